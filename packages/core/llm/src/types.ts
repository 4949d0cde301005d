/**
 * The model contract behind `ctx.llm`: a registry of adapters keyed by provider name, each
 * streaming chunks for one chat-completion request with tool calling.
 */
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'

/** JSON Schema object as sent to the model for a tool's parameters (draft 2020-12 subset). */
export type JsonSchema = Record<string, unknown>

/** One tool call requested by the model. `arguments` is the JSON text exactly as produced. */
export interface ToolCall {
  id: string
  name: string
  arguments: string
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[] }
  | { role: 'tool'; toolCallId: string; name: string; content: string }

/** A tool as offered to the model. */
export interface ModelTool {
  name: string
  description: string
  parameters: JsonSchema
}

export interface ModelRequest {
  messages: ChatMessage[]
  tools: ModelTool[]
  signal?: AbortSignal
}

export type FinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'other'

/**
 * One streamed piece of a model response. Tool calls arrive as deltas keyed by `index`
 * (the OpenAI streaming convention): the first delta of an index carries `id` and `name`,
 * later ones append to `arguments`.
 */
export type ModelChunk =
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call-delta'; index: number; id?: string; name?: string; argumentsDelta?: string }
  | { type: 'usage'; inputTokens: number; outputTokens: number }
  | { type: 'finish'; reason: FinishReason }

/** A complete model response, assembled from chunks by `collectResponse`. */
export interface ModelResponse {
  text: string
  toolCalls: ToolCall[]
  finishReason: FinishReason
  usage?: { inputTokens: number; outputTokens: number }
}

/** A provider implementation registered on `ctx.llm`. */
export interface ModelAdapter {
  /** Registry key, e.g. `openai`, `replay`. */
  readonly provider: string
  /** Human-readable model name for logs and ACP agent info, e.g. `deepseek-chat`. */
  readonly model?: string
  /**
   * Streams one response. Must stop promptly and reject with `request.signal.reason` when the
   * signal aborts. Failures reject with `LlmError` (`MODEL_ERROR`, `SCRIPT_ERROR`, …) whose
   * message says what failed and how to fix it.
   */
  stream(request: ModelRequest): AsyncIterable<ModelChunk>
}

/**
 * The codes of `LlmError`, each with its details and its message. A model's failure and a missing
 * key carry the sentence that names the endpoint and the fix (`reason`).
 */
const LLM_ERRORS = {
  DUPLICATE_PROVIDER: (d: { provider: string }) => `a model adapter for provider "${d.provider}" is already registered; give the second one another provider name`,
  /** `wanted`: the provider asked for, or undefined when none is registered and none was named. */
  NO_PROVIDER: (d: { wanted: string | undefined; registered: string }) =>
    d.wanted === undefined ? 'no model adapter is registered; load @conch/llm-openai or @conch/llm-replay' : `no model adapter for provider "${d.wanted}"; registered: ${d.registered}`,
  AMBIGUOUS_PROVIDER: (d: { providers: string[] }) => `several model adapters are registered (${d.providers.join(', ')}); set the llm "provider" config to choose one`,
  MODEL_ERROR: (d: { reason: string }) => d.reason,
  NO_API_KEY: (d: { reason: string }) => d.reason,
  /** The model script `file` cannot be read (`unreadable`: the system's error), or its `line` (1-based; none: the whole file) is not a model reply (`problem`; `also`: the other lines that are not). */
  SCRIPT_ERROR: (d: { file: string; line?: number; problem: string; also?: { line: number; problem: string }[] } | { file: string; unreadable: string }) =>
    'unreadable' in d ? `cannot read the model script ${d.file}: ${d.unreadable}` : `${d.file}${d.line === undefined ? '' : `:${d.line}`}: ${d.problem}${alsoWrong(d.file, d.also)}`,
  /** Model call `call` (1-based) found no line left in the script `file` of `lines` lines. */
  SCRIPT_EXHAUSTED: (d: { file: string; call: number; lines: number }) =>
    `the model script ${d.file} has no line for model call ${d.call}: ${d.lines === 1 ? 'its one line was used' : `all ${d.lines} lines were used`}; add lines or shorten the task`,
} satisfies ErrorMessages

export type LlmErrorCode = keyof typeof LLM_ERRORS
export const LlmError = errorClass('LlmError', LLM_ERRORS)
export type LlmError<C extends LlmErrorCode = LlmErrorCode> = ErrorOf<typeof LLM_ERRORS, C>

/** The public surface of `ctx.llm` (implemented by the default-exported `LlmService`). */
export interface LlmServiceApi {
  /**
   * Registers an adapter; the disposer is tied to the caller's plugin scope.
   * @throws LlmError `DUPLICATE_PROVIDER`.
   */
  register(adapter: ModelAdapter): () => void
  /** The adapter for `provider`, or undefined. */
  get(provider: string): ModelAdapter | undefined
  /**
   * The adapter to use: `provider` if given, else the service's configured `provider`, else the
   * only registered adapter.
   * @throws LlmError `NO_PROVIDER` (naming the registered ones) or `AMBIGUOUS_PROVIDER`.
   */
  resolve(provider?: string): ModelAdapter
  /** Registered provider names. */
  providers(): string[]
}

/** The other wrong lines of a script, the first three named: `; also s.jsonl:4: …; and 2 more lines`. */
function alsoWrong(file: string, also: { line: number; problem: string }[] = []): string {
  const named = also.slice(0, 3).map((wrong) => `; also ${file}:${wrong.line}: ${wrong.problem}`).join('')
  const more = also.length - 3
  return more > 0 ? `${named}; and ${more} more line${more === 1 ? '' : 's'}` : named
}
