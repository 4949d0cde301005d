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
import { SANDBOX_MODES, type SandboxMode, type SandboxServiceApi } from '@conch/sandbox'
import { messageOf, registerListed, type PendingEvent, type SessionLog } from '@conch/session'
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

const isMode = (value: unknown): value is SandboxMode => (SANDBOX_MODES as readonly unknown[]).includes(value)

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
        .enum(SANDBOX_MODES)
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
      network: z
        .enum(['none', 'allow', 'full'])
        .default('none')
        .describe("Each agent's network: none (loopback only, shared by its processes), allow (HTTP and HTTPS to the hosts in allow, through conch's proxy), full (the host's network)."),
      allow: z
        .array(
          z
            .string()
            .regex(
              /^(\*\.)?([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]*[a-z0-9])?(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$/,
              'a host pattern is a lower-case host name (example.com) or *. and one (*.example.com, its subdomains only), with :port for a port other than 443 (HTTPS) and 80 (http://)',
            ),
        )
        .default([])
        .describe('Host patterns reachable under network: allow: example.com exactly, or *.example.com for its subdomains; port 443 through HTTPS and 80 for http://, or the one a pattern names (example.com:8443).'),
      expose: z
        .array(z.number().int().min(1).max(65535))
        .default([])
        .describe("Ports of each agent's loopback made reachable on a host 127.0.0.1 port that conch reports when a terminal opens; none by default."),
    })
    .refine((config) => config.network !== 'allow' || config.allow.length > 0, {
      message: 'network: allow needs at least one host pattern in allow (e.g. allow: [registry.npmjs.org])',
      path: ['allow'],
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
        render: (agent) => {
          const sandbox = ctx.get('sandbox') as SandboxServiceApi | undefined
          return describePolicy(this.resolve({ session: agent.session }), sandbox?.sharesLoopback?.() !== false, sandbox?.rootWritable?.() === true)
        },
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
    const mode = isMode(latest) ? latest : this.config.mode
    const { network, allow } = this.config
    return {
      mode,
      workspaceRoot: started === undefined ? this.config.workspaceRoot : (canonical(started) ?? resolvePath(started)),
      sessionId: session.id,
      network: mode === 'danger-full-access' || network === 'full' ? { mode: 'full' } : network === 'allow' ? { mode: 'allow', hosts: [...allow] } : { mode: 'none' },
      expose: [...this.config.expose],
    }
  }

  setMode(session: SessionLog, mode: SandboxMode): void {
    if (!isMode(mode)) throw invalidMode(mode, session.id)
    session.append<SandboxModeEventData>(SANDBOX_MODE_EVENT, { mode })
  }

  fence(fence: ModeFence): () => void {
    return registerListed(this.ctx, this.fences, fence, `sandboxPolicy.fence(${fence.name})`)
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
  return new SandboxPolicyError('INVALID_MODE', { mode, sessionId, modes: SANDBOX_MODES })
}

/**
 * The one-line system-prompt section for a policy (`loopbackShared`: an agent's processes share
 * one loopback; `rootWritable`: workspace-write may write a container's system files). It names
 * the workspace root in every mode, so a terminal opened there need not (tool-pty's
 * `[opened: …]`). E.g.
 * `Sandbox: workspace-write — files under /work/x are writable except the files that configure shells, git and editors (…); everything else is read-only except /tmp; your terminals and programs share one /tmp and one loopback (…); no network beyond that loopback.`
 */
export function describePolicy(policy: ResolvedPolicy, loopbackShared = true, rootWritable = false): string {
  const shared = loopbackShared
    ? 'your terminals and programs share one /tmp and one loopback (a server one starts on 127.0.0.1 is reachable from the others)'
    : 'your terminals and programs share one /tmp, but each has a loopback of its own (a server one starts on 127.0.0.1 is not reachable from the others)'
  let net: string
  switch (policy.network.mode) {
    case 'none':
      net = loopbackShared ? 'no network beyond that loopback' : 'no network beyond loopback'
      break
    case 'allow':
      net = `network only to ${policy.network.hosts.join(', ')} through a proxy (HTTP_PROXY and HTTPS_PROXY are set; HTTPS on 443 and http:// on 80 unless a host names its port); a refused host shows in the result as [network: blocked <host> — not in the allowlist]`
      break
    case 'full':
      net = 'network allowed'
      break
    default: {
      const never: never = policy.network
      throw new Error(`unhandled network ${JSON.stringify(never)}`)
    }
  }
  let clauses: string[]
  switch (policy.mode) {
    case 'read-only':
      clauses = [`files (the workspace, ${policy.workspaceRoot}, and the rest) can be read but not written (except in /tmp)`, shared, net]
      break
    case 'workspace-write':
      clauses = [
        `files under ${policy.workspaceRoot} are writable except the files that configure shells, git and editors (.bashrc, .git/hooks, .git/config, .vscode, .mcp.json and the like; an empty folder with such a name is a guard)`,
        rootWritable
          ? "the rest of the system's files are a container's own copy, writable too and gone when you end"
          : 'everything else is read-only except /tmp',
        shared,
        net,
      ]
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
