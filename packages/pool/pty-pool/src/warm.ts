/**
 * The warm side of the pool: sessions by key, one invoke per session at a time, boot, health and
 * eviction. It answers or throws an `InvokeFailure`; everything else lives in `PtyPool`.
 */
import { rmSync } from 'node:fs'
import { defaultProcessTable, isEnded } from '@conch/subprocess'
import type { PoolConfig } from './config.ts'
import { InvokeFailure } from './errors.ts'
import type { SessionInfo, WorkerCounter } from './protocol.ts'
import { keyString, PoolSession, prepareLaunch, redactKey, type AnswerOfTurn, type PoolKey, type TurnPhases } from './session.ts'
import type { TerminalFactory, TerminalOwner } from './terminal.ts'

/** A pooled answer. */
export interface WarmAnswer extends Omit<AnswerOfTurn, 'phases'> {
  /** `warm`: a session was reused; `booted`: one was booted for this turn; `one-shot-pty`: a one-shot run in a terminal. */
  path: 'warm' | 'booted' | 'one-shot-pty'
  /** For `booted`: spawn → input prompt, ms. */
  bootMs?: number
  /** Where a warm or booted turn's time went. */
  phases?: TurnPhases
}

export interface AttemptOptions {
  signal?: AbortSignal
  /** Absolute cap of this invoke, ms. */
  capMs: number
  /** No progress for this long fails it, ms. */
  stallMs: number
  /** The CLI's working directory. */
  cwd: string
  /** Whose CLI it is (its key's owner); the terminal factory confines it under the owner's policy. */
  owner?: TerminalOwner
}

/** The warm side, in-process or behind a worker. */
export interface SessionBackend {
  /**
   * One sentinel round trip on the key's warm session (booted when there is none).
   * @throws InvokeFailure — `cancelled` only after the session is closed.
   */
  invoke(key: PoolKey, prompt: string, options: AttemptOptions): Promise<WarmAnswer>
  /**
   * The kind's one-shot argv in a fresh terminal; the answer is its screen at exit.
   * @throws InvokeFailure
   */
  oneShot(key: PoolKey, prompt: string, options: AttemptOptions): Promise<WarmAnswer>
  evictTick(): Promise<void>
  setEvictEvery(ms: number): void
  sessionStates(): SessionInfo[]
  /** Closes every session (counted as shutdown evictions) and stops the backend. */
  close(): Promise<void>
}

export interface WarmDeps {
  terminals: TerminalFactory
  /** The server environment passEnv and account variables are read from. */
  env: Readonly<Record<string, string | undefined>>
  /** Raised when a pool counter goes up. */
  count: (name: WorkerCounter) => void
  warn: (message: string) => void
  /** Called when the set of sessions changed. */
  changed?: () => void
  /** Variables added to every CLI's environment after scrubbing (the worker's ownership tag). */
  extraEnv?: Record<string, string>
  stateDir: string
  /** The folder of the owner agents' folders of homes, when the sandbox binds each agent its own (`PtyPool.agentHomes`). */
  agentHomes?: string
  /** Folders agents may write besides an owner's workspace root (`PoolDeps.workspaces`): no CLI is taken from PATH there. */
  workspaces?: readonly string[]
}

/** Whether a session started for `before` may serve `after`: the same agent object and the same policy data. */
function sameOwner(before: TerminalOwner | undefined, after: TerminalOwner | undefined): boolean {
  if (before === undefined || after === undefined) return before === after
  return before.id === after.id && before.agent === after.agent && JSON.stringify(before.policy ?? null) === JSON.stringify(after.policy ?? null)
}

