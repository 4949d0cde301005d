/**
 * The pool's front: admission and shutdown, the kill switch, routing, metrics, and the fallback
 * to the fresh-spawn path. The warm sessions behind it are a `SessionBackend`: in-process
 * (`WarmSessions`) or in a supervised worker (`WorkerSupervisor`). Every pooled failure falls
 * back and is logged to `pool-failures.jsonl`, so the pool never answers less than a fresh spawn.
 */
import { isAbsolute, join } from 'node:path'
import type { PtyOwner } from '@conch/pty'
import type { SubprocessServiceApi } from '@conch/subprocess'
import { type PoolConfig, routeFor } from './config.ts'
import { appendNoFollow, makeHomeDir, readNoFollow } from './home-fs.ts'
import { type FailureReason, InvokeFailure, PoolError } from './errors.ts'
import { PoolMetrics } from './metrics.ts'
import type { OwnerPolicy, SessionInfo } from './protocol.ts'
import { redactKey, type PoolKey } from './session.ts'
import { agentHomes, defaultStateDir, openStateDir } from './state-dir.ts'
import { WorkerSupervisor } from './supervisor.ts'
import { unconfinedPolicy, type TerminalFactory, type TerminalOwner } from './terminal.ts'
import { type SessionBackend, type WarmAnswer, WarmSessions } from './warm.ts'

/** Bytes of the failure log `readFailures` reads at most. */
const FAILURES_READ_BYTES = 16 * 1024 * 1024

/** Runs a prompt through the fresh-spawn path (the CLI's one-shot mode). */
export type FallbackRunner = (request: { key: PoolKey; prompt: string; signal?: AbortSignal; cwd: string }) => Promise<string>

/** How an answer was produced. */
export type InvokePath = 'warm' | 'booted' | 'one-shot-pty' | 'fresh-spawn'

/** An answer; `source`, `bootMs` and `phases` as a pooled answer (`WarmAnswer`) has them. */
export interface InvokeResult extends Partial<Pick<WarmAnswer, 'source' | 'bootMs' | 'phases'>> {
  text: string
  path: InvokePath
  /** Set when the pool failed and the fresh-spawn path answered. */
  fallback?: { reason: FailureReason; detail: string; midTask: boolean; afterMs: number }
  /** Set when the kill switch or the route sent the invoke straight to the fresh-spawn path. */
  bypass?: 'kill-switch' | 'fresh-spawn-route'
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
  /** The owner agent (its id must be the key's `owner`); default: `PoolDeps.owners(key.owner)`. */
  owner?: PtyOwner
}

export interface PoolDeps {
  /** The warm side; default: in-process sessions, or a supervised worker for `worker: managed`. */
  backend?: SessionBackend
  /** Spawns the managed worker (required for `worker: managed`). */
  subprocess?: SubprocessServiceApi | undefined
  /**
   * The in-process terminal factory: `ptyTerminals` under `terminal: conch` (required: else
   * `CONFIG_INVALID`), `policyTerminals` under `unconfined` (else each spawn fails and falls back).
   */
  terminals?: TerminalFactory
  /** Finds an owner agent by id when an invoke names none (the plugin: `ctx.agents.get`). */
  owners?: (id: string) => PtyOwner | undefined
  /** Managed worker under `terminal: conch`: the owner's sandbox policy, sent with each invoke. */
  policyOf?: (owner: PtyOwner) => OwnerPolicy
  /**
   * Folders agents may write besides an owner's own workspace root (the plugin: the sandbox
   * policy's configured root and the sandbox's `readWritePaths`): a configured `stateDir` stays out
   * of them, and no CLI (nor the managed worker) is taken from a PATH folder inside one.
   */
  workspaces?: readonly string[]
  /** In-process under `terminal: conch`: the sandbox has fixed mounts (a container), so homes go in `agentHomes`. */
  agentHomes?: boolean
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
      return detail.detail.split('\n')[0]!.slice(0, 200) || 'the CLI could not be spawned'
    case 'no_sentinel':
      return 'no sentinel in the answer'
    case 'unhealthy':
      return 'the session was unhealthy'
  }
}

export type PoolState = 'running' | 'draining' | 'closed'

export class PtyPool {
  readonly metrics: PoolMetrics
  readonly backend: SessionBackend
  private readonly inFlight = new Set<Promise<unknown>>()
  private readonly warn: (message: string) => void
  /** The fallback causes already warned about (each is warned once). */
  private readonly warnedCauses = new Set<string>()
  private killSwitchOn: boolean
  private closing: Promise<void> | undefined
  state: PoolState = 'running'
  /** Where the private homes are made, checked and created at construction (state-dir.ts); hide it in every sandbox. */
  readonly stateDir: string
  /** The folder in `stateDir` of each owner agent's folder of homes (`PoolDeps.agentHomes`), else undefined. */
  readonly agentHomes: string | undefined

