/**
 * The supervisor of a managed worker (`conch pool-worker`, spawned through `ctx.subprocess`), a
 * hostile peer: any protocol violation, crash or run of missed pings stops its whole tree, fails
 * its in-flight invokes and restarts it after a backoff. Lifecycle and shutdown: the README's
 * "The managed worker".
 */
import type { Duplex } from 'node:stream'
import { describeExit, unreachable } from '@conch/errors'
import type { ChildHandle, SubprocessServiceApi } from '@conch/subprocess'
import { defaultProcessTable, signalIfSame, type ProcessIdentity } from '@conch/subprocess'
import type { PoolConfig } from './config.ts'
import { InvokeFailure } from './errors.ts'
import type { PoolMetrics } from './metrics.ts'
import { encodeLine, LineDecoder, workerMessageSchema, type MainMessage, type SessionInfo, type TerminalSections, type WorkerMessage } from './protocol.ts'
import { defaultStateDir } from './state-dir.ts'
import type { PoolKey } from './session.ts'
import type { AttemptOptions, SessionBackend, WarmAnswer } from './warm.ts'

export type SupervisorState = 'starting' | 'ready' | 'backoff' | 'stopping' | 'stopped'

const TRANSITIONS: Record<SupervisorState, readonly SupervisorState[]> = {
  starting: ['ready', 'backoff', 'stopping'],
  ready: ['backoff', 'stopping'],
  backoff: ['starting', 'stopping'],
  stopping: ['stopped'],
  stopped: [],
}

export interface SupervisorDeps {
  subprocess: SubprocessServiceApi
  /** The server environment the pool reads passEnv and account variables from; sent in `init`. */
  env: Readonly<Record<string, string | undefined>>
  metrics: PoolMetrics
  warn: (message: string) => void
  /** The config sections the worker composes its terminals (ctx.pty) from; sent in `init`. */
  terminal?: TerminalSections
  /** Folders agents may write (`PoolDeps.workspaces`): a worker command named without a path is never found there. */
  workspaces?: readonly string[]
}

interface Pending {
  resolve: (answer: WarmAnswer) => void
  reject: (failure: InvokeFailure) => void
}

/** The bytes the main process may have queued unread for the worker before it counts as stuck. */
const MAX_QUEUED_BYTES = 64 * 1024 * 1024

/** One running worker process and its channel. */
class WorkerInstance {
  readonly pending = new Map<number, Pending>()
  readonly decoder: LineDecoder
  readonly startedAt = Date.now()
  sessions: SessionInfo[] = []
  ready = false
  pid: number | undefined
  stderrTail = ''
  lastPingId = 0
  lastPongId = 0
  misses = 0
  exited = false
  /** The worker's start identity, read right after spawn (pid + start time), so a recycled pid is never signalled. */
  identity: Promise<ProcessIdentity | undefined> | undefined
  failed = false
  constructor(readonly handle: ChildHandle, readonly channel: Duplex, maxBytes: number) {
    this.decoder = new LineDecoder(maxBytes)
  }
}

export class WorkerSupervisor implements SessionBackend {
  state: SupervisorState = 'starting'
  private worker: WorkerInstance | undefined
  private nextId = 1
  private backoffMs: number
  private restartTimer: NodeJS.Timeout | undefined
  private pingTimer: NodeJS.Timeout | undefined
  private readonly waiters = new Set<() => void>()
  private readonly schema: ReturnType<typeof workerMessageSchema>
  private readonly limits: PoolConfig['supervisor']
  private closing: Promise<void> | undefined
  private evictEveryMs: number

  constructor(private readonly config: PoolConfig, private readonly deps: SupervisorDeps) {
    this.limits = config.supervisor
    this.backoffMs = this.limits.backoffMs
    this.evictEveryMs = config.evictEveryMs
    this.schema = workerMessageSchema(this.limits.maxMessageBytes, Math.max(config.maxSessions * 4, 64))
    this.spawn()
  }

  /** The worker's pid while one runs (tests and status). */
  workerPid(): number | undefined {
    return this.worker?.handle.pid
  }

  private to(next: SupervisorState): void {
    if (this.state === next) return
    if (!TRANSITIONS[this.state].includes(next)) throw new Error(`pool supervisor: no transition ${this.state} → ${next}`)
    this.state = next
    this.deps.metrics.managedWorkerActive.set(next === 'ready' ? 1 : 0)
    for (const wake of [...this.waiters]) wake()
  }

