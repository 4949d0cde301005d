/**
 * How the program's process is started: the node argv, its environment, and confinement under
 * the owner's policy through `ctx.sandbox`.
 */
import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { PtcPolicy } from '@conch/ptc'
import { SandboxError, type ConfineResult, type SandboxAgent, type SandboxServiceApi } from '@conch/sandbox'
import type { Config } from './config.ts'

/** The bootstrap shipped with this package (plain CommonJS: no loader). */
export const DEFAULT_BOOTSTRAP = fileURLToPath(new URL('./bootstrap.cjs', import.meta.url))

/** Host variables the program's process keeps: the executable search path and temp paths. */
export const KEPT_VARIABLES = ['PATH', 'TMPDIR', 'TMP', 'TEMP'] as const

/**
 * The node argv: the heap cap (MiB), the vm loader's experimental warning silenced, and the
 * bootstrap. Nothing of the host's `execArgv` or `NODE_OPTIONS` is passed on.
 */
export function nodeArgv(config: Pick<Config, 'nodeExecutable' | 'bootstrapPath' | 'maxOldGenerationSizeMb'>): [string, ...string[]] {
  return [
    config.nodeExecutable,
    `--max-old-space-size=${config.maxOldGenerationSizeMb}`,
    '--disable-warning=ExperimentalWarning',
    config.bootstrapPath ?? DEFAULT_BOOTSTRAP,
  ]
}

/** The complete environment of the program's process: only `KEPT_VARIABLES` that the host has. */
export function programEnv(host: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {}
  for (const name of KEPT_VARIABLES) {
    const value = host[name]
    if (value !== undefined) env[name] = value
  }
  return env
}

/** `relayed`: the program runs behind a relay (a container's exec), outside the host tree of the process started. */
export type Confinement = Pick<ConfineResult, 'argv'> & { enforcement: 'full' | 'partial' | 'none'; provider?: string; relayed?: boolean }

/**
 * Wraps `argv` for `policy`: unchanged under `danger-full-access`, else through `ctx.sandbox`.
 * @throws SandboxError `SANDBOX_UNAVAILABLE` when no sandbox service or provider works; others as thrown.
 */
export async function confine(
  argv: [string, ...string[]],
  policy: PtcPolicy,
  cwd: string,
  sandbox: SandboxServiceApi | undefined,
  agent?: SandboxAgent,
): Promise<Confinement> {
  if (policy.mode === 'danger-full-access') return { argv, enforcement: 'none' }
  if (sandbox === undefined) {
    throw new SandboxError('SANDBOX_UNAVAILABLE', { reason: `cannot run a program under ${policy.mode}: no sandbox service (@conch/sandbox) is loaded` })
  }
  // The program's own files (node, the bootstrap) stay visible, read-only, wherever they
  // live: under /tmp they would otherwise be hidden by the sandbox's private /tmp.
  const own = argv.filter((arg) => isAbsolute(arg))
  const confined = await sandbox.confine(argv, { mode: policy.mode, workspaceRoot: policy.workspaceRoot, cwd, protectedPaths: own, ...(agent && { agent }) })
  return { argv: confined.argv, enforcement: confined.enforcement, provider: confined.provider, ...(confined.relayed !== undefined && { relayed: true }) }
}
