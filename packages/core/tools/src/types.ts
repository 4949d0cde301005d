/**
 * The tool contract behind `ctx.tools`: what a tool definition is, what executing one gives
 * back, and how results are bounded before the model sees them.
 */
import type { z } from 'zod'
import type { JsonSchema } from '@conch/llm'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'

/**
 * The agent a tool runs for. Declared open here and merged with `Agent` by `@conch/agent`
 * (`declare module '@conch/tools'`), so tools receive the exact owning Agent object without
 * this package depending on the agent loop.
 */
export interface ToolOwner {
  readonly id: string
}

export interface TextContent {
  type: 'text'
  text: string
}

/** What a tool returns. `meta` is structured data for clients and logs; the model sees only `content`. */
export interface ToolResult {
  content: TextContent[]
  isError?: boolean
  meta?: Record<string, unknown>
}

/** Incremental output a running tool reports (for example terminal output as it arrives), in bytes of UTF-8 text. */
export interface ToolProgress {
  type: 'output'
  text: string
}

export interface ToolExecuteContext {
  /** The exact Agent that called the tool; ownership checks compare this object. */
  agent: ToolOwner
  /** Aborted when the turn is cancelled; long-running tools must stop promptly. */
  signal: AbortSignal
  /** The model's tool-call id (for a call made from inside another tool, an id derived from the outer one). */
  callId: string
  /** The id of the outer call when a tool calls another one (e.g. from a `run_code` program); absent for the model's own calls. */
  parentCallId?: string
  /** Reports incremental output while the tool runs (ACP streams it to the client). */
  progress?: (update: ToolProgress) => void
}

/** How a client should present a call (ACP `ToolKind` subset). */
export type ToolKind = 'read' | 'edit' | 'delete' | 'search' | 'execute' | 'think' | 'fetch' | 'other'

export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  /** Unique name the model calls, `[a-z][a-z0-9_]*`. */
  name: string
  /** What the tool does and when to use it, for the model. */
  description: string
  /** zod schema of the input; the model receives its JSON Schema. */
  input: S
  /** Client presentation hint (ACP tool_call `kind`). Defaults to `other`. */
  kind?: ToolKind
  /** Short human title for a call, e.g. `bash: ls -la`. Defaults to the tool name. */
  title?: (input: z.output<S>) => string
  /** Byte bound of this tool's final result text (UTF-8). Defaults to the service's `maxResultBytes`. */
  maxResultBytes?: number
  /** Runs the tool. Thrown errors become `isError` results whose text names the problem. */
  execute(input: z.output<S>, context: ToolExecuteContext): Promise<ToolResult>
}

/** A tool as described to clients and the model. */
export interface ToolSpec {
  name: string
  description: string
  parameters: JsonSchema
  kind: ToolKind
}

/** The codes of `ToolsError`, each with its details and its message. */
const TOOLS_ERRORS = {
  DUPLICATE_TOOL: (d: { tool: string }) => `tool ${d.tool} is already registered; tool names must be unique`,
  /** `execute` of an unregistered name (an error result, not a throw). */
  NO_TOOL: (d: { tool: string; available: string[] }) => `unknown tool "${d.tool}"; ${d.available.length ? `available tools: ${d.available.join(', ')}` : 'no tools are registered'}`,
  /** Arguments the input schema rejects (an error result, not a throw): one line per issue. */
  INVALID_INPUT: (d: { tool: string; issues: string[] }) => `invalid arguments for ${d.tool}:\n${d.issues.join('\n')}\nFix the arguments and call ${d.tool} again.`,
  /** A definition `register()` refuses: bad name, empty description, a schema without a JSON Schema object form, or a byte bound below 64. */
  INVALID_TOOL: (d: { tool: unknown; problem: string }) => `cannot register tool ${JSON.stringify(d.tool)}: ${d.problem}`,
} satisfies ErrorMessages

export type ToolsErrorCode = keyof typeof TOOLS_ERRORS
export const ToolsError = errorClass('ToolsError', TOOLS_ERRORS)
export type ToolsError<C extends ToolsErrorCode = ToolsErrorCode> = ErrorOf<typeof TOOLS_ERRORS, C>

/** The public surface of `ctx.tools` (implemented by the default-exported `ToolsService`). */
export interface ToolsServiceApi {
  /**
   * Registers a tool; the disposer is tied to the caller's plugin scope.
   * @throws ToolsError `DUPLICATE_TOOL`, `INVALID_TOOL`.
   */
  register<S extends z.ZodType>(definition: ToolDefinition<S>): () => void
  get(name: string): ToolDefinition | undefined
  /** Every registered tool as offered to the model, sorted by name. */
  specs(): ToolSpec[]
  /**
   * Validates `input` against the tool's schema, runs it, and bounds the result.
   * Never throws for tool-level problems: an unknown tool, invalid input (each issue with its
   * field path) or a thrown error becomes an `isError` result whose text names the problem
   * and the fix. The final text always fits the tool's byte bound.
   */
  execute(name: string, input: unknown, context: ToolExecuteContext): Promise<ToolResult>
}
