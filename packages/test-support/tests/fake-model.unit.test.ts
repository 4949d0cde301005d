/**
 * The fake model is read by the official SDK clients (openai, @anthropic-ai/sdk): if they
 * parse its streams, Codex and Claude Code — which speak the same formats — can too.
 */
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { afterEach, describe, expect, it } from 'vitest'
import { startFakeModel, splitWords, type FakeModelServer } from '../src/fake-model/index.ts'

let server: FakeModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(options?: Parameters<typeof startFakeModel>[0]): Promise<FakeModelServer> {
  server = await startFakeModel(options)
  return server
}

const openai = (fake: FakeModelServer) => new OpenAI({ baseURL: fake.openaiBaseUrl, apiKey: 'dummy', maxRetries: 0 })
const anthropic = (fake: FakeModelServer) => new Anthropic({ baseURL: fake.url, apiKey: 'dummy', maxRetries: 0 })

/** Streams a Responses request and collects the text deltas and the final event. */
async function responses(fake: FakeModelServer, body: Partial<OpenAI.Responses.ResponseCreateParamsStreaming> = {}, signal?: AbortSignal) {
  const deltas: string[] = []
  const types: string[] = []
  let final: OpenAI.Responses.Response | undefined
  const stream = await openai(fake).responses.create(
    { model: 'gpt-5.5', input: 'say hi', stream: true, ...body },
    signal ? { signal } : {},
  )
  for await (const event of stream) {
    types.push(event.type)
    if (event.type === 'response.output_text.delta') deltas.push(event.delta)
    if (event.type === 'response.completed' || event.type === 'response.failed' || event.type === 'response.incomplete') final = event.response
  }
  return { deltas, types, final, text: final ? outputText(final) : undefined }
}

/** The text of the response's message items (the SDK adds `output_text` only to non-streamed responses). */
function outputText(response: OpenAI.Responses.Response): string {
  return response.output
    .flatMap((item) => (item.type === 'message' ? item.content : []))
    .map((part) => (part.type === 'output_text' ? part.text : ''))
    .join('')
}

