import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import PtyService, { PtyError, type PtyErrorCode } from '../src/index.ts'
import { CLOSED, FakeBackend, fakeAgent, flush, result, track, type FakeAgent } from './fakes.ts'

let root: Context
let logged: unknown[]
let serviceFiber: { dispose(): Promise<void> }
let backend: FakeBackend
let backendFiber: { dispose(): Promise<void> }
let alice: FakeAgent
let bob: FakeAgent

async function mountBackend(ctx: Context, instance: FakeBackend) {
  return ctx.plugin({
    name: `backend-${instance.type}`,
    inject: ['pty'],
    apply: (inner: Context) => {
      inner.pty.registerBackend(instance)
    },
  })
}

async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

function thrown(action: () => unknown): unknown {
  try {
    action()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

function expectCode(error: unknown, code: PtyErrorCode, message?: RegExp) {
  expect(error).toBeInstanceOf(PtyError)
  expect((error as PtyError).code).toBe(code)
  if (message) expect((error as PtyError).message).toMatch(message)
}

beforeEach(async () => {
  root = new Context()
  logged = []
  root.logger.exporter({ export: (message: { args?: unknown[] }) => void logged.push(...(message.args ?? [])) } as never)
  serviceFiber = await root.plugin(PtyService, PtyService.Config.parse({}))
  backend = new FakeBackend()
  backendFiber = await mountBackend(root, backend)
  alice = fakeAgent(root, 'agent-1')
  bob = fakeAgent(root, 'agent-2')
})

afterEach(async () => {
  await serviceFiber.dispose()
})

describe('backend registry', () => {
  it('lists registered types and refuses a second backend of the same type', async () => {
    expect(root.pty.types()).toEqual(['shell'])
    const duplicate = new FakeBackend('shell')
    const error = await rejection(
      root.plugin({ inject: ['pty'], apply: (ctx: Context) => void ctx.pty.registerBackend(duplicate) }).then(() => undefined),
    )
    expectCode(error, 'DUPLICATE_BACKEND', /"shell" is already registered/)
    expect(root.pty.types()).toEqual(['shell'])
  })

  it('removes a backend when the plugin that registered it is disposed', async () => {
    await backendFiber.dispose()
    expect(root.pty.types()).toEqual([])
    expectCode(await rejection(root.pty.spawn(alice, { type: 'shell' })), 'NO_BACKEND', /no PTY backend for type "shell"; registered types: \(none\)/)
    await mountBackend(root, new FakeBackend('shell'))
    expect(root.pty.types()).toEqual(['shell'])
  })

  it('keeps sessions owned and closable after their backend is unloaded', async () => {
    const opened = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    await backendFiber.dispose()
    expect(session.closes).toHaveLength(0)
    expect(root.pty.list(alice).map((info) => info.sessionId)).toEqual([opened.sessionId])
    expect(root.pty.read(alice, opened.sessionId).text).toBe('offset=0 count=500')
    await expect(root.pty.close(alice, opened.sessionId)).resolves.toEqual(CLOSED)
    expect(root.pty.list(alice)).toEqual([])
  })
})

describe('spawn', () => {
  it('publishes a session with the backend motd and pid', async () => {
    const opened = await root.pty.spawn(alice, { type: 'shell', name: 'build', cwd: '/tmp' })
    expect(opened).toMatchObject({ sessionId: 'pty-1', name: 'build', type: 'shell', pid: 4242, status: { state: 'running' }, busy: false, motd: 'welcome' })
    const { owner, ...request } = backend.last.request
    expect(owner).toBe(alice)
    expect(request).toMatchObject({ sessionId: 'pty-1', name: 'build', cwd: '/tmp' })
    expect(backend.last.request.signal.aborted).toBe(false)
  })

  it('allocates ids in the order spawns start, whatever order backends finish in', async () => {
    backend.auto = false
    const first = root.pty.spawn(alice, { type: 'shell' })
    const second = root.pty.spawn(alice, { type: 'shell' })
    expect(root.pty.activity(alice)).toEqual(['pty-1', 'pty-2'])
    backend.spawns[1]!.result.resolve(backend.spawns[1]!.session)
    expect((await second).sessionId).toBe('pty-2')
    backend.spawns[0]!.result.resolve(backend.spawns[0]!.session)
    expect((await first).sessionId).toBe('pty-1')
    expect(root.pty.list(alice).map((info) => info.sessionId)).toEqual(['pty-1', 'pty-2'])
  })

  it('numbers the sessions of an owner with its own id prefix on their own, so the default ids stay consecutive', async () => {
    const pool = Object.assign(Object.create(bob) as typeof bob, { sessionPrefix: 'pool' })
    expect((await root.pty.spawn(pool, { type: 'shell' })).sessionId).toBe('pool-1')
    expect((await root.pty.spawn(alice, { type: 'shell' })).sessionId).toBe('pty-1')
    expect((await root.pty.spawn(pool, { type: 'shell' })).sessionId).toBe('pool-2')
    expect(root.pty.list(alice).map((info) => info.sessionId)).toEqual(['pty-1'])
    expectCode(thrown(() => root.pty.read(alice, 'pool-1')), 'FOREIGN_SESSION')
    const odd = Object.assign(Object.create(bob) as typeof bob, { sessionPrefix: 'Pty/' })
    expectCode(await rejection(root.pty.spawn(odd, { type: 'shell' })), 'INVALID_INPUT', /lower-case letters and digits/)
  })

  it('names the session in the details of NO_SESSION and FOREIGN_SESSION, and builds the message from them', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const foreign = thrown(() => root.pty.read(bob, sessionId))
    expect(foreign).toMatchObject({ name: 'PtyError', code: 'FOREIGN_SESSION', details: { sessionId } })
    expect((foreign as Error).message).toBe(PtyError.message('FOREIGN_SESSION', { sessionId }))
    expect(thrown(() => root.pty.read(alice, 'pty-9'))).toMatchObject({ code: 'NO_SESSION', details: { sessionId: 'pty-9' }, message: 'unknown PTY session pty-9' })
  })

  it('refuses a name the owner already uses on a session or on a spawn in flight', async () => {
    await root.pty.spawn(alice, { type: 'shell', name: 'a' })
    expectCode(await rejection(root.pty.spawn(alice, { type: 'shell', name: 'a' })), 'DUPLICATE_NAME', /agent-1 already has a PTY session named "a" \(pty-1\)/)
    backend.auto = false
    const opening = root.pty.spawn(alice, { type: 'shell', name: 'b' })
    expectCode(await rejection(root.pty.spawn(alice, { type: 'shell', name: 'b' })), 'DUPLICATE_NAME', /\(pty-2\)/)
    const other = root.pty.spawn(bob, { type: 'shell', name: 'b' })
    backend.spawns[2]!.result.resolve(backend.spawns[2]!.session)
    await expect(other).resolves.toMatchObject({ sessionId: 'pty-3', name: 'b' })
    backend.spawns[1]!.result.resolve(backend.spawns[1]!.session)
    await opening
  })

  it('frees a name when its session is closed', async () => {
    const opened = await root.pty.spawn(alice, { type: 'shell', name: 'a' })
    await root.pty.close(alice, opened.sessionId)
    await expect(root.pty.spawn(alice, { type: 'shell', name: 'a' })).resolves.toMatchObject({ name: 'a' })
  })

  it('rejects bad options with INVALID_INPUT before reaching a backend', async () => {
    expectCode(await rejection(root.pty.spawn(alice, { type: '' })), 'INVALID_INPUT', /non-empty string `type`/)
    expectCode(await rejection(root.pty.spawn(alice, { type: 'shell', name: '' })), 'INVALID_INPUT', /`name`/)
    expectCode(await rejection(root.pty.spawn(alice, { type: 'shell', name: 'x'.repeat(10_000) })), 'INVALID_INPUT', /`name` must be at most 64 characters \(this one has 10000\)/)
    expect(backend.spawns).toHaveLength(0)
    await expect(root.pty.spawn(alice, { type: 'shell', name: 'x'.repeat(64) })).resolves.toMatchObject({ name: 'x'.repeat(64) })
  })

  it('refuses an owner that is not live', async () => {
    void alice.dispose()
    expectCode(await rejection(root.pty.spawn(alice, { type: 'shell' })), 'OWNER_NOT_LIVE', /agent agent-1 is/)
  })

  it('wraps a backend failure as SPAWN_FAILED naming the cause', async () => {
    backend.auto = false
    const opening = root.pty.spawn(alice, { type: 'shell' })
    backend.last.result.reject(new Error('ENOENT /bin/bash'))
    const error = await rejection(opening)
    expectCode(error, 'SPAWN_FAILED', /could not start a "shell" PTY session: ENOENT \/bin\/bash/)
    expect(root.pty.hasOwnerActivity(alice)).toBe(false)
  })

  it('gives a failed spawn’s id back, so the next session takes it', async () => {
    backend.auto = false
    const failing = root.pty.spawn(alice, { type: 'shell' })
    backend.last.result.reject(new Error('cwd missing'))
    await rejection(failing)
    backend.auto = true
    expect((await root.pty.spawn(alice, { type: 'shell' })).sessionId).toBe('pty-1')
  })

  it('rejects at once with the reason of a signal that is already aborted, starting nothing', async () => {
    const reason = new Error('turn cancelled')
    const error = await rejection(root.pty.spawn(alice, { type: 'shell' }, AbortSignal.abort(reason)))
    expect(error).toBe(reason)
    expect(backend.spawns).toHaveLength(0)
  })
})

describe('spawn rollback', () => {
  it('closes the session and rejects with the exact signal reason when the caller cancels during startup', async () => {
    backend.auto = false
    const caller = new AbortController()
    const opening = track(root.pty.spawn(alice, { type: 'shell' }, caller.signal))
    const reason = { why: 'user pressed stop' }
    caller.abort(reason)
    expect(backend.last.request.signal.aborted).toBe(true)
    expect(backend.last.request.signal.reason).toBe(reason)
    backend.last.result.resolve(backend.last.session)
    await flush()
    expect(opening.state()).toBe('rejected')
    expect(opening.error).toBe(reason)
    expect(backend.last.session.closes).toHaveLength(1)
    expect(root.pty.list(alice)).toEqual([])
    expect(root.pty.hasOwnerActivity(alice)).toBe(false)
  })

  it('keeps the caller reason even when the backend rejects with something else', async () => {
    backend.auto = false
    const caller = new AbortController()
    const opening = root.pty.spawn(alice, { type: 'shell' }, caller.signal)
    const reason = new Error('cancelled by caller')
    caller.abort(reason)
    backend.last.result.reject(new PtyError('SPAWN_FAILED', { reason: 'startup interrupted' }))
    expect(await rejection(opening)).toBe(reason)
  })

  it('keeps the caller reason when the rollback close fails, and holds the failure as owner activity', async () => {
    backend.auto = false
    const caller = new AbortController()
    const opening = root.pty.spawn(alice, { type: 'shell' }, caller.signal)
    const reason = new Error('cancelled by caller')
    caller.abort(reason)
    backend.last.session.autoClose = { ...CLOSED, survivors: [{ pid: 77, name: 'sleep' }] }
    backend.last.result.resolve(backend.last.session)
    expect(await rejection(opening)).toBe(reason)
    expect(root.pty.hasOwnerActivity(alice)).toBe(true)
    expect(root.pty.activity(alice)).toEqual(['pty-1'])
    expect(root.pty.list(alice)).toEqual([])
  })

  it('reports a pending rollback failure at the next owner dispose, then forgets it', async () => {
    backend.auto = false
    const caller = new AbortController()
    const opening = root.pty.spawn(alice, { type: 'shell' }, caller.signal)
    caller.abort(new Error('stop'))
    backend.last.session.autoClose = new Error('EPERM')
    backend.last.result.resolve(backend.last.session)
    await rejection(opening)
    const errors = await alice.dispose()
    expect(errors).toHaveLength(1)
    expect(errors[0]).toBeInstanceOf(AggregateError)
    const [failure] = (errors[0] as AggregateError).errors
    expectCode(failure, 'CLOSE_FAILED', /rolling back PTY session pty-1 failed: EPERM/)
    expect((errors[0] as AggregateError).message).toMatch(/cleaning up the PTY sessions of agent-1 failed/)
    expect(root.pty.hasOwnerActivity(alice)).toBe(false)
  })

  it('reports a pending rollback failure at service dispose', async () => {
    backend.auto = false
    const caller = new AbortController()
    const opening = root.pty.spawn(alice, { type: 'shell' }, caller.signal)
    caller.abort(new Error('stop'))
    backend.last.session.autoClose = new Error('EPERM')
    backend.last.result.resolve(backend.last.session)
    await rejection(opening)
    const error = await rejection(root.pty.shutdown())
    expect(error).toBeInstanceOf(AggregateError)
    expect((error as AggregateError).message).toMatch(/^shutting down the PTY service failed: rolling back PTY session pty-1 failed: EPERM$/)
  })

  it('rolls back instead of publishing when the service disposes during startup', async () => {
    backend.auto = false
    const opening = track(root.pty.spawn(alice, { type: 'shell' }))
    const disposing = track(serviceFiber.dispose())
    await flush()
    expect(backend.last.request.signal.aborted).toBe(true)
    expect(disposing.state()).toBe('pending')
    backend.last.result.resolve(backend.last.session)
    await flush()
    expectCode(opening.error, 'SERVICE_DISPOSING')
    expect(backend.last.session.closes).toHaveLength(1)
    await flush()
    expect(disposing.state()).toBe('resolved')
  })

  it('rolls back instead of publishing when the owner is disposed during startup, and the dispose waits for it', async () => {
    backend.auto = false
    const opening = track(root.pty.spawn(alice, { type: 'shell' }))
    backend.last.session.autoClose = undefined
    const disposing = track(alice.dispose())
    await flush()
    expect(backend.last.request.signal.aborted).toBe(true)
    expectCode(backend.last.request.signal.reason, 'OWNER_NOT_LIVE')
    backend.last.result.resolve(backend.last.session)
    await flush()
    expect(backend.last.session.closes).toHaveLength(1)
    expect(disposing.state()).toBe('pending')
    backend.last.session.closes[0]!.resolve(CLOSED)
    await flush()
    expectCode(opening.error, 'OWNER_NOT_LIVE')
    expect(disposing.state()).toBe('resolved')
    expect(disposing.value).toEqual([])
  })

  it('rolls back when the owner stopped being live while the backend worked, even before its cleanup ran', async () => {
    backend.auto = false
    const opening = track(root.pty.spawn(alice, { type: 'shell' }))
    // The agent starts disposing (state and signal change) but our cleanup has not run yet.
    const disposing = alice.dispose()
    backend.last.result.resolve(backend.last.session)
    await flush()
    expectCode(opening.error, 'OWNER_NOT_LIVE')
    expect(backend.last.session.closes).toHaveLength(1)
    expect(await disposing).toEqual([])
  })

  it('makes a lifecycle dispose report a rollback close that failed', async () => {
    backend.auto = false
    const opening = track(root.pty.spawn(alice, { type: 'shell' }))
    const disposing = alice.dispose()
    backend.last.session.autoClose = { ...CLOSED, survivors: [{ pid: 91, name: 'python3' }] }
    backend.last.result.resolve(backend.last.session)
    const errors = await disposing
    expectCode(opening.error, 'CLOSE_FAILED', /rolling back PTY session pty-1 left processes running \(1 process: python3\)/)
    expect((errors[0] as AggregateError).errors[0]).toBe(opening.error)
  })
})

describe('ownership checks', () => {
  it('names an unknown session', async () => {
    expectCode(thrown(() => root.pty.read(alice, 'pty-7')), 'NO_SESSION', /^unknown PTY session pty-7$/)
    expectCode(thrown(() => root.pty.startSend(alice, 'pty-7', { text: 'x', submit: true })), 'NO_SESSION')
    expectCode(await rejection(root.pty.signal(alice, 'pty-7', 'SIGINT')), 'NO_SESSION')
    expectCode(await rejection(root.pty.close(alice, 'pty-7')), 'NO_SESSION')
  })

  it('refuses every operation on another agent’s session and touches nothing', async () => {
    const opened = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    const message = /^PTY session pty-1 belongs to another agent$/
    expectCode(thrown(() => root.pty.read(bob, opened.sessionId)), 'FOREIGN_SESSION', message)
    expectCode(thrown(() => root.pty.startSend(bob, opened.sessionId, { text: 'x', submit: true })), 'FOREIGN_SESSION', message)
    expectCode(await rejection(root.pty.signal(bob, opened.sessionId, 'SIGINT')), 'FOREIGN_SESSION', message)
    expectCode(await rejection(root.pty.close(bob, opened.sessionId)), 'FOREIGN_SESSION', message)
    expect(session.sends).toHaveLength(0)
    expect(session.signals).toHaveLength(0)
    expect(session.closes).toHaveLength(0)
    expect(root.pty.list(bob)).toEqual([])
    expect(root.pty.hasOwnerActivity(bob)).toBe(false)
  })

  it('refuses calls from an owner that is no longer live', async () => {
    const opened = await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.autoClose = undefined
    void alice.dispose()
    expectCode(thrown(() => root.pty.read(alice, opened.sessionId)), 'OWNER_NOT_LIVE')
    expectCode(thrown(() => root.pty.startSend(alice, opened.sessionId, { text: 'x', submit: true })), 'OWNER_NOT_LIVE')
    backend.last.session.closes[0]!.resolve(CLOSED)
  })

  it('refuses everything once the service is disposing', async () => {
    const opened = await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.autoClose = undefined
    // Callers that still hold the service (an operation in flight) see the refusals.
    const pty = root.pty
    const disposing = serviceFiber.dispose()
    await flush()
    expectCode(thrown(() => pty.read(alice, opened.sessionId)), 'SERVICE_DISPOSING', /the PTY service is shutting down/)
    expectCode(thrown(() => pty.startSend(alice, opened.sessionId, { text: 'x', submit: true })), 'SERVICE_DISPOSING')
    expectCode(await rejection(pty.spawn(alice, { type: 'shell' })), 'SERVICE_DISPOSING')
    expectCode(await rejection(pty.close(alice, opened.sessionId)), 'SERVICE_DISPOSING')
    expectCode(thrown(() => pty.registerBackend(new FakeBackend('other'))), 'SERVICE_DISPOSING')
    backend.last.session.closes[0]!.resolve(CLOSED)
    await disposing
  })
})

describe('send reservation', () => {
  it('refuses a second send while one is active, naming the session and what to do', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    root.pty.startSend(alice, sessionId, { text: 'sleep 100', submit: true })
    const error = thrown(() => root.pty.startSend(alice, sessionId, { text: 'echo hi', submit: true }))
    expectCode(error, 'SEND_ACTIVE', /PTY session pty-1 is still running a send; wait for it with task_output or interrupt it with terminal_signal/)
    expect(backend.last.session.sends).toHaveLength(1)
    expect(root.pty.list(alice)[0]?.busy).toBe(true)
  })

  it('passes a send’s own timeoutMs and idleMs to the backend and refuses bad ones before anything is written', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    for (const bad of [0, -5, 1.5, Number.NaN]) {
      expectCode(thrown(() => root.pty.startSend(alice, sessionId, { text: 'x', submit: true, timeoutMs: bad })), 'INVALID_INPUT', /timeoutMs of a send to pty-1 must be a positive integer/)
      expectCode(thrown(() => root.pty.startSend(alice, sessionId, { text: 'x', submit: true, idleMs: bad })), 'INVALID_INPUT', /idleMs of a send to pty-1 must be a positive integer/)
    }
    expect(session.sends).toHaveLength(0)
    root.pty.startSend(alice, sessionId, { text: 'watch date', submit: true, timeoutMs: 5000, idleMs: 700 })
    expect(session.lastSend.input).toEqual({ text: 'watch date', submit: true, timeoutMs: 5000, idleMs: 700 })
  })

  it('passes exactly one of text, keys or secret to the backend, and refuses none, two or malformed ones before anything is written', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    const bad: unknown[] = [
      { submit: true },
      { text: 'x', keys: ['Enter'], submit: true },
      { keys: [], submit: false },
      { keys: ['Up', 7], submit: false },
      { keys: [{ txt: 'x' }], submit: false },
      { secret: { name: 'PW' }, submit: true },
      { secret: { name: 'PW', value: '' }, submit: true },
      { text: 'x', secret: { name: 'PW', value: 'v' }, submit: true },
    ]
    for (const input of bad) expectCode(thrown(() => root.pty.startSend(alice, sessionId, input as never)), 'INVALID_INPUT', /nothing was written/)
    expect(session.sends).toHaveLength(0)
    expect(root.pty.list(alice)[0]?.busy).toBe(false)
    const keyed = root.pty.startSend(alice, sessionId, { keys: ['Up', { text: 'ls' }], submit: false })
    expect(session.lastSend.input).toEqual({ keys: ['Up', { text: 'ls' }], submit: false })
    session.lastSend.done.resolve(result())
    await keyed.done
    root.pty.startSend(alice, sessionId, { secret: { name: 'PW', value: 'long-enough-value' }, submit: true })
    expect(session.lastSend.input).toEqual({ secret: { name: 'PW', value: 'long-enough-value' }, submit: true })
  })

  it('releases the reservation only when done settles, whether it resolves or rejects', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    const first = root.pty.startSend(alice, sessionId, { text: 'a', submit: true })
    session.lastSend.done.resolve(result({ viewport: 'a' }))
    await expect(first.done).resolves.toMatchObject({ viewport: 'a' })
    expect(root.pty.list(alice)[0]?.busy).toBe(false)
    const second = root.pty.startSend(alice, sessionId, { text: 'b', submit: true })
    session.lastSend.done.reject(new PtyError('SESSION_EXITED', { reason: 'gone at write time' }))
    expectCode(await rejection(second.done), 'SESSION_EXITED')
    expect(() => root.pty.startSend(alice, sessionId, { text: 'c', submit: true })).not.toThrow()
  })

  it('holds the reservation during a cancel until the signal is delivered and done settles', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    const operation = root.pty.startSend(alice, sessionId, { text: 'sleep 100', submit: true })
    const cancelling = track(operation.cancel())
    expect(session.lastSend.cancelCalls).toBe(1)
    expectCode(thrown(() => root.pty.startSend(alice, sessionId, { text: 'next', submit: true })), 'SEND_ACTIVE')
    session.lastSend.cancelled.resolve()
    await flush()
    expect(cancelling.state()).toBe('resolved')
    // The backend settles done after delivering SIGINT; until then the slot stays taken.
    expectCode(thrown(() => root.pty.startSend(alice, sessionId, { text: 'next', submit: true })), 'SEND_ACTIVE')
    session.lastSend.done.resolve(result({ evidence: { tier: 'cancel', detail: 'SIGINT delivered' } }))
    await operation.done
    expect(() => root.pty.startSend(alice, sessionId, { text: 'next', submit: true })).not.toThrow()
  })

  it('refuses a send to an exited session before the backend writes anything', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.current = { state: 'exited', exitCode: 3, signal: null }
    const error = thrown(() => root.pty.startSend(alice, sessionId, { text: 'echo x', submit: true }))
    expectCode(error, 'SESSION_EXITED', /PTY session pty-1 exited with code 3; nothing was written/)
    expect(backend.last.session.sends).toHaveLength(0)
    expect(root.pty.list(alice)[0]?.busy).toBe(false)
  })

  it('cancels the operation when the caller’s signal aborts', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const caller = new AbortController()
    root.pty.startSend(alice, sessionId, { text: 'sleep 100', submit: true, signal: caller.signal })
    expect(backend.last.session.lastSend.cancelCalls).toBe(0)
    caller.abort()
    expect(backend.last.session.lastSend.cancelCalls).toBe(1)
  })

  it('cancels at once when the caller’s signal is already aborted', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    root.pty.startSend(alice, sessionId, { text: 'rm -rf build', submit: true, signal: AbortSignal.abort() })
    expect(backend.last.session.lastSend.cancelCalls).toBe(1)
  })

  it('passes output streaming through to the backend operation', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const operation = root.pty.startSend(alice, sessionId, { text: 'seq 2', submit: true })
    const seen: string[] = []
    operation.onOutput(() => seen.push(operation.readOutput()))
    backend.last.session.lastSend.emit('1\n')
    backend.last.session.lastSend.emit('2\n')
    expect(seen).toEqual(['1\n', '2\n'])
  })

  it('releases the reservation when the backend refuses the send synchronously', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.startSendError = new PtyError('SESSION_EXITED', { reason: 'just exited' })
    expectCode(thrown(() => root.pty.startSend(alice, sessionId, { text: 'x', submit: true })), 'SESSION_EXITED', /just exited/)
    backend.last.session.startSendError = undefined
    expect(() => root.pty.startSend(alice, sessionId, { text: 'x', submit: true })).not.toThrow()
  })
})

