/**
 * `ctx.sandboxPolicy`: each session's sandbox mode, event-sourced from its log. The latest
 * `sandbox/mode` event wins, else the configured default, so a replayed session keeps its
 * policy. A change of the effective mode is vetoed — by an interceptor on `ctx.sessions`, before
 * the event is stored — while any registered fence (the terminal backend) reports the session busy.
 */
import { realpathSync } from 'node:fs'
import { resolve as resolvePath } from 'node:path'
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import type { AgentServiceApi } from '@conch/agent'
import type { SandboxMode, SandboxServiceApi } from '@conch/sandbox'
import { messageOf, type PendingEvent, type SessionLog } from '@conch/session'
import {
  SandboxPolicyError,
  type ModeFence,
  type ResolvedPolicy,
  type SandboxModeEventData,
  type SandboxPolicyServiceApi,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    sandboxPolicy: SandboxPolicyService
  }
}

/** The session event type that records a mode change. */
export const SANDBOX_MODE_EVENT = 'sandbox/mode'

const MODES = ['read-only', 'workspace-write', 'danger-full-access'] as const satisfies readonly SandboxMode[]

const isMode = (value: unknown): value is SandboxMode => (MODES as readonly unknown[]).includes(value)

/** An absolute, canonical path (realpath(3)); undefined when it does not exist. */
function canonical(path: string): string | undefined {
  try {
    return realpathSync(resolvePath(path))
  } catch {
    return undefined
  }
}

class SandboxPolicyService extends Service implements SandboxPolicyServiceApi {
  static inject = ['sessions']

  static Config = z
    .strictObject({
      mode: z
        .enum(MODES)
        .default('read-only')
        .describe('The mode of a session that has no sandbox/mode event: read-only, workspace-write or danger-full-access.'),
      workspaceRoot: z
        .string()
        .min(1)
        .default(() => process.cwd())
        .transform((path, ctx) => {
          const real = canonical(path)
          if (real === undefined) {
            ctx.issues.push({ code: 'custom', message: `${resolvePath(path)} does not exist`, input: path })
            return z.NEVER
          }
          return real
        })
        .describe('The workspace of sessions whose session/start names none; made absolute and canonical. Default: the working directory.'),
    })
    .prefault({})

  private readonly fences: ModeFence[] = []

  constructor(ctx: Context, public config: SandboxPolicyService.Config) {
    super(ctx, 'sandboxPolicy')
    ctx.sessions.intercept((event, log) => this.vet(event, log))
    ctx.inject(['agents'], (scope) => {
      const agents = scope.get('agents') as AgentServiceApi
      agents.section({
        id: 'sandbox',
        render: (agent) => describePolicy(this.resolve({ session: agent.session }), (ctx.get('sandbox') as SandboxServiceApi | undefined)?.networkAllowed?.()),
      })
    })
  }

  /**
   * The session's policy: the mode of its latest `sandbox/mode` event, else the configured
   * `mode`; the workspace root from its `session/start` (made canonical when it exists), else
   * the configured `workspaceRoot`.
   */
  resolve(options: { session: SessionLog }): ResolvedPolicy {
    const { session } = options
    const latest = session.last<Partial<SandboxModeEventData>>(SANDBOX_MODE_EVENT)?.data?.mode
    const started = session.start.workspaceRoot
    return {
      mode: isMode(latest) ? latest : this.config.mode,
      workspaceRoot: started === undefined ? this.config.workspaceRoot : (canonical(started) ?? resolvePath(started)),
      sessionId: session.id,
    }
  }

  /**
   * Appends `{mode}` as a `sandbox/mode` event to `session`.
   * @throws SandboxPolicyError `INVALID_MODE` for an unknown mode; `MODE_CHANGE_REFUSED` (from
   *   the interceptor, nothing appended) while a fence is busy and the effective mode would change.
   */
  setMode(session: SessionLog, mode: SandboxMode): void {
    if (!isMode(mode)) throw invalidMode(mode, session.id)
    session.append<SandboxModeEventData>(SANDBOX_MODE_EVENT, { mode })
  }

  fence(fence: ModeFence): () => void {
    return this.ctx.effect(() => {
      this.fences.push(fence)
      return () => {
        const index = this.fences.indexOf(fence)
        if (index >= 0) this.fences.splice(index, 1)
      }
    }, `sandboxPolicy.fence(${fence.name})`)
  }

  /** The interceptor: validates every `sandbox/mode` event and vetoes a busy change. */
  private vet(event: PendingEvent, log: SessionLog): void {
    if (event.type !== SANDBOX_MODE_EVENT) return
    const mode = (event.data as Partial<SandboxModeEventData> | undefined)?.mode
    if (!isMode(mode)) throw invalidMode(mode, log.id)
    const current = this.resolve({ session: log }).mode
    if (mode === current) return
    const reasons: string[] = []
    for (const fence of this.fences) {
      let reason: string | undefined
      try {
        reason = fence.busy(log.id)
      } catch (error) {
        // A fence that cannot answer refuses: a wider terminal must never outlive a downgrade.
        reason = `${fence.name} could not be checked (${messageOf(error)})`
      }
      if (reason) reasons.push(reason)
    }
    if (reasons.length > 0) {
      throw new SandboxPolicyError('MODE_CHANGE_REFUSED', { from: current, to: mode, busy: reasons })
    }
  }
}

function invalidMode(mode: unknown, sessionId: string): SandboxPolicyError {
  return new SandboxPolicyError('INVALID_MODE', { mode, sessionId, modes: MODES })
}

/**
 * The one-line system-prompt section for a policy, e.g.
 * `Sandbox: workspace-write — files under /work/x are writable; everything else is read-only (except /tmp); network allowed.`
 * The network clause is left out when `network` is undefined (no provider says).
 */
export function describePolicy(policy: ResolvedPolicy, network: boolean | undefined): string {
  const net = network === undefined ? [] : [network ? 'network allowed' : 'no network access (each terminal and program has a loopback of its own)']
  let clauses: string[]
  switch (policy.mode) {
    case 'read-only':
      clauses = ['files can be read but not written (except in /tmp, which each terminal and program has to itself)', ...net]
      break
    case 'workspace-write':
      clauses = [`files under ${policy.workspaceRoot} are writable and shared by your terminals and programs`, 'everything else is read-only (except /tmp, which each terminal and program has to itself)', ...net]
      break
    case 'danger-full-access':
      clauses = ['no sandbox: every file you can write is writable and the network is open', `stay inside ${policy.workspaceRoot}`]
      break
    default: {
      const never: never = policy.mode
      throw new Error(`unhandled sandbox mode ${String(never)}`)
    }
  }
  return `Sandbox: ${policy.mode} — ${clauses.join('; ')}.`
}

namespace SandboxPolicyService {
  export type Config = z.output<typeof SandboxPolicyService.Config>
}

export default SandboxPolicyService
