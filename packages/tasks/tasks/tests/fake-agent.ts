/**
 * A minimal stand-in for an `@conch/agent` Agent: an owner identity with the `onDispose`
 * semantics of the contract (cleanups run in reverse order and are awaited; registering on an
 * agent that is not live throws). The tasks service only uses `id`, `state` and `onDispose`.
 */
import type { Agent, AgentState } from '@conch/agent'

export interface FakeAgent extends Agent {
  dispose(): Promise<void>
}

export function fakeAgent(id: string): FakeAgent {
  let state: AgentState = 'live'
  const controller = new AbortController()
  const cleanups = new Set<() => void | Promise<void>>()
  return {
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
