/**
 * The Agent object: the owner identity every seam compares, with its lifecycle state, its
 * abort signal and its ordered cleanups. Only `AgentService` changes its state.
 */
import { setMaxListeners } from 'node:events'
import type { Context } from 'cordis'
import type { SessionLog } from '@conch/session'
import { AgentError, type Agent, type AgentState, type RunResult } from './types.ts'

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
}
