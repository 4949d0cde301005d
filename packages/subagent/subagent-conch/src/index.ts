/**
 * `@conch/subagent-conch`: a second conch (`conch acp`, its own composition) as a sub-agent.
 * Depth is enforced: a conch reads its depth from `CONCH_SUBAGENT_DEPTH` and the chain's limit
 * from `CONCH_SUBAGENT_MAX_DEPTH` (both set by the parent on the spawn) and refuses to start
 * another at the limit (`DEPTH_EXCEEDED`).
 */
import { existsSync } from 'node:fs'
import { basename, resolve } from 'node:path'
import type { Context } from 'cordis'
import { z } from 'zod'
import {
  SubagentError,
  childCwd,
  childEnv,
  outOfProcessConfig,
  parentWritable,
  acpChildConfig,
  providerName,
  type SubagentCapabilities,
  type ProviderRequest,
  type SubagentProvider,
  type SubagentServiceApi,
} from '@conch/subagent'
import type { SubprocessServiceApi } from '@conch/subprocess'

export const name = 'subagent-conch'
export const inject = ['subagents', 'subprocess']

/** This process's delegation depth, set by the parent's provider on the spawn. */
export const DEPTH_VARIABLE = 'CONCH_SUBAGENT_DEPTH'
/** The deepest depth any conch of this chain may have, set by the parent's provider. */
export const MAX_DEPTH_VARIABLE = 'CONCH_SUBAGENT_MAX_DEPTH'
/** The composition the running conch booted (set by the `conch` command). */
export const CONFIG_VARIABLE = 'CONCH_CONFIG'

/** The conch provider enforces the depth limit and nothing else. */
export const CAPABILITIES: SubagentCapabilities = Object.freeze({
  outputSchema: false,
  depthLimit: true,
  toolFilter: false,
  persona: false,
})

export const Config = z.strictObject({
  name: providerName('conch'),
  command: z
    .array(z.string().min(1))
    .min(1)
    .optional()
    .describe('How to start conch (argv before `acp`); unset: this conch the same way it was started, else `conch` on PATH.'),
  config: z
    .string()
    .min(1)
    .optional()
    .describe("The child's cordis.yml (relative: to the working directory); unset: the composition this conch booted."),
  script: z
    .string()
    .optional()
    .transform((value) => (value === '' ? undefined : value))
    .describe(
      'A scripted model for the child (`conch acp --script`; relative: to the working directory). Empty: none, so a yml can write ${VARIABLE:-}.',
    ),
  maxDepth: z
    .number()
    .int()
    .min(1)
    .default(3)
    .describe('Deepest delegation chain below the first conch (1: its children may not delegate further).'),
  permission: z
    .enum(['reject', 'allow'])
    .default('reject')
    .describe("How the child's session/request_permission is answered."),
  ...outOfProcessConfig,
  ...acpChildConfig,
}).prefault({})

export type Config = z.output<typeof Config>

/** Where this process sits in a delegation chain (read once, at load). */
export interface DepthInfo {
  depth: number
  /** The limit inherited from the parent, if this conch was spawned as a sub-agent. */
  inheritedMax?: number
}

/** Reads `CONCH_SUBAGENT_DEPTH` / `CONCH_SUBAGENT_MAX_DEPTH`; anything but a non-negative integer counts as unset. */
export function depthFromEnv(env: Readonly<Record<string, string | undefined>>): DepthInfo {
  const read = (name: string): number | undefined => {
    const value = env[name]
    return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined
  }
  const depth = read(DEPTH_VARIABLE) ?? 0
  const inheritedMax = read(MAX_DEPTH_VARIABLE)
  return inheritedMax === undefined ? { depth } : { depth, inheritedMax }
}

/** The argv that starts this conch again: `node <bin>` when this process is the conch bin, else `conch`. */
export function defaultCommand(argv: readonly string[] = process.argv, execPath = process.execPath): [string, ...string[]] {
  const script = argv[1]
  if (script !== undefined && /^conch(\.[cm]?js)?$/.test(basename(script))) return [execPath, script]
  return ['conch']
}

/** `writable`: the folders the run's parent may write (`parentWritable`), where a bare `command[0]` is never found. */
export function conchProvider(subprocess: SubprocessServiceApi, config: Config, where: DepthInfo, writable: (request: ProviderRequest) => readonly string[] = () => []): SubagentProvider {
  const command = (config.command as [string, ...string[]] | undefined) ?? defaultCommand()
  const composition = resolve(config.config ?? process.env[CONFIG_VARIABLE] ?? 'cordis.yml')
  const script = config.script === undefined ? undefined : resolve(config.script)
  // The chain's limit never grows on the way down: the smallest of every level's.
  const chainMax = Math.min(config.maxDepth, where.inheritedMax ?? Number.POSITIVE_INFINITY)
  return {
    name: config.name,
    capabilities: CAPABILITIES,
    async start(request) {
      const childDepth = where.depth + 1
      if (childDepth > chainMax) {
        throw new SubagentError('DEPTH_EXCEEDED', { provider: config.name, depth: where.depth, max: chainMax })
      }
      // request.maxDepth: how many levels the child may still start below itself.
      const max = Math.min(chainMax, request.maxDepth === undefined ? Number.POSITIVE_INFINITY : childDepth + request.maxDepth)
      if (!existsSync(composition)) {
        throw new SubagentError('START_FAILED', { reason: `cannot start the "${config.name}" sub-agent: its composition ${composition} does not exist; set config` })
      }
      if (script !== undefined && !existsSync(script)) {
        throw new SubagentError('START_FAILED', { reason: `cannot start the "${config.name}" sub-agent: its script ${script} does not exist` })
      }
      const argv: [string, ...string[]] = [...command, 'acp', '--config', composition, ...(script === undefined ? [] : ['--script', script])]
      // The ACP SDK is loaded on the first run, not when conch starts.
      const { startAcpChild } = await import('@conch/subagent/acp')
      return startAcpChild({
        subprocess,
        provider: config.name,
        argv,
        cwd: childCwd(config.cwd, request.parent, config.name),
        env: childEnv(config.env, { [DEPTH_VARIABLE]: String(childDepth), [MAX_DEPTH_VARIABLE]: String(max) }),
        agentWritable: writable(request),
        permission: config.permission,
        timing: config,
        request,
        clientName: 'conch',
      })
    },
  }
}

export const apply = (ctx: Context, config: Config) => {
  const subagents: SubagentServiceApi = ctx.subagents
  subagents.registerProvider(conchProvider(ctx.subprocess, config, depthFromEnv(process.env), (request) => parentWritable(ctx, request.parent)))
}
