import { type Context, Service } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskError } from '@conch/tasks'
import { ScriptedBackend } from './fake-backend.ts'
import { boot, type Harness } from './harness.ts'

let harness: Harness

afterEach(async () => {
  const current = harness as Harness | undefined
  harness = undefined as never
  await current?.dispose()
})

const tick = () => new Promise((resolve) => setImmediate(resolve))

describe('run_in_background with the memory backend', () => {
  it('returns a task id at once, naming no terminal the model named itself', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'hold building', run_in_background: true })
    expect(result.content[0]!.text).toBe('[task: task-1 started]')
    expect(result.meta).toEqual({ taskId: 'task-1', sessionId: 'pty-1' })
    expect(await harness.text('task_list', {})).toBe('task-1 running pty-send "pty-1: hold building"')
    expect(await harness.text('task_output', { taskId: 'task-1' })).toBe('building\n[status: running]')
    expect(await harness.text('terminal_list', {})).toBe('pty-1 shell running busy')
  })

  it('does not repeat the notifyOn pattern the model gave, and names the terminal it opened for a send without sessionId', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'hold serving', run_in_background: true, notifyOn: 'Listening on' })
    expect(result.content[0]!.text).toBe('[task: task-1 started]')
    const own = await harness.call('terminal_send', { text: 'hold serving', run_in_background: true })
    expect(own.content[0]!.text).toBe('[task: task-2 started in pty-2]')
    expect(own.meta).toEqual({ taskId: 'task-2', sessionId: 'pty-2' })
  })

  it('interrupts the send with a real SIGINT when the task is killed', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'hold', run_in_background: true })
    expect(await harness.text('task_kill', { taskId: 'task-1' })).toBe('(no new output)\n[status: killed, wait: stdin_read]')
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo $?' })).toBe('130\n[wait: stdin_read]')
  })

  it('ends the task with the wait reason and session status as fields', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 3', run_in_background: true })
    expect(await harness.text('task_output', { taskId: 'task-1', wait: true })).toBe('1\n2\n3\n[status: completed, wait: stdin_read]')
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'echo "open', run_in_background: true })
    expect(await harness.text('task_output', { taskId: 'task-2', wait: true })).toBe('(no new output)\n[status: completed, wait: stdin_read, input: continuation]')
    await harness.call('terminal_send', { sessionId: 'pty-1', text: '"; exit 5', run_in_background: true })
    expect(await harness.text('task_output', { taskId: 'task-3', wait: true })).toBe('open\n\nexit\n[status: completed, wait: session_exit, session: exited code=5]')
  })

  it('surfaces SEND_ACTIVE and unknown sessions before any task exists', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    const held = harness.call('terminal_send', { sessionId: 'pty-1', text: 'hold' })
    await tick()
    const active = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'export WRITTEN=yes', run_in_background: true })
    expect(active.isError).toBe(true)
    expect(active.content[0]!.text).toMatch(/^SEND_ACTIVE: PTY session pty-1 is still running a send/)
    const unknown = await harness.call('terminal_send', { sessionId: 'pty-4', text: 'ls', run_in_background: true })
    expect(unknown.content[0]!.text).toMatch(/^NO_SESSION: unknown PTY session pty-4/)
    expect(await harness.text('task_list', {})).toBe('(no tasks)')
    await harness.call('terminal_signal', { sessionId: 'pty-1', signal: 'SIGINT' })
    await held
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "[$WRITTEN]"' })).toMatch(/^\[\]\n/)
  })

  it('refuses a background send when ctx.tasks is not loaded, writing nothing', async () => {
    harness = await boot({ tasks: false })
    await harness.call('terminal_open', { type: 'shell' })
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'export WRITTEN=yes', run_in_background: true })
    expect(result).toMatchObject({ isError: true, meta: { errorCode: 'NO_SERVICE' } })
    expect(result.content[0]!.text).toBe(`NO_SERVICE: ${TaskError.message('NO_SERVICE', { tool: 'terminal_send' })}`)
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "[$WRITTEN]"' })).toMatch(/^\[\]\n/)
  })
})

