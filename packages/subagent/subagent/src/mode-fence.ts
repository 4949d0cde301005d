/**
 * The parent's sandbox mode for a child agent, and the fence that keeps it: a child keeps its
 * mode for life, so `ctx.sandboxPolicy` refuses a session's mode change while it has runs.
 */
import type { Context } from 'cordis'
import type { ProviderRequest } from './types.ts'

/** The part of `ctx.sandboxPolicy` (@conch/sandbox-policy) the fence uses, structurally. */
interface SandboxPolicyLike<Mode extends string> {
  resolve(options: { session: unknown }): { mode: Mode }
  fence?(fence: { name: string; busy(sessionId: string): string | undefined }): () => void
}

export interface ModeFence<Mode extends string> {
  /** The parent session's mode, or `undefined` when no sandbox policy is loaded. */
  parentMode(request: ProviderRequest): Mode | undefined
  /** Records a run of the parent session as running (`true`) or ended (`false`). */
  track(request: ProviderRequest, running: boolean): void
}

/**
 * Registers the fence named `<name> sub-agents` with `ctx.sandboxPolicy` whenever it is loaded,
 * tied to `ctx`'s lifetime, and returns what a provider calls per run.
 */
export function modeFence<Mode extends string>(ctx: Context, name: string): ModeFence<Mode> {
  /** Run ids per parent session. */
  const live = new Map<string, Set<string>>()
  ctx.inject(['sandboxPolicy'], (scope) => {
    const service = scope.get('sandboxPolicy') as unknown as SandboxPolicyLike<Mode>
    service.fence?.({
      name: `${name} sub-agents`,
      busy: (sessionId) => {
        const runs = live.get(sessionId)
        return runs && runs.size > 0 ? `${name} sub-agent runs ${[...runs].join(', ')} are running` : undefined
      },
    })
  })
  return {
    parentMode: (request) => (ctx.get('sandboxPolicy') as unknown as SandboxPolicyLike<Mode> | undefined)?.resolve({ session: request.parent.session }).mode,
    track(request, running) {
      const sessionId = request.parent.session.id
      const runs = live.get(sessionId) ?? new Set<string>()
      if (running) runs.add(request.runId)
      else runs.delete(request.runId)
      if (runs.size === 0) live.delete(sessionId)
      else live.set(sessionId, runs)
    },
  }
}
