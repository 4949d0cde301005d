/**
 * The real Claude Code binary (the pinned SDK platform package), driven by the SDK's query()
 * with its spawn routed through ctx.subprocess, against the fake model on 127.0.0.1, keyless.
 * Every test ends with the process table showing no process carrying the test's mark, and
 * the run's private config dir gone.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startFakeModel, type FakeModelServer, type FakeResponder } from '@conch/test-support/fake-model'
import { SubagentError } from '@conch/subagent'
import { startRun } from '@conch/test-support/harness'
import { boot, claudeBinary, freshMark, marked, MARK_VARIABLE, type Harness } from './harness.ts'

const binary = claudeBinary()
// Without the product (a developer who has not run ./scripts/install-products.sh), these
// tests cannot run; in CI claudeBinary() throws instead, so a missing product fails the suite.
const real = describe.skipIf(binary === undefined)

let fake: FakeModelServer
let scratch: string
let stateRoot: string
let harness: Harness | undefined
let mark: string
/** Answers every request a test does not queue for (Claude Code retries and falls back to a non-streamed request). */
let respond: FakeResponder | undefined

beforeAll(async () => {
  fake = await startFakeModel({ respond: (request) => respond?.(request) })
  scratch = mkdtempSync('/var/tmp/conch-claude-test-')
  stateRoot = join(scratch, 'state')
  // What the child reaches its model with: the fake server, a dummy key, no retries.
  process.env.ANTHROPIC_BASE_URL = fake.url
  process.env.ANTHROPIC_API_KEY = 'sk-ant-dummy-key-for-the-fake-model'
  process.env.CLAUDE_CODE_MAX_RETRIES = '0'
})

afterAll(async () => {
  await fake.close()
  rmSync(scratch, { recursive: true, force: true })
})

afterEach(async () => {
  respond = undefined
  await harness?.dispose()
  harness = undefined
  expect(marked(mark)).toEqual([])
  expect(existsSync(stateRoot) ? readdirSync(stateRoot) : []).toEqual([])
})

function config(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { executable: binary, stateRoot, env: [MARK_VARIABLE, 'ANTHROPIC_API_KEY'], disposeEofGraceMs: 3000, ...overrides }
}

async function setup(options: { mode?: 'read-only' | 'workspace-write'; config?: Record<string, unknown> } = {}) {
  mark = freshMark()
  const workspace = mkdtempSync(join(scratch, 'ws-'))
  harness = await boot(config(options.config), { workspaceRoot: workspace, mode: options.mode ?? 'read-only' })
  return { workspace, harness }
}

const prompt = (text: string) => [{ type: 'text' as const, text }]

/** Starts a run and collects its updates (see startRun). */
const start = (h: Harness, text: string, signal?: AbortSignal) => startRun(h, 'claude-code', text, signal)

const lastMessages = () => fake.requests.findLast((request) => request.api === 'messages')

