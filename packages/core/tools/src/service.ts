/**
 * `ctx.tools`: the tool registry and the execute pipeline (validate → run → bound) between the
 * agent loop and every tool package.
 */
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import type { JsonSchema } from '@conch/llm'
import { messageOf, registerUnique } from '@conch/session'
import { boundWithNotice, utf8Bytes } from './bound.ts'
import { closeObjects, unknownFields, type FieldTree } from './fields.ts'
import {
  ToolsError,
  type ToolDefinition,
  type ToolExecuteContext,
  type ToolResult,
  type ToolSpec,
  type ToolsServiceApi,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    tools: ToolsService
  }
}

/** Tool names the model can call: OpenAI function names allow at most 64 characters. */
const TOOL_NAME = /^[a-z][a-z0-9_]{0,63}$/
/** The smallest byte bound that still holds the truncation notice with some text. */
export const MIN_RESULT_BYTES = 64

interface Registered {
  definition: ToolDefinition
  parameters: JsonSchema
  /** The closed object levels of the input, for the unknown-field check (see fields.ts). */
  fields: FieldTree | undefined
}

class ToolsService extends Service implements ToolsServiceApi {
  static Config = z
    .strictObject({
      maxResultBytes: z
        .number()
        .int()
        .min(MIN_RESULT_BYTES)
        .default(262144)
        .describe('Default UTF-8 byte bound of a tool result text; a tool may set its own.'),
    })
    .prefault({})

  private readonly tools = new Map<string, Registered>()

  constructor(ctx: Context, public config: ToolsService.Config) {
    super(ctx, 'tools')
  }

  register<S extends z.ZodType>(definition: ToolDefinition<S>): () => void {
    const schema = checkDefinition(definition)
    const fields = closeObjects(schema)
    const registered: Registered = { definition: definition as unknown as ToolDefinition, parameters: compactSchema(schema) as JsonSchema, fields }
    const duplicate = () => new ToolsError('DUPLICATE_TOOL', { tool: definition.name })
    return registerUnique(this.ctx, this.tools, definition.name, registered, duplicate, `tools.register(${definition.name})`)
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name)?.definition
  }

  /** Registered tool names, sorted. */
  names(): string[] {
    return [...this.tools.keys()].sort()
  }

  specs(): ToolSpec[] {
    return this.names().map((name) => {
      const { definition, parameters } = this.tools.get(name)!
      return {
        name,
        description: definition.description,
        parameters: structuredClone(parameters),
        kind: definition.kind ?? 'other',
      }
    })
  }

  async execute(name: string, input: unknown, context: ToolExecuteContext): Promise<ToolResult> {
    const registered = this.tools.get(name)
    if (!registered) {
      return this.bound(
        errorResult(ToolsError.message('NO_TOOL', { tool: name, available: this.names() })),
        this.config.maxResultBytes,
      )
    }
    const { definition } = registered
    const limit = definition.maxResultBytes ?? this.config.maxResultBytes
    const parsed = await definition.input.safeParseAsync(input)
    const issues = parsed.success ? [] : parsed.error.issues.map((issue) => `- ${formatPath(issue.path)}: ${issue.message}`)
    // zod strips keys a z.object does not know; a strict object reports them itself.
    const reported = new Set(
      parsed.success
        ? []
        : parsed.error.issues.flatMap((issue) =>
            issue.code === 'unrecognized_keys' ? issue.keys.map((key) => formatPath([...issue.path, key])) : [],
          ),
    )
    for (const field of registered.fields ? unknownFields(registered.fields, input) : []) {
      const path = formatPath(field.path)
      if (reported.has(path)) continue
      const takes = field.known.length ? `it takes ${field.known.join(', ')}` : 'it takes no fields'
      issues.push(`- ${path}: unknown field; ${takes}`)
    }
    if (!parsed.success || issues.length) {
      return this.bound(
        errorResult(ToolsError.message('INVALID_INPUT', { tool: name, issues }), { errorCode: 'INVALID_INPUT' }),
        limit,
      )
    }
    if (context.signal.aborted) {
      return this.bound(errorResult(`${name} was cancelled before it started`, { errorCode: 'CANCELLED' }), limit)
    }
    let result: unknown
    try {
      result = await definition.execute(parsed.data, context)
    } catch (error) {
      const code = errorCode(error)
      return this.bound(errorResult(describeError(error, code), code === undefined ? undefined : { errorCode: code }), limit)
    }
    if (!isToolResult(result)) {
      return this.bound(errorResult(`${name} returned an invalid result (expected {content: [{type: 'text', text}]})`), limit)
    }
    return this.bound(result, limit)
  }

  /** Returns `result` unchanged when its text fits `limit` bytes, else one bounded text item. */
  private bound(result: ToolResult, limit: number): ToolResult {
    const text = toolResultText(result)
    if (utf8Bytes(text) <= limit) return result
    return { ...result, content: [{ type: 'text', text: boundWithNotice(text, limit).text }] }
  }
}

