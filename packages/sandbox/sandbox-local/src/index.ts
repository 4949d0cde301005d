/**
 * @conch/sandbox-local — registers this machine's sandbox mechanisms with `ctx.sandbox`:
 * bubblewrap on Linux, sandbox-exec on macOS. Both are registered; `ctx.sandbox` picks the one
 * for the running platform whose probe succeeds.
 */
import type { Context } from 'cordis'
import { startEgressProxy } from '@conch/sandbox'
import { bubblewrapProvider, type HostPaths } from './bubblewrap.ts'
import { Config } from './config.ts'
import { sandboxExecProvider } from './sandbox-exec.ts'

export const name = 'sandbox-local'
export const inject = ['sandbox']
export { Config }

/** `egress`: the agents' egress proxy under network `allow`, and who is told of a refused host. */
export const apply = (ctx: Context, config: Config, egress: Parameters<typeof bubblewrapProvider>[5] & { host?: HostPaths } = { startEgressProxy }): void => {
  const refused = (agent: string, host: string) => ctx.sandbox.refused({ agent, host })
  const { host, ...rest } = egress
  const bubblewrap = bubblewrapProvider(config, undefined, host, undefined, undefined, { onRefused: refused, ...rest })
  ctx.sandbox.register(bubblewrap)
  ctx.effect(() => () => void bubblewrap.release(), 'sandbox-local.placeholders')
  ctx.effect(() => () => bubblewrap.close(), 'sandbox-local.agents')
  ctx.sandbox.register(sandboxExecProvider(config))
}

export {
  bubblewrapArgv,
  bubblewrapProvider,
  joinLauncher,
  nodeHostPaths,
  SECCOMP_FD,
  SECCOMP_LAUNCHER,
  type AgentPlace,
  type BubblewrapOptions,
  type HostFiles,
  type HostPaths,
  type Nsenter,
} from './bubblewrap.ts'
export { hostPatternProblem, isHostOwnAddress, proxyEnvironment, startEgressProxy, type EgressProxy, type EgressProxyOptions } from '@conch/sandbox'
export { folderLedger, mountPointsEverywhere, placeholders, type PlaceholderEntry, type PlaceholderLedger, type PlaceholderOptions, type Placeholders } from './deny-write.ts'
export { DEFAULT_DENY_READ, DEFAULT_DENY_WRITE, DEFAULT_HOME_READ_ONLY } from './config.ts'
export { KERNEL_MASKED_PATHS, KERNEL_READ_ONLY_PATHS } from './kernel-paths.ts'
export { RUNTIME_DIRS, RUNTIME_FILES_KEPT, SERVICE_SOCKETS_MASKED } from './service-paths.ts'
export { AgentSandboxes, agentsFolderPath, inNamespace, pinsFolderPath, type AgentSandboxOptions, type StartEgressProxy } from './agent-sandbox.ts'
export * from './seccomp.ts'
export { sandboxExecArgv, sandboxExecProvider, seatbeltProfile, SANDBOX_EXEC_GAPS, type SandboxExecOptions, type SeatbeltShape } from './sandbox-exec.ts'
