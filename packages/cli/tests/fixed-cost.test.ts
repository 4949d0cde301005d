/**
 * What every model request carries before any work: the system prompt and the tool schemas of
 * the root `cordis.yml`, measured in the first request a real `conch run` sends to a fake
 * OpenAI-compatible server on loopback. The bound is on those bytes as they are sent.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import { chunk, startFakeServer, type FakeServer } from '../../core/llm-openai/tests/fake-server.ts'
import { CLI_ROOT, jsonLines, runConch } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

/** Bytes of the system prompt and all tool schemas together. */
const FIXED_COST_BYTES = 10_000
/** Bytes of run_code's schema alone. */
const RUN_CODE_BYTES = 2_500

const ROOT_COMPOSITION = resolve(CLI_ROOT, '..', '..', 'cordis.yml')

let server: FakeServer
let dirs: string[]

beforeEach(async () => {
  server = await startFakeServer()
  server.replies.push({ kind: 'sse', chunks: [chunk({ content: 'done' }, 'stop')] })
  dirs = [mkdtempSync(join(tmpdir(), 'conch-cost-')), mkdtempSync(join(tmpdir(), 'conch-cost-state-'))]
})

afterEach(async () => {
  await server.close()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

it('the root composition sends at most 10 KB of system prompt and tool schemas, run_code at most 2.5 KB', async () => {
  const [cwd, state] = dirs as [string, string]
  const result = await runConch(['run', '--config', ROOT_COMPOSITION, '--cwd', cwd, '--output', 'stream-json', 'say done'], {
    cwd,
    env: { CONCH_BASE_URL: server.baseURL, CONCH_MODEL: 'fake-model', XDG_STATE_HOME: state },
  })
  expect(result.code, result.stderr).toBe(0)
  expect(jsonLines(result.stdout).at(-1)).toMatchObject({ type: 'result', status: 'completed' })

  const body = server.received[0]!.body as { messages: { role: string; content: string }[]; tools: { function: { name: string } }[] }
  const bytes = (value: unknown) => Buffer.byteLength(typeof value === 'string' ? value : JSON.stringify(value))
  const system = body.messages.filter((message) => message.role === 'system').reduce((sum, message) => sum + bytes(message.content), 0)
  const perTool = Object.fromEntries(body.tools.map((tool) => [tool.function.name, bytes(tool)]))
  const total = system + bytes(body.tools)
  const report = JSON.stringify({ system, tools: perTool, total })
  expect(Object.keys(perTool)).toContain('run_code')
  expect(Object.keys(perTool)).toContain('terminal_send')
  expect(total, report).toBeLessThanOrEqual(FIXED_COST_BYTES)
  expect(perTool['run_code'], report).toBeLessThanOrEqual(RUN_CODE_BYTES)
})
