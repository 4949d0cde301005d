/**
 * The Agent object: the owner identity every seam compares, with its lifecycle state, its
 * abort signal and its ordered cleanups. Only `AgentService` changes its state.
 */
import { setMaxListeners } from 'node:events'
import type { Context } from 'cordis'
import type { SessionLog } from '@conch/session'
import { AgentError, type Agent, type AgentState, type Notification, type RunResult } from './types.ts'

interface Cleanup {
  run: () => void | Promise<void>
}

export class AgentHandle implements Agent {
  state: AgentState = 'live'
  /** Set once the agent's scope has loaded, before `create()` resolves. */
  ctx!: Context
  /** The loaded scope plugin (a Cordis fiber); only its `dispose` is used. */
  scope: { dispose(): Promise<void> } | undefined
  /** The running turn, if any (one at a time). */
  turn: Promise<RunResult> | undefined
  /** The disposal in progress or done; every `dispose()` call returns it. */
  disposal: Promise<void> | undefined
  readonly controller = new AbortController()
  readonly cleanups: Cleanup[] = []
  /** Notifications not yet delivered, oldest first. */
  readonly inbox: Notification[] = []
  /** Open `holdWake` holds. */
  holds = 0
  /** Called when the inbox or the holds change (the wake wait listens). */
  private readonly watchers = new Set<() => void>()

  /** @param ownsSession whether the agent created its session (and closes it when disposed) */
  constructor(
    readonly id: string,
    readonly session: SessionLog,
    readonly ownsSession: boolean,
  ) {
    // Everything the agent owns (spawns, sends, tasks, turns) listens to its signal, so dozens of
    // listeners are normal here, not a leak (events.setMaxListeners, Node's default warns at 10).
    setMaxListeners(0, this.controller.signal)
  }

  get signal(): AbortSignal {
    return this.controller.signal
  }

  onDispose(cleanup: () => void | Promise<void>): () => void {
    if (this.state !== 'live') {
      throw new AgentError('AGENT_NOT_LIVE', { agent: this.id, state: this.state, next: 'cleanups can only be registered on a live agent' })
    }
    const entry: Cleanup = { run: cleanup }
    this.cleanups.push(entry)
    return () => {
      const index = this.cleanups.indexOf(entry)
      if (index >= 0) this.cleanups.splice(index, 1)
    }
  }

  notify(notification: Notification): void {
    if (this.state !== 'live') return
    this.inbox.push(notification)
    this.changed()
  }

  /** Takes the notifications still to deliver, oldest first, without the withdrawn ones, and tells each producer it was delivered. */
  deliver(): Notification[] {
    const delivered = this.inbox.splice(0).filter((notification) => notification.withdrawn?.() !== true)
    for (const notification of delivered) notification.delivered?.()
    return delivered
  }

  holdWake(): () => void {
    this.holds++
    let held = true
    return () => {
      if (!held) return
      held = false
      this.holds--
      this.changed()
    }
  }

  /**
   * Waits until a waking notification is queued (true), or until nothing holds the run open,
   * `ms` pass or `signal` aborts (false). `onWait` hears, before a wait starts, how many holds
   * keep the run open.
   */
  async wake(ms: number, signal: AbortSignal, onWait?: (holds: number) => void): Promise<boolean> {
    const ready = () => this.inbox.some((notification) => notification.wake && notification.withdrawn?.() !== true)
    if (ready()) return true
    if (this.holds === 0 || signal.aborted) return false
    onWait?.(this.holds)
    if (signal.aborted) return false
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        signal.removeEventListener('abort', done)
        this.watchers.delete(check)
        resolve()
      }
      const check = () => {
        if (ready() || this.holds === 0) done()
      }
      const timer = setTimeout(done, ms)
      signal.addEventListener('abort', done, { once: true })
      this.watchers.add(check)
    })
    return ready() && !signal.aborted
  }

  private changed(): void {
    for (const watcher of [...this.watchers]) watcher()
  }
}
