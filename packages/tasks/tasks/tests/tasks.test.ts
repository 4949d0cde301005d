import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import TasksService, { TaskError, type TaskOutcome } from '../src/index.ts'
import { fakeAgent } from './fake-agent.ts'

interface Deferred<T> {
  promise: Promise<T>
  resolve(value: T): void
  reject(reason: unknown): void
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (reason: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/** A run that ends when its signal aborts (how a well-behaved producer reacts to kill). */
function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve()
    else signal.addEventListener('abort', () => resolve(), { once: true })
  })
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (error) {
    return error instanceof TaskError ? error.code : `not a TaskError: ${String(error)}`
  }
  return undefined
}

let ctx: Context
let fiber: { dispose(): Promise<void> }
let tasks: TasksService

beforeEach(async () => {
  ctx = new Context()
  fiber = await ctx.plugin(TasksService, TasksService.Config.parse({}))
  tasks = ctx.tasks
})

afterEach(async () => {
  await fiber.dispose()
})

describe('starting and reading', () => {
  it('numbers tasks task-1, task-2, … in creation order', () => {
    const owner = fakeAgent('agent-1')
    const other = fakeAgent('agent-2')
    expect(tasks.start({ kind: 'test', label: 'a', owner, run: (c) => untilAborted(c.signal) }).id).toBe('task-1')
    expect(tasks.start({ kind: 'test', label: 'b', owner: other, run: (c) => untilAborted(c.signal) }).id).toBe('task-2')
    expect(tasks.start({ kind: 'test', label: 'c', owner, run: (c) => untilAborted(c.signal) }).id).toBe('task-3')
  })

  it('a read returns only the output written since the previous read', () => {
    const owner = fakeAgent('agent-1')
    let write!: (text: string) => void
    const { id } = tasks.start({
      kind: 'test',
      label: 'writer',
      owner,
      run: (c) => {
        write = c.write
        return untilAborted(c.signal)
      },
    })
    write('one\n')
    write('two\n')
    expect(tasks.read(owner, id)).toMatchObject({ status: 'running', output: 'one\ntwo\n', omitted: undefined })
    expect(tasks.read(owner, id).output).toBe('')
    write('three\n')
    expect(tasks.read(owner, id).output).toBe('three\n')
  })

  it('a run that resolves ends the task completed with the outcome fields and meta', async () => {
    const owner = fakeAgent('agent-1')
    const outcome: TaskOutcome = { fields: { wait: 'stdin_read', session: 'running' }, meta: { pid: 42 } }
    const { id } = tasks.start({ kind: 'pty-send', label: 'pty-1: make', owner, run: async () => outcome })
    const snapshot = await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(snapshot).toMatchObject({
      id,
      kind: 'pty-send',
      label: 'pty-1: make',
      status: 'completed',
      fields: { wait: 'stdin_read', session: 'running' },
      meta: { pid: 42 },
      timedOut: false,
    })
    expect(Object.keys(snapshot.fields)).toEqual(['wait', 'session'])
    expect(snapshot.endedAt).toBeTypeOf('string')
    expect(snapshot.error).toBeUndefined()
  })

  it('a run that reports status failed or stopped ends the task so', async () => {
    const owner = fakeAgent('agent-1')
    for (const status of ['failed', 'stopped'] as const) {
      const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: async () => ({ status }) })
      expect((await tasks.wait(owner, id, { timeoutMs: 60_000 })).status).toBe(status)
    }
  })

  it('a run that rejects ends the task failed with the error message', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: async (c) => {
        c.write('partial\n')
        throw new Error('disk full')
      },
    })
    expect(await tasks.wait(owner, id, { timeoutMs: 60_000 })).toMatchObject({
      status: 'failed',
      error: 'disk full',
      output: 'partial\n',
    })
  })

  it('a run that throws synchronously still ends the task failed, not the start call', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: () => {
        throw new Error('bad argv')
      },
    })
    expect(await tasks.wait(owner, id, { timeoutMs: 60_000 })).toMatchObject({ status: 'failed', error: 'bad argv' })
  })
})

