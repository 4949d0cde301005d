/**
 * The three wire formats as event encoders — OpenAI Responses, Anthropic Messages and OpenAI
 * chat completions streaming events, as server-sent events (`event:` + `data:` lines, WHATWG
 * HTML § 9.2). The driver (server.ts) decides *when* each part goes out; an encoder only says
 * *what* goes out, in each format's event order.
 */
import type { FakeToolCall } from './types.ts'

export interface SseEvent {
  /** The `event:` line; chat completions name none. */
  event?: string
  /** JSON, or a string written as it is (`[DONE]`). */
  data: unknown
}

export type ToolCall = Required<FakeToolCall>

export interface StreamEncoder {
  open(): SseEvent[]
  /** A complete message in the `commentary` phase (Responses only; Messages ignores it). */
  commentary(text: string): SseEvent[]
  textStart(): SseEvent[]
  textDelta(delta: string): SseEvent[]
  textEnd(text: string): SseEvent[]
  toolCall(call: ToolCall): SseEvent[]
  finish(stopReason: 'end_turn' | 'max_tokens' | 'refusal' | 'tool_use'): SseEvent[]
  fail(failure: { code: string; message: string }): SseEvent[]
}

export function formatSse(event: SseEvent): string {
  const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data)
  return `${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${data}\n\n`
}

/** A rough token count (4 characters a token) for usage fields. */
export const roughTokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4))

let counter = 0
/** A unique id with the format's prefix (`resp_`, `msg_`, `fc_`, `call_`, `toolu_`). */
export const fakeId = (prefix: string): string => `${prefix}fake${(++counter).toString(36)}${Date.now().toString(36)}`

export function responsesEncoder(options: { model: string; inputTokens: number }): StreamEncoder {
  const responseId = fakeId('resp_')
  const output: Record<string, unknown>[] = []
  let sequence = 0
  let outputTokens = 0
  let message: { id: string; index: number; phase?: string } | undefined
  let hasCommentary = false
  const ev = (type: string, fields: Record<string, unknown>): SseEvent => ({ event: type, data: { type, sequence_number: sequence++, ...fields } })
  const response = (status: string, extra: Record<string, unknown> = {}) => ({
    id: responseId,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    model: options.model,
    output: [...output],
    ...extra,
  })
  const messageItems = (id: string, index: number, text: string, phase?: string): SseEvent[] => {
    const item = { id, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }], ...(phase ? { phase } : {}) }
    output.push(item)
    outputTokens += roughTokens(text)
    return [
      ev('response.output_text.done', { item_id: id, output_index: index, content_index: 0, text }),
      ev('response.content_part.done', { item_id: id, output_index: index, content_index: 0, part: { type: 'output_text', text, annotations: [] } }),
      ev('response.output_item.done', { output_index: index, item }),
    ]
  }
  const startMessage = (phase?: string): { id: string; index: number; phase?: string; events: SseEvent[] } => {
    const id = fakeId('msg_')
    const index = output.length
    return {
      id,
      index,
      ...(phase ? { phase } : {}),
      events: [
        ev('response.output_item.added', { output_index: index, item: { id, type: 'message', status: 'in_progress', role: 'assistant', content: [], ...(phase ? { phase } : {}) } }),
        ev('response.content_part.added', { item_id: id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }),
      ],
    }
  }
  return {
    open: () => [ev('response.created', { response: response('in_progress') }), ev('response.in_progress', { response: response('in_progress') })],
    commentary(text) {
      hasCommentary = true
      const started = startMessage('commentary')
      return [
        ...started.events,
        ev('response.output_text.delta', { item_id: started.id, output_index: started.index, content_index: 0, delta: text }),
        ...messageItems(started.id, started.index, text, 'commentary'),
      ]
    },
    textStart() {
      const started = startMessage(hasCommentary ? 'final_answer' : undefined)
      message = started
      return started.events
    },
    textDelta(delta) {
      if (!message) throw new Error('textDelta before textStart')
      return [ev('response.output_text.delta', { item_id: message.id, output_index: message.index, content_index: 0, delta })]
    },
    textEnd(text) {
      if (!message) throw new Error('textEnd before textStart')
      const { id, index, phase } = message
      message = undefined
      return messageItems(id, index, text, phase)
    },
    toolCall(call) {
      const id = fakeId('fc_')
      const index = output.length
      const args = JSON.stringify(call.arguments)
      const item = { id, type: 'function_call', status: 'completed', call_id: call.id, name: call.name, arguments: args }
      output.push(item)
      outputTokens += roughTokens(args)
      return [
        ev('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress', arguments: '' } }),
        ev('response.function_call_arguments.delta', { item_id: id, output_index: index, delta: args }),
        ev('response.function_call_arguments.done', { item_id: id, output_index: index, arguments: args }),
        ev('response.output_item.done', { output_index: index, item }),
      ]
    },
    finish(stopReason) {
      const usage = {
        input_tokens: options.inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: options.inputTokens + outputTokens,
      }
      if (stopReason === 'max_tokens') {
        return [ev('response.incomplete', { response: response('incomplete', { incomplete_details: { reason: 'max_output_tokens' }, usage }) })]
      }
      return [ev('response.completed', { response: response('completed', { usage }) })]
    },
    fail: (failure) => [ev('response.failed', { response: response('failed', { error: failure }) })],
  }
}

