/**
 * `@conch/ptc-node`: the runtime of `ctx.ptc` — every program in a fresh `node` process, confined
 * under the owner's policy, with a length-prefixed JSON control channel on fd 3.
 */
import type { Context } from 'cordis'
import type { PtcServiceApi } from '@conch/ptc'
import type { SandboxServiceApi } from '@conch/sandbox'
import type { SubprocessServiceApi } from '@conch/subprocess'
import { Config } from './config.ts'
import { NodeRuntime } from './runtime.ts'

export { Config } from './config.ts'
export { NodeRuntime, strip } from './runtime.ts'
export { nodeArgv, programEnv, KEPT_VARIABLES, DEFAULT_BOOTSTRAP } from './launch.ts'
export { FrameDecoder, FrameWriter, encodeFrame, parseChildMessage, ChannelError } from './channel.ts'

export const name = 'ptc-node'
export const inject = ['ptc', 'subprocess']

export const apply = (ctx: Context, config: Config) => {
  const ptc: PtcServiceApi = ctx.ptc
  const subprocess: SubprocessServiceApi = ctx.subprocess
  const runtime = new NodeRuntime({ subprocess, sandbox: () => ctx.get('sandbox') as SandboxServiceApi | undefined }, config)
  ctx.effect(() => () => runtime.dispose(), 'ptc-node.spares')
  ptc.register(runtime)
}