describe('read and signal', () => {
  it('pages with defaults offset 0 and count 500, and validates them', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    expect(root.pty.read(alice, sessionId).text).toBe('offset=0 count=500')
    expect(root.pty.read(alice, sessionId, { offset: 10, count: 5 }).text).toBe('offset=10 count=5')
    expectCode(thrown(() => root.pty.read(alice, sessionId, { offset: -1 })), 'INVALID_INPUT', /non-negative integers/)
  })

  it('reads an exited session’s scrollback', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.current = { state: 'exited', exitCode: 4, signal: null }
    expect(root.pty.read(alice, sessionId).text).toBe('offset=0 count=500')
  })

  it('forwards an allowed signal and refuses others', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    await expect(root.pty.signal(alice, sessionId, 'SIGINT')).resolves.toMatchObject({ delivered: true, target: 'sleep' })
    expectCode(await rejection(root.pty.signal(alice, sessionId, 'SIGUSR1' as never)), 'INVALID_INPUT', /allowed signals: SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP/)
    expect(backend.last.session.signals).toEqual(['SIGINT'])
  })

  it('refuses to signal an exited session without touching the backend', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.current = { state: 'exited', exitCode: null, signal: 'SIGHUP' }
    expectCode(await rejection(root.pty.signal(alice, sessionId, 'SIGINT')), 'SESSION_EXITED', /was killed by SIGHUP; no signal was sent/)
    expect(backend.last.session.signals).toEqual([])
  })
})