describe('the unread output bound', () => {
  it('drops the oldest unread bytes beyond the limit and says so on the next read only', () => {
    const owner = fakeAgent('agent-1')
    let write!: (text: string) => void
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      outputLimitBytes: 10,
      run: (c) => {
        write = c.write
        return untilAborted(c.signal)
      },
    })
    write('0123456789')
    expect(tasks.read(owner, id)).toMatchObject({ output: '0123456789', omitted: undefined })
    write('abcdef')
    write('ghijkl')
    expect(tasks.read(owner, id)).toMatchObject({ output: 'cdefghijkl', omitted: { bytes: 2, lines: 1 } })
    write('m')
    expect(tasks.read(owner, id)).toMatchObject({ output: 'm', omitted: undefined })
  })

  it('never cuts inside a multi-byte character', () => {
    const owner = fakeAgent('agent-1')
    let write!: (text: string) => void
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      outputLimitBytes: 9,
      run: (c) => {
        write = c.write
        return untilAborted(c.signal)
      },
    })
    // 'é' is 2 bytes, '😀' 4 bytes (a surrogate pair in UTF-16), '中' 3 bytes.
    write('é😀中😀')
    const { output, omitted } = tasks.read(owner, id)
    expect(omitted).toEqual({ bytes: 6, lines: 1 })
    expect(output).toBe('中😀')
    expect(output).not.toContain('\uFFFD')
  })

  it('uses the service outputLimitBytes when the spec has none', async () => {
    const small = new Context()
    const smallFiber = await small.plugin(TasksService, TasksService.Config.parse({ outputLimitBytes: 4 }))
    const owner = fakeAgent('agent-1')
    const { id } = small.tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: async (c) => c.write('abcdefgh'),
    })
    expect(await small.tasks.wait(owner, id, { timeoutMs: 60_000 })).toMatchObject({ output: 'efgh', omitted: { bytes: 4, lines: 1 } })
    await smallFiber.dispose()
  })

  it('rejects an invalid outputLimitBytes at load, naming the field', async () => {
    const bad = new Context()
    await expect(bad.plugin(TasksService, { outputLimitBytes: 0 } as never)).rejects.toThrow(/outputLimitBytes/)
  })
})

describe('pull producers', () => {
  it('calls drain on every read and once after run settles, so no output is lost', async () => {
    const owner = fakeAgent('agent-1')
    let pending = ''
    const finish = deferred()
    let drains = 0
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: () => finish.promise,
      drain() {
        drains++
        const text = pending
        pending = ''
        return text
      },
    })
    pending = 'first\n'
    expect(tasks.read(owner, id).output).toBe('first\n')
    expect(drains).toBe(1)
    pending = 'last words\n'
    finish.resolve()
    const snapshot = await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(snapshot).toMatchObject({ status: 'completed', output: 'last words\n' })
    expect(drains).toBe(2)
    tasks.read(owner, id)
    expect(drains).toBe(2)
  })
})

