/**
 * `ctx.llm`: the registry of model adapters, keyed by provider name.
 */
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import { registerUnique } from '@conch/session'
import { LlmError, type LlmServiceApi, type ModelAdapter } from './types.ts'

declare module 'cordis' {
  interface Context {
    llm: LlmService
  }
}

class LlmService extends Service implements LlmServiceApi {
  static Config = z
    .strictObject({
      provider: z
        .string()
        .min(1)
        .optional()
        .describe('Provider used when a caller names none; unset: the only registered adapter.'),
    })
    .prefault({})

  private readonly adapters = new Map<string, ModelAdapter>()

  constructor(ctx: Context, public config: LlmService.Config) {
    super(ctx, 'llm')
  }

  register(adapter: ModelAdapter): () => void {
    const duplicate = () => new LlmError('DUPLICATE_PROVIDER', { provider: adapter.provider })
    return registerUnique(this.ctx, this.adapters, adapter.provider, adapter, duplicate, `llm.register(${adapter.provider})`)
  }

  get(provider: string): ModelAdapter | undefined {
    return this.adapters.get(provider)
  }

  resolve(provider?: string): ModelAdapter {
    const wanted = provider ?? this.config.provider
    const all = [...this.adapters.values()]
    const adapter = wanted === undefined ? (all.length === 1 ? all[0] : undefined) : this.adapters.get(wanted)
    if (adapter) return adapter
    if (wanted === undefined && all.length > 1) throw new LlmError('AMBIGUOUS_PROVIDER', { providers: this.providers() })
    throw new LlmError('NO_PROVIDER', { wanted, registered: all.length === 0 ? '(none)' : this.providers().join(', ') })
  }

  providers(): string[] {
    return [...this.adapters.keys()]
  }
}

namespace LlmService {
  export type Config = z.output<typeof LlmService.Config>
}

export default LlmService