/** The reported survivors still running: a terminal closed by its owner's disposal reports its CLI unchecked. */
async function stillRunning(pids: readonly number[]): Promise<number[]> {
  const table = defaultProcessTable()
  const entries = await Promise.all(pids.map((pid) => table.get(pid)))
  return pids.filter((_, index) => entries[index] !== undefined && !isEnded(entries[index]!.state))
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

/** The in-process warm side. */
export class WarmSessions implements SessionBackend {
  private readonly sessions = new Map<string, PoolSession>()
  private readonly locks = new KeyLocks()
  private timer: NodeJS.Timeout | undefined
  private closed = false

  constructor(private readonly config: PoolConfig, private readonly deps: WarmDeps) {
    this.setEvictEvery(config.evictEveryMs)
  }

  sessionStates(): SessionInfo[] {
    return [...this.sessions.values()].map((session) => ({ key: redactKey(session.key), state: session.state, turns: session.turns, ...(session.pid !== undefined && { pid: session.pid }) }))
  }

  async invoke(key: PoolKey, prompt: string, options: AttemptOptions): Promise<WarmAnswer> {
    const id = keyString(key)
    return this.locks.run(id, async () => {
      let bootMs: number | undefined
      try {
        if (this.closed) throw new InvokeFailure('unhealthy', 'the pool is closed', false)
        let session = this.sessions.get(id)
        // A half-finished answer must never reach the next turn, and a CLI keeps the sandbox it
        // started under for life (an owner whose policy changed gets a new session): replace it.
        const foreign = session?.state === 'idle' && !sameOwner(session.owner, options.owner)
        if (foreign) this.deps.warn(`pool: the ${key.kind} session of ${key.owner} was started under another owner policy; replacing it`)
        if (session && (session.state !== 'idle' || foreign)) {
          await this.evict(id, session, 'unhealthy')
          session = undefined
        }
        if (session) this.deps.count('cacheHits')
        else {
          session = await this.bootSession(key, options.cwd, options.signal, options.owner)
          bootMs = session.bootMs
        }
        const turn = session.invoke(prompt, { ...(options.signal && { signal: options.signal }), capMs: options.capMs, stallMs: options.stallMs })
        // The session is busy now (invoke changes its state before its first await).
        this.deps.changed?.()
        const answer = await turn
        this.deps.changed?.()
        return { text: answer.text, source: answer.source, path: bootMs === undefined ? 'warm' : 'booted', phases: answer.phases, ...(bootMs !== undefined && { bootMs }) }
      } catch (error) {
        const failure = error instanceof InvokeFailure ? error : new InvokeFailure('unhealthy', (error as Error).message, false)
        if (bootMs !== undefined) failure.bootMs = bootMs
        const session = this.sessions.get(id)
        if (session && session.state === 'unhealthy') {
          // A cancelled session is closed before the cancel is reported, so a cancelled run's
          // teardown means its CLI is gone; others close while the fallback runs.
          if (failure.reason === 'cancelled') await this.evict(id, session, 'unhealthy')
          else void this.evict(id, session, 'unhealthy')
        }
        throw failure
      }
    })
  }

  private async bootSession(key: PoolKey, cwd: string, signal: AbortSignal | undefined, owner: TerminalOwner | undefined): Promise<PoolSession> {
    await this.makeRoom()
    const kind = this.config.kinds[key.kind]!
    const session = new PoolSession(key, kind, this.config, this.environment(key, cwd, owner), this.deps.terminals)
    const id = keyString(key)
    this.sessions.set(id, session)
    this.deps.count('spawns')
    this.deps.changed?.()
    try {
      await session.boot(signal)
    } catch (error) {
      void this.evict(id, session, 'unhealthy')
      throw error
    }
    return session
  }

  private environment(key: PoolKey, cwd: string, owner: TerminalOwner | undefined) {
    return { parentEnv: this.deps.env, accountEnv: this.accountEnv(key.account), cwd, stateDir: this.deps.stateDir, ...(this.deps.agentHomes !== undefined && { agentHomes: this.deps.agentHomes }), warn: this.deps.warn, ...(this.deps.extraEnv && { extraEnv: this.deps.extraEnv }), ...(this.deps.workspaces && { workspaces: this.deps.workspaces }), ...(owner && { owner }) }
  }

  private accountEnv(account: string): Record<string, string> {
    const env: Record<string, string> = {}
    for (const [name, source] of Object.entries(this.config.accounts[account]?.env ?? {})) {
      const value = this.deps.env[source]
      if (value !== undefined) env[name] = value
    }
    return env
  }

  /** LRU eviction beyond `maxSessions`: the least recently used idle session goes. */
  private async makeRoom(): Promise<void> {
    while (this.sessions.size >= this.config.maxSessions) {
      const idle = [...this.sessions.entries()].filter(([id, session]) => (session.state !== 'busy' && session.state !== 'booting' && !this.locks.busy(id)) || session.state === 'unhealthy')
      if (idle.length === 0) throw new InvokeFailure('spawn', `the pool is full (${this.config.maxSessions} sessions, all busy)`, false)
      idle.sort((a, b) => a[1].lastUsedAt - b[1].lastUsedAt)
      const [id, session] = idle[0]!
      await this.evict(id, session, session.state === 'unhealthy' ? 'unhealthy' : 'idle')
    }
  }

  private async evict(id: string, session: PoolSession, why: 'idle' | 'unhealthy' | 'shutdown'): Promise<void> {
    if (this.sessions.get(id) === session) this.sessions.delete(id)
    if (session.state === 'closing' || session.state === 'closed') return
    this.deps.count(why === 'idle' ? 'evictedIdle' : why === 'unhealthy' ? 'evictedUnhealthy' : 'evictedShutdown')
    this.deps.changed?.()
    const left = await stillRunning((await session.close()).survivors)
    if (left.length > 0) this.deps.warn(`pool: closing the ${session.key.kind} session left processes ${left.join(', ')}`)
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
    if (this.closed) return
    this.timer = setInterval(() => void this.evictTick(), ms)
    this.timer.unref()
  }

  async oneShot(key: PoolKey, prompt: string, options: AttemptOptions): Promise<WarmAnswer> {
    const kind = this.config.kinds[key.kind]!
    const started = Date.now()
    const launch = prepareLaunch(kind, key, this.environment(key, options.cwd, options.owner), { prompt, args: kind.oneShotArgs ?? [] })
    let terminal
    try {
      terminal = await this.deps.terminals({ argv: launch.argv, cwd: options.cwd, env: launch.env, rows: kind.rows, cols: kind.cols, scrollback: 10_000, network: kind.network, home: launch.home, ...(options.owner && { owner: options.owner }) })
    } catch (error) {
      rmSync(launch.home, { recursive: true, force: true })
      throw new InvokeFailure('spawn', `could not start ${kind.command}: ${(error as Error).message}`, false)
    }
    let timer: NodeJS.Timeout | undefined
    const capped = new Promise<'cap'>((resolve) => (timer = setTimeout(() => resolve('cap'), options.capMs)))
    let onAbort = () => {}
    const aborted = new Promise<'abort'>((resolve) => {
      onAbort = () => resolve('abort')
      if (options.signal?.aborted) onAbort()
      else options.signal?.addEventListener('abort', onAbort, { once: true })
    })
    const outcome = await Promise.race([terminal.exited, capped, aborted])
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', onAbort)
    const text = terminal.screen({ scrollback: true }).join('\n').trim()
    const left = await stillRunning((await terminal.close()).survivors)
    // The home is removed only once no process of the run is left to swap a folder in it for a
    // link while rm walks it (rm(1)'s classic race); a run with survivors keeps its home.
    if (left.length > 0) this.deps.warn(`pool: a one-shot ${key.kind} run left processes ${left.join(', ')}; its home ${launch.home} is kept`)
    else rmSync(launch.home, { recursive: true, force: true })
    if (outcome === 'abort') throw new InvokeFailure('cancelled', 'the one-shot run was cancelled', true, Date.now() - started)
    if (outcome === 'cap') throw new InvokeFailure('hard_cap', `no exit within ${options.capMs} ms`, true, options.capMs)
    if (outcome.exitCode !== 0) throw new InvokeFailure('unhealthy', `the one-shot run exited with code ${outcome.exitCode}: ${text.slice(-200)}`, true, Date.now() - started)
    return { text, source: 'screen', path: 'one-shot-pty' }
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.timer) clearInterval(this.timer)
    await Promise.all([...this.sessions.entries()].map(([id, session]) => this.evict(id, session, 'shutdown')))
  }
}