  constructor(readonly config: PoolConfig, private readonly deps: PoolDeps = {}) {
    this.metrics = deps.metrics ?? new PoolMetrics()
    this.warn = deps.warn ?? ((message) => process.emitWarning(message))
    this.killSwitchOn = config.killSwitch
    this.metrics.managedWorkerActive.set(0)
    const env = deps.env ?? process.env
    this.stateDir = config.stateDir === undefined
      ? openStateDir(defaultStateDir(env), { field: 'stateDir (the default, under $XDG_STATE_HOME or ~/.local/state)' })
      : openStateDir(config.stateDir, { field: 'stateDir', workspaces: deps.workspaces ?? [] })
    this.agentHomes = deps.agentHomes === true ? agentHomes(this.stateDir) : undefined
    if (this.agentHomes !== undefined) makeHomeDir(this.stateDir, this.agentHomes)
    if (deps.backend) this.backend = deps.backend
    else if (config.worker === 'managed') {
      if (!deps.subprocess) throw new PoolError('CONFIG_INVALID', { field: 'pool config: worker', problem: '"managed" needs ctx.subprocess to spawn the worker (mount @conch/subprocess)' })
      if (config.terminal === 'conch' && !deps.policyOf) {
        throw new PoolError('CONFIG_INVALID', {
          field: 'pool config: terminal',
          problem: '"conch" (the default) runs each CLI under its owner\'s sandbox policy, which the managed worker gets from ctx.sandboxPolicy: mount @conch/sandbox-policy (and @conch/sandbox with @conch/sandbox-local), or set terminal: "unconfined" to run the CLIs with no sandbox',
        })
      }
      this.backend = new WorkerSupervisor({ ...config, stateDir: this.stateDir }, { subprocess: deps.subprocess, env, metrics: this.metrics, warn: this.warn, terminal: config.workerTerminals, ...(deps.workspaces && { workspaces: deps.workspaces }) })
    } else {
      const metrics = this.metrics
      let terminals = deps.terminals
      if (!terminals) {
        if (config.terminal === 'conch') {
          throw new PoolError('CONFIG_INVALID', {
            field: 'pool config: terminal',
            problem: '"conch" (the default) opens each CLI as a ctx.pty terminal of its owner: mount @conch/pty with @conch/pty-local (and the sandbox) before the pool, or set terminal: "unconfined" to run the CLIs with no sandbox',
          })
        }
        terminals = () => Promise.reject(new Error('terminal: "unconfined" opens each CLI as a ctx.pty terminal under danger-full-access: mount @conch/session, @conch/sandbox-policy and @conch/pty with @conch/pty-local before the pool'))
      }
      this.backend = new WarmSessions(config, {
        terminals,
        env,
        warn: this.warn,
        stateDir: this.stateDir,
        ...(this.agentHomes !== undefined && { agentHomes: this.agentHomes }),
        ...(deps.workspaces && { workspaces: deps.workspaces }),
        count: (name) => metrics[name].inc(),
      })
    }
  }

  /** The runtime toggle of the kill switch: on sends every invoke to the fresh-spawn path at once. */
  setKillSwitch(on: boolean): void {
    this.killSwitchOn = on
  }

  killSwitch(): boolean {
    return this.killSwitchOn
  }

  /** Sessions by state, for status displays (in managed mode: as the worker last reported them). */
  sessionStates(): SessionInfo[] {
    return this.backend.sessionStates()
  }

  /** The pids of every live session's CLI (for tests and teardown checks). */
  pids(): number[] {
    return this.backend.sessionStates().flatMap((session) => (session.pid === undefined ? [] : [session.pid]))
  }

  /**
   * Routes an agent's invoke by its per-agent setting: `fresh-spawn` (default, also for a
   * missing or malformed setting) → the fallback runner; `pty-pool` → an API-key account takes
   * a one-shot PTY invoke, any other the warm REPL.
   * @throws PoolError as `acquireAndInvoke`.
   */
  invokeForAgent(agent: string, conversation: string, prompt: string, options: InvokeOptions = {}): Promise<InvokeResult> {
    const route = routeFor(this.config, agent)
    if (route.runtime !== 'pty-pool') {
      const key: PoolKey = { owner: agent, conversation, kind: '', model: '', account: '', bare: false }
      return this.track(() => this.bypass(key, prompt, options, 'fresh-spawn-route'))
    }
    const key: PoolKey = { owner: agent, conversation, kind: route.kind, model: route.model, account: route.account, bare: route.bare }
    const oneShot = Boolean(route.account && this.config.accounts[route.account]?.type === 'api-key' && this.config.kinds[route.kind]?.oneShotArgs)
    return this.track(() => this.invokeTracked(key, prompt, options, oneShot))
  }

