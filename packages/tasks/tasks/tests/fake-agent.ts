/**
 * A minimal stand-in for an `@conch/agent` Agent: an owner identity with the `onDispose`
 * semantics of the contract (cleanups run in reverse order and are awaited; registering on an
 * agent that is not live throws). The tasks service uses `id`, `state`, `onDispose`, `notify` and `holdWake`; the last two are recorded.
 */
import type { Agent, AgentState, Notification } from '@conch/agent'

export interface FakeAgent extends Agent {
  dispose(): Promise<void>
  /** What `notify` received, oldest first. */
  readonly notifications: Notification[]
  /** Open `holdWake` holds. */
  readonly holds: number
}

export function fakeAgent(id: string): FakeAgent {
  let state: AgentState = 'live'
  const controller = new AbortController()
  const cleanups = new Set<() => void | Promise<void>>()
  const notifications: Notification[] = []
  let holds = 0
  return {
    notifications,
    get holds() {
      return holds
    },
    notify(notification) {
      if (state === 'live') notifications.push(notification)
    },
    holdWake() {
      holds++
      let held = true
      return () => {
        if (held) holds--
        held = false
      }
    },
    id,
    session: undefined as never,
    ctx: undefined as never,
    get state() {
      return state
    },
    signal: controller.signal,
    onDispose(cleanup) {
      if (state !== 'live') throw new Error(`agent ${id} is ${state}`)
      cleanups.add(cleanup)
      return () => void cleanups.delete(cleanup)
    },
    async dispose() {
      if (state !== 'live') return
      state = 'disposing'
      controller.abort(new Error(`agent ${id} disposed`))
      for (const cleanup of [...cleanups].reverse()) await cleanup()
      cleanups.clear()
      state = 'disposed'
    },
  }
}