describe('kill', () => {
  it('closes the session and forgets it', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    await expect(root.pty.close(alice, sessionId)).resolves.toEqual(CLOSED)
    expect(root.pty.list(alice)).toEqual([])
    expectCode(thrown(() => root.pty.read(alice, sessionId)), 'NO_SESSION')
  })

  it('reports survivors as CLOSE_FAILED, keeps the session listed, and retries on the next kill', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    session.autoClose = { ...CLOSED, survivors: [{ pid: 1001, name: 'sleep' }, { pid: 4242, name: 'bash' }] }
    const error = await rejection(root.pty.close(alice, sessionId))
    expectCode(error, 'CLOSE_FAILED', /closing PTY session pty-1 left processes running \(2 processes: sleep, bash\); retry the close/)
    expect(root.pty.list(alice).map((info) => info.sessionId)).toEqual([sessionId])
    expect(root.pty.hasOwnerActivity(alice)).toBe(true)
    session.autoClose = CLOSED
    await expect(root.pty.close(alice, sessionId)).resolves.toEqual(CLOSED)
    expect(session.closes).toHaveLength(2)
    expect(root.pty.list(alice)).toEqual([])
  })

  it('shares one close between concurrent kills', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    session.autoClose = undefined
    const first = root.pty.close(alice, sessionId)
    const second = root.pty.close(alice, sessionId)
    expect(session.closes).toHaveLength(1)
    session.closes[0]!.resolve(CLOSED)
    await expect(Promise.all([first, second])).resolves.toEqual([CLOSED, CLOSED])
  })

  it('says a session the owner closed was closed, with the reason closeIfIdle gave; to another agent it stays unknown', async () => {
    const first = await root.pty.spawn(alice, { type: 'shell' })
    await root.pty.close(alice, first.sessionId)
    expect(thrown(() => root.pty.read(alice, first.sessionId))).toMatchObject({ code: 'NO_SESSION', details: { sessionId: 'pty-1', closed: {} }, message: 'PTY session pty-1 was closed' })
    const second = await root.pty.spawn(alice, { type: 'shell' })
    const closing = root.pty.closeIfIdle(alice, second.sessionId, 'when its task task-3 ended')
    backend.last.session.looks[0]!.resolve([])
    await expect(closing).resolves.toEqual(CLOSED)
    expect(thrown(() => root.pty.startSend(alice, second.sessionId, { text: 'x', submit: true }))).toMatchObject({
      code: 'NO_SESSION',
      details: { sessionId: 'pty-2', closed: { reason: 'when its task task-3 ended' } },
      message: 'PTY session pty-2 was closed when its task task-3 ended',
    })
    expect(thrown(() => root.pty.read(bob, second.sessionId))).toMatchObject({ code: 'NO_SESSION', message: 'unknown PTY session pty-2' })
  })

  it('closeIfIdle keeps a session that is busy, holds a process besides the shell, cannot tell, or took a send while it looked', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    const send = root.pty.startSend(alice, sessionId, { text: 'x', submit: true })
    await expect(root.pty.closeIfIdle(alice, sessionId, 'now')).resolves.toBeUndefined()
    expect(session.looks).toHaveLength(0)
    session.lastSend.done.resolve(result())
    await send.done
    for (const answer of [[{ pid: 4300, name: 'sleep' }], undefined]) {
      const kept = root.pty.closeIfIdle(alice, sessionId, 'now')
      session.looks.at(-1)!.resolve(answer)
      await expect(kept).resolves.toBeUndefined()
    }
    const raced = root.pty.closeIfIdle(alice, sessionId, 'now')
    const late = root.pty.startSend(alice, sessionId, { text: 'y', submit: true })
    session.looks.at(-1)!.resolve([])
    await expect(raced).resolves.toBeUndefined()
    session.lastSend.done.resolve(result())
    await late.done
    expect(session.closes).toHaveLength(0)
    expect(root.pty.list(alice).map((info) => info.sessionId)).toEqual([sessionId])
  })

  it('refuses sends and signals while a close is in flight or after it failed', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    session.autoClose = new Error('EPERM')
    expectCode(await rejection(root.pty.close(alice, sessionId)), 'CLOSE_FAILED', /closing PTY session pty-1 failed: EPERM/)
    expectCode(thrown(() => root.pty.startSend(alice, sessionId, { text: 'x', submit: true })), 'SESSION_EXITED', /is being closed/)
    expectCode(await rejection(root.pty.signal(alice, sessionId, 'SIGINT')), 'SESSION_EXITED', /is being closed/)
    expect(session.sends).toHaveLength(0)
    expect(root.pty.read(alice, sessionId).text).toBe('offset=0 count=500')
  })
})

