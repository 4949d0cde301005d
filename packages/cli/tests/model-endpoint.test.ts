/**
 * Which endpoint a key is sent to, by a real `conch run` against two fake model servers on
 * loopback — one standing in for DeepSeek, one for OpenAI — mapped in place of the default
 * endpoints through `@conch/llm-openai`'s `endpoints` setting (the defaults' variables and models
 * kept), so no request leaves the machine.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { Config } from '@conch/llm-openai/endpoint'
import { chunk, startFakeServer, type FakeServer } from '../../core/llm-openai/tests/fake-server.ts'
import { jsonLines, runConch, SPINE, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

let ws: Workspace
let deepseek: FakeServer
let openai: FakeServer
let local: FakeServer

beforeEach(async () => {
  ws = workspace()
  ;[deepseek, openai, local] = await Promise.all([startFakeServer(), startFakeServer(), startFakeServer()])
  for (const server of [deepseek, openai, local]) server.replies.push({ kind: 'sse', chunks: [chunk({ content: 'done' }, 'stop')] })
  // The default endpoints, each provider's URL replaced by its fake.
  const fakes: Record<string, string> = { 'https://api.deepseek.com': deepseek.baseURL, 'https://api.openai.com/v1': openai.baseURL }
  const endpoints = Config.parse({}).endpoints.map((endpoint) => ({ ...endpoint, baseURL: fakes[endpoint.baseURL] }))
  expect(endpoints.every((endpoint) => endpoint.baseURL !== undefined)).toBe(true)
  ws.write('cordis.yml', `${SPINE}- id: llm-openai\n  name: '@conch/llm-openai'\n  config: ${JSON.stringify({ endpoints, maxRetries: 0 })}\n`)
})

afterEach(async () => {
  await Promise.all([deepseek, openai, local].map((server) => server.close()))
  ws.remove()
})

async function run(env: NodeJS.ProcessEnv) {
  const result = await runConch(['run', '--config', 'cordis.yml', '--output', 'stream-json', 'say done'], { cwd: ws.dir, env })
  expect(result.stderr).toBe('')
  expect(result.code).toBe(0)
  expect(jsonLines(result.stdout).at(-1)).toMatchObject({ type: 'result', status: 'completed', text: 'done' })
  const authorization = (server: FakeServer) => server.received.map((request) => request.headers.authorization ?? 'none')
  return { deepseek: authorization(deepseek), openai: authorization(openai), local: authorization(local), models: [deepseek, openai, local].flatMap((server) => server.received.map((request) => request.body['model'])) }
}

describe('the live model endpoint', () => {
  it('OPENAI_API_KEY alone goes to OpenAI, never to DeepSeek', async () => {
    expect(await run({ OPENAI_API_KEY: 'sk-openai-key' })).toEqual({ deepseek: [], openai: ['Bearer sk-openai-key'], local: [], models: ['gpt-4.1-mini'] })
  })

  it('DEEPSEEK_API_KEY goes to DeepSeek, and with both set only the DeepSeek key is sent', async () => {
    expect(await run({ DEEPSEEK_API_KEY: 'sk-deepseek-key' })).toEqual({ deepseek: ['Bearer sk-deepseek-key'], openai: [], local: [], models: ['deepseek-chat'] })
    deepseek.replies.push({ kind: 'sse', chunks: [chunk({ content: 'done' }, 'stop')] })
    expect(await run({ DEEPSEEK_API_KEY: 'sk-deepseek-key', OPENAI_API_KEY: 'sk-openai-key' })).toEqual({
      deepseek: ['Bearer sk-deepseek-key', 'Bearer sk-deepseek-key'],
      openai: [],
      local: [],
      models: ['deepseek-chat', 'deepseek-chat'],
    })
  })

  it('OPENAI_BASE_URL moves the OpenAI key only: a DeepSeek key still goes to DeepSeek', async () => {
    expect(await run({ OPENAI_BASE_URL: local.baseURL, DEEPSEEK_API_KEY: 'sk-deepseek-key' })).toEqual({ deepseek: ['Bearer sk-deepseek-key'], openai: [], local: [], models: ['deepseek-chat'] })
    // (what each server received, counted from the first run)
    expect(await run({ OPENAI_BASE_URL: local.baseURL, OPENAI_API_KEY: 'sk-openai-key' })).toEqual({
      deepseek: ['Bearer sk-deepseek-key'],
      openai: [],
      local: ['Bearer sk-openai-key'],
      models: ['deepseek-chat', 'gpt-4.1-mini'],
    })
  })

  it('OPENAI_BASE_URL or CONCH_BASE_URL with CONCH_MODEL names a server the user chose, with the key set or with none', async () => {
    expect(await run({ OPENAI_BASE_URL: local.baseURL, CONCH_MODEL: 'qwen3-8b' })).toEqual({ deepseek: [], openai: [], local: ['none'], models: ['qwen3-8b'] })
    local.replies.push({ kind: 'sse', chunks: [chunk({ content: 'done' }, 'stop')] })
    expect(await run({ CONCH_BASE_URL: local.baseURL, CONCH_MODEL: 'qwen3-8b', OPENAI_API_KEY: 'sk-openai-key' })).toEqual({
      deepseek: [],
      openai: [],
      local: ['none', 'Bearer sk-openai-key'],
      models: ['qwen3-8b', 'qwen3-8b'],
    })
  })
})
