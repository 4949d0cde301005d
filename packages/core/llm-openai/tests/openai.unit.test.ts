import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import LlmService, { LlmError, collectResponse, type ModelAdapter, type ModelRequest } from '@conch/llm'
import { chatChunk as chunk, startFakeModel, type FakeModelServer } from '@conch/test-support/fake-model'
import * as openai from '../src/index.ts'
import { resolveEndpoint, toWireMessages } from '../src/index.ts'

const KEY_ENV = 'CONCH_TEST_OPENAI_KEY'
const KEY = 'sk-test-not-a-real-key'

let server: FakeModelServer
let ctx: Context
let fibers: { dispose(): Promise<void> }[]
let savedOpenAIKey: string | undefined

beforeEach(async () => {
  server = await startFakeModel()
  ctx = new Context()
  fibers = [await ctx.plugin(LlmService, {})]
  process.env[KEY_ENV] = KEY
  savedOpenAIKey = process.env['OPENAI_API_KEY']
  delete process.env['OPENAI_API_KEY']
})

afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  await server.close()
  delete process.env[KEY_ENV]
  if (savedOpenAIKey !== undefined) process.env['OPENAI_API_KEY'] = savedOpenAIKey
})

async function load(config: Partial<openai.Config> = {}): Promise<ModelAdapter> {
  const endpoints = [{ apiKeyEnv: KEY_ENV, baseURL: server.url, model: 'deepseek-chat' }]
  fibers.push(await ctx.plugin(openai, openai.Config.parse({ endpoints, maxRetries: 0, ...config })))
  return ctx.llm.resolve()
}

function request(extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    messages: [
      { role: 'system', content: 'You are conch.' },
      { role: 'user', content: 'list files' },
    ],
    tools: [{ name: 'terminal_open', description: 'Opens a terminal.', parameters: { type: 'object', properties: {} } }],
    ...extra,
  }
}

async function failure(promise: Promise<unknown>): Promise<LlmError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(LlmError)
  return error as LlmError
}

describe('streaming a chat completion', () => {
  it('maps text deltas, finish and usage, and sends the request in the wire format with the key from the environment', async () => {
    server.enqueue({
      sse: [
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: 'Here are ' }),
        chunk({ content: 'the files.' }),
        chunk({}, 'stop'),
        chunk({}, null, { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 }),
      ],
    })
    const adapter = await load({ model: 'deepseek-chat', temperature: 0.2, provider: 'deepseek' })
    expect(adapter.provider).toBe('deepseek')
    expect(adapter.model).toBe('deepseek-chat')
    const deltas: string[] = []
    const response = await collectResponse(adapter.stream(request()), (c) => void (c.type === 'text-delta' && deltas.push(c.text)))
    expect(response).toEqual({
      text: 'Here are the files.',
      toolCalls: [],
      finishReason: 'stop',
      usage: { inputTokens: 42, outputTokens: 7 },
    })
    expect(deltas).toEqual(['Here are ', 'the files.'])

    const [sent] = server.requests
    expect(sent!.path).toBe('/chat/completions')
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(sent!.body).toEqual({
      model: 'deepseek-chat',
      messages: [
        { role: 'system', content: 'You are conch.' },
        { role: 'user', content: 'list files' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: 'function', function: { name: 'terminal_open', description: 'Opens a terminal.', parameters: { type: 'object', properties: {} } } }],
      temperature: 0.2,
    })
  })

  it('assembles tool calls whose arguments arrive split across many deltas', async () => {
    const args0 = '{"type": "bash", "name": "main"}'
    const args1 = '{"sessionId": "pty-1", "text": "ls -la"}'
    const pieces = (text: string) => text.match(/.{1,5}/g)!
    server.enqueue({
      sse: [
        chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'terminal_open', arguments: '' } }] }),
        ...pieces(args0).map((part) => chunk({ tool_calls: [{ index: 0, function: { arguments: part } }] })),
        chunk({ tool_calls: [{ index: 1, id: 'call_def', type: 'function', function: { name: 'terminal_send', arguments: '' } }] }),
        ...pieces(args1).map((part) => chunk({ tool_calls: [{ index: 1, function: { arguments: part } }] })),
        chunk({}, 'tool_calls'),
      ],
    })
    const adapter = await load()
    const response = await collectResponse(adapter.stream(request()))
    expect(response.finishReason).toBe('tool_calls')
    expect(response.toolCalls).toEqual([
      { id: 'call_abc', name: 'terminal_open', arguments: args0 },
      { id: 'call_def', name: 'terminal_send', arguments: args1 },
    ])
  })

  it('sends earlier tool calls and results back in the wire format', async () => {
    server.enqueue({ sse: [chunk({ content: 'ok' }, 'stop')] })
    const adapter = await load()
    await collectResponse(
      adapter.stream(
        request({
          messages: [
            { role: 'user', content: 'go' },
            { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'terminal_open', arguments: '{}' }] },
            { role: 'tool', toolCallId: 'c1', name: 'terminal_open', content: 'opened pty-1' },
          ],
          tools: [],
        }),
      ),
    )
    const body = server.requests[0]!.body as Record<string, unknown>
    expect(body['tools']).toBeUndefined()
    expect(body['messages']).toEqual([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'terminal_open', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'opened pty-1' },
    ])
  })
})

