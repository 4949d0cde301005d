/**
 * Turning a session's events into the chat messages sent to the model.
 */
import type { ChatMessage } from '@conch/llm'
import type { SessionEvent } from '@conch/session'
import type { AssistantMessageData, ToolResultData, UserMessageData } from './events.ts'

/** The tool text given for a call whose result is missing from the log (the harness stopped mid-call). */
export const MISSING_RESULT = 'no result: the harness stopped before this call finished'

/**
 * Builds the message list for a model call: the system prompt (when not empty), then
 * `user/message` → user, `assistant/message` → assistant (with its tool calls), `tool/result`
 * → tool. Other event types, and the results of nested calls (those with a `parentCallId`), are
 * not part of the conversation.
 *
 * Chat APIs require every tool call of an assistant message to be answered by a tool message
 * before the next user or assistant message; a call without a logged result (a crash mid-call
 * in a replayed session) is answered with `MISSING_RESULT` so the history stays well-formed.
 */
export function buildMessages(systemPrompt: string, events: readonly SessionEvent[]): ChatMessage[] {
  const messages: ChatMessage[] = []
  if (systemPrompt !== '') messages.push({ role: 'system', content: systemPrompt })
  let pending: { id: string; name: string }[] = []
  const answerPending = () => {
    for (const call of pending) messages.push({ role: 'tool', toolCallId: call.id, name: call.name, content: MISSING_RESULT })
    pending = []
  }
  for (const event of events) {
    switch (event.type) {
      case 'user/message':
        answerPending()
        messages.push({ role: 'user', content: (event.data as UserMessageData).text })
        break
      case 'assistant/message': {
        answerPending()
        const data = event.data as AssistantMessageData
        const calls = data.toolCalls.length > 0 ? { toolCalls: data.toolCalls } : {}
        messages.push({ role: 'assistant', content: data.text, ...calls })
        pending = data.toolCalls.map((call) => ({ id: call.id, name: call.name }))
        break
      }
      case 'tool/result': {
        const data = event.data as ToolResultData
        if (data.parentCallId !== undefined) break
        const index = pending.findIndex((call) => call.id === data.callId)
        // A result for a call that is not open would make the request invalid; the log never
        // holds one unless edited by hand, so it is left out.
        if (index < 0) break
        pending.splice(index, 1)
        messages.push({ role: 'tool', toolCallId: data.callId, name: data.name, content: data.text })
        break
      }
    }
  }
  answerPending()
  return messages
}