describe('wait', () => {
  it('resolves as soon as the task ends, not at the timeout', async () => {
    const owner = fakeAgent('agent-1')
    const finish = deferred()
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: () => finish.promise })
    const waiting = tasks.wait(owner, id, { timeoutMs: 600_000 })
    finish.resolve()
    expect(await waiting).toMatchObject({ status: 'completed', timedOut: false })
  })

  it('resolves with timedOut when the task is still running at the timeout, and never rejects', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: (c) => untilAborted(c.signal) })
    expect(await tasks.wait(owner, id, { timeoutMs: 5 })).toMatchObject({ status: 'running', timedOut: true })
  })

  it('returns when the signal aborts, with the task still running', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: (c) => untilAborted(c.signal) })
    const abort = new AbortController()
    const waiting = tasks.wait(owner, id, { timeoutMs: 600_000, signal: abort.signal })
    abort.abort()
    expect(await waiting).toMatchObject({ status: 'running', timedOut: true })
  })

  it('returns at a notifyOn match, naming it, and a second wait waits for new news', async () => {
    const owner = fakeAgent('agent-1')
    let write = (_text: string) => {}
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, notifyOn: /READY/, run: (c) => ((write = c.write), untilAborted(c.signal)) })
    write('booting\n')
    const waiting = tasks.wait(owner, id, { timeoutMs: 600_000 })
    write('READY on 8080\n')
    expect(await waiting).toMatchObject({ status: 'running', output: 'booting\nREADY on 8080\n', events: ['matched "READY"'], timedOut: false })
    // Its notification is withdrawn: the read showed the match.
    expect(owner.notifications[0]!.withdrawn!()).toBe(true)
    write('GET /\n')
    expect(await tasks.wait(owner, id, { timeoutMs: 5 })).toMatchObject({ status: 'running', output: 'GET /\n', events: [], timedOut: true })
  })

  it('returns at once for an event not yet delivered, and not for one delivered', async () => {
    const owner = fakeAgent('agent-1')
    const writes: ((text: string) => void)[] = []
    const start = () => tasks.start({ kind: 'test', label: 'x', owner, notifyOn: /READY/, run: (c) => (writes.push(c.write), untilAborted(c.signal)) }).id
    const undelivered = start()
    const delivered = start()
    for (const write of writes) write('READY\n')
    expect(owner.notifications.map((n) => n.source)).toEqual([undelivered, delivered])
    expect(await tasks.wait(owner, undelivered, { timeoutMs: 600_000 })).toMatchObject({ events: ['matched "READY"'], timedOut: false })
    owner.notifications[1]!.delivered!()
    // The delivered tail counts as read: not shown again.
    expect(await tasks.wait(owner, delivered, { timeoutMs: 5 })).toMatchObject({ output: '', events: [], timedOut: true })
  })

  it('waits for a real child process and returns its output', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'process',
      label: 'node prints',
      owner,
      async run(c) {
        const child = spawn(process.execPath, ['-e', 'console.log("from-child-" + (6 * 7))'])
        child.stdout.setEncoding('utf8').on('data', c.write)
        const [code] = await once(child, 'close')
        return { fields: { exit: String(code) } }
      },
    })
    expect(await tasks.wait(owner, id, { timeoutMs: 60_000 })).toMatchObject({
      status: 'completed',
      output: 'from-child-42\n',
      fields: { exit: '0' },
    })
  })
})

