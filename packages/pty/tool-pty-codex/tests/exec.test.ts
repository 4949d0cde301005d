/**
 * The Codex profile through its real composition: examples/codex-profile/cordis.yml booted by
 * conch's own boot code (the root composition: workspace-write, so every command runs in bash
 * under bubblewrap), each call through `ctx.tools.execute` as the agent loop makes it.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { boot, loadComposition, type App } from '@conch/cli'
import type { Agent } from '@conch/agent'
import type { PtyServiceApi } from '@conch/pty'
import type { ToolsServiceApi } from '@conch/tools'

const EXAMPLE = fileURLToPath(new URL('../../../../examples/codex-profile/cordis.yml', import.meta.url))

interface Seen {
  text: string
  isError: boolean
  meta: Record<string, unknown>
}

let app: App
let agent: Agent
let workspace: string
let calls = 0

async function call(name: string, input: Record<string, unknown>, as = agent): Promise<Seen> {
  const tools = app.ctx.get('tools') as ToolsServiceApi
  const result = await tools.execute(name, input, { agent: as, signal: new AbortController().signal, callId: `call-${++calls}` })
  return { text: result.content.map((part) => ('text' in part ? part.text : '')).join(''), isError: result.isError === true, meta: result.meta ?? {} }
}

const outputOf = (seen: Seen) => seen.text.slice(seen.text.indexOf('\nOutput:\n') + '\nOutput:\n'.length)

beforeAll(async () => {
  workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-codexp-')))
  const script = path.join(workspace, '..', `${path.basename(workspace)}.jsonl`)
  writeFileSync(script, '{"text": "unused"}\n')
  const composition = loadComposition({ config: EXAMPLE, script, env: process.env })
  // Event logs stay in memory: the test leaves nothing under the state home.
  const entries = composition.entries.map((row) => (row.id === 'sessions' ? { ...row, config: { persist: false } } : row))
  app = await boot({ ...composition, entries })
  agent = await (app.ctx.get('agents') as { create(options: { workspaceRoot: string }): Promise<Agent> }).create({ workspaceRoot: workspace })
}, 60_000)

afterAll(async () => {
  await app?.shutdown()
  rmSync(workspace, { recursive: true, force: true })
  rmSync(`${workspace}.jsonl`, { force: true })
})

describe('the Codex tool profile', () => {
  it('offers exec_command and write_stdin instead of the terminal tools', () => {
    const names = (app.ctx.get('tools') as ToolsServiceApi).specs().map((tool) => tool.name)
    expect(names).toEqual(expect.arrayContaining(['exec_command', 'write_stdin']))
    expect(names).not.toContain('terminal_send')
  })

  it('runs a command to its end: its output and exit code, no session id, no terminal left', async () => {
    mkdirSync(path.join(workspace, 'sub'))
    const seen = await call('exec_command', { cmd: 'echo "in $(basename "$PWD")"; (exit 3)', workdir: path.join(workspace, 'sub') })
    expect(seen.isError).toBe(false)
    expect(seen.text).toMatch(/^Wall time: \d+\.\d{3} seconds\nProcess exited with code 3\nOriginal token count: \d+\nOutput:\n/)
    // What the command printed, without the typed command or the prompt after it.
    expect(outputOf(seen)).toBe('in sub')
    expect(seen.meta).toMatchObject({ exit_code: 3, waitReason: 'stdin_read' })
    expect(seen.meta).not.toHaveProperty('session_id')
    expect((app.ctx.get('pty') as PtyServiceApi).list(agent)).toEqual([])
  })

  it('keeps a REPL as a session: an empty write_stdin returns at its prompt, exit() gives the exit code', async () => {
    const started = await call('exec_command', { cmd: 'python3 -q', yield_time_ms: 60000 })
    expect(started.text).toMatch(/\nProcess running with session ID (\d+) \(waiting for input\)\n/)
    const id = started.meta.session_id as number
    expect(started.meta).not.toHaveProperty('exit_code')
    // Waits for the program, not for the bound: python is already reading.
    const polled = await call('write_stdin', { session_id: id, chars: '', yield_time_ms: 600000 })
    expect(polled.meta).toMatchObject({ session_id: id, waitReason: 'stdin_read' })
    const answered = await call('write_stdin', { session_id: id, chars: 'print(6 * 7)\n' })
    expect(outputOf(answered)).toContain('42')
    expect(answered.meta.session_id).toBe(id)
    const ended = await call('write_stdin', { session_id: id, chars: 'exit(7)\n' })
    expect(ended.text).toContain('\nProcess exited with code 7\n')
    expect(ended.meta).not.toHaveProperty('session_id')
    const gone = await call('write_stdin', { session_id: id, chars: '' })
    expect(gone.isError).toBe(true)
    expect(gone.text).toMatch(/^NO_SESSION: /)
  })

  it('hands back a session id for a long job, then an empty write_stdin returns at its exit with the code', async () => {
    const go = path.join(workspace, 'go')
    const started = await call('exec_command', { cmd: `until [ -e ${go} ]; do sleep 0.05; done; echo finished; (exit 4)`, yield_time_ms: 300 })
    expect(started.text).toMatch(/\nProcess running with session ID \d+ \(still running at yield_time_ms\)\n/)
    expect(started.meta.waitReason).toBe('timeout')
    const id = started.meta.session_id as number
    writeFileSync(go, '')
    const ended = await call('write_stdin', { session_id: id, chars: '', yield_time_ms: 600000 })
    expect(ended.meta).toMatchObject({ exit_code: 4, waitReason: 'stdin_read' })
    expect(outputOf(ended)).toContain('finished')
  })

  it('a command that ends the shell reports the shell exit code', async () => {
    const seen = await call('exec_command', { cmd: 'exit 9' })
    expect(seen.meta).toMatchObject({ exit_code: 9, waitReason: 'session_exit' })
    expect(seen.text).toContain('\nProcess exited with code 9\n')
  })

  it('cuts output to max_output_tokens around one marker and counts the original tokens', async () => {
    const seen = await call('exec_command', { cmd: 'seq 1 2000', max_output_tokens: 20 })
    const output = outputOf(seen)
    expect(Buffer.byteLength(output)).toBeLessThanOrEqual(80)
    expect(output).toMatch(/^1\n(.*\n)*\[… [\d,]+ bytes \([\d,]+ lines\) omitted\]\n(.*\n)*2000$/)
    // The echo of the command and the prompt after it are not counted.
    expect(seen.meta.original_token_count).toBe(Math.ceil(Buffer.byteLength(Array.from({ length: 2000 }, (_, i) => i + 1).join('\n')) / 4))
    expect(seen.meta.truncated).toBe(true)
  })

  it('counts what the terminal dropped of a flood in the original tokens', async () => {
    const seen = await call('exec_command', { cmd: 'seq 1 400000', max_output_tokens: 100 })
    const output = outputOf(seen)
    expect(seen.meta.exit_code).toBe(0)
    expect(output).toMatch(/^1\n/)
    expect(output).toMatch(/\n400000$/)
    expect(seen.meta.original_token_count).toBe(Math.ceil(Buffer.byteLength(Array.from({ length: 400000 }, (_, i) => i + 1).join('\n')) / 4))
  })
})

describe('the output of a multi-line command', () => {
  it('is what the command printed, without the lines bash echoed', async () => {
    const seen = await call('exec_command', { cmd: 'for n in 1 2; do\n  echo "line $n"\ndone' })
    expect(seen.meta.exit_code).toBe(0)
    expect(outputOf(seen)).toBe('line 1\nline 2')
  })

  it('keeps output that ended without a line break, on the prompt\'s row', async () => {
    const seen = await call('exec_command', { cmd: 'printf "no-newline-%s" $((6*7))' })
    expect(seen.meta.exit_code).toBe(0)
    expect(outputOf(seen)).toBe('no-newline-42')
  })
})

describe('sessions of another agent', () => {
  it('are unknown to it: its write_stdin reaches nothing', async () => {
    const other = await (app.ctx.get('agents') as { create(options: { workspaceRoot: string }): Promise<Agent> }).create({ workspaceRoot: workspace })
    const started = await call('exec_command', { cmd: 'python3 -q', yield_time_ms: 60000 })
    const id = started.meta.session_id as number
    const foreign = await call('write_stdin', { session_id: id, chars: 'print("in" + "truder")\n' }, other)
    expect(foreign).toMatchObject({ isError: true, meta: { errorCode: 'NO_SESSION' } })
    const own = await call('write_stdin', { session_id: id, chars: 'exit()\n' })
    expect(own.meta.exit_code).toBe(0)
    expect(own.text).not.toContain('intruder')
  })
})

describe('a session whose shell ended between calls', () => {
  it('is reported by the next write_stdin and then forgotten, its terminal closed', async () => {
    const pty = app.ctx.get('pty') as PtyServiceApi
    const started = await call('exec_command', { cmd: 'python3 -q', yield_time_ms: 60000 })
    const id = started.meta.session_id as number
    const session = pty.list(agent).find((info) => info.sessionId.endsWith(`-${id}`))!
    process.kill(session.pid!, 'SIGKILL')
    await until(() => pty.list(agent).find((info) => info.sessionId === session.sessionId)?.status.state === 'exited', 10_000, 'the shell to exit')
    const ended = await call('write_stdin', { session_id: id, chars: 'print(1)\n' })
    expect(ended).toMatchObject({ isError: true, meta: { errorCode: 'SESSION_EXITED' } })
    expect(pty.list(agent).map((info) => info.sessionId)).not.toContain(session.sessionId)
    expect((await call('write_stdin', { session_id: id, chars: '' })).meta.errorCode).toBe('NO_SESSION')
  })
})
