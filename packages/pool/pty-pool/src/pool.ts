/**
 * The pool: warm sessions by key, one invoke per session at a time, health and eviction, the
 * routing of an agent's invoke, and the fallback chain to the fresh-spawn path.
 *
 * Every pooled failure (boot, stall, hard cap, no sentinel, spawn, unhealthy) is recoverable:
 * the same prompt runs through the fallback (the CLI's one-shot mode, through its sub-agent
 * provider) and one line is appended to `pool-failures.jsonl`. Enabling the pool therefore
 * never makes an invoke less reliable than a fresh spawn.
 */
import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { type PoolConfig, routeFor } from './config.ts'
import { type FailureReason, InvokeFailure, PoolError } from './errors.ts'
import { PoolMetrics } from './metrics.ts'
import { keyString, PoolSession, prepareLaunch, redactKey, type PoolKey } from './session.ts'
import { spawnScreenTerminal, type TerminalFactory } from './terminal.ts'

/** Runs a prompt through the fresh-spawn path (the CLI's one-shot mode). */
export type FallbackRunner = (request: { key: PoolKey; prompt: string; signal?: AbortSignal; cwd: string }) => Promise<string>

/** How an answer was produced. */
export type InvokePath = 'warm' | 'booted' | 'one-shot-pty' | 'fresh-spawn'

export interface InvokeResult {
  text: string
  path: InvokePath
  /** Set when the pool failed and the fresh-spawn path answered. */
  fallback?: { reason: FailureReason; detail: string; midTask: boolean; afterMs: number }
  /** Set when the kill switch or the route sent the invoke straight to the fresh-spawn path. */
  bypass?: 'kill-switch' | 'fresh-spawn-route'
  /** For `booted`: spawn → input prompt, ms. */
  bootMs?: number
  /** `screen` or `transcript` for pooled answers. */
  source?: 'screen' | 'transcript'
  durationMs: number
}

/** One line of `pool-failures.jsonl`. */
export interface FailureLine {
  at: string
  reason: FailureReason
  midTask: boolean
  key: PoolKey
  detail: string
  /** ms: time in the pool before giving up, time the fallback took. */
  durations: { poolMs: number; fallbackMs: number; bootMs?: number }
  fallback: 'ok' | 'failed'
}

/** Options of one invoke. */
export interface InvokeOptions {
  signal?: AbortSignal
  /** Caps this invoke below `hardCapMs`, ms. */
  deadlineMs?: number
  /** The CLI's working directory (default: the pool's `cwd`, else the server's). */
  cwd?: string
  /** The fresh-spawn path for this invoke (default: the pool's). */
  fallback?: FallbackRunner
}

export interface PoolDeps {
  terminals?: TerminalFactory
  fallback?: FallbackRunner
  metrics?: PoolMetrics
  env?: Readonly<Record<string, string | undefined>>
  warn?: (message: string) => void
}

/** The one-line note a model sees with a pooled answer. */
export function poolNote(result: InvokeResult): string {
  if (result.fallback) return `[pool: fell back to a fresh spawn — ${describeFailure(result.fallback.reason, result.fallback)}]`
  switch (result.path) {
    case 'warm':
      return '[pool: warm session reused]'
    case 'booted':
      return '[pool: new warm session]'
    case 'one-shot-pty':
      return '[pool: one-shot PTY run]'
    case 'fresh-spawn':
      return result.bypass === 'kill-switch' ? '[pool: off (kill switch) — fresh spawn]' : '[pool: not routed — fresh spawn]'
  }
}

function describeFailure(reason: FailureReason, detail: { afterMs: number; detail: string }): string {
  const seconds = `${Math.round(detail.afterMs / 1000)} s`
  switch (reason) {
    case 'stall':
      return `stall after ${seconds}`
    case 'hard_cap':
      return `hard cap after ${seconds}`
    case 'boot':
      return 'the CLI did not boot'
    case 'spawn':
      return 'the CLI could not be spawned'
    case 'no_sentinel':
      return 'no sentinel in the answer'
    case 'unhealthy':
      return 'the session was unhealthy'
  }
}

