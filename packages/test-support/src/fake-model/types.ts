/**
 * The fake model's vocabulary: what one scripted answer looks like (`FakeAnswer`), what the
 * server records about each request (`FakeRequest`), and the knobs of the server itself.
 */
import type { IncomingHttpHeaders } from 'node:http'

/** A tool call the fake model makes: a Responses `function_call` item, a Messages `tool_use` block or a chat `tool_calls` entry. */
export interface FakeToolCall {
  /** The tool's name as the product offered it (`exec_command`, `Bash`, …). */
  name: string
  /** The call's arguments; serialised as JSON on the wire. */
  arguments: Record<string, unknown>
  /** The call id (`call_id` / `tool_use` id); generated when omitted. */
  id?: string
}

/**
 * One scripted answer. Text is streamed as deltas (`chunks`, or `text` cut at word
 * boundaries), then the tool calls, then the closing events. Every knob is optional.
 */
export interface FakeAnswer {
  /** The answer text, streamed one word (with its leading space) per delta. */
  text?: string
  /** Explicit deltas; win over `text`. */
  chunks?: string[]
  /**
   * Responses only: an earlier message item in the `commentary` phase, before the answer
   * (which then carries the `final_answer` phase).
   */
  commentary?: string
  /** Tool calls after the text. */
  toolCalls?: FakeToolCall[]
  /**
   * Chat completions only: these `data:` payloads exactly (recorded `chat.completion.chunk`s,
   * `chatChunk` builds one), each one delta, then `data: [DONE]` — instead of the text and tool
   * calls. What an adapter's parser is tested against.
   */
  sse?: unknown[]
  /** Wait before the first delta, after the stream opened, ms. */
  firstTokenDelayMs?: number
  /** Wait between deltas (a slow answer), ms. */
  chunkDelayMs?: number
  /**
   * Stop after this many deltas and hold the stream open — until `FakeModelServer.release()`
   * continues it, the client goes away or the server closes.
   */
  stallAfterChunks?: number
  /** Destroy the connection after this many deltas, without any closing event (a crash mid-stream). */
  closeAfterChunks?: number
  /**
   * The closing sentinel: `'auto'` (default) appends the sentinel the system prompt asks for,
   * if it asks; `'omit'` never appends one; a string is appended as the sentinel.
   */
  sentinel?: 'auto' | 'omit' | string
  /**
   * End the stream with a model-level failure instead of completion: Responses
   * `response.failed` with `{code, message}` (Codex maps `context_length_exceeded` to
   * contextWindowExceeded), Messages an `error` event of this `type`.
   */
  fail?: { code: string; message?: string }
  /** Messages only: the stop reason (default `end_turn`, or `tool_use` when there are tool calls). */
  stopReason?: 'end_turn' | 'max_tokens' | 'refusal'
  /** Answer with this HTTP status and a JSON error body instead of a stream. */
  httpStatus?: number
  /** With `httpStatus`: this JSON body instead of the default error. */
  httpBody?: unknown
  /** With `httpStatus`: more response headers (`retry-after-ms`, …). */
  httpHeaders?: Record<string, string>
}

/** Which endpoint a request hit. */
export type FakeApi = 'responses' | 'messages' | 'chat' | 'count_tokens' | 'models' | 'other'

/** How the server finished a response. */
export type FakeOutcome =
  /** The stream ended with its closing events. */
  | 'completed'
  /** The stream ended with a failure event (`fail`). */
  | 'failed'
  /** The server destroyed the connection mid-stream (`closeAfterChunks`). */
  | 'closed'
  /** The client went away before the stream ended (an interrupt, a killed child). */
  | 'client-gone'
  /** An HTTP error status was answered (`httpStatus`, unknown path, bad JSON). */
  | 'http-error'
  /** A plain JSON answer (count_tokens, models, non-streamed messages). */
  | 'answered'

/** A tool result the client sent back (`function_call_output` / `tool_result`). */
export interface FakeToolResult {
  callId: string
  output: string
  isError?: boolean
}

/** What the fake model reads from a request body, in any of its wire formats. */
export interface ParsedBody {
  model?: string
  stream: boolean
  /** Responses `instructions` and system/developer messages; Messages `system`. Joined by newlines. */
  system: string
  /** The text of the last user message. */
  userText: string
  /** Tool results in the request (the client's answers to earlier tool calls). */
  toolResults: FakeToolResult[]
  /** The names of the tools offered. */
  tools: string[]
}

/** What the server records about one request; live fields change while it is answered. */
export interface FakeRequest extends ParsedBody {
  /** 1, 2, … in arrival order. */
  seq: number
  api: FakeApi
  method: string
  /** The path without the query string. */
  path: string
  /** The query string without `?` (`beta=true`), empty when none. */
  query: string
  /** The request headers, names in lower case (`authorization`, …). */
  headers: IncomingHttpHeaders
  /** The parsed JSON body; undefined when there was none or it did not parse. */
  body: unknown
  /** When the request arrived, `Date.now()` ms. */
  receivedAt: number
  /** The answer chosen for it (undefined for endpoints that are not streamed). */
  answer?: FakeAnswer
  /** The sentinel appended to the answer, if any. */
  sentinel?: string
  /** Deltas written so far (text deltas and tool calls). Live. */
  chunksSent: number
  /** True while the stream is held by `stallAfterChunks`. Live. */
  stalled: boolean
  /** Set when the response ended. Live. */
  outcome?: FakeOutcome
}

/** Chooses the answer to a streamed request; return undefined to fall back to the default answer. */
export type FakeResponder = (request: FakeRequest) => FakeAnswer | undefined

export interface FakeModelOptions {
  /** Port on 127.0.0.1; 0 (default) picks a free one. */
  port?: number
  /** Called for every streamed request that the queue does not answer. */
  respond?: FakeResponder
  /** The answer when neither the queue nor `respond` gives one (default `{text: 'ok'}`). */
  defaultAnswer?: FakeAnswer
  /**
   * Finds the sentinel a system prompt asks the model to close its answer with: the whole
   * first match is the sentinel. Default `DEFAULT_SENTINEL_PATTERN`.
   */
  sentinelPattern?: RegExp
  /** Frames an answer with its sentinel; default: the text, a newline, the sentinel. */
  frame?: (text: string, sentinel: string) => string
}
