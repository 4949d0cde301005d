/**
 * Assembling a complete `ModelResponse` from streamed `ModelChunk`s.
 */
import { LlmError, type FinishReason, type ModelChunk, type ModelResponse, type ToolCall } from './types.ts'

/**
 * Consumes `stream` to its end and returns the assembled response.
 *
 * - `text-delta`s are concatenated.
 * - `tool-call-delta`s are grouped by `index` (the OpenAI streaming convention): the first `id`
 *   and `name` seen for an index stick, every `argumentsDelta` is appended. Calls come back in
 *   ascending index order. A call that never received an `id` gets `call_<index>`.
 * - The last `usage` and the last `finish` win. Without a `finish` chunk the reason is `other`.
 *
 * `onChunk` sees every chunk as it arrives (the agent loop forwards text deltas with it).
 * Errors of the stream (including an abort) propagate unchanged.
 *
 * @throws LlmError `MODEL_ERROR` when a tool call never received a name.
 */
export async function collectResponse(
  stream: AsyncIterable<ModelChunk>,
  onChunk?: (chunk: ModelChunk) => void,
): Promise<ModelResponse> {
  let text = ''
  let finishReason: FinishReason = 'other'
  let usage: ModelResponse['usage']
  const calls = new Map<number, { id?: string; name?: string; arguments: string }>()
  for await (const chunk of stream) {
    onChunk?.(chunk)
    switch (chunk.type) {
      case 'text-delta':
        text += chunk.text
        break
      case 'tool-call-delta': {
        let call = calls.get(chunk.index)
        if (!call) {
          call = { arguments: '' }
          calls.set(chunk.index, call)
        }
        if (chunk.id && !call.id) call.id = chunk.id
        if (chunk.name && !call.name) call.name = chunk.name
        if (chunk.argumentsDelta) call.arguments += chunk.argumentsDelta
        break
      }
      case 'usage':
        usage = { inputTokens: chunk.inputTokens, outputTokens: chunk.outputTokens }
        break
      case 'finish':
        finishReason = chunk.reason
        break
      default: {
        const unknown: never = chunk
        throw new LlmError('MODEL_ERROR', { reason: `unknown model chunk ${JSON.stringify(unknown)}` })
      }
    }
  }
  const toolCalls: ToolCall[] = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([index, call]) => {
      if (!call.name) {
        throw new LlmError('MODEL_ERROR', { reason: `the model sent tool call #${index} without a function name` })
      }
      return { id: call.id ?? `call_${index}`, name: call.name, arguments: call.arguments }
    })
  const response: ModelResponse = { text, toolCalls, finishReason }
  if (usage) response.usage = usage
  return response
}
