/**
 * @conch/sandbox-docker — registers a Docker provider with `ctx.sandbox`: each agent's sandbox is
 * one container, and each of its confined processes an exec with a TTY in it.
 */
import type { Context } from 'cordis'
import type {} from '@conch/sandbox'
import { Config } from './config.ts'
import { dockerProvider } from './provider.ts'

export const name = 'sandbox-docker'
export const inject = ['sandbox']
export { Config }

export const apply = (ctx: Context, config: Config): void => {
  const provider = dockerProvider(config)
  ctx.sandbox.register(provider)
  ctx.effect(() => () => provider.close(), 'sandbox-docker.agents')
}

export { daemonOptions, dockerProvider, LABEL, RELAY, type DockerProvider } from './provider.ts'