describe('list and activity', () => {
  it('lists the owner’s sessions in creation order with exit codes and busy flags', async () => {
    await root.pty.spawn(alice, { type: 'shell', name: 'a' })
    const first = backend.last.session
    await root.pty.spawn(bob, { type: 'shell' })
    await root.pty.spawn(alice, { type: 'shell' })
    first.current = { state: 'exited', exitCode: 4, signal: null }
    root.pty.startSend(alice, 'pty-3', { text: 'sleep 1', submit: true })
    const listed = root.pty.list(alice)
    expect(listed.map(({ sessionId, name, status, busy }) => ({ sessionId, name, status, busy }))).toEqual([
      { sessionId: 'pty-1', name: 'a', status: { state: 'exited', exitCode: 4, signal: null }, busy: false },
      { sessionId: 'pty-3', name: undefined, status: { state: 'running' }, busy: true },
    ])
    expect(Date.parse(listed[0]!.createdAt)).not.toBeNaN()
  })

  it('counts spawns in flight as owner activity', async () => {
    backend.auto = false
    const opening = root.pty.spawn(alice, { type: 'shell' })
    expect(root.pty.hasOwnerActivity(alice)).toBe(true)
    expect(root.pty.activity(alice)).toEqual(['pty-1'])
    expect(root.pty.hasOwnerActivity(bob)).toBe(false)
    backend.last.result.resolve(backend.last.session)
    await opening
    expect(root.pty.activity(alice)).toEqual(['pty-1'])
    await root.pty.close(alice, 'pty-1')
    expect(root.pty.hasOwnerActivity(alice)).toBe(false)
  })
})