describe('failures and retries', () => {
  it('retries a 429 and then streams the answer', async () => {
    server.enqueue(
      { httpStatus: 429, httpBody: { error: { message: 'Rate limit reached', type: 'rate_limit' } }, httpHeaders: { 'retry-after-ms': '1' } },
      { sse: [chunk({ content: 'after the retry' }, 'stop')] },
    )
    const adapter = await load({ maxRetries: 3 })
    const response = await collectResponse(adapter.stream(request()))
    expect(response.text).toBe('after the retry')
    expect(server.requests).toHaveLength(2)
  })

  it('gives up after maxRetries on a 500 with a MODEL_ERROR naming the endpoint and status', async () => {
    for (let attempt = 0; attempt < 3; attempt++) {
      server.enqueue({ httpStatus: 500, httpBody: { error: { message: 'upstream exploded' } }, httpHeaders: { 'retry-after-ms': '1' } })
    }
    const adapter = await load({ maxRetries: 2 })
    const error = await failure(collectResponse(adapter.stream(request())))
    expect(error.code).toBe('MODEL_ERROR')
    expect(error.message).toBe(`the model API at ${server.url} answered HTTP 500 upstream exploded (after 2 retries); try again later`)
    expect(server.requests).toHaveLength(3)
  })

  it('does not retry a 401 and says where the key comes from, without showing it', async () => {
    server.enqueue({ httpStatus: 401, httpBody: { error: { message: 'Authentication Fails' } } })
    const adapter = await load({ maxRetries: 3 })
    const error = await failure(collectResponse(adapter.stream(request())))
    expect(error.message).toBe(`the model API at ${server.url} answered HTTP 401 Authentication Fails; check the key in ${KEY_ENV}`)
    expect(error.message).not.toContain(KEY)
    expect(server.requests).toHaveLength(1)
  })

  it('reports an unreachable endpoint', async () => {
    const adapter = await load()
    const baseURL = server.url
    await server.close()
    const error = await failure(collectResponse(adapter.stream(request())))
    expect(error.message).toMatch(new RegExp(`^cannot reach the model API at ${baseURL} \\(after 0 retries\\): .+; check baseURL and the network$`))
  })

  it('closes the HTTP stream and rejects with the abort reason when the signal aborts mid-stream', async () => {
    server.enqueue({ sse: [chunk({ content: 'partial' })], stallAfterChunks: 1 })
    const adapter = await load()
    const controller = new AbortController()
    const reason = new Error('turn cancelled')
    const seen: string[] = []
    const result = collectResponse(adapter.stream(request({ signal: controller.signal })), (c) => {
      if (c.type === 'text-delta') {
        seen.push(c.text)
        controller.abort(reason)
      }
    })
    await expect(result).rejects.toBe(reason)
    expect(seen).toEqual(['partial'])
    await server.waitFor((requests) => requests[0]?.outcome === 'client-gone')
  })
})