  /**
   * Takes (or boots) the key's warm session and runs one sentinel round trip; on any pooled
   * failure runs the fallback and logs a failure line.
   * @throws PoolError `POOL_CLOSED` while draining, `INVOKE_CANCELLED` when the caller
   *   cancelled, `INVOKE_FAILED` when the fallback failed too.
   */
  acquireAndInvoke(key: PoolKey, prompt: string, options: InvokeOptions = {}): Promise<InvokeResult> {
    return this.track(() => this.invokeTracked(key, prompt, options, false))
  }

  /** Admits an invoke while running and tracks it until it settles (shutdown drains these). */
  private track(body: () => Promise<InvokeResult>): Promise<InvokeResult> {
    if (this.state !== 'running') return Promise.reject(new PoolError('POOL_CLOSED', {}))
    const work = body()
    this.inFlight.add(work)
    void work.finally(() => this.inFlight.delete(work)).catch(() => {})
    return work
  }

  private async invokeTracked(key: PoolKey, prompt: string, options: InvokeOptions, oneShot: boolean): Promise<InvokeResult> {
    if (this.killSwitchOn) return this.bypass(key, prompt, options, 'kill-switch')
    const started = Date.now()
    const cwd = this.cwdOf(key, options)
    if (!this.config.kinds[key.kind]) throw new PoolError('INVOKE_FAILED', { kind: key.kind, problem: 'unknown_kind', known: Object.keys(this.config.kinds) })
    if (options.owner && options.owner.id !== key.owner) throw new PoolError('INVOKE_FAILED', { kind: key.kind, problem: 'foreign_owner', owner: options.owner.id, keyOwner: key.owner })
    const end = this.metrics.invokeDuration.startTimer()
    try {
      const attempt = { ...(options.signal && { signal: options.signal }), capMs: Math.min(this.config.hardCapMs, options.deadlineMs ?? Number.POSITIVE_INFINITY), stallMs: this.config.stallMs, cwd }
      let answer: WarmAnswer
      try {
        const owner = this.terminalOwner(key, options, cwd)
        if (owner) Object.assign(attempt, { owner })
        answer = oneShot ? await this.backend.oneShot(key, prompt, attempt) : await this.backend.invoke(key, prompt, attempt)
      } catch (error) {
        if (!(error instanceof InvokeFailure)) throw error
        if (error.reason === 'cancelled') throw new PoolError('INVOKE_CANCELLED', { kind: key.kind })
        return await this.fallBack(key, prompt, options, cwd, error, started, error.bootMs)
      }
      if (answer.text === '') this.metrics.invokesEmpty.inc()
      else this.metrics.invokesOk.inc()
      return { text: answer.text, path: answer.path, ...(answer.path !== 'one-shot-pty' && { source: answer.source }), durationMs: Date.now() - started, ...(answer.bootMs !== undefined && { bootMs: answer.bootMs }), ...(answer.phases && { phases: answer.phases }) }
    } finally {
      end()
    }
  }

  /**
   * The owner the key's CLI runs for: in-process the agent object, in a managed worker its resolved
   * policy; under `unconfined` `danger-full-access` in `cwd`.
   * @throws InvokeFailure `spawn` when a managed worker needs the policy of an owner not found.
   */
  private terminalOwner(key: PoolKey, options: InvokeOptions, cwd: string): TerminalOwner | undefined {
    if (this.config.terminal === 'unconfined') return { id: key.owner, policy: unconfinedPolicy(cwd) }
    const found = options.owner ?? this.deps.owners?.(key.owner)
    // Only the key's own owner: a lookup that answers with another agent is not used.
    const agent = found?.id === key.owner ? found : undefined
    if (this.config.worker !== 'managed' || this.deps.backend) return { id: key.owner, ...(agent && { agent }) }
    if (!agent || !this.deps.policyOf) throw new InvokeFailure('spawn', `no owner agent ${key.owner} to resolve the sandbox policy of its CLI from`, false)
    // Exactly the fields the worker takes (its check is strict).
    const { mode, workspaceRoot, protectedPaths, hiddenPaths } = this.deps.policyOf(agent)
    // The homes stay hidden in the worker's sandboxes too, whatever the main process's sandbox says.
    const hidden = [...new Set([...(hiddenPaths ?? []), this.stateDir])]
    return { id: key.owner, policy: { mode, workspaceRoot, protectedPaths: [...protectedPaths], hiddenPaths: hidden } }
  }

