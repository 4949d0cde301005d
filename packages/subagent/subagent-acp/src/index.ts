/**
 * `@conch/subagent-acp`: a sub-agent provider for any agent that speaks the Agent Client Protocol
 * over stdio (`startAcpChild` of `@conch/subagent/acp`), answering its permission requests by policy.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import { NO_CAPABILITIES, childCwd, childEnv, outOfProcessConfig, acpChildConfig, parentWritable, providerName, type ProviderRequest, type SubagentProvider, type SubagentServiceApi } from '@conch/subagent'
import type { SubprocessServiceApi } from '@conch/subprocess'

export const name = 'subagent-acp'
export const inject = ['subagents', 'subprocess']

export const Config = z
  .strictObject({
    name: providerName('acp', 'Provider name the tool rows refer to (one row per ACP agent).'),
    command: z.string().min(1).describe('The ACP agent program: a name looked up on PATH, or a path.'),
    args: z.array(z.string()).default([]).describe('Arguments after the command.'),
    permission: z
      .enum(['reject', 'allow'])
      .default('reject')
      .describe("How the child's session/request_permission is answered: reject (a reject option, else cancelled) or allow."),
    ...outOfProcessConfig,
    ...acpChildConfig,
  })
  // A row without `config:` parses as {}, so the error names the required field.
  .prefault({} as never)

export type Config = z.output<typeof Config>

/**
 * The provider, for tests and compositions that register it by hand. `writable`: the folders the
 * run's parent may write (`parentWritable`), where a bare `command` is never found.
 */
export function acpProvider(subprocess: SubprocessServiceApi, config: Config, writable: (request: ProviderRequest) => readonly string[] = () => []): SubagentProvider {
  return {
    name: config.name,
    capabilities: NO_CAPABILITIES,
    async start(request) {
      const cwd = childCwd(config.cwd, request.parent, config.name)
      // The ACP SDK is loaded on the first run, not when conch starts.
      const { startAcpChild } = await import('@conch/subagent/acp')
      return startAcpChild({
        subprocess,
        provider: config.name,
        argv: [config.command, ...config.args],
        cwd,
        env: childEnv(config.env),
        agentWritable: writable(request),
        permission: config.permission,
        timing: config,
        request,
      })
    },
  }
}

export const apply = (ctx: Context, config: Config) => {
  const subagents: SubagentServiceApi = ctx.subagents
  subagents.registerProvider(acpProvider(ctx.subprocess, config, (request) => parentWritable(ctx, request.parent)))
}