describe('OpenAI Responses stream', () => {
  it('streams a text answer word by word and records what the request carried', async () => {
    const fake = await start()
    fake.enqueue({ text: 'hello there, parent' })
    const { deltas, final, types, text } = await responses(fake, {
      instructions: 'you are a child',
      input: [{ role: 'developer', content: 'be brief' }, { role: 'user', content: [{ type: 'input_text', text: 'what now?' }] }],
      tools: [{ type: 'function', name: 'exec_command', parameters: { type: 'object', properties: {} }, strict: false }],
    })
    expect(deltas).toEqual(['hello', ' there,', ' parent'])
    expect(types[0]).toBe('response.created')
    expect(types.at(-1)).toBe('response.completed')
    expect(text).toBe('hello there, parent')
    expect(final?.usage?.output_tokens).toBeGreaterThan(0)
    const [request] = fake.requests
    expect(request).toMatchObject({
      seq: 1,
      api: 'responses',
      method: 'POST',
      path: '/v1/responses',
      stream: true,
      model: 'gpt-5.5',
      system: 'you are a child\nbe brief',
      userText: 'what now?',
      tools: ['exec_command'],
      chunksSent: 3,
      outcome: 'completed',
    })
  })

  it('makes a scripted function_call and records the function_call_output that comes back', async () => {
    const fake = await start()
    fake.enqueue({ toolCalls: [{ name: 'exec_command', arguments: { cmd: 'touch x' }, id: 'call_1' }] }, { text: 'done' })
    const { final } = await responses(fake)
    const call = final?.output.find((item) => item.type === 'function_call')
    expect(call).toMatchObject({ type: 'function_call', name: 'exec_command', call_id: 'call_1', arguments: '{"cmd":"touch x"}' })
    const second = await responses(fake, {
      input: [
        { type: 'function_call', call_id: 'call_1', name: 'exec_command', arguments: '{"cmd":"touch x"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'rejected by user' },
      ],
    })
    expect(second.text).toBe('done')
    expect(fake.requests[1]?.toolResults).toEqual([{ callId: 'call_1', output: 'rejected by user' }])
  })

  it('sends a commentary message before the final answer, each with its phase', async () => {
    const fake = await start()
    fake.enqueue({ commentary: 'looking', text: 'the answer' })
    const { final } = await responses(fake)
    const messages = final?.output.filter((item) => item.type === 'message') as unknown as { phase?: string; content: { text: string }[] }[]
    expect(messages.map((message) => [message.phase, message.content[0]?.text])).toEqual([
      ['commentary', 'looking'],
      ['final_answer', 'the answer'],
    ])
  })

  it('ends with response.failed carrying the scripted error code', async () => {
    const fake = await start()
    fake.enqueue({ text: 'partial', fail: { code: 'context_length_exceeded' } })
    const { types, final, deltas } = await responses(fake)
    expect(deltas).toEqual(['partial'])
    expect(types.at(-1)).toBe('response.failed')
    expect(final?.error?.code).toBe('context_length_exceeded')
    expect(fake.requests[0]?.outcome).toBe('failed')
  })

  it('ends an answer cut by the token limit with response.incomplete', async () => {
    const fake = await start()
    fake.enqueue({ text: 'cut', stopReason: 'max_tokens' })
    const { types, final } = await responses(fake)
    expect(types.at(-1)).toBe('response.incomplete')
    expect(final?.incomplete_details?.reason).toBe('max_output_tokens')
  })
})

describe('Anthropic Messages stream', () => {
  it('streams text on POST /v1/messages?beta=true and records the system text and user text', async () => {
    const fake = await start()
    fake.enqueue({ text: 'child answer here' })
    const deltas: string[] = []
    const stream = anthropic(fake).beta.messages.stream({
      model: 'claude-fake',
      max_tokens: 100,
      system: [{ type: 'text', text: 'system one' }, { type: 'text', text: 'system two' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: '<reminder>' }, { type: 'text', text: 'the task' }] }],
    }, { query: { beta: 'true' } }) // the query string Claude Code sends
    stream.on('text', (text) => deltas.push(text))
    const message = await stream.finalMessage()
    expect(deltas).toEqual(['child', ' answer', ' here'])
    expect(message.content).toEqual([{ type: 'text', text: 'child answer here' }])
    expect(message.stop_reason).toBe('end_turn')
    expect(fake.requests[0]).toMatchObject({ api: 'messages', path: '/v1/messages', query: 'beta=true', system: 'system one\nsystem two', userText: '<reminder>\nthe task', outcome: 'completed' })
  })

  it('makes a scripted tool_use and records the tool_result that comes back', async () => {
    const fake = await start()
    fake.enqueue({ text: 'let me', toolCalls: [{ name: 'Bash', arguments: { command: 'rm -rf /tmp/x' }, id: 'toolu_1' }] }, { text: 'ok then' })
    const client = anthropic(fake)
    const first = await client.messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'go' }] }).finalMessage()
    expect(first.stop_reason).toBe('tool_use')
    expect(first.content).toEqual([
      { type: 'text', text: 'let me' },
      { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'rm -rf /tmp/x' } },
    ])
    const second = await client.messages
      .stream({
        model: 'm',
        max_tokens: 10,
        messages: [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: first.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'permission denied', is_error: true }] },
        ],
      })
      .finalMessage()
    expect(second.content).toEqual([{ type: 'text', text: 'ok then' }])
    expect(fake.requests[1]?.toolResults).toEqual([{ callId: 'toolu_1', output: 'permission denied', isError: true }])
  })

  it('answers stream: false with a whole message', async () => {
    const fake = await start({ defaultAnswer: { text: 'whole' } })
    const message = await anthropic(fake).messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
    expect(message.content).toEqual([{ type: 'text', text: 'whole' }])
    expect(fake.requests[0]).toMatchObject({ stream: false, outcome: 'answered' })
  })

  it('ends with an error event the client reports', async () => {
    const fake = await start()
    fake.enqueue({ text: 'half', fail: { code: 'overloaded_error', message: 'busy' } })
    await expect(anthropic(fake).messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).finalMessage()).rejects.toThrow(/busy/)
  })

  it('counts tokens and lists no models', async () => {
    const fake = await start()
    const counted = await anthropic(fake).messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'count me' }] })
    expect(counted.input_tokens).toBeGreaterThan(0)
    const models = await fetch(`${fake.openaiBaseUrl}/models`).then((response) => response.json())
    expect(models).toMatchObject({ data: [] })
    expect(fake.requests.map((request) => request.api)).toEqual(['count_tokens', 'models'])
  })
})

