/**
 * `@conch/subagent-cli-pool`: a `ctx.subagents` provider whose runs go through `ctx.ptyPool`,
 * one warm CLI per conversation, falling back to the kind's one-shot provider. A namespace
 * plugin (no default export).
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import { NO_CAPABILITIES, SubagentError, providerName, textOf, type ProviderOutcome, type ProviderRequest, type ProviderRun, type SubagentProvider, type SubagentServiceApi } from '@conch/subagent'
import { type FallbackRunner, PoolError, poolNote, type PtyPool } from '@conch/pty-pool'

export const name = 'subagent-cli-pool'
export const inject = ['subagents', 'ptyPool']

export const Config = z.strictObject({
  name: providerName('cli-pool'),
  kind: z.string().min(1).describe('The pool kind (claude, codex, generic or a configured one).'),
  model: z.string().default('').describe('Model of the key ("" = the kind\'s default).'),
  account: z.string().default('').describe('Account of the key (an id from the pool\'s `accounts`).'),
  bare: z.boolean().default(false).describe('Bare mode of the key.'),
  fallbackProvider: z.string().optional().describe('Sub-agent provider of the fresh-spawn path; default: the kind\'s `fallbackProvider`.'),
})
  // A row without `config:` parses as {}, so the error names the required field.
  .prefault({} as never)
export type Config = z.output<typeof Config>

/** The fresh-spawn path: one run on the named provider; its answer, or an error naming its stop. */
export function subagentFallback(subagents: SubagentServiceApi, provider: string | undefined, request: ProviderRequest): FallbackRunner {
  return async ({ prompt, signal }) => {
    if (!provider) throw new SubagentError('NO_PROVIDER', { role: 'fallbackProvider' })
    const run = await subagents.start(provider, { prompt: [{ type: 'text', text: prompt }], parent: request.parent, ...(signal && { signal }), label: `${request.label ?? 'cli-pool'} (fresh spawn)` })
    try {
      const result = await run.result
      const text = result.output.map((block) => block.text).join('')
      if (result.stopReason !== 'completed') throw new Error(`${provider} stopped with ${result.stopReason}: ${result.diagnostic ?? text.slice(0, 200)}`)
      return text
    } finally {
      await run.dispose()
    }
  }
}

export function cliPoolProvider(pool: PtyPool, subagents: SubagentServiceApi, config: Config): SubagentProvider {
  const kind = pool.config.kinds[config.kind]
  if (!kind) throw new SubagentError('INVALID_PROVIDER', { kind: config.kind, known: Object.keys(pool.config.kinds) })
  const fallbackProvider = config.fallbackProvider ?? kind.fallbackProvider
  return {
    name: config.name,
    capabilities: NO_CAPABILITIES,
    async start(request) {
      if (request.signal.aborted) throw request.signal.reason
      const key = { owner: request.parent.id, conversation: request.parent.session.id, kind: config.kind, model: config.model, account: config.account, bare: config.bare }
      // The parent agent owns the CLI (under `terminal: conch`, its terminal and sandbox policy).
      const work = pool.acquireAndInvoke(key, textOf(request.prompt, '\n'), { signal: request.signal, owner: request.parent, fallback: subagentFallback(subagents, fallbackProvider, request) })
      const outcome: Promise<ProviderOutcome> = work.then(
        (result) => {
          request.update({ type: 'text', text: `${result.text}\n\n${poolNote(result)}` })
          return { stopReason: 'completed' as const }
        },
        (error: unknown) => {
          if (error instanceof PoolError && error.code === 'INVOKE_CANCELLED') return { stopReason: 'aborted' as const, diagnostic: error.message }
          return { stopReason: 'error' as const, diagnostic: (error as Error).message }
        },
      )
      return {
        childId: `pool:${config.kind}`,
        outcome,
        // The warm CLI belongs to the pool and outlives the run; a cancelled run's CLI is
        // closed by the pool before the outcome settles.
        dispose: async () => {
          await outcome
        },
      } satisfies ProviderRun
    },
  }
}

export const apply = (ctx: Context, config: Config) => {
  const subagents: SubagentServiceApi = ctx.subagents
  subagents.registerProvider(cliPoolProvider(ctx.ptyPool.pool, subagents, config))
}