  /** One eviction tick: unhealthy sessions and sessions idle longer than `idleEvictMs` go. */
  evictTick(): Promise<void> {
    return this.backend.evictTick()
  }

  /** Restarts the eviction tick with another period (tests use a short one). */
  setEvictEvery(ms: number): void {
    this.backend.setEvictEvery(ms)
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
      throw new PoolError('INVOKE_FAILED', { kind: key.kind, problem: 'fallback_failed', reason, failure: failure.message, fallback: (error as Error).message }, { cause: error })
    }
    this.appendFailure(line(true))
    const result: InvokeResult = { text, path: 'fresh-spawn', fallback: { reason, detail: failure.message, midTask: failure.midTask, afterMs: failure.elapsedMs || poolMs }, durationMs: Date.now() - started }
    // Once per reason (per cause, for a CLI that could not start): the log has every one.
    const cause = reason === 'spawn' ? `spawn: ${failure.message}` : reason
    if (!this.warnedCauses.has(cause)) {
      this.warnedCauses.add(cause)
      this.warn(`${poolNote(result)}; every fallback is logged in ${this.failuresFile()}`)
    }
    return result
  }

  /** The invoke straight through the fresh-spawn path. */
  private async bypass(key: PoolKey, prompt: string, options: InvokeOptions, why: NonNullable<InvokeResult['bypass']>): Promise<InvokeResult> {
    const started = Date.now()
    const text = await this.runFallback(key, prompt, options, this.cwdOf(key, options))
    return { text, path: 'fresh-spawn', bypass: why, durationMs: Date.now() - started }
  }

  private runFallback(key: PoolKey, prompt: string, options: InvokeOptions, cwd: string): Promise<string> {
    const fallback = options.fallback ?? this.deps.fallback
    if (!fallback) return Promise.reject(new PoolError('INVOKE_FAILED', { kind: key.kind, problem: 'no_fallback' }))
    return fallback({ key, prompt, cwd, ...(options.signal && { signal: options.signal }) })
  }

  private appendFailure(line: FailureLine): void {
    const file = this.failuresFile()
    try {
      // No sandbox shows the state folder; no link is followed all the same.
      appendNoFollow(file, `${JSON.stringify(line)}\n`)
    } catch (error) {
      this.warn(`pool: could not append to ${file}: ${(error as Error).message}`)
    }
  }

  /** The failure log: `pool-failures.jsonl` in the state folder (never in a checkout or a workspace). */
  failuresFile(): string {
    return join(this.stateDir, 'pool-failures.jsonl')
  }

  /** The failure lines written so far (for status and tests), from the log's first `FAILURES_READ_BYTES`. */
  readFailures(): FailureLine[] {
    try {
      const text = readNoFollow(this.failuresFile(), FAILURES_READ_BYTES)?.toString('utf8') ?? ''
      return text.split('\n').filter(Boolean).flatMap((line) => {
        try {
          return [JSON.parse(line) as FailureLine]
        } catch {
          return [] // a line cut at the read bound
        }
      })
    } catch {
      return []
    }
  }

  /** The CLI's working directory: the invoke's `cwd`, its owner agent's workspace root, the pool's `cwd`, the server's. */
  private cwdOf(key: PoolKey, options: InvokeOptions): string {
    if (options.cwd !== undefined) return options.cwd
    const owner = options.owner ?? this.deps.owners?.(key.owner)
    const workspace = owner?.id === key.owner ? owner.session.start.workspaceRoot : undefined
    return workspace !== undefined && isAbsolute(workspace) ? workspace : (this.config.cwd ?? process.cwd())
  }

  /** Graceful shutdown: stop admitting invokes, let in-flight ones finish within `drainMs`, close the warm side. Idempotent. */
  shutdown(drainMs = this.config.drainMs): Promise<void> {
    this.closing ??= this.drainAndClose(drainMs)
    return this.closing
  }

  private async drainAndClose(drainMs: number): Promise<void> {
    this.state = 'draining'
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((resolve) => (timer = setTimeout(resolve, drainMs)))])
    clearTimeout(timer)
    await this.backend.close()
    this.state = 'closed'
  }
}