/** A per-key FIFO lock: one invoke per session at a time. */
class KeyLocks {
  private readonly tails = new Map<string, Promise<void>>()
  async run<T>(id: string, body: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(id) ?? Promise.resolve()
    let release!: () => void
    const mine = new Promise<void>((resolve) => (release = resolve))
    const tail = previous.then(() => mine)
    this.tails.set(id, tail)
    await previous
    try {
      return await body()
    } finally {
      release()
      if (this.tails.get(id) === tail) this.tails.delete(id)
    }
  }
  busy(id: string): boolean {
    return this.tails.has(id)
  }
}

export type PoolState = 'running' | 'draining' | 'closed'

export class PtyPool {
  readonly metrics: PoolMetrics
  private readonly sessions = new Map<string, PoolSession>()
  private readonly locks = new KeyLocks()
  private readonly inFlight = new Set<Promise<unknown>>()
  private readonly terminals: TerminalFactory
  private readonly env: Readonly<Record<string, string | undefined>>
  private readonly warn: (message: string) => void
  private timer: NodeJS.Timeout | undefined
  private killSwitchOn: boolean
  state: PoolState = 'running'

  constructor(readonly config: PoolConfig, private readonly deps: PoolDeps = {}) {
    this.metrics = deps.metrics ?? new PoolMetrics()
    this.terminals = deps.terminals ?? spawnScreenTerminal
    this.env = deps.env ?? process.env
    this.warn = deps.warn ?? ((message) => process.emitWarning(message))
    this.killSwitchOn = config.killSwitch
    this.metrics.managedWorkerActive.set(config.worker === 'managed' ? 1 : 0)
    this.timer = setInterval(() => void this.evictTick(), config.evictEveryMs)
    this.timer.unref()
  }

  /** The runtime toggle of the kill switch: on sends every invoke to the fresh-spawn path at once. */
  setKillSwitch(on: boolean): void {
    this.killSwitchOn = on
  }

  killSwitch(): boolean {
    return this.killSwitchOn
  }

  /** Sessions by state, for status displays. */
  sessionStates(): Array<{ key: PoolKey; state: string; turns: number; pid: number | undefined }> {
    return [...this.sessions.values()].map((session) => ({ key: redactKey(session.key), state: session.state, turns: session.turns, pid: session.pid }))
  }

  /** The pids of every live session's CLI (for tests and teardown checks). */
  pids(): number[] {
    return [...this.sessions.values()].map((session) => session.pid).filter((pid): pid is number => pid !== undefined)
  }

  /**
   * Routes an agent's invoke by its per-agent setting: `fresh-spawn` (default, also for a
   * missing or malformed setting) → the fallback runner; `pty-pool` → an API-key account takes
   * a one-shot PTY invoke, any other the warm REPL.
   */
  async invokeForAgent(agent: string, conversation: string, prompt: string, options: InvokeOptions = {}): Promise<InvokeResult> {
    const route = routeFor(this.config, agent)
    if (route.runtime !== 'pty-pool') {
      const started = Date.now()
      const key: PoolKey = { owner: agent, conversation, kind: '', model: '', account: '', bare: false }
      const text = await this.runFallback(key, prompt, options, this.cwdOf(options.cwd))
      return { text, path: 'fresh-spawn', bypass: 'fresh-spawn-route', durationMs: Date.now() - started }
    }
    const key: PoolKey = { owner: agent, conversation, kind: route.kind, model: route.model, account: route.account, bare: route.bare }
    if (route.account && this.config.accounts[route.account]?.type === 'api-key' && this.config.kinds[route.kind]?.oneShotArgs) {
      return this.oneShot(key, prompt, options)
    }
    return this.acquireAndInvoke(key, prompt, options)
  }