  private command(): [string, ...string[]] {
    const given = this.limits.command
    if (given) return given as [string, ...string[]]
    return [process.execPath, process.argv[1] ?? 'conch', 'pool-worker']
  }

  private spawn(): void {
    let handle: ChildHandle
    try {
      handle = this.deps.subprocess.spawn({ argv: this.command(), extraPipes: 1, ...(this.config.cwd && { cwd: this.config.cwd }), ...(this.deps.workspaces && { agentWritable: this.deps.workspaces }) })
    } catch (error) {
      this.deps.warn(`pool: the worker could not be spawned: ${(error as Error).message}`)
      this.scheduleRestart()
      return
    }
    const channel = handle.extra[0]!
    const worker = new WorkerInstance(handle, channel, this.limits.maxMessageBytes)
    this.worker = worker
    worker.identity = defaultProcessTable().get(handle.pid).then((entry) => entry && { pid: entry.pid, startTime: entry.startTime }, () => undefined)
    handle.stdout.on('data', () => {})
    handle.stderr.on('data', (chunk: Buffer) => {
      worker.stderrTail = (worker.stderrTail + chunk.toString('utf8')).slice(-4096)
    })
    channel.on('data', (chunk: Buffer) => this.receive(worker, chunk))
    channel.on('error', () => {})
    // The channel closes when the worker dies, often before its exit is reported (which waits
    // for all of its stdio); the exit's detail wins when it follows within a moment. A worker
    // whose descriptors outlive it in another process is caught by the health pings.
    channel.on('close', () => {
      if (worker.failed) return
      const timer = setTimeout(() => this.fail(worker, 'closed its channel'), 250)
      timer.unref()
      void handle.done.then(() => clearTimeout(timer))
    })
    void handle.done.then(({ exitCode, signal }) => {
      worker.exited = true
      if (worker.failed) return
      const tail = worker.stderrTail.trim().split('\n').slice(-3).join(' | ')
      this.fail(worker, `${describeExit({ exitCode, signal })}${tail ? `: ${tail}` : ''}`)
    })
    const readyTimer = setTimeout(() => {
      if (!worker.ready) this.fail(worker, `did not say ready within ${this.limits.readyTimeoutMs} ms`)
    }, this.limits.readyTimeoutMs)
    readyTimer.unref()
    const env = Object.fromEntries(Object.entries(this.deps.env).filter(([, value]) => value !== undefined)) as Record<string, string>
    this.send(worker, { type: 'init', config: { ...this.config, stateDir: this.config.stateDir ?? defaultStateDir(this.deps.env) }, env, ...(this.deps.terminal && { terminal: this.deps.terminal }) })
  }

  private send(worker: WorkerInstance, message: MainMessage): void {
    if (worker.failed || worker.channel.destroyed) return
    worker.channel.write(encodeLine(message))
    if (worker.channel.writableLength > MAX_QUEUED_BYTES) this.fail(worker, `left more than ${MAX_QUEUED_BYTES} bytes unread`)
  }

  private receive(worker: WorkerInstance, chunk: Buffer): void {
    try {
      this.receiveLines(worker, chunk)
    } catch (error) {
      this.violation(worker, `a message that could not be handled (${(error as Error).message})`)
    }
  }

  private receiveLines(worker: WorkerInstance, chunk: Buffer): void {
    if (worker.failed) return
    const { values, violation } = worker.decoder.feed(chunk)
    for (const value of values) {
      if (worker.failed) return
      const parsed = this.schema.safeParse(value)
      if (!parsed.success) {
        const issue = parsed.error.issues[0]
        this.violation(worker, `a message of no known shape (${issue?.path.join('.') || 'type'}: ${issue?.message})`)
        return
      }
      this.handle(worker, parsed.data)
    }
    if (violation) this.violation(worker, violation.message)
  }

