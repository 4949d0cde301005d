/**
 * The real Codex binary (the pinned @openai/codex platform package, spawned directly) against
 * the fake model on 127.0.0.1, keyless. Every test ends with the process table showing no
 * process carrying the test's mark, and the run's private CODEX_HOME gone.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startFakeModel, type FakeModelServer } from '@conch/test-support/fake-model'
import { SubagentError } from '@conch/subagent'
import { startRun } from '@conch/test-support/harness'
import { boot, codexBinary, freshMark, marked, MARK_VARIABLE, type Harness } from './harness.ts'

const binary = codexBinary()
// Without the product (a developer who has not run ./scripts/install-products.sh), these
// tests cannot run; in CI codexBinary() throws instead, so a missing product fails the suite.
const real = describe.skipIf(binary === undefined)

let fake: FakeModelServer
let scratch: string
let homeRoot: string
let harness: Harness | undefined
let mark: string

beforeAll(async () => {
  fake = await startFakeModel()
  // Outside /tmp: the child's TMPDIR is /tmp, and CODEX_HOME must not be under it.
  scratch = mkdtempSync('/var/tmp/conch-codex-test-')
  homeRoot = join(scratch, 'homes')
  process.env.FAKE_API_KEY = 'dummy-key-for-the-fake-model'
})

afterAll(async () => {
  await fake.close()
  rmSync(scratch, { recursive: true, force: true })
})

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  expect(marked(mark)).toEqual([])
  expect(existsSync(homeRoot) ? readdirSync(homeRoot) : []).toEqual([])
})

function config(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    executable: binary,
    homeRoot,
    env: [MARK_VARIABLE, 'FAKE_API_KEY'],
    disposeEofGraceMs: 3000,
    config: {
      model: 'gpt-5.5',
      model_provider: 'fake',
      model_providers: {
        fake: {
          name: 'fake',
          base_url: fake.openaiBaseUrl,
          wire_api: 'responses',
          env_key: 'FAKE_API_KEY',
          request_max_retries: 0,
          stream_max_retries: 0,
        },
      },
    },
    ...overrides,
  }
}

async function setup(options: { mode?: 'read-only' | 'workspace-write'; config?: Record<string, unknown> } = {}) {
  mark = freshMark()
  const workspace = mkdtempSync(join(scratch, 'ws-'))
  harness = await boot(config(options.config), { workspaceRoot: workspace, mode: options.mode ?? 'read-only' })
  return { workspace, harness }
}

const prompt = (text: string) => [{ type: 'text' as const, text }]

/** Starts a run and collects its updates (see startRun). */
const start = (h: Harness, text: string, signal?: AbortSignal) => startRun(h, 'codex', text, signal)

