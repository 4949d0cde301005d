/**
 * Push, not poll: a real `conch run` whose scripted model starts background terminal sends and
 * ends its turn; conch notifies it when a send's program exits, prints a line matching
 * `notifyOn`, or blocks reading its terminal — waking the run with a new turn — and prints each
 * delivered notification as a stream-json line. Shells run under bubblewrap (workspace-write).
 */
import { randomInt } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { acpRequest, jsonLines, processesWith, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

/** A run whose model opens a terminal, starts `send` in the background, ends its turn, and answers `Woken.` when woken. */
function script(send: object): string {
  return ws.write(
    'script.jsonl',
    [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', run_in_background: true, ...send } }]),
      step('Waiting for it.'),
      step('Woken.'),
    ].join('\n'),
  )
}

/** Starts the run; `release()` creates the file `go` in the workspace once the model has ended its first turn. */
function start(scriptPath: string, output: 'stream-json' | 'text' = 'stream-json') {
  const config = writeComposition(ws.dir, terminalComposition({ script: scriptPath, mode: 'workspace-write', tasks: true }))
  const conch = startConch(['run', '--config', config, '--output', output, 'work in the background'], { cwd: ws.dir })
  const waiting = new Promise<void>((resolve, reject) => {
    const onData = () => {
      if (!conch.stdout().includes(output === 'text' ? 'Waiting for it.\n' : '"text":"Waiting for it."')) return
      conch.child.stdout.off('data', onData)
      resolve()
    }
    conch.child.stdout.on('data', onData)
    void conch.exit.then(() => reject(new Error(`conch exited before ending its first turn; stderr:\n${conch.stderr()}`)))
  })
  return {
    conch,
    async release() {
      await waiting
      writeFileSync(join(ws.dir, 'go'), '')
    },
  }
}

/** Waits for the file `go` (created by the test after the model's first turn), then runs `then`. */
const afterGo = (then: string) => `while [ ! -e go ]; do sleep 0.05; done; ${then}`

describe('notifications through conch run', () => {
  it('wakes the run when a background program exits, with its status and last lines', async () => {
    const run = start(script({ text: afterGo('echo built-ok; (exit 3)'), notify: true }))
    await run.release()
    expect(await run.conch.exit, run.conch.stderr()).toBe(0)
    const lines = jsonLines(run.conch.stdout())
    const notification = lines.find((line) => line['type'] === 'notification')
    expect(notification).toMatchObject({ type: 'notification', source: 'task-1', event: 'exited 3', evidence: 'controlled prompt', wake: true })
    expect(notification!['tail']).toContain('built-ok')
    expect(notification!['text']).toMatch(/^\[notification: task-1 exited 3; evidence: controlled prompt\]\n/)
    // The notification came before the turn it started, and the run completed with that turn's answer.
    const types = lines.map((line) => line['type'])
    expect(types.slice(types.indexOf('notification'))).toEqual(['notification', 'assistant', 'result'])
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Woken.' })
    // No polling call was made.
    expect(lines.filter((line) => line['type'] === 'tool_call').map((line) => line['name'])).toEqual(['terminal_open', 'terminal_send'])
  })

  it('prints a waking notification once in the text transcript, before the answer it led to', async () => {
    const run = start(script({ text: afterGo('echo built-ok; (exit 3)'), notify: true }), 'text')
    await run.release()
    expect(await run.conch.exit, run.conch.stderr()).toBe(0)
    const out = run.conch.stdout()
    expect(out.match(/\[notification: task-1 exited 3/g)).toHaveLength(1)
    expect(out).toMatch(/Waiting for it\.\n\n\[waiting up to 600 s for the task the model asked to be woken by\]\n\n\[notification: task-1 exited 3; evidence: controlled prompt\]\n[\s\S]*built-ok[\s\S]*\n\nWoken\.\n$/)
  })

  it('wakes the run at the first output line matching notifyOn, then stops the task when the run ends', async () => {
    const server = `sleep 47.${randomInt(100000, 999999)}`
    const run = start(script({ text: afterGo(`echo booting; echo "Listening on 127.0.0.1:8080"; ${server}`), notifyOn: 'Listening on \\S+' }))
    await run.release()
    expect(await run.conch.exit, run.conch.stderr()).toBe(0)
    const lines = jsonLines(run.conch.stdout())
    expect(lines.filter((line) => line['type'] === 'notification')).toEqual([
      expect.objectContaining({ source: 'task-1', event: 'matched "Listening on \\\\S+"', evidence: 'Listening on 127.0.0.1:8080', wake: true }),
    ])
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Woken.' })
    expect(processesWith(server)).toEqual([])
  })

  it('wakes the run when a background program blocks reading its terminal, with the prompt it shows', async () => {
    const run = start(script({ text: afterGo(`read -r -p 'Password: ' answer`), notify: true }))
    await run.release()
    expect(await run.conch.exit, run.conch.stderr()).toBe(0)
    const lines = jsonLines(run.conch.stdout())
    const notification = lines.find((line) => line['type'] === 'notification')
    expect(notification).toMatchObject({ source: 'task-1', event: 'waiting for input: Password:', wake: true })
    // The kernel's evidence: bash blocked in a read of this terminal, named without its host pid.
    expect(notification!['evidence']).toMatch(/^bash read fd0 \/dev\/pts\/\d+$/)
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Woken.' })
  })

  it('does not keep the run alive for a background program without notify, and stops it', async () => {
    const server = `sleep 48.${randomInt(100000, 999999)}`
    const path = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', run_in_background: true, text: server } }]),
        step('Left it running.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, terminalComposition({ script: path, mode: 'workspace-write', tasks: true }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'start a server'], { cwd: ws.dir })
    expect(run.code, run.stderr).toBe(0)
    const lines = jsonLines(run.stdout)
    expect(lines.some((line) => line['type'] === 'notification')).toBe(false)
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Left it running.' })
    expect(processesWith(server)).toEqual([])
  })

  it('does not wake the run for a notify task whose terminal the model closed itself', async () => {
    const server = `sleep 49.${randomInt(100000, 999999)}`
    const path = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', run_in_background: true, text: server, notify: true } }]),
        step('', [{ name: 'terminal_close', arguments: { sessionId: 'pty-1' } }]),
        step('Closed it.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, terminalComposition({ script: path, mode: 'workspace-write', tasks: true }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'start and stop a server'], { cwd: ws.dir })
    expect(run.code, run.stderr).toBe(0)
    const lines = jsonLines(run.stdout)
    expect(lines.filter((line) => line['type'] === 'notification')).toEqual([])
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Closed it.' })
    expect(processesWith(server)).toEqual([])
  })
})

/** The agent's text in `updates`, its chunks joined. */
const said = (updates: Record<string, unknown>[]): string =>
  updates
    .filter((update) => update['sessionUpdate'] === 'agent_message_chunk')
    .map((update) => (update['content'] as { text: string }).text)
    .join('')

describe('notifications through conch acp', () => {
  it('shows the notification to the client as a session update and answers the prompt after the woken turn', async () => {
    const path = script({ text: afterGo('echo built-ok; (exit 3)'), notify: true })
    writeComposition(ws.dir, terminalComposition({ script: path, mode: 'workspace-write', tasks: true }))
    const conch = startConch(['acp', '--config', 'cordis.yml'], { cwd: ws.dir })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    const session = await acpRequest(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
    const sessionId = (session['result'] as { sessionId: string }).sessionId
    const updates = () =>
      jsonLines(conch.stdout())
        .filter((frame) => frame['method'] === 'session/update')
        .map((frame) => (frame['params'] as { update: Record<string, unknown> }).update)
    // The first turn's answer streams, then the prompt stays open for the notification.
    const firstTurn = new Promise<void>((resolve) => {
      const onData = () => {
        if (!said(updates()).includes('Waiting for it.')) return
        conch.child.stdout.off('data', onData)
        resolve()
      }
      conch.child.stdout.on('data', onData)
    })
    const prompt = acpRequest(conch, 2, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'work in the background' }] })
    await firstTurn
    writeFileSync(join(ws.dir, 'go'), '')
    expect(await prompt).toMatchObject({ id: 2, result: { stopReason: 'end_turn' } })
    const all = updates()
    const notification = all.find((update) => update['sessionUpdate'] === 'user_message_chunk')
    expect(notification).toMatchObject({
      content: { type: 'text', text: expect.stringMatching(/^\[notification: task-1 exited 3; evidence: controlled prompt\]\n/) },
      _meta: { conch: { notification: { source: 'task-1', event: 'exited 3', evidence: 'controlled prompt', wake: true } } },
    })
    // The woken turn's answer follows the notification.
    expect(said(all.slice(all.indexOf(notification!)))).toBe('Woken.')
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
  })
})