describe('the API key', () => {
  it('loads without a key and fails each call with NO_API_KEY saying what to set and where each key goes', async () => {
    delete process.env[KEY_ENV]
    const adapter = await load()
    const error = await failure(collectResponse(adapter.stream(request())))
    expect(error.code).toBe('NO_API_KEY')
    expect(error.message).toBe(
      `no API key for the model: set ${KEY_ENV} (sent to ${server.url}), or name an OpenAI-compatible endpoint with CONCH_BASE_URL (and CONCH_MODEL), or run with --script FILE to use a scripted model`,
    )
    expect(server.requests).toHaveLength(0)
  })

  it('sends each key only to its own endpoint: DeepSeek for DEEPSEEK_API_KEY, OpenAI for OPENAI_API_KEY', () => {
    const config = openai.Config.parse({})
    expect(resolveEndpoint(config, { DEEPSEEK_API_KEY: 'k' })).toEqual({ baseURL: 'https://api.deepseek.com', model: 'deepseek-chat', apiKeyEnv: 'DEEPSEEK_API_KEY' })
    expect(resolveEndpoint(config, { OPENAI_API_KEY: 'k' })).toEqual({ baseURL: 'https://api.openai.com/v1', model: 'gpt-4.1-mini', apiKeyEnv: 'OPENAI_API_KEY' })
    expect(resolveEndpoint(config, { DEEPSEEK_API_KEY: '', OPENAI_API_KEY: 'k' })?.baseURL).toBe('https://api.openai.com/v1')
    expect(resolveEndpoint(config, {})).toBeUndefined()
  })

  it('OPENAI_BASE_URL moves only the OpenAI key; with no key at all it names a server without one', () => {
    const config = openai.Config.parse({})
    expect(resolveEndpoint(config, { OPENAI_BASE_URL: 'http://b/v1', OPENAI_API_KEY: 'k' })).toEqual({ baseURL: 'http://b/v1', model: 'gpt-4.1-mini', apiKeyEnv: 'OPENAI_API_KEY' })
    expect(resolveEndpoint(config, { OPENAI_BASE_URL: 'http://b/v1', DEEPSEEK_API_KEY: 'k' })).toEqual({ baseURL: 'https://api.deepseek.com', model: 'deepseek-chat', apiKeyEnv: 'DEEPSEEK_API_KEY' })
  })

  it('a named endpoint (config, then CONCH_BASE_URL) and CONCH_MODEL apply to any key, or to none', () => {
    const config = openai.Config.parse({})
    expect(resolveEndpoint(config, { OPENAI_BASE_URL: 'http://127.0.0.1:8000/v1', CONCH_MODEL: 'qwen' })).toEqual({
      baseURL: 'http://127.0.0.1:8000/v1',
      model: 'qwen',
      apiKeyEnv: undefined,
    })
    expect(resolveEndpoint(config, { CONCH_BASE_URL: 'http://a/v1', OPENAI_BASE_URL: 'http://b/v1', OPENAI_API_KEY: 'k' })).toEqual({
      baseURL: 'http://a/v1',
      model: 'gpt-4.1-mini',
      apiKeyEnv: 'OPENAI_API_KEY',
    })
    expect(resolveEndpoint({ ...config, baseURL: 'http://c/v1', model: 'm' }, { CONCH_BASE_URL: 'http://a/v1', CONCH_MODEL: 'x' })).toEqual({
      baseURL: 'http://c/v1',
      model: 'm',
      apiKeyEnv: undefined,
    })
  })

  it('sends no Authorization header to a named endpoint when no key is set', async () => {
    delete process.env[KEY_ENV]
    server.enqueue({ sse: [chunk({ content: 'ok' }, 'stop')] })
    const adapter = await load({ baseURL: server.url, model: 'local-model' })
    expect((await collectResponse(adapter.stream(request()))).text).toBe('ok')
    expect(server.requests[0]!.headers.authorization).toBeUndefined()
    expect((server.requests[0]!.body as Record<string, unknown>)['model']).toBe('local-model')
  })

  it('refuses a key pasted into apiKeyEnv without echoing it', async () => {
    const endpoints = [{ apiKeyEnv: 'sk-live-1234567890', baseURL: 'http://127.0.0.1:1', model: 'm' }]
    const error = await ctx.plugin(openai, { endpoints } as unknown as openai.Config).then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error?.message).toMatch(/must be the name of an environment variable, not a key \(at endpoints\.0\.apiKeyEnv\)/)
    expect(error?.message).not.toContain('sk-live-1234567890')
  })
})

describe('toWireMessages', () => {
  it('keeps the text of an assistant message that also calls tools', () => {
    expect(toWireMessages([{ role: 'assistant', content: 'Opening.', toolCalls: [{ id: 'c', name: 't', arguments: '{}' }] }])).toEqual([
      { role: 'assistant', content: 'Opening.', tool_calls: [{ id: 'c', type: 'function', function: { name: 't', arguments: '{}' } }] },
    ])
  })
})