describe('disposal', () => {
  it('closes the owner’s sessions on owner dispose and waits for them, leaving other owners alone', async () => {
    await root.pty.spawn(alice, { type: 'shell' })
    const mine = backend.last.session
    await root.pty.spawn(bob, { type: 'shell' })
    const theirs = backend.last.session
    mine.autoClose = undefined
    const disposing = track(alice.dispose())
    await flush()
    expect(mine.closes).toHaveLength(1)
    expect(disposing.state()).toBe('pending')
    mine.closes[0]!.resolve(CLOSED)
    await flush()
    expect(disposing.state()).toBe('resolved')
    expect(disposing.value).toEqual([])
    expect(theirs.closes).toHaveLength(0)
    expect(root.pty.list(alice)).toEqual([])
    expect(root.pty.list(bob)).toHaveLength(1)
  })

  it('throws every close failure of an owner dispose together and keeps failed sessions for a retry', async () => {
    await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.autoClose = new Error('EPERM one')
    await root.pty.spawn(alice, { type: 'shell' })
    const second = backend.last.session
    second.autoClose = { ...CLOSED, survivors: [{ pid: 5, name: 'daemon' }] }
    const errors = await alice.dispose()
    const aggregate = errors[0] as AggregateError
    expect(aggregate.errors.map((error: PtyError) => error.code)).toEqual(['CLOSE_FAILED', 'CLOSE_FAILED'])
    expect(aggregate.message).toMatch(/pty-1 failed: EPERM one.*pty-2 left processes running \(1 process: daemon\)/)
    expect(root.pty.activity(alice)).toEqual(['pty-1', 'pty-2'])
    // The service's own disposal retries them.
    second.autoClose = CLOSED
    await serviceFiber.dispose()
    expect(second.closes).toHaveLength(2)
  })

  it('closes everything on service dispose and waits for the closes', async () => {
    await root.pty.spawn(alice, { type: 'shell' })
    const mine = backend.last.session
    await root.pty.spawn(bob, { type: 'shell' })
    const theirs = backend.last.session
    theirs.autoClose = undefined
    const disposing = track(serviceFiber.dispose())
    await flush()
    expect(mine.closes).toHaveLength(1)
    expect(theirs.closes).toHaveLength(1)
    expect(disposing.state()).toBe('pending')
    theirs.closes[0]!.resolve(CLOSED)
    await flush()
    expect(disposing.state()).toBe('resolved')
  })

  it('clears every registry on service dispose even when closes fail, and reports all failures together', async () => {
    await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.autoClose = new Error('EPERM a')
    await root.pty.spawn(bob, { type: 'shell' })
    backend.last.session.autoClose = { ...CLOSED, survivors: [{ pid: 9, name: 'sleep' }] }
    const pty = root.pty
    const error = await rejection(pty.shutdown())
    expect((error as AggregateError).errors).toHaveLength(2)
    expect((error as AggregateError).message).toMatch(/shutting down the PTY service failed: closing PTY session pty-1 failed: EPERM a; retry the close; closing PTY session pty-2 left processes running \(1 process: sleep\)/)
    expect(pty.list(alice)).toEqual([])
    expect(pty.list(bob)).toEqual([])
    expect(pty.hasOwnerActivity(alice)).toBe(false)
    expect(pty.types()).toEqual([])
  })

  it('logs each failure when the plugin is unloaded', async () => {
    await root.pty.spawn(alice, { type: 'shell' })
    backend.last.session.autoClose = new Error('EPERM a')
    await serviceFiber.dispose()
    expect(logged.map((entry) => (entry as Error).message)).toContain('closing PTY session pty-1 failed: EPERM a; retry the close')
    expect(root.get('pty')).toBeUndefined()
  })

  it('does not let a service dispose leave owner hooks behind', async () => {
    await root.pty.spawn(alice, { type: 'shell' })
    await serviceFiber.dispose()
    // The hook was detached: disposing the agent afterwards runs nothing of ours.
    expect(await alice.dispose()).toEqual([])
  })

  it('settles an active send’s reservation through the backend close', async () => {
    const { sessionId } = await root.pty.spawn(alice, { type: 'shell' })
    const session = backend.last.session
    const operation = root.pty.startSend(alice, sessionId, { text: 'sleep 100', submit: true })
    session.autoClose = undefined
    const killing = root.pty.close(alice, sessionId)
    session.lastSend.done.resolve(result({ waitReason: 'session_exit', sessionStatus: { state: 'exited', exitCode: null, signal: 'SIGTERM' } }))
    await expect(operation.done).resolves.toMatchObject({ waitReason: 'session_exit' })
    session.closes[0]!.resolve(CLOSED)
    await expect(killing).resolves.toEqual(CLOSED)
  })
})
