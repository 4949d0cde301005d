/**
 * Mapping between conch's model DTOs and the OpenAI chat-completions wire format
 * (https://platform.openai.com/docs/api-reference/chat), which DeepSeek and other compatible
 * endpoints share.
 */
import type OpenAI from 'openai'
import type { ChatMessage, FinishReason, ModelChunk, ModelTool } from '@conch/llm'

type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam
type WireTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool
type WireChunk = OpenAI.Chat.Completions.ChatCompletionChunk

export function toWireMessages(messages: readonly ChatMessage[]): WireMessage[] {
  return messages.map((message): WireMessage => {
    switch (message.role) {
      case 'system':
        return { role: 'system', content: message.content }
      case 'user':
        return { role: 'user', content: message.content }
      case 'assistant': {
        if (!message.toolCalls?.length) return { role: 'assistant', content: message.content }
        return {
          role: 'assistant',
          // An assistant turn that only calls tools has no content (null, not "").
          content: message.content === '' ? null : message.content,
          tool_calls: message.toolCalls.map((call) => ({
            id: call.id,
            type: 'function' as const,
            function: { name: call.name, arguments: call.arguments },
          })),
        }
      }
      case 'tool':
        return { role: 'tool', tool_call_id: message.toolCallId, content: message.content }
      default: {
        const unknown: never = message
        throw new TypeError(`unknown chat message role in ${JSON.stringify(unknown)}`)
      }
    }
  })
}

export function toWireTools(tools: readonly ModelTool[]): WireTool[] {
  return tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }))
}

/** `finish_reason` values of the API; `function_call` is the deprecated form of `tool_calls`. */
export function toFinishReason(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case 'stop':
    case 'tool_calls':
    case 'length':
    case 'content_filter':
      return reason
    case 'function_call':
      return 'tool_calls'
    default:
      return 'other'
  }
}

/**
 * The conch chunks carried by one streamed `chat.completion.chunk`: content → `text-delta`,
 * each `delta.tool_calls[i]` → `tool-call-delta` (by its `index`), `finish_reason` → `finish`,
 * and `usage` (the last chunk with `stream_options.include_usage`) → `usage`.
 */
export function fromWireChunk(chunk: WireChunk): ModelChunk[] {
  const out: ModelChunk[] = []
  const choice = chunk.choices?.[0]
  const delta = choice?.delta
  if (delta?.content) out.push({ type: 'text-delta', text: delta.content })
  for (const call of delta?.tool_calls ?? []) {
    const piece: Extract<ModelChunk, { type: 'tool-call-delta' }> = { type: 'tool-call-delta', index: call.index }
    if (call.id) piece.id = call.id
    if (call.function?.name) piece.name = call.function.name
    if (call.function?.arguments) piece.argumentsDelta = call.function.arguments
    out.push(piece)
  }
  if (choice?.finish_reason) out.push({ type: 'finish', reason: toFinishReason(choice.finish_reason) })
  if (chunk.usage) {
    out.push({ type: 'usage', inputTokens: chunk.usage.prompt_tokens, outputTokens: chunk.usage.completion_tokens })
  }
  return out
}