  /**
   * Takes (or boots) the key's warm session, runs one sentinel round trip and returns the
   * session; on any pooled failure runs the fallback and logs a failure line.
   * @throws PoolError `POOL_CLOSED` while draining, `INVOKE_CANCELLED` when the caller
   *   cancelled, `INVOKE_FAILED` when the fallback failed too.
   */
  acquireAndInvoke(key: PoolKey, prompt: string, options: InvokeOptions = {}): Promise<InvokeResult> {
    if (this.state !== 'running') return Promise.reject(new PoolError('POOL_CLOSED', 'the pool is shutting down and admits no new invoke'))
    const work = this.invokeTracked(key, prompt, options)
    this.inFlight.add(work)
    void work.finally(() => this.inFlight.delete(work)).catch(() => {})
    return work
  }

  private async invokeTracked(key: PoolKey, prompt: string, options: InvokeOptions): Promise<InvokeResult> {
    const started = Date.now()
    const cwd = this.cwdOf(options.cwd)
    if (this.killSwitchOn) {
      const text = await this.runFallback(key, prompt, options, cwd)
      return { text, path: 'fresh-spawn', bypass: 'kill-switch', durationMs: Date.now() - started }
    }
    if (!this.config.kinds[key.kind]) throw new PoolError('INVOKE_FAILED', `unknown CLI kind "${key.kind}"; known: ${Object.keys(this.config.kinds).join(', ')}`)
    const id = keyString(key)
    const end = this.metrics.invokeDuration.startTimer()
    try {
      return await this.locks.run(id, async () => {
        let booted = false
        let bootMs: number | undefined
        try {
          let session = this.sessions.get(id)
          if (session && session.state !== 'idle') {
            // A half-finished answer must never reach the next turn: replace it.
            await this.evict(id, session, 'unhealthy')
            session = undefined
          }
          if (session) this.metrics.cacheHits.inc()
          else {
            session = await this.bootSession(key, cwd, options.signal)
            booted = true
            bootMs = session.bootMs
          }
          const capMs = Math.min(this.config.hardCapMs, options.deadlineMs ?? Number.POSITIVE_INFINITY)
          const answer = await session.invoke(prompt, { ...(options.signal && { signal: options.signal }), capMs, stallMs: this.config.stallMs })
          if (answer.text === '') this.metrics.invokesEmpty.inc()
          else this.metrics.invokesOk.inc()
          return { text: answer.text, path: booted ? 'booted' : 'warm', source: answer.source, durationMs: Date.now() - started, ...(bootMs !== undefined && { bootMs }) } satisfies InvokeResult
        } catch (error) {
          if (!(error instanceof InvokeFailure)) throw error
          const session = this.sessions.get(id)
          if (session && session.state === 'unhealthy') {
            // A cancelled session is closed before the cancel is reported, so a cancelled run's
            // teardown means its CLI is gone; others close while the fallback runs.
            if (error.reason === 'cancelled') await this.evict(id, session, 'unhealthy')
            else void this.evict(id, session, 'unhealthy')
          }
          if (error.reason === 'cancelled') throw new PoolError('INVOKE_CANCELLED', `the invoke on ${key.kind} was cancelled; its session was closed and the next acquire boots a new one`)
          return this.fallBack(key, prompt, options, cwd, error, started, bootMs)
        }
      })
    } finally {
      end()
    }
  }

  private async bootSession(key: PoolKey, cwd: string, signal?: AbortSignal): Promise<PoolSession> {
    await this.makeRoom()
    const kind = this.config.kinds[key.kind]!
    const session = new PoolSession(key, kind, this.config, { parentEnv: this.env, accountEnv: this.accountEnv(key.account), cwd, stateDir: this.stateDir() }, this.terminals)
    const id = keyString(key)
    this.sessions.set(id, session)
    this.metrics.spawns.inc()
    try {
      await session.boot(signal)
    } catch (error) {
      void this.evict(id, session, 'unhealthy')
      throw error
    }
    return session
  }