export function messagesEncoder(options: { model: string; inputTokens: number }): StreamEncoder {
  const messageId = fakeId('msg_')
  let index = -1
  let outputTokens = 0
  return {
    open: () => [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id: messageId,
            type: 'message',
            role: 'assistant',
            model: options.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: options.inputTokens, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
          },
        },
      },
      { event: 'ping', data: { type: 'ping' } },
    ],
    commentary: () => [],
    textStart() {
      index += 1
      return [{ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } } }]
    },
    textDelta: (delta) => [{ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: delta } } }],
    textEnd(text) {
      outputTokens += roughTokens(text)
      return [{ event: 'content_block_stop', data: { type: 'content_block_stop', index } }]
    },
    toolCall(call) {
      index += 1
      const json = JSON.stringify(call.arguments)
      outputTokens += roughTokens(json)
      return [
        { event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'tool_use', id: call.id, name: call.name, input: {} } } },
        { event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json } } },
        { event: 'content_block_stop', data: { type: 'content_block_stop', index } },
      ]
    },
    finish: (stopReason) => [
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: outputTokens } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ],
    fail: (failure) => [{ event: 'error', data: { type: 'error', error: { type: failure.code, message: failure.message } } }],
  }
}

/** The finish reason a chat completion reports for each stop reason. */
const CHAT_FINISH = { end_turn: 'stop', tool_use: 'tool_calls', max_tokens: 'length', refusal: 'content_filter' } as const

/** A `chat.completion.chunk` as DeepSeek and OpenAI stream it: one delta, or the usage alone. */
export function chatChunk(delta: Record<string, unknown>, finishReason: string | null = null, usage?: Record<string, number>, model = 'deepseek-chat'): Record<string, unknown> {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1767225600,
    model,
    choices: usage ? [] : [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(usage ? { usage } : {}),
  }
}

export function chatEncoder(options: { model: string; inputTokens: number }): StreamEncoder {
  let calls = 0
  let outputTokens = 0
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null, usage?: Record<string, number>): SseEvent => ({ data: chatChunk(delta, finishReason, usage, options.model) })
  return {
    open: () => [chunk({ role: 'assistant', content: '' })],
    commentary: () => [],
    textStart: () => [],
    textDelta: (delta) => [chunk({ content: delta })],
    textEnd(text) {
      outputTokens += roughTokens(text)
      return []
    },
    toolCall(call) {
      const json = JSON.stringify(call.arguments)
      outputTokens += roughTokens(json)
      return [chunk({ tool_calls: [{ index: calls++, id: call.id, type: 'function', function: { name: call.name, arguments: json } }] })]
    },
    finish: (stopReason) => [
      chunk({}, CHAT_FINISH[stopReason]),
      chunk({}, null, { prompt_tokens: options.inputTokens, completion_tokens: outputTokens, total_tokens: options.inputTokens + outputTokens }),
      { data: '[DONE]' },
    ],
    fail: (failure) => [{ data: { error: { code: failure.code, message: failure.message } } }],
  }
}

/** A complete, non-streamed Messages API response (`stream: false`). */
export function messagesJson(options: { model: string; inputTokens: number; text: string; toolCalls: ToolCall[]; stopReason: string }): Record<string, unknown> {
  const content: Record<string, unknown>[] = []
  if (options.text) content.push({ type: 'text', text: options.text })
  for (const call of options.toolCalls) content.push({ type: 'tool_use', id: call.id, name: call.name, input: call.arguments })
  return {
    id: fakeId('msg_'),
    type: 'message',
    role: 'assistant',
    model: options.model,
    content,
    stop_reason: options.stopReason,
    stop_sequence: null,
    usage: { input_tokens: options.inputTokens, output_tokens: roughTokens(options.text) },
  }
}