real('codex app-server as a sub-agent', { timeout: 60_000 }, () => {
  it('answers with the final agent message, the commentary before it left out', async () => {
    const h = (await setup()).harness
    fake.enqueue({ commentary: 'let me look', text: 'the answer is 42' })
    const { run, updates } = await start(h, 'what is the answer? tag-complete')
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'the answer is 42' }] })
    expect(run.childId).toMatch(/^[0-9a-f-]{36}$/)
    expect(updates.filter((update) => update.type === 'text').map((update) => (update as { text: string }).text).join('')).toContain('the answer is 42')
    const request = fake.requests.findLast((entry) => entry.api === 'responses')
    expect(request?.userText).toBe('what is the answer? tag-complete')
    // The parent's read-only mode reached Codex as its own sandbox.
    expect(request?.system).toContain('`sandbox_mode` is `read-only`')
    await run.dispose()
    const log = h.agent.session.events().map((event) => event.type)
    expect(log).toContain('subagent/start')
    expect(log).toContain('subagent/end')
  })

  it('projects the parent workspace-write mode: the child writes in its cwd, and nothing outside it', async () => {
    const { workspace, harness: h } = await setup({ mode: 'workspace-write' })
    const outside = mkdtempSync('/var/tmp/conch-codex-outside-')
    try {
      fake.enqueue(
        { toolCalls: [{ name: 'exec_command', arguments: { cmd: `touch inside-file; touch ${outside}/outside-file; echo DONE` } }] },
        { text: 'wrote it' },
      )
      const { run } = await start(h, 'write the files')
      expect((await run.result).stopReason).toBe('completed')
      expect(readdirSync(workspace)).toEqual(['inside-file'])
      expect(readdirSync(outside)).toEqual([])
      const output = fake.requests.findLast((entry) => entry.api === 'responses')?.toolResults[0]?.output ?? ''
      expect(output).toMatch(/Read-only file system|Permission denied/)
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  })

  it('declines a command approval: the escalated command never runs', async () => {
    const { workspace, harness: h } = await setup({ mode: 'read-only' })
    fake.enqueue(
      {
        text: 'I need to write',
        toolCalls: [{ name: 'exec_command', arguments: { cmd: 'touch escalated-file', sandbox_permissions: 'require_escalated', justification: 'to write a file' } }],
      },
      { text: 'could not write' },
    )
    const { run, updates } = await start(h, 'try to escalate')
    const result = await run.result
    expect(result.stopReason).toBe('completed')
    expect(readdirSync(workspace)).toEqual([])
    const toolResult = fake.requests.findLast((entry) => entry.api === 'responses')?.toolResults[0]?.output ?? ''
    expect(toolResult).toMatch(/rejected/i)
    expect(updates).toContainEqual(expect.objectContaining({ type: 'tool', title: expect.stringContaining('touch escalated-file'), status: 'failed' }))
  })

  it('cancel mid-answer settles aborted with the partial output, and the child goes', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'alpha beta gamma delta epsilon zeta eta theta iota kappa', chunkDelayMs: 150 })
    const controller = new AbortController()
    const { run, streamed } = await start(h, 'a slow one', controller.signal)
    const seq = (await fake.waitForRequest((request) => request.api === 'responses' && request.userText === 'a slow one')).seq
    await streamed('alpha beta')
    controller.abort()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    const text = result.output.map((block) => block.text).join('')
    expect(text).toMatch(/^alpha beta/)
    expect(text).not.toContain('kappa')
    await run.dispose()
    // turn/interrupt (or the teardown) dropped the model stream.
    await fake.waitFor((requests) => requests[seq - 1]?.outcome === 'client-gone')
  })

  it('a model stream that breaks mid-answer ends as error with the partial output; result does not reject', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'first second third fourth', closeAfterChunks: 2 })
    const { run } = await start(h, 'break the stream')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output.map((block) => block.text).join('')).toBe('first second')
    expect(result.diagnostic).toMatch(/stream disconnected|failed the turn/)
  })

  it('a child killed mid-answer ends as error with the partial output', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'one two three four five six', stallAfterChunks: 2 })
    const { run, streamed } = await start(h, 'get killed')
    await fake.waitFor((requests) => requests.findLast((request) => request.userText === 'get killed')?.stalled)
    await streamed('one two')
    for (const pid of marked(mark)) process.kill(pid, 'SIGKILL')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output.map((block) => block.text).join('')).toBe('one two')
    expect(result.diagnostic).toMatch(/codex (was killed by SIGKILL|closed its output) before the turn completed/)
  })

  it('a context window overflow ends as max-tokens', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'so far', fail: { code: 'context_length_exceeded', message: 'too long' } })
    const { run } = await start(h, 'overflow')
    const result = await run.result
    expect(result.stopReason).toBe('max-tokens')
    expect(result.output.map((block) => block.text).join('')).toBe('so far')
  })

  it('dispose() twice resolves both times, and once the tree is gone', async () => {
    const h = (await setup()).harness
    fake.enqueue({ text: 'never finishes', stallAfterChunks: 1 })
    const { run } = await start(h, 'stall forever')
    await fake.waitFor((requests) => requests.findLast((request) => request.userText === 'stall forever')?.stalled)
    const first = run.dispose()
    const second = run.dispose()
    await Promise.all([first, second])
    expect(marked(mark)).toEqual([])
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('a child that exits at once fails the start, leaving nothing behind', async () => {
    mark = freshMark()
    const bin = join(scratch, 'exits')
    writeFileSync(bin, '#!/bin/sh\necho "no such subcommand" >&2\nexit 0\n')
    chmodSync(bin, 0o755)
    harness = await boot(config({ executable: bin }), { workspaceRoot: scratch, mode: 'read-only' })
    const error = await harness.ctx.subagents.start('codex', { prompt: prompt('x'), parent: harness.agent }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(SubagentError)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringMatching(/(exited with code 0 before it was ready|closed its output).*no such subcommand/s) })
  })

  it('a child that never answers initialize fails the start at the timeout, leaving nothing behind', async () => {
    mark = freshMark()
    const bin = join(scratch, 'silent')
    writeFileSync(bin, '#!/bin/sh\nsleep 600 &\nexec sleep 600\n')
    chmodSync(bin, 0o755)
    harness = await boot(config({ executable: bin, startTimeoutMs: 500 }), { workspaceRoot: scratch, mode: 'read-only' })
    const error = await harness.ctx.subagents.start('codex', { prompt: prompt('x'), parent: harness.agent }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('was not ready within 500 ms') })
    expect(marked(mark)).toEqual([])
  })

  it('a CODEX_HOME root under the child temp dir fails the start with the reason', async () => {
    mark = freshMark()
    harness = await boot(config({ homeRoot: '/tmp/conch-codex-homes' }), { workspaceRoot: scratch, mode: 'read-only' })
    const error = await harness.ctx.subagents.start('codex', { prompt: prompt('x'), parent: harness.agent }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('refuses to install its sandbox helper') })
  })
})