  /** LRU eviction beyond `maxSessions`: the least recently used idle session goes. */
  private async makeRoom(): Promise<void> {
    while (this.sessions.size >= this.config.maxSessions) {
      const idle = [...this.sessions.entries()].filter(([id, session]) => session.state !== 'busy' && session.state !== 'booting' && !this.locks.busy(id) || session.state === 'unhealthy')
      if (idle.length === 0) throw new InvokeFailure('spawn', `the pool is full (${this.config.maxSessions} sessions, all busy)`, false)
      idle.sort((a, b) => a[1].lastUsedAt - b[1].lastUsedAt)
      const [id, session] = idle[0]!
      await this.evict(id, session, session.state === 'unhealthy' ? 'unhealthy' : 'idle')
    }
  }

  private async evict(id: string, session: PoolSession, why: 'idle' | 'unhealthy' | 'shutdown'): Promise<void> {
    if (this.sessions.get(id) === session) this.sessions.delete(id)
    if (session.state === 'closing' || session.state === 'closed') return
    if (why === 'idle') this.metrics.evictedIdle.inc()
    else if (why === 'unhealthy') this.metrics.evictedUnhealthy.inc()
    else this.metrics.evictedShutdown.inc()
    const report = await session.close()
    if (report.survivors.length > 0) this.warn(`pool: closing the ${session.key.kind} session left processes ${report.survivors.join(', ')}`)
  }

  /** One eviction tick: unhealthy sessions and sessions idle longer than `idleEvictMs` go. */
  async evictTick(): Promise<void> {
    const now = Date.now()
    const work: Promise<void>[] = []
    for (const [id, session] of [...this.sessions.entries()]) {
      if (this.locks.busy(id)) continue
      if (session.state === 'unhealthy') work.push(this.evict(id, session, 'unhealthy'))
      else if (session.state === 'idle' && now - session.lastUsedAt >= this.config.idleEvictMs) work.push(this.evict(id, session, 'idle'))
    }
    await Promise.all(work)
  }

