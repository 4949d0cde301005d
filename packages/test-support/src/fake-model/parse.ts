/**
 * Reads what the fake model needs from a request body: the system text, the last user text,
 * the tool results and the offered tool names, for each wire format.
 *
 * Shapes: OpenAI Responses API `POST /v1/responses` (`instructions`, `input` items of type
 * `message` / `function_call_output`, `tools`), Anthropic Messages API `POST /v1/messages`
 * (`system`, `messages[].content` blocks of type `text` / `tool_result`, `tools`), OpenAI chat
 * completions `POST …/chat/completions` (`messages` of role `system` / `user` / `tool`, `tools`
 * of `{function: {name}}`).
 */
import type { FakeToolResult, ParsedBody } from './types.ts'

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Text of a content value that is a string or a list of `{type, text}` parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content
    .filter(isObject)
    .map((part) => (typeof part.text === 'string' ? part.text : ''))
    .filter((text) => text.length > 0)
    .join('\n')
}

function toolNames(tools: unknown): string[] {
  if (!Array.isArray(tools)) return []
  return tools.filter(isObject).map((tool) => String(tool.name ?? (isObject(tool.function) ? tool.function.name : undefined) ?? tool.type ?? ''))
}

/** The fields every format reads alike (model, stream, tools) around what its own walk found. */
function parsed(json: Json, found: Pick<ParsedBody, 'system' | 'userText' | 'toolResults'>): ParsedBody {
  return { ...(typeof json.model === 'string' ? { model: json.model } : {}), stream: json.stream === true, ...found, tools: toolNames(json.tools) }
}

/** Responses API: `instructions` and system/developer messages are the system text. */
export function parseResponsesBody(body: unknown): ParsedBody {
  const json = isObject(body) ? body : {}
  const system: string[] = typeof json.instructions === 'string' && json.instructions ? [json.instructions] : []
  // `input` is a list of items, or a plain string: one user message.
  let userText = typeof json.input === 'string' ? json.input : ''
  const toolResults: FakeToolResult[] = []
  const input = Array.isArray(json.input) ? json.input.filter(isObject) : []
  for (const item of input) {
    const type = item.type ?? 'message'
    if (type === 'message') {
      if (item.role === 'system' || item.role === 'developer') system.push(textOf(item.content))
      if (item.role === 'user') userText = textOf(item.content)
    } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      toolResults.push({ callId: String(item.call_id ?? ''), output: typeof item.output === 'string' ? item.output : textOf(item.output) })
    }
  }
  return parsed(json, { system: system.filter((text) => text.length > 0).join('\n'), userText, toolResults })
}

/** Messages API: `system` is a string or text blocks; tool results are blocks of user messages. */
export function parseMessagesBody(body: unknown): ParsedBody {
  const json = isObject(body) ? body : {}
  let userText = ''
  const toolResults: FakeToolResult[] = []
  const messages = Array.isArray(json.messages) ? json.messages.filter(isObject) : []
  for (const message of messages) {
    if (message.role !== 'user') continue
    userText = textOf(Array.isArray(message.content) ? message.content.filter((block) => isObject(block) && block.type === 'text') : message.content)
    if (!Array.isArray(message.content)) continue
    for (const block of message.content.filter(isObject)) {
      if (block.type !== 'tool_result') continue
      toolResults.push({ callId: String(block.tool_use_id ?? ''), output: textOf(block.content), ...(block.is_error === true ? { isError: true } : {}) })
    }
  }
  return parsed(json, { system: textOf(json.system), userText, toolResults })
}

/** Chat completions: system messages are the system text; `tool` messages are the tool results. */
export function parseChatBody(body: unknown): ParsedBody {
  const json = isObject(body) ? body : {}
  const system: string[] = []
  let userText = ''
  const toolResults: FakeToolResult[] = []
  for (const message of Array.isArray(json.messages) ? json.messages.filter(isObject) : []) {
    if (message.role === 'system' || message.role === 'developer') system.push(textOf(message.content))
    if (message.role === 'user') userText = textOf(message.content)
    if (message.role === 'tool') toolResults.push({ callId: String(message.tool_call_id ?? ''), output: textOf(message.content) })
  }
  return parsed(json, { system: system.filter((text) => text.length > 0).join('\n'), userText, toolResults })
}