describe('OpenAI chat completions stream', () => {
  it('streams text and a tool call the SDK assembles, and records the system text, user text, tool results and tools', async () => {
    const fake = await start()
    fake.enqueue({ text: 'opening one', toolCalls: [{ name: 'terminal_open', arguments: { type: 'shell' }, id: 'call_1' }] })
    const stream = openai(fake).chat.completions.stream({
      model: 'deepseek-chat',
      messages: [
        { role: 'system', content: 'you are conch' },
        { role: 'user', content: 'open a terminal' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'terminal_list', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_0', content: 'no terminals' },
      ],
      tools: [{ type: 'function', function: { name: 'terminal_open', parameters: { type: 'object', properties: {} } } }],
      stream_options: { include_usage: true },
    })
    const deltas: string[] = []
    stream.on('content', (delta) => deltas.push(delta))
    const completion = await stream.finalChatCompletion()
    expect(deltas).toEqual(['opening', ' one'])
    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: { content: 'opening one', tool_calls: [{ id: 'call_1', function: { name: 'terminal_open', arguments: '{"type":"shell"}' } }] },
    })
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0)
    expect(fake.requests[0]).toMatchObject({ api: 'chat', path: '/v1/chat/completions', system: 'you are conch', userText: 'open a terminal', toolResults: [{ callId: 'call_0', output: 'no terminals' }], tools: ['terminal_open'], outcome: 'completed' })
  })

  it('sends recorded chunks as they are, and answers a scripted HTTP error with its body and headers', async () => {
    const fake = await start()
    const chunk = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: 'as recorded' }, finish_reason: 'stop' }] }
    fake.enqueue({ httpStatus: 429, httpBody: { error: { message: 'slow down' } }, httpHeaders: { 'retry-after-ms': '1' } }, { sse: [chunk] })
    const client = new OpenAI({ baseURL: fake.openaiBaseUrl, apiKey: 'dummy', maxRetries: 1 })
    const completion = await client.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).finalChatCompletion()
    expect(completion.choices[0]?.message.content).toBe('as recorded')
    expect(fake.requests.map((request) => request.outcome)).toEqual(['http-error', 'completed'])
  })
})