  private handle(worker: WorkerInstance, message: WorkerMessage): void {
    switch (message.type) {
      case 'ready':
        if (worker.ready) return this.violation(worker, 'a second ready')
        worker.ready = true
        worker.pid = message.pid
        if (this.state !== 'starting') return
        this.to('ready')
        this.send(worker, { type: 'set_evict_every', ms: this.evictEveryMs })
        this.startPings(worker)
        return
      case 'pong':
        if (message.id > worker.lastPingId) return this.violation(worker, `a pong for ping ${message.id}, which was never sent`)
        if (message.id > worker.lastPongId) {
          worker.lastPongId = message.id
          worker.misses = 0
        }
        return
      case 'count':
        if (!worker.ready) return this.violation(worker, 'a count before ready')
        this.deps.metrics[message.name].inc()
        return
      case 'sessions':
        if (!worker.ready) return this.violation(worker, 'sessions before ready')
        worker.sessions = message.sessions
        return
      case 'result': {
        const pending = worker.pending.get(message.id)
        if (!pending) return this.violation(worker, `a result for invoke ${message.id}, which is not waiting for one`)
        worker.pending.delete(message.id)
        if (message.ok) {
          pending.resolve({ text: message.text, source: message.source, path: message.path, ...(message.bootMs !== undefined && { bootMs: message.bootMs }), ...(message.phases && { phases: message.phases }) })
        } else {
          const failure = new InvokeFailure(message.reason, message.message, message.midTask, message.elapsedMs)
          failure.bootMs = message.bootMs
          pending.reject(failure)
        }
        return
      }
      default:
        return unreachable(message, 'worker message')
    }
  }

  private startPings(worker: WorkerInstance): void {
    if (this.pingTimer) clearInterval(this.pingTimer)
    this.pingTimer = setInterval(() => {
      if (worker.failed || this.worker !== worker) return
      const id = ++worker.lastPingId
      this.send(worker, { type: 'ping', id })
      const check = setTimeout(() => {
        if (worker.failed || worker.lastPongId >= id) return
        worker.misses++
        this.deps.metrics.healthMisses.inc()
        if (worker.misses >= this.limits.maxMisses) this.fail(worker, `missed ${worker.misses} health pings in a row (${this.limits.pingTimeoutMs} ms each)`)
      }, this.limits.pingTimeoutMs)
      check.unref()
    }, this.limits.pingEveryMs)
    this.pingTimer.unref()
  }

  private violation(worker: WorkerInstance, what: string): void {
    this.fail(worker, `broke the protocol: ${what}`)
  }

  /** The worker is dead or untrusted: stop its tree, fail its invokes, restart after a backoff. */
  private fail(worker: WorkerInstance, why: string): void {
    if (worker.failed) return
    worker.failed = true
    if (this.pingTimer && this.worker === worker) clearInterval(this.pingTimer)
    const failure = () => new InvokeFailure('unhealthy', `the pool worker ${why}`, true)
    for (const pending of worker.pending.values()) pending.reject(failure())
    worker.pending.clear()
    worker.sessions = []
    worker.channel.destroy()
    if (this.state === 'stopping' || this.state === 'stopped') return
    this.deps.warn(`pool: the worker ${why}; restarting it`)
    if (Date.now() - worker.startedAt >= this.limits.stableMs) this.backoffMs = this.limits.backoffMs
    const stopped = this.stopTree(worker, this.config.closeGraceMs)
    this.to('backoff')
    void stopped.then(() => this.scheduleRestart())
  }

  private scheduleRestart(): void {
    if (this.state === 'stopping' || this.state === 'stopped') return
    if (this.state !== 'backoff') this.to('backoff')
    const delay = this.backoffMs
    this.backoffMs = Math.min(this.backoffMs * 2, this.limits.backoffMaxMs)
    this.restartTimer = setTimeout(() => {
      if (this.state !== 'backoff') return
      this.to('starting')
      this.deps.metrics.restarts.inc()
      this.spawn()
    }, delay)
    this.restartTimer.unref()
  }

  /** The worker's whole tree and every process carrying its tag: TERM, KILL after `graceMs`, verified. */
  private async stopTree(worker: WorkerInstance, graceMs: number): Promise<void> {
    const report = await worker.handle.terminate({ graceMs })
    if (report.survivors.length > 0) this.deps.warn(`pool: stopping the worker left processes ${report.survivors.map((record) => record.pid).join(', ')}`)
  }