  /** Restarts the eviction tick with another period (tests use a short one). */
  setEvictEvery(ms: number): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = setInterval(() => void this.evictTick(), ms)
    this.timer.unref()
  }

  /**
   * A one-shot PTY invoke for accounts whose one-shot mode works: the CLI's one-shot argv in a
   * fresh terminal, the answer is its screen when it exits. No sentinel framing.
   */
  private async oneShot(key: PoolKey, prompt: string, options: InvokeOptions): Promise<InvokeResult> {
    const started = Date.now()
    const kind = this.config.kinds[key.kind]!
    const cwd = this.cwdOf(options.cwd)
    const launch = prepareLaunch(kind, key, { parentEnv: this.env, accountEnv: this.accountEnv(key.account), cwd, stateDir: this.stateDir() }, { prompt, args: kind.oneShotArgs! })
    let failure: InvokeFailure
    try {
      const terminal = await this.terminals({ argv: launch.argv, cwd, env: launch.env, rows: kind.rows, cols: kind.cols, scrollback: 10_000 })
      const capMs = Math.min(this.config.hardCapMs, options.deadlineMs ?? Number.POSITIVE_INFINITY)
      let timer: NodeJS.Timeout | undefined
      const capped = new Promise<'cap'>((resolve) => (timer = setTimeout(() => resolve('cap'), capMs)))
      const outcome = await Promise.race([terminal.exited, capped])
      clearTimeout(timer)
      const text = terminal.screen({ scrollback: true }).join('\n').trim()
      const report = await terminal.close(this.config.closeGraceMs)
      rmSync(launch.home, { recursive: true, force: true })
      if (report.survivors.length > 0) this.warn(`pool: a one-shot ${key.kind} run left processes ${report.survivors.join(', ')}`)
      if (outcome !== 'cap' && outcome.exitCode === 0) {
        this.metrics.invokesOk.inc()
        return { text, path: 'one-shot-pty', durationMs: Date.now() - started }
      }
      failure = outcome === 'cap' ? new InvokeFailure('hard_cap', `no exit within ${capMs} ms`, true, capMs) : new InvokeFailure('unhealthy', `the one-shot run exited with code ${outcome.exitCode}: ${text.slice(-200)}`, true, Date.now() - started)
    } catch (error) {
      failure = new InvokeFailure('spawn', `could not start ${kind.command}: ${(error as Error).message}`, false)
    }
    return this.fallBack(key, prompt, options, cwd, failure, started, undefined)
  }

  private async fallBack(key: PoolKey, prompt: string, options: InvokeOptions, cwd: string, failure: InvokeFailure, started: number, bootMs: number | undefined): Promise<InvokeResult> {
    const reason = failure.reason as FailureReason
    this.metrics.fallbacks.inc({ reason })
    const poolMs = Date.now() - started
    const fallbackStarted = Date.now()
    const line = (ok: boolean): FailureLine => ({
      at: new Date().toISOString(),
      reason,
      midTask: failure.midTask,
      key: redactKey(key),
      detail: failure.message,
      durations: { poolMs, fallbackMs: Date.now() - fallbackStarted, ...(bootMs !== undefined && { bootMs }) },
      fallback: ok ? 'ok' : 'failed',
    })
    let text: string
    try {
      text = await this.runFallback(key, prompt, options, cwd)
    } catch (error) {
      this.appendFailure(line(false))
      throw new PoolError('INVOKE_FAILED', `the pool failed (${reason}: ${failure.message}) and the fresh-spawn path failed too: ${(error as Error).message}`, { cause: error })
    }
    this.appendFailure(line(true))
    return { text, path: 'fresh-spawn', fallback: { reason, detail: failure.message, midTask: failure.midTask, afterMs: failure.elapsedMs || poolMs }, durationMs: Date.now() - started }
  }

  private runFallback(key: PoolKey, prompt: string, options: InvokeOptions, cwd: string): Promise<string> {
    const fallback = options.fallback ?? this.deps.fallback
    if (!fallback) return Promise.reject(new PoolError('INVOKE_FAILED', `no fresh-spawn path is configured for kind "${key.kind}"`))
    return fallback({ key, prompt, cwd, ...(options.signal && { signal: options.signal }) })
  }

  private appendFailure(line: FailureLine): void {
    const file = this.failuresFile()
    try {
      mkdirSync(dirname(file), { recursive: true })
      appendFileSync(file, `${JSON.stringify(line)}\n`)
    } catch (error) {
      this.warn(`pool: could not append to ${file}: ${(error as Error).message}`)
    }
  }

  /** The failure log's absolute path. */
  failuresFile(): string {
    return resolve(this.config.failuresFile)
  }

  /** The failure lines written so far (for status and tests). */
  readFailures(): FailureLine[] {
    try {
      return readFileSync(this.failuresFile(), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as FailureLine)
    } catch {
      return []
    }
  }

  private accountEnv(account: string): Record<string, string> {
    const spec = this.config.accounts[account]
    const env: Record<string, string> = {}
    if (!spec) return env
    for (const [name, source] of Object.entries(spec.env)) {
      const value = this.env[source]
      if (value !== undefined) env[name] = value
    }
    return env
  }

  private stateDir(): string {
    return this.config.stateDir ?? join(tmpdir(), 'conch-pool')
  }

  private cwdOf(cwd: string | undefined): string {
    return cwd ?? this.config.cwd ?? process.cwd()
  }

  /**
   * Graceful shutdown: stop admitting invokes → let in-flight ones finish within `drainMs` →
   * close every session (its whole tree, with proof). Idempotent.
   */
  async shutdown(drainMs = 10_000): Promise<void> {
    if (this.state === 'closed') return
    this.state = 'draining'
    if (this.timer) clearInterval(this.timer)
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((resolve) => (timer = setTimeout(resolve, drainMs)))])
    clearTimeout(timer)
    await Promise.all([...this.sessions.entries()].map(([id, session]) => this.evict(id, session, 'shutdown')))
    this.state = 'closed'
  }
}