describe('kill', () => {
  it('calls cancel, then aborts the signal, awaits run, and reports killed', async () => {
    const owner = fakeAgent('agent-1')
    const steps: string[] = []
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      async run(c) {
        await untilAborted(c.signal)
        steps.push('aborted')
        await new Promise((resolve) => setImmediate(resolve))
        c.write('bye\n')
        steps.push('run settled')
        return { fields: { wait: 'session_exit' } }
      },
      async cancel() {
        steps.push('cancel')
      },
    })
    const snapshot = await tasks.kill(owner, id)
    expect(steps).toEqual(['cancel', 'aborted', 'run settled'])
    expect(snapshot).toMatchObject({ status: 'killed', output: 'bye\n', fields: { wait: 'session_exit' } })
  })

  it('carries what the cancel hook reports about stopping: its fields over the outcome\'s, and its output last', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      async run(c) {
        await untilAborted(c.signal)
        c.write('interrupted\n')
        return { fields: { wait: 'timeout', session: 'running' } }
      },
      async cancel() {
        return { fields: { wait: 'stdin_read', signals: 'SIGINT then SIGTERM' }, output: 'Terminated\n' }
      },
    })
    const snapshot = await tasks.kill(owner, id)
    expect(snapshot).toMatchObject({
      status: 'killed',
      output: 'interrupted\nTerminated\n',
      fields: { wait: 'stdin_read', session: 'running', signals: 'SIGINT then SIGTERM' },
    })
    expect(Object.keys(snapshot.fields)).toEqual(['wait', 'session', 'signals'])
  })

  it('reports killed even when the run rejects on abort', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      async run(c) {
        await untilAborted(c.signal)
        throw c.signal.reason
      },
    })
    const snapshot = await tasks.kill(owner, id)
    expect(snapshot.status).toBe('killed')
    expect(snapshot.error).toBeUndefined()
  })

  it('still aborts when the cancel hook throws', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: (c) => untilAborted(c.signal),
      cancel() {
        throw new Error('already gone')
      },
    })
    expect((await tasks.kill(owner, id)).status).toBe('killed')
  })

  it('killing an ended task returns its snapshot unchanged', async () => {
    const owner = fakeAgent('agent-1')
    let cancels = 0
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: async () => ({ fields: { exit: '0' } }),
      cancel: () => void cancels++,
    })
    await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(await tasks.kill(owner, id)).toMatchObject({ status: 'completed', fields: { exit: '0' } })
    expect(cancels).toBe(0)
  })

  it('two concurrent kills cancel once and both see killed', async () => {
    const owner = fakeAgent('agent-1')
    let cancels = 0
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner,
      run: (c) => untilAborted(c.signal),
      cancel: () => void cancels++,
    })
    const [a, b] = await Promise.all([tasks.kill(owner, id), tasks.kill(owner, id)])
    expect([a.status, b.status]).toEqual(['killed', 'killed'])
    expect(cancels).toBe(1)
  })

  it('a kill waits until the producer process has exited', async () => {
    const owner = fakeAgent('agent-1')
    let pid: number | undefined
    const started = deferred()
    const { id } = tasks.start({
      kind: 'process',
      label: 'ticker',
      owner,
      async run(c) {
        const child = spawn(process.execPath, ['-e', 'console.log("ready"); setInterval(() => {}, 1000)'])
        pid = child.pid
        child.stdout.setEncoding('utf8').on('data', (text: string) => {
          c.write(text)
          started.resolve()
        })
        c.signal.addEventListener('abort', () => child.kill('SIGTERM'), { once: true })
        const [, signal] = await once(child, 'close')
        return { fields: { signal: String(signal) } }
      },
    })
    await started.promise
    const snapshot = await tasks.kill(owner, id)
    expect(snapshot).toMatchObject({ status: 'killed', output: 'ready\n', fields: { signal: 'SIGTERM' } })
    expect(() => process.kill(pid!, 0)).toThrow(/ESRCH/)
  })
})

