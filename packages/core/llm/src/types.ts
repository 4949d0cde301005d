/**
 * The model contract behind `ctx.llm`: a registry of adapters keyed by provider name, each
 * streaming chunks for one chat-completion request with tool calling.
 */
import { ConchError } from '@conch/session'

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

export type LlmErrorCode =
  | 'DUPLICATE_PROVIDER'
  | 'NO_PROVIDER'
  | 'AMBIGUOUS_PROVIDER'
  | 'MODEL_ERROR'
  | 'NO_API_KEY'
  | 'SCRIPT_ERROR'
  | 'SCRIPT_EXHAUSTED'

export class LlmError extends ConchError<LlmErrorCode, undefined> {
  override readonly name = 'LlmError'
  constructor(code: LlmErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, undefined, message, options)
  }
}

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