namespace ToolsService {
  export type Config = z.output<typeof ToolsService.Config>
}

export default ToolsService

/** The text the model sees for a result: its text items joined by newlines. */
export function toolResultText(result: ToolResult): string {
  return result.content.map((item) => item.text).join('\n')
}

/** Validates a definition and returns its parameters' JSON Schema (`io: 'input'`, no `$schema`). */
function checkDefinition(definition: ToolDefinition<z.ZodType>): JsonSchema {
  const invalid = (problem: string) => new ToolsError('INVALID_TOOL', { tool: definition.name, problem })
  if (typeof definition.name !== 'string' || !TOOL_NAME.test(definition.name)) {
    throw invalid('the name must match [a-z][a-z0-9_]* and be at most 64 characters')
  }
  if (typeof definition.description !== 'string' || definition.description.trim() === '') {
    throw invalid('the description is empty; say what the tool does and when to use it')
  }
  if (typeof definition.execute !== 'function') throw invalid('execute is not a function')
  const bound = definition.maxResultBytes
  if (bound !== undefined && (!Number.isInteger(bound) || bound < MIN_RESULT_BYTES)) {
    throw invalid(`maxResultBytes must be an integer of at least ${MIN_RESULT_BYTES} bytes, got ${bound}`)
  }
  let schema: JsonSchema
  try {
    schema = z.toJSONSchema(definition.input, { io: 'input' }) as JsonSchema
  } catch (error) {
    throw invalid(`its input schema has no JSON Schema form (${(error as Error).message})`)
  }
  delete schema['$schema']
  if (schema['type'] !== 'object') throw invalid('the input schema must be a z.object(...) (the model passes an arguments object)')
  return schema
}

/**
 * The schema as the model is offered it, every byte of which each request carries: without
 * `additionalProperties: false` (every closed level refuses unknown fields anyway, naming the
 * fields it takes; see fields.ts) and without the safe-integer bounds zod gives every `.int()`.
 */
function compactSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(compactSchema)
  if (typeof node !== 'object' || node === null) return node
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node)) {
    if (key === 'additionalProperties' && value === false) continue
    if ((key === 'maximum' && value === Number.MAX_SAFE_INTEGER) || (key === 'minimum' && value === Number.MIN_SAFE_INTEGER)) continue
    out[key] = compactSchema(value)
  }
  return out
}

/** An error result with one text item (and `meta` when given). */
export function errorResult(text: string, meta?: Record<string, unknown>): ToolResult {
  const result: ToolResult = { content: [{ type: 'text', text }], isError: true }
  if (meta) result.meta = meta
  return result
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.length === 0 ? '(arguments)' : path.map(String).join('.')
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && code !== '' ? code : undefined
}

function describeError(error: unknown, code: string | undefined): string {
  const message = messageOf(error)
  return code === undefined ? message : `${code}: ${message}`
}

function isToolResult(value: unknown): value is ToolResult {
  if (typeof value !== 'object' || value === null) return false
  const content = (value as { content?: unknown }).content
  return (
    Array.isArray(content) &&
    content.every((item) => typeof item === 'object' && item !== null && item.type === 'text' && typeof item.text === 'string')
  )
}