describe('knobs', () => {
  it('waits before the first token', async () => {
    const fake = await start()
    fake.enqueue({ text: 'late', firstTokenDelayMs: 150 })
    const started = Date.now()
    const { deltas } = await responses(fake)
    // A lower bound only: the delay is a floor, load can only add to it.
    expect(Date.now() - started).toBeGreaterThanOrEqual(150)
    expect(deltas).toEqual(['late'])
  })

  it('stalls mid-answer until released, with the first deltas already sent', async () => {
    const fake = await start()
    fake.enqueue({ text: 'one two three four', stallAfterChunks: 2 })
    const seen: string[] = []
    const done = (async () => {
      const stream = await openai(fake).responses.create({ model: 'm', input: 'x', stream: true })
      for await (const event of stream) if (event.type === 'response.output_text.delta') seen.push(event.delta)
    })()
    await fake.waitFor((requests) => requests[0]?.stalled)
    expect(fake.requests[0]?.chunksSent).toBe(2)
    expect(fake.requests[0]?.outcome).toBeUndefined()
    fake.release()
    await done
    expect(seen).toEqual(['one', ' two', ' three', ' four'])
    expect(fake.requests[0]?.outcome).toBe('completed')
  })

  it('closes the connection mid-stream without a closing event', async () => {
    const fake = await start()
    fake.enqueue({ text: 'a b c d', closeAfterChunks: 2 })
    const seen: string[] = []
    const run = (async () => {
      const stream = anthropic(fake).messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      stream.on('text', (text) => seen.push(text))
      await stream.finalMessage()
    })()
    await expect(run).rejects.toThrow()
    expect(seen).toEqual(['a', ' b'])
    expect(fake.requests[0]).toMatchObject({ chunksSent: 2, outcome: 'closed' })
  })

  it('records a client that goes away during a slow answer', async () => {
    const fake = await start()
    fake.enqueue({ text: 'slow words keep coming forever and ever', chunkDelayMs: 50 })
    const controller = new AbortController()
    const run = responses(fake, {}, controller.signal)
    await fake.waitFor((requests) => (requests[0]?.chunksSent ?? 0) >= 2)
    controller.abort()
    await Promise.allSettled([run])
    const request = await fake.waitFor((requests) => requests[0]?.outcome && requests[0])
    expect(request.outcome).toBe('client-gone')
    expect(request.chunksSent).toBeLessThan(7)
  })

  it('frames the answer with the sentinel the system prompt asks for, unless told to omit it', async () => {
    const fake = await start()
    fake.enqueue({ text: 'framed' }, { text: 'bare', sentinel: 'omit' }, { text: 'plain' })
    const asks = { instructions: 'End every answer with the line <<<DONE-7f3a>>>.' }
    expect((await responses(fake, asks)).text).toBe('framed\n<<<DONE-7f3a>>>')
    expect(fake.requests[0]?.sentinel).toBe('<<<DONE-7f3a>>>')
    expect((await responses(fake, asks)).text).toBe('bare')
    expect((await responses(fake)).text).toBe('plain')
  })

  it('uses a custom sentinel pattern and framing', async () => {
    const fake = await start({ sentinelPattern: /\[\[end:\w+\]\]/, frame: (text, sentinel) => `${sentinel}\n${text}\n${sentinel}` })
    fake.enqueue({ text: 'inside' })
    const message = await anthropic(fake)
      .messages.stream({ model: 'm', max_tokens: 10, system: 'close with [[end:abc]]', messages: [{ role: 'user', content: 'x' }] })
      .finalMessage()
    expect(message.content).toEqual([{ type: 'text', text: '[[end:abc]]\ninside\n[[end:abc]]' }])
  })

  it('answers from the queue first, then respond(), then the default', async () => {
    const fake = await start({
      respond: (request) => (request.userText === 'special' ? { text: 'from respond' } : undefined),
      defaultAnswer: { text: 'from default' },
    })
    fake.enqueue({ text: 'from queue' })
    const texts: (string | undefined)[] = []
    for (const input of ['special', 'special', 'other']) texts.push((await responses(fake, { input })).text)
    expect(texts).toEqual(['from queue', 'from respond', 'from default'])
  })

  it('answers an HTTP error status, a 404 for unknown paths and a 400 for bad JSON', async () => {
    const fake = await start()
    fake.enqueue({ httpStatus: 500 })
    await expect(responses(fake)).rejects.toMatchObject({ status: 500 })
    expect((await fetch(`${fake.url}/v1/elsewhere`)).status).toBe(404)
    expect((await fetch(`${fake.url}/v1/messages`, { method: 'POST', body: '{nope' })).status).toBe(400)
    expect(fake.requests.map((request) => [request.api, request.outcome])).toEqual([
      ['responses', 'http-error'],
      ['other', 'http-error'],
      ['messages', 'http-error'],
    ])
  })

  it('close() ends stalled streams and rejects pending waits', async () => {
    const fake = await start()
    fake.enqueue({ text: 'never ends', stallAfterChunks: 1 })
    const run = responses(fake)
    await fake.waitFor((requests) => requests[0]?.stalled)
    const pending = fake.waitForRequest((request) => request.seq === 99)
    await fake.close()
    await expect(pending).rejects.toThrow(/closed/)
    await expect(run).rejects.toThrow()
    expect(fake.requests[0]?.outcome).toBe('client-gone')
    await expect(fake.waitFor(() => true)).rejects.toThrow(/closed/)
  })
})

describe('splitWords', () => {
  it('keeps every character, the whitespace going with the next word', () => {
    for (const text of ['', 'one', ' lead', 'a  b\nc ', '\n\n']) expect(splitWords(text).join('')).toBe(text)
    expect(splitWords('a  b\nc ')).toEqual(['a', '  b', '\nc', ' '])
  })
})