  /** Waits until a worker is ready, or fails as `spawn` after `readyTimeoutMs`. */
  private async readyWorker(signal?: AbortSignal): Promise<WorkerInstance> {
    const deadline = Date.now() + this.limits.readyTimeoutMs
    for (;;) {
      if (signal?.aborted) throw new InvokeFailure('cancelled', 'the invoke was cancelled', false)
      if (this.state === 'stopping' || this.state === 'stopped') throw new InvokeFailure('unhealthy', 'the pool worker is stopping', false)
      if (this.state === 'ready' && this.worker && !this.worker.failed) return this.worker
      const left = deadline - Date.now()
      if (left <= 0) throw new InvokeFailure('spawn', `the pool worker is not running (${this.state} for ${this.limits.readyTimeoutMs} ms)`, false)
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer)
          this.waiters.delete(wake)
          signal?.removeEventListener('abort', wake)
          resolve()
        }
        const timer = setTimeout(wake, left)
        this.waiters.add(wake)
        signal?.addEventListener('abort', wake, { once: true })
      })
    }
  }

  invoke(key: PoolKey, prompt: string, options: AttemptOptions): Promise<WarmAnswer> {
    return this.request(key, prompt, options, false)
  }

  oneShot(key: PoolKey, prompt: string, options: AttemptOptions): Promise<WarmAnswer> {
    return this.request(key, prompt, options, true)
  }

  private async request(key: PoolKey, prompt: string, options: AttemptOptions, oneShot: boolean): Promise<WarmAnswer> {
    const worker = await this.readyWorker(options.signal)
    const id = this.nextId++
    const capMs = Number.isFinite(options.capMs) ? options.capMs : this.config.hardCapMs
    let cancelTimer: NodeJS.Timeout | undefined
    const onAbort = () => {
      if (!worker.pending.has(id)) return
      this.send(worker, { type: 'cancel', id })
      // A worker that does not confirm the cancel in time is stopped (its sessions with it).
      cancelTimer = setTimeout(() => {
        const pending = worker.pending.get(id)
        if (!pending) return
        worker.pending.delete(id)
        this.fail(worker, `did not confirm a cancel within ${this.limits.cancelGraceMs} ms`)
        pending.reject(new InvokeFailure('cancelled', 'the invoke was cancelled', true))
      }, this.limits.cancelGraceMs)
    }
    const answer = new Promise<WarmAnswer>((resolve, reject) => worker.pending.set(id, { resolve, reject }))
    this.send(worker, { type: 'invoke', id, key, prompt, capMs, stallMs: options.stallMs, cwd: options.cwd, oneShot, ...(options.owner?.policy && { policy: options.owner.policy }) })
    if (options.signal?.aborted) onAbort()
    else options.signal?.addEventListener('abort', onAbort, { once: true })
    try {
      return await answer
    } finally {
      clearTimeout(cancelTimer)
      options.signal?.removeEventListener('abort', onAbort)
    }
  }

  async evictTick(): Promise<void> {
    if (this.worker && this.state === 'ready') this.send(this.worker, { type: 'evict_tick' })
  }

  setEvictEvery(ms: number): void {
    this.evictEveryMs = ms
    if (this.worker && this.state === 'ready') this.send(this.worker, { type: 'set_evict_every', ms })
  }

  /** Sessions as the worker last reported them (its word, for display only). */
  sessionStates(): SessionInfo[] {
    return this.worker && !this.worker.failed ? this.worker.sessions : []
  }

  /** SIGTERM the worker → SIGKILL after `termGraceMs` → its tree and tagged processes verified gone. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.state === 'stopped') return
      this.to('stopping')
      clearTimeout(this.restartTimer)
      if (this.pingTimer) clearInterval(this.pingTimer)
      const worker = this.worker
      if (worker) {
        const ended = worker.handle.done.then(() => true)
        const identity = await worker.identity
        if (identity && !worker.exited) await signalIfSame(defaultProcessTable(), identity, 'SIGTERM').catch(() => 'gone')
        let timer: NodeJS.Timeout | undefined
        await Promise.race([ended, new Promise((resolve) => (timer = setTimeout(resolve, this.limits.termGraceMs)))])
        clearTimeout(timer)
        // Whatever is left (the worker after the grace, any CLI it left behind) is KILLed now.
        await this.stopTree(worker, 1)
        worker.failed = true
        for (const pending of worker.pending.values()) pending.reject(new InvokeFailure('unhealthy', 'the pool worker stopped', true))
        worker.pending.clear()
        worker.sessions = []
      }
      this.to('stopped')
    })()
    return this.closing
  }
}