real('Claude Code as a sub-agent', { timeout: 60_000 }, () => {
  it('answers with the result text', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'the child answer' })
    const { run, updates } = await start(h, 'say the answer')
    const result = await run.result
    expect(result).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: 'the child answer' }] })
    expect(updates.map((update) => (update.type === 'text' ? update.text : '')).join('')).toBe('the child answer')
    expect(lastMessages()).toMatchObject({ path: '/v1/messages', query: 'beta=true' })
    expect(lastMessages()?.userText).toContain('say the answer')
    expect(run.childId).toMatch(/^[0-9a-f-]{36}$/)
  })

  it('denies a tool that needs a permission by policy: the command never runs', async () => {
    const { workspace, harness: h } = await setup({ mode: 'workspace-write' })
    fake.enqueue({ text: 'running it', toolCalls: [{ name: 'Bash', arguments: { command: 'touch denied-file', description: 'touch a file' } }] }, { text: 'it was denied' })
    const { run, updates } = await start(h, 'run a command')
    const result = await run.result
    expect(result.stopReason).toBe('completed')
    expect(readdirSync(workspace)).toEqual([])
    expect(lastMessages()?.toolResults[0]).toMatchObject({ isError: true, output: expect.stringMatching(/denied/i) })
    expect(updates).toContainEqual(expect.objectContaining({ type: 'tool', title: 'Bash: touch denied-file', status: 'running' }))
    expect(updates).toContainEqual(expect.objectContaining({ type: 'tool', status: 'failed' }))
  })

  it('cancel mid-answer settles aborted with the partial output, and the CLI goes', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'alpha beta gamma delta epsilon zeta eta theta iota kappa', chunkDelayMs: 150 })
    const controller = new AbortController()
    const { run, streamed } = await start(h, 'a slow one', controller.signal)
    await streamed('alpha beta')
    controller.abort()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    const text = result.output.map((block) => block.text).join('')
    expect(text).toMatch(/^alpha beta/)
    expect(text).not.toContain('kappa')
    await run.dispose()
  })

  it('a CLI killed mid-answer ends as error with the partial output; result does not reject', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'one two three four five six', stallAfterChunks: 2 })
    const { run, streamed } = await start(h, 'get killed')
    await streamed('one two')
    for (const pid of marked(mark)) process.kill(pid, 'SIGKILL')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output.map((block) => block.text).join('')).toBe('one two')
    expect(result.diagnostic).toMatch(/claude/)
  })

  it('a model stream that breaks mid-answer ends as error with the partial output', async () => {
    const h = (await setup()).harness
    // Every attempt breaks, the non-streamed fallback included.
    respond = () => ({ text: 'first second third fourth', chunkDelayMs: 100, closeAfterChunks: 2 })
    const { run } = await start(h, 'break the stream')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    // What reached the model before the break is kept; how much of the second chunk Claude Code
    // forwarded before it noticed the break depends on its own batching.
    const partial = result.output.map((block) => block.text).join('')
    expect(partial).toMatch(/^first/)
    expect('first second'.startsWith(partial)).toBe(true)
  })

  it('an error answer from the model is error, never completed', async () => {
    const h = (await setup()).harness
    respond = () => ({ httpStatus: 400 })
    const { run } = await start(h, 'bad request')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toBeTruthy()
  })

  it('dispose() twice resolves both times, and once the tree is gone', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'never finishes', stallAfterChunks: 1 })
    const { run, streamed } = await start(h, 'stall forever')
    await streamed('never')
    const first = run.dispose()
    const second = run.dispose()
    await Promise.all([first, second])
    expect(marked(mark)).toEqual([])
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('a CLI that exits at once fails the start, leaving nothing behind', async () => {
    mark = freshMark()
    const bin = join(scratch, 'exits')
    writeFileSync(bin, '#!/bin/sh\necho "cannot start" >&2\nexit 0\n')
    chmodSync(bin, 0o755)
    harness = await boot(config({ executable: bin }), { workspaceRoot: scratch, mode: 'read-only' })
    const error = await harness.ctx.subagents.start('claude-code', { prompt: prompt('x'), parent: harness.agent }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(SubagentError)
    expect(error).toMatchObject({ code: 'START_FAILED' })
  })

  it('a CLI that never gets ready fails the start at the timeout, leaving nothing behind', async () => {
    mark = freshMark()
    const bin = join(scratch, 'silent')
    writeFileSync(bin, '#!/bin/sh\nsleep 600 &\nexec sleep 600\n')
    chmodSync(bin, 0o755)
    harness = await boot(config({ executable: bin, startTimeoutMs: 500 }), { workspaceRoot: scratch, mode: 'read-only' })
    const error = await harness.ctx.subagents.start('claude-code', { prompt: prompt('x'), parent: harness.agent }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('was not ready within 500 ms') })
    expect(marked(mark)).toEqual([])
  })
})
