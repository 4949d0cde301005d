/**
 * Which endpoint a key is sent to, by a real `conch run` against two fake model servers on
 * loopback — one standing in for DeepSeek, one for OpenAI — mapped in place of the default
 * endpoints through `@conch/llm-openai`'s `endpoints` setting (the defaults' variables and models
 * kept), so no request leaves the machine.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { Config } from '@conch/llm-openai/endpoint'
import { chatChunk as chunk, startFakeModel, type FakeModelServer } from '@conch/test-support/fake-model'
import { spine, writeComposition } from '@conch/test-support/composition'
import { jsonLines, runConch, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

let ws: Workspace
let deepseek: FakeModelServer
let openai: FakeModelServer
let local: FakeModelServer

beforeEach(async () => {
  ws = workspace()
  ;[deepseek, openai, local] = await Promise.all([startFakeModel(), startFakeModel(), startFakeModel()])
  for (const server of [deepseek, openai, local]) server.enqueue({ sse: [chunk({ content: 'done' }, 'stop')] })
  // The default endpoints, each provider's URL replaced by its fake.
  const fakes: Record<string, string> = { 'https://api.deepseek.com': deepseek.url, 'https://api.openai.com/v1': openai.url }
  const endpoints = Config.parse({}).endpoints.map((endpoint) => ({ ...endpoint, baseURL: fakes[endpoint.baseURL] }))
  expect(endpoints.every((endpoint) => endpoint.baseURL !== undefined)).toBe(true)
  writeComposition(ws.dir, spine([{ id: 'llm-openai', name: '@conch/llm-openai', config: { endpoints, maxRetries: 0 } }]))
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
  const authorization = (server: FakeModelServer) => server.requests.map((request) => request.headers.authorization ?? 'none')
  return { deepseek: authorization(deepseek), openai: authorization(openai), local: authorization(local), models: [deepseek, openai, local].flatMap((server) => server.requests.map((request) => (request.body as Record<string, unknown>)['model'])) }
}

describe('the live model endpoint', () => {
  it('OPENAI_API_KEY alone goes to OpenAI, never to DeepSeek', async () => {
    expect(await run({ OPENAI_API_KEY: 'sk-openai-key' })).toEqual({ deepseek: [], openai: ['Bearer sk-openai-key'], local: [], models: ['gpt-4.1-mini'] })
  })

  it('DEEPSEEK_API_KEY goes to DeepSeek, and with both set only the DeepSeek key is sent', async () => {
    expect(await run({ DEEPSEEK_API_KEY: 'sk-deepseek-key' })).toEqual({ deepseek: ['Bearer sk-deepseek-key'], openai: [], local: [], models: ['deepseek-chat'] })
    deepseek.enqueue({ sse: [chunk({ content: 'done' }, 'stop')] })
    expect(await run({ DEEPSEEK_API_KEY: 'sk-deepseek-key', OPENAI_API_KEY: 'sk-openai-key' })).toEqual({
      deepseek: ['Bearer sk-deepseek-key', 'Bearer sk-deepseek-key'],
      openai: [],
      local: [],
      models: ['deepseek-chat', 'deepseek-chat'],
    })
  })

  it('OPENAI_BASE_URL moves the OpenAI key only: a DeepSeek key still goes to DeepSeek', async () => {
    expect(await run({ OPENAI_BASE_URL: local.url, DEEPSEEK_API_KEY: 'sk-deepseek-key' })).toEqual({ deepseek: ['Bearer sk-deepseek-key'], openai: [], local: [], models: ['deepseek-chat'] })
    // (what each server received, counted from the first run)
    expect(await run({ OPENAI_BASE_URL: local.url, OPENAI_API_KEY: 'sk-openai-key' })).toEqual({
      deepseek: ['Bearer sk-deepseek-key'],
      openai: [],
      local: ['Bearer sk-openai-key'],
      models: ['deepseek-chat', 'gpt-4.1-mini'],
    })
  })

  it('OPENAI_BASE_URL or CONCH_BASE_URL with CONCH_MODEL names a server the user chose, with the key set or with none', async () => {
    expect(await run({ OPENAI_BASE_URL: local.url, CONCH_MODEL: 'qwen3-8b' })).toEqual({ deepseek: [], openai: [], local: ['none'], models: ['qwen3-8b'] })
    local.enqueue({ sse: [chunk({ content: 'done' }, 'stop')] })
    expect(await run({ CONCH_BASE_URL: local.url, CONCH_MODEL: 'qwen3-8b', OPENAI_API_KEY: 'sk-openai-key' })).toEqual({
      deepseek: [],
      openai: [],
      local: ['none', 'Bearer sk-openai-key'],
      models: ['qwen3-8b', 'qwen3-8b'],
    })
  })
})
