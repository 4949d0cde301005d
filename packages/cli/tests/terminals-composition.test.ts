/**
 * The terminal trio mounted by the loader from a cordis.yml — the spine, process ownership, the
 * sandbox services (workspace-write, so shells run under bubblewrap) and `@conch/pty`,
 * `@conch/pty-local`, `@conch/tool-pty` — driven through an agent by the scripted model with
 * all seven terminal tools and task_output, in a real `conch run` process.
 */
import { randomInt } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { jsonLines, processesWith, runConch, step, workspace, type Workspace } from './harness.ts'

// One conch process that compiles on start, spawns a sandboxed shell and waits for a SIGINT'd sleep.
vi.setConfig({ testTimeout: 90_000 })

/** The composition, with the model script's path filled in. */
const composition = (script: string) => terminalComposition({ script, mode: 'workspace-write', tasks: true })

interface ToolResultLine {
  type: 'tool_result'
  id: string
  name: string
  isError: boolean
  text: string
  meta?: Record<string, unknown>
}

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

describe('the terminal trio from a cordis.yml', () => {
  it('drives open, send, read, signal, a background send, list and close through an agent and leaves no process', async () => {
    // Unique arguments so the processes of this run can be found (and only they).
    const nap = `sleep 45.${randomInt(100000, 999999)}`
    const daemon = `sleep 46.${randomInt(100000, 999999)}`
    const script = ws.write(
      'script.jsonl',
      [
        step('Opening a terminal.', [{ name: 'terminal_open', arguments: { type: 'shell', name: 'work' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'mkdir -p sub && cd sub && export GREETING=composed' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'echo "$GREETING in $(basename "$PWD")"' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `(setsid ${daemon} &)` } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: nap, run_in_background: true } }]),
        step('', [{ name: 'terminal_signal', arguments: { sessionId: 'pty-1', signal: 'SIGINT' } }]),
        step('', [{ name: 'task_output', arguments: { taskId: 'task-1', wait: true, timeoutMs: 20000 } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'echo "status=$?"' } }]),
        step('', [{ name: 'terminal_read', arguments: { sessionId: 'pty-1' } }]),
        step('', [{ name: 'terminal_list', arguments: {} }]),
        step('', [{ name: 'terminal_close', arguments: { sessionId: 'pty-1' } }]),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, composition(script))

    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'use a terminal'], { cwd: ws.dir })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = jsonLines(run.stdout)
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Done.' })
    const results = lines.filter((line): line is ToolResultLine & Record<string, unknown> => line['type'] === 'tool_result')
    expect(results.map((result) => result.name)).toEqual([
      'terminal_open',
      'terminal_send',
      'terminal_send',
      'terminal_send',
      'terminal_send',
      'terminal_signal',
      'task_output',
      'terminal_send',
      'terminal_read',
      'terminal_list',
      'terminal_close',
    ])
    for (const result of results) expect(result.isError, result.text).toBe(false)
    const [open, , greeting, , background, signal, output, status, read, list, close] = results as ToolResultLine[]

    // The system prompt's sandbox section names the workspace, so the open does not repeat it.
    expect(open!.text).toBe('[opened: pty-1]')
    expect(open!.meta).toMatchObject({ cwd: realpathSync(ws.dir) })
    // State persists between sends: the directory and the exported variable.
    expect(greeting!.text.split('\n')).toContain('composed in sub')
    expect(greeting!.text).toMatch(/\n\[exit: 0\]$/)
    expect(background!.meta).toMatchObject({ taskId: 'task-1', sessionId: 'pty-1' })
    // The interrupted background send ended: its notification rides on this result when the task
    // settled first (else task_output below reads the end and withdraws it).
    const [signalled, notified] = signal!.text.split('\n\n')
    expect(signalled).toMatch(/^\[signal: SIGINT delivered to sleep in pty-1\]$/)
    // It does not repeat the command: no label, and its tail leaves out the echo.
    if (notified !== undefined) expect(notified).toMatch(/^\[notification: task-1 exited 130; evidence: controlled prompt\](?:$|\n(?!sleep 45))/)
    expect(output!.text).toContain('[status: completed, exit: 130]')
    expect(status!.text.split('\n')).toContain('status=130')
    expect(read!.text.split('\n')).toContain('composed in sub')
    expect(read!.text.split('\n')).toContain('status=130')
    expect(list!.text).toBe('pty-1 shell running name=work')
    expect(close!.text).toMatch(/^\[closed: pty-1 — stopped .*\]/)
    expect(close!.meta).toMatchObject({ sessionId: 'pty-1', survivors: [] })

    // Nothing the terminal started outlives the run: not the interrupted sleep, not the
    // setsid daemon, not the sandbox runner (its argv names the workspace).
    expect(processesWith(nap)).toEqual([])
    expect(processesWith(daemon)).toEqual([])
    expect(processesWith(ws.dir)).toEqual([])
  })
})