describe('ownership', () => {
  it('another agent gets FOREIGN_TASK naming the task, an unknown id NO_TASK', async () => {
    const owner = fakeAgent('agent-1')
    const other = fakeAgent('agent-2')
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: (c) => untilAborted(c.signal) })
    expect(codeOf(() => tasks.read(other, id))).toBe('FOREIGN_TASK')
    expect(() => tasks.read(other, id)).toThrow(/task task-1 belongs to another agent/)
    await expect(tasks.wait(other, id, { timeoutMs: 1 })).rejects.toMatchObject({ code: 'FOREIGN_TASK' })
    await expect(tasks.kill(other, id)).rejects.toMatchObject({ code: 'FOREIGN_TASK' })
    expect(tasks.read(owner, id).status).toBe('running')
    expect(codeOf(() => tasks.read(owner, 'task-9'))).toBe('NO_TASK')
    expect(() => tasks.read(owner, 'task-9')).toThrow("unknown task task-9; this agent's tasks are task-1")
    expect(() => tasks.read(other, 'task-9')).toThrow('unknown task task-9; this agent has no tasks')
  })

  it('lists only the owner’s tasks, in creation order, with their status', async () => {
    const owner = fakeAgent('agent-1')
    const other = fakeAgent('agent-2')
    tasks.start({ kind: 'pty-send', label: 'pty-1: sleep 100', owner, run: (c) => untilAborted(c.signal) })
    tasks.start({ kind: 'test', label: 'theirs', owner: other, run: (c) => untilAborted(c.signal) })
    const { id } = tasks.start({ kind: 'test', label: 'done', owner, run: async () => ({ fields: { exit: '0' } }) })
    await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(tasks.list(owner).map(({ id, kind, label, status, fields }) => ({ id, kind, label, status, fields }))).toEqual([
      { id: 'task-1', kind: 'pty-send', label: 'pty-1: sleep 100', status: 'running', fields: {} },
      { id: 'task-3', kind: 'test', label: 'done', status: 'completed', fields: { exit: '0' } },
    ])
  })

  it('refuses to start a task for an agent that is not live', async () => {
    const owner = fakeAgent('agent-1')
    await owner.dispose()
    expect(codeOf(() => tasks.start({ kind: 'test', label: 'x', owner, run: async () => {} }))).toBe('OWNER_NOT_LIVE')
  })

  it('disposing the owner kills and awaits every task of that owner and no other', async () => {
    const owner = fakeAgent('agent-1')
    const other = fakeAgent('agent-2')
    const settled: string[] = []
    const run = (name: string) => async (c: { signal: AbortSignal }) => {
      await untilAborted(c.signal)
      await new Promise((resolve) => setImmediate(resolve))
      settled.push(name)
    }
    tasks.start({ kind: 'test', label: 'a', owner, run: run('a') })
    tasks.start({ kind: 'test', label: 'b', owner, run: run('b') })
    const { id: theirs } = tasks.start({ kind: 'test', label: 'c', owner: other, run: run('c') })
    await owner.dispose()
    expect(settled.sort()).toEqual(['a', 'b'])
    expect(tasks.list(owner)).toEqual([])
    expect(tasks.read(other, theirs).status).toBe('running')
  })

  it('an ended task no longer holds a cleanup on its owner', async () => {
    const owner = fakeAgent('agent-1')
    let registered = 0
    const onDispose = owner.onDispose.bind(owner)
    owner.onDispose = (cleanup) => {
      registered++
      const remove = onDispose(cleanup)
      return () => {
        registered--
        remove()
      }
    }
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: async () => {} })
    await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(registered).toBe(0)
  })
})

describe('service lifetime', () => {
  it('unloading the service kills and awaits every task', async () => {
    const local = new Context()
    const localFiber = await local.plugin(TasksService, TasksService.Config.parse({}))
    const service = local.tasks
    const settled: string[] = []
    for (const name of ['a', 'b']) {
      service.start({
        kind: 'test',
        label: name,
        owner: fakeAgent(`agent-${name}`),
        async run(c) {
          await untilAborted(c.signal)
          await new Promise((resolve) => setImmediate(resolve))
          settled.push(name)
        },
      })
    }
    await localFiber.dispose()
    expect(settled.sort()).toEqual(['a', 'b'])
  })

  it('refuses new tasks once the service is shutting down', async () => {
    const local = new Context()
    const localFiber = await local.plugin(TasksService, TasksService.Config.parse({}))
    const service = local.tasks
    const owner = fakeAgent('agent-1')
    let refusal: string | undefined
    service.start({
      kind: 'test',
      label: 'x',
      owner,
      run: (c) => untilAborted(c.signal),
      cancel() {
        refusal = codeOf(() => service.start({ kind: 'test', label: 'late', owner, run: async () => {} }))
      },
    })
    await localFiber.dispose()
    expect(refusal).toBe('SERVICE_DISPOSING')
  })
})

