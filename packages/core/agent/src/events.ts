/**
 * The data of the session events the agent loop appends, in the order a turn appends them:
 * `turn/start`, `user/message`, then per model call `assistant/message` and per tool call
 * `tool/call` + `tool/result`, and last `turn/end`.
 */
import type { ToolCall } from '@conch/llm'
import type { RunStatus } from './types.ts'

export interface TurnStartData {
  prompt: string
}

export interface UserMessageData {
  text: string
}

export interface AssistantMessageData {
  text: string
  /** The calls exactly as the model produced them (`arguments` is JSON text). */
  toolCalls: ToolCall[]
}

export interface ToolCallData {
  callId: string
  name: string
  /** The parsed arguments object, or the raw text when it was not valid JSON. */
  arguments: unknown
  /**
   * Set on a nested call — one a tool made while it ran, such as `run_code`'s program — to the
   * `callId` of the outer call. Nested calls are part of the log, not of the conversation.
   */
  parentCallId?: string
}

export interface ToolResultData {
  callId: string
  name: string
  isError: boolean
  /** What the model sees: the result's text items joined by newlines, already bounded. */
  text: string
  meta?: Record<string, unknown>
  /** As `ToolCallData.parentCallId`: the outer call of a nested call. */
  parentCallId?: string
}

export interface TurnEndData {
  status: RunStatus
  text: string
  /** Model calls made in the turn. */
  steps: number
}
