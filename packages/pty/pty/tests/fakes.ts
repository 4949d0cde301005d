/**
 * Test doubles whose every step is driven by the test: agents with a real disposal sequence,
 * and a backend whose spawns, sends, cancels and closes settle only when the test says so.
 */
import type { Context } from 'cordis'
import { type Agent, AgentError, type AgentState } from '@conch/agent'
import type {
  BackendSession,
  BackendSpawnRequest,
  ClosedProcess,
  CloseResult,
  PtyBackend,
  PtySignal,
  ReadPage,
  SendOperation,
  SendResult,
  SessionStatus,
  SignalResult,
} from '../src/index.ts'

export interface Deferred<T> {
  promise: Promise<T>
  resolve(value: T): void
  reject(error: unknown): void
  settled: boolean
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  const result: Deferred<T> = {
    promise,
    settled: false,
    resolve(value) {
      result.settled = true
      resolve(value)
    },
    reject(error) {
      result.settled = true
      reject(error)
    },
  }
  return result
}

/** Lets every queued promise callback run. */
export async function flush(): Promise<void> {
  for (let index = 0; index < 10; index++) await Promise.resolve()
}

/** Observes a promise without handling it for the caller: `state()` says where it is. */
export function track<T>(promise: Promise<T>): { state(): 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown } {
  const tracked: { state(): 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown; current: 'pending' | 'resolved' | 'rejected' } = {
    current: 'pending',
    state: () => tracked.current,
  }
  promise.then(
    (value) => {
      tracked.current = 'resolved'
      tracked.value = value
    },
    (error: unknown) => {
      tracked.current = 'rejected'
      tracked.error = error
    },
  )
  return tracked
}

export interface FakeAgent extends Agent {
  /** Runs the agent's disposal like `ctx.agents.dispose`: abort, cleanups in reverse, collect failures. */
  dispose(): Promise<unknown[]>
}

export function fakeAgent(ctx: Context, id: string): FakeAgent {
  const controller = new AbortController()
  const cleanups: (() => void | Promise<void>)[] = []
  let state: AgentState = 'live'
  return {
    id,
    ctx,
    session: {} as Agent['session'],
    get state() {
      return state
    },
    signal: controller.signal,
    notify: () => {},
    holdWake: () => () => {},
    onDispose(cleanup) {
      if (state !== 'live') throw new AgentError('AGENT_NOT_LIVE', { agent: id, state, next: 'create a new agent' })
      cleanups.push(cleanup)
      return () => {
        const index = cleanups.indexOf(cleanup)
        if (index >= 0) cleanups.splice(index, 1)
      }
    },
    async dispose() {
      state = 'disposing'
      controller.abort(new AgentError('AGENT_DISPOSED', { agent: id }))
      const errors: unknown[] = []
      for (const cleanup of cleanups.splice(0).reverse()) {
        try {
          await cleanup()
        } catch (error) {
          errors.push(error)
        }
      }
      state = 'disposed'
      return errors
    },
  }
}

export const CLOSED: CloseResult = {
  status: { state: 'exited', exitCode: 0, signal: null },
  stopped: [{ pid: 4242, name: 'bash' }],
  survivors: [],
}

export function result(overrides: Partial<SendResult> = {}): SendResult {
  return {
    viewport: 'ok',
    waitReason: 'stdin_read',
    sessionStatus: { state: 'running' },
    truncated: false,
    evidence: { tier: 'fixed', detail: 'test' },
    elapsedMs: 0,
    ...overrides,
  }
}

/** One send on a fake session: settles only when the test resolves `done`. */
export class FakeSend {
  readonly done = deferred<SendResult>()
  readonly cancelled = deferred<void>()
  cancelCalls = 0
  output = ''
  private readonly listeners = new Set<() => void>()
  readonly operation: SendOperation

  constructor(readonly input: { text: string; submit: boolean; signal?: AbortSignal }) {
    this.operation = {
      done: this.done.promise,
      readOutput: () => {
        const text = this.output
        this.output = ''
        return text
      },
      onOutput: (listener) => {
        this.listeners.add(listener)
        return () => this.listeners.delete(listener)
      },
      cancel: () => {
        this.cancelCalls++
        return this.cancelled.promise
      },
    }
  }

  emit(text: string): void {
    this.output += text
    for (const listener of this.listeners) listener()
  }
}

export class FakeSession implements BackendSession {
  readonly pid: number | undefined = 4242
  readonly motd = 'welcome'
  current: SessionStatus = { state: 'running' }
  readonly sends: FakeSend[] = []
  readonly signals: PtySignal[] = []
  readonly closes: Deferred<CloseResult>[] = []
  /** When set, `close()` settles at once with this outcome instead of waiting for the test. */
  autoClose: CloseResult | Error | undefined = CLOSED
  startSendError: Error | undefined
  /** What `leftRunning` answers: each look takes the next (the test resolves it). */
  readonly looks: Deferred<ClosedProcess[] | undefined>[] = []

  status(): SessionStatus {
    return this.current
  }

  onExit(): () => void {
    return () => {}
  }

  startSend(input: { text: string; submit: boolean; signal?: AbortSignal }): SendOperation {
    if (this.startSendError) throw this.startSendError
    const send = new FakeSend(input)
    this.sends.push(send)
    return send.operation
  }

  read(options: { offset: number; count: number }): ReadPage {
    return { text: `offset=${options.offset} count=${options.count}`, totalLines: 1, firstRetainedLine: 1, lineBegin: 1, lineEnd: 1, truncated: false }
  }

  async signal(signal: PtySignal): Promise<SignalResult> {
    this.signals.push(signal)
    return { signal, delivered: true, targetPgid: 4300, target: 'sleep' }
  }

  leftRunning(): Promise<ClosedProcess[] | undefined> {
    const look = deferred<ClosedProcess[] | undefined>()
    this.looks.push(look)
    return look.promise
  }

  close(): Promise<CloseResult> {
    const close = deferred<CloseResult>()
    this.closes.push(close)
    const outcome = this.autoClose
    if (outcome instanceof Error) close.reject(outcome)
    else if (outcome) close.resolve(outcome)
    return close.promise
  }

  get lastSend(): FakeSend {
    const send = this.sends.at(-1)
    if (!send) throw new Error('no send was started')
    return send
  }
}

export interface PendingSpawn {
  request: BackendSpawnRequest
  result: Deferred<BackendSession>
  session: FakeSession
}

/** A backend whose spawns settle when the test says (or at once with `auto`). */
export class FakeBackend implements PtyBackend {
  readonly spawns: PendingSpawn[] = []

  constructor(readonly type = 'shell', public auto = true) {}

  spawn(request: BackendSpawnRequest): Promise<BackendSession> {
    const pending: PendingSpawn = { request, result: deferred(), session: new FakeSession() }
    this.spawns.push(pending)
    if (this.auto) pending.result.resolve(pending.session)
    return pending.result.promise
  }

  get last(): PendingSpawn {
    const spawn = this.spawns.at(-1)
    if (!spawn) throw new Error('no spawn was started')
    return spawn
  }
}