describe('notifications', () => {
  it('notifies the owner when a task ends, with the outcome event, evidence and last lines', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({
      kind: 'test',
      label: 'pty-1: make',
      owner,
      run: async (c) => {
        c.write(`${Array.from({ length: 8 }, (_, i) => `line ${i + 1}`).join('\n')}\n`)
        return { event: 'exited 2', evidence: 'controlled prompt' }
      },
    })
    await new Promise<void>((resolve) => void (function check() { if (owner.notifications.length) resolve(); else setImmediate(check) })())
    const [notification] = owner.notifications
    expect(notification).toEqual({
      source: id,
      event: 'exited 2',
      label: 'pty-1: make',
      evidence: 'controlled prompt',
      tail: 'line 4\nline 5\nline 6\nline 7\nline 8',
      wake: false,
      withdrawn: expect.any(Function),
      delivered: expect.any(Function),
    })
    expect(notification!.withdrawn!()).toBe(false)
    // Reading the final status withdraws it: the model has seen the end.
    expect(tasks.read(owner, id)).toMatchObject({ status: 'completed', events: [] })
    expect(notification!.withdrawn!()).toBe(true)
  })

  it('names the status and error when the outcome has no event', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, run: async () => Promise.reject(new Error('spawn bash ENOENT')) })
    await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(owner.notifications).toMatchObject([{ source: id, event: 'failed: spawn bash ENOENT', wake: false }])
  })

  it('does not notify about a task that was killed', async () => {
    const owner = fakeAgent('agent-1')
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, notify: true, run: (c) => untilAborted(c.signal) })
    expect(owner.holds).toBe(1)
    await tasks.kill(owner, id)
    expect(owner.notifications).toEqual([])
    expect(owner.holds).toBe(0)
  })

  it('holds the owner awake for a notify task until its notification is queued', async () => {
    const owner = fakeAgent('agent-1')
    const finish = deferred()
    const { id } = tasks.start({ kind: 'test', label: 'x', owner, notify: true, run: () => finish.promise })
    expect(owner.holds).toBe(1)
    finish.resolve()
    await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(owner.notifications).toMatchObject([{ source: id, event: 'completed', wake: true }])
    expect(owner.holds).toBe(0)
  })

  it('notifies once at the first line matching notifyOn past the echo, across chunk boundaries, with a tail without the echo, and releases the hold', async () => {
    const owner = fakeAgent('agent-1')
    const finish = deferred()
    let pending = ''
    let changed = () => {}
    const { id } = tasks.start({
      kind: 'test',
      label: 'pty-1: npm run dev',
      owner,
      notifyOn: /Listening on/,
      echoLines: 1,
      run: (c) => {
        changed = () => c.changed()
        return finish.promise
      },
      drain() {
        const text = pending
        pending = ''
        return text
      },
    })
    pending = 'npm run dev # Listening on\ncompiling\nListen'
    changed()
    expect(owner.notifications).toEqual([])
    pending = 'ing on :3000\r\nListening on :3001\n'
    changed()
    expect(owner.notifications).toEqual([
      {
        source: id,
        event: 'matched "Listening on"',
        label: 'pty-1: npm run dev',
        evidence: 'Listening on :3000',
        tail: 'compiling\nListening on :3000\nListening on :3001',
        wake: true,
        withdrawn: expect.any(Function),
        delivered: expect.any(Function),
      },
    ])
    expect(owner.holds).toBe(0)
    // The model still reads everything; the read names the match and withdraws its notification.
    expect(tasks.read(owner, id)).toMatchObject({
      output: 'npm run dev # Listening on\ncompiling\nListening on :3000\r\nListening on :3001\n',
      events: ['matched "Listening on"'],
    })
    expect(owner.notifications[0]!.withdrawn!()).toBe(true)
    finish.resolve()
    await tasks.wait(owner, id, { timeoutMs: 60_000 })
    expect(owner.notifications.map((n) => n.event)).toEqual(['matched "Listening on"', 'completed'])
  })
})
