/**
 * @conch/sandbox-docker — registers a Docker provider with `ctx.sandbox`: each agent's sandbox is
 * one container, and each of its confined processes an exec with a TTY in it.
 */
import type { Context } from 'cordis'
import type {} from '@conch/sandbox'
import { Config } from './config.ts'
import { dockerProvider, type DockerProviderOptions } from './provider.ts'

export const name = 'sandbox-docker'
export const inject = ['sandbox']
export { Config }

/** `egress`: the agents' egress proxy under network `allow` (tests give one with a `resolve`). */
export const apply = (ctx: Context, config: Config, egress: Pick<DockerProviderOptions, 'startEgressProxy'> = {}): void => {
  const provider = dockerProvider(config, { ...egress, onRefused: (agent, host) => ctx.sandbox.refused({ agent, host }) })
  ctx.sandbox.register(provider)
  ctx.effect(() => () => provider.close(), 'sandbox-docker.agents')
}

export { daemonOptions, dockerProvider, LABEL, RELAY, type DockerProvider, type DockerProviderOptions } from './provider.ts'