describe('notifyOn', () => {
  // `(a+)+$` backtracks exponentially in RegExp on a run of a's that does not end the line: 40 of
  // them stall the event loop for days. The pattern comes from the model and the line from the
  // program, so either may be hostile.
  it('tries the model\'s pattern in linear time: a line built to backtrack does not stall conch', async () => {
    harness = await boot()
    const seen: Array<[string, string | undefined]> = []
    const notify = harness.agent.notify.bind(harness.agent)
    harness.agent.notify = (notification) => (seen.push([notification.event, notification.evidence]), notify(notification))
    await harness.call('terminal_open', { type: 'shell' })
    const hostile = `${'a'.repeat(40)}!`
    await harness.call('terminal_send', { sessionId: 'pty-1', text: `echo skipped as the echo; echo ${hostile}; echo ${'a'.repeat(40)}`, run_in_background: true, notifyOn: '^(a+)+$' })
    expect(await harness.text('task_output', { taskId: 'task-1', wait: true })).toContain(hostile)
    expect(seen[0]).toEqual(['matched "^(a+)+$"', 'a'.repeat(40)])
  })

  it('refuses a pattern RE2 cannot run, naming what is wrong', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    const refused = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'make', run_in_background: true, notifyOn: '(?<=a)b' })
    expect(refused.isError).toBe(true)
    expect(refused.content[0]!.text).toContain('notifyOn is not a valid RE2 regular expression (no lookaround or backreferences): error parsing regexp: invalid named capture')
  })
})

describe('run_in_background ordering', () => {
  it('gives task_output only the output produced since the previous read, then the final status', async () => {
    const backend = new ScriptedBackend()
    harness = await boot({ backend })
    await harness.call('terminal_open', { type: 'shell' })
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'make', run_in_background: true })
    const send = backend.last
    // Quiet is not an end: a background send waits for proof up to maxTimeoutMs.
    expect(send.input).toEqual({ text: 'make', submit: true, timeoutMs: 600000, idleMs: 600000 })
    send.emit('compiling a\n')
    expect(await harness.text('task_output', { taskId: 'task-1' })).toBe('compiling a\n[status: running]')
    send.emit('compiling b\n')
    expect(await harness.text('task_output', { taskId: 'task-1' })).toBe('compiling b\n[status: running]')
    send.emit('done\n')
    send.finish({ waitReason: 'inferred_idle', inputState: 'not_reading' })
    expect(await harness.text('task_output', { taskId: 'task-1', wait: true })).toBe('done\n[status: completed, wait: inferred_idle, input: not_reading]')
  })

  it('takes the send back before its write when the task cannot start', async () => {
    const backend = new ScriptedBackend()
    backend.autoWrite = false
    harness = await boot({ backend, tasks: false })
    class RefusingTasks extends Service {
      constructor(ctx: Context) {
        super(ctx, 'tasks')
      }
      start(): never {
        throw new TaskError('SERVICE_DISPOSING', { kind: 'pty-send' })
      }
    }
    await harness.ctx.plugin(RefusingTasks)
    await harness.call('terminal_open', { type: 'shell' })
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'rm -rf build', run_in_background: true })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toBe('SERVICE_DISPOSING: cannot start a pty-send task: the tasks service is shutting down')
    expect(backend.last.cancelCalls).toBe(1)
    expect(backend.last.written).toBe(false)
    expect(await harness.text('terminal_list', {})).toBe('pty-1 shell running')
  })

  it('reports a foreground send cancelled before its write without claiming output', async () => {
    const backend = new ScriptedBackend()
    backend.autoWrite = false
    harness = await boot({ backend })
    await harness.call('terminal_open', { type: 'shell' })
    const turn = new AbortController()
    const pending = harness.call('terminal_send', { sessionId: 'pty-1', text: 'rm -rf build' }, { signal: turn.signal })
    await tick()
    turn.abort()
    const result = await pending
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toBe('SEND_CANCELLED: cancelled before its input was written; nothing was written — send it again when ready')
    expect(backend.last.written).toBe(false)
  })
})
