/**
 * `conch acp` against clients that misbehave, as a real child process: a frame over the size
 * limit, a client that stops reading its stdout (a pipe nobody reads), and SIGTERM while stdout
 * is blocked.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { spine, writeComposition } from '@conch/test-support/composition'
import { eventually } from '@conch/test-support/wait'
import { startConch, step, workspace, type Conch, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

/** Unconfined terminals: the subject here is the protocol side, not the sandbox. */
const COMPOSITION = spine([
  { id: 'tasks', name: '@conch/tasks' },
  { id: 'subprocess', name: '@conch/subprocess' },
  { id: 'sandbox', name: '@conch/sandbox' },
  { id: 'sandbox-policy', name: '@conch/sandbox-policy', config: { mode: 'danger-full-access' } },
  { id: 'pty', name: '@conch/pty' },
  { id: 'pty-local', name: '@conch/pty-local' },
  { id: 'tool-pty', name: '@conch/tool-pty' },
])

/** Frames on conch's stdout, parsed as they arrive; reading can be paused. */
function frames(conch: Conch) {
  const parsed: Record<string, unknown>[] = []
  let buffered = ''
  const waiters: { match: (frame: Record<string, unknown>) => boolean; resolve: (frame: Record<string, unknown>) => void }[] = []
  conch.child.stdout.on('data', (chunk: Buffer | string) => {
    buffered += chunk.toString()
    let newline: number
    while ((newline = buffered.indexOf('\n')) !== -1) {
      const frame = JSON.parse(buffered.slice(0, newline)) as Record<string, unknown>
      buffered = buffered.slice(newline + 1)
      parsed.push(frame)
      for (const waiter of [...waiters]) {
        if (!waiter.match(frame)) continue
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(frame)
      }
    }
  })
  return {
    parsed,
    waitFor(match: (frame: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
      const found = parsed.find(match)
      if (found) return Promise.resolve(found)
      return new Promise((resolve, reject) => {
        waiters.push({ match, resolve })
        void conch.exit.then(() => reject(new Error(`conch exited first; stderr:\n${conch.stderr()}`)))
      })
    },
    send(id: number | undefined, method: string, params: unknown) {
      conch.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, params })}\n`)
    },
  }
}

/** Starts `conch acp` with a scripted model and opens one session; resolves with its id. */
async function serve(script: string[]): Promise<{ conch: Conch; io: ReturnType<typeof frames>; sessionId: string }> {
  writeComposition(ws.dir, COMPOSITION)
  ws.write('s.jsonl', `${script.join('\n')}\n`)
  const conch = startConch(['acp', '--config', 'cordis.yml', '--script', 's.jsonl'], { cwd: ws.dir })
  const io = frames(conch)
  io.send(0, 'initialize', { protocolVersion: 1 })
  await io.waitFor((frame) => frame['id'] === 0)
  io.send(1, 'session/new', { cwd: ws.dir, mcpServers: [] })
  const created = await io.waitFor((frame) => frame['id'] === 1)
  return { conch, io, sessionId: (created['result'] as { sessionId: string }).sessionId }
}

describe('conch acp with a misbehaving client', () => {
  it('answers a frame over the size limit with an error, says why on stderr, and keeps serving', async () => {
    const { conch, io } = await serve([step('hi')])
    const huge = `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"text":"${'x'.repeat(33 * 1024 * 1024)}"}}\n`
    conch.child.stdin.write(huge)
    const refused = await io.waitFor((frame) => frame['id'] === null && frame['error'] !== undefined)
    expect(refused['error']).toMatchObject({ code: -32700 })
    expect(conch.stderr()).toMatch(/frame of more than 33554432 bytes/)
    // Still serving: a new request is answered.
    io.send(8, 'session/new', { cwd: ws.dir, mcpServers: [] })
    expect(await io.waitFor((frame) => frame['id'] === 8)).toMatchObject({ result: { sessionId: expect.any(String) } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
  })

  it('coalesces live output for a client that stops reading, and still delivers the final result', async () => {
    const done = join(ws.dir, 'send-done')
    const { conch, io, sessionId } = await serve([
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `for i in $(seq 1 40); do seq 1 3000; sleep 0.1; done; echo END-$((6*7)); touch ${done}` } }]),
      step('Done.'),
    ])
    // Stop reading: the pipe and Node's buffer fill, and conch's writes to stdout stall.
    conch.child.stdout.pause()
    io.send(2, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'print a lot' }] })
    expect(await eventually(() => existsSync(done), 60_000)).toBe(true)
    conch.child.stdout.resume()
    const answered = await io.waitFor((frame) => frame['id'] === 2)
    expect(answered).toMatchObject({ result: { stopReason: 'end_turn' } })
    const updates = io.parsed.filter((frame) => frame['method'] === 'session/update').map((frame) => (frame['params'] as { update: Record<string, unknown> }).update)
    const live = updates.filter((update) => update['sessionUpdate'] === 'tool_call_update' && update['status'] === undefined && update['content'] !== undefined)
    const results = updates.filter((update) => update['sessionUpdate'] === 'tool_call_update' && update['status'] === 'completed')
    expect(results).toHaveLength(2)
    expect(JSON.stringify(results[1])).toContain('END-42')
    // About 40 updates (one per 100 ms of output) without coalescing; a stalled client gets the newest few.
    expect(live.length).toBeLessThan(12)
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
  })

  it('exits within its grace after SIGTERM although nobody reads its stdout', async () => {
    const { conch, io, sessionId } = await serve([
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'while :; do seq 1 5000; done' } }]),
      step('Unreachable.'),
    ])
    conch.child.stdout.pause()
    io.send(2, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'print forever' }] })
    // The shell is printing once its output stalls conch's stdout: wait for the pipe to fill.
    // Wait until the client's buffer is full and Node stopped reading the pipe: from then on
    // the pipe fills and conch's writes stall (a live update alone is up to 64 KiB).
    const stdout = conch.child.stdout
    expect(await eventually(() => stdout.readableLength >= stdout.readableHighWaterMark, 30_000)).toBe(true)
    const sent = Date.now()
    conch.child.kill('SIGTERM')
    const code = await conch.exit
    // shutdownGraceMs (5000), a second for the last frames, the composition's shutdown and a
    // second to flush: a blocked stdout must not hold the exit beyond that.
    expect(Date.now() - sent).toBeLessThan(15_000)
    expect(code).toBe(0)
  })
})
