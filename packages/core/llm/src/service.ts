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
    if (wanted !== undefined) {
      const adapter = this.adapters.get(wanted)
      if (adapter) return adapter
      throw new LlmError('NO_PROVIDER', { wanted, registered: this.describeRegistered() })
    }
    const all = [...this.adapters.values()]
    if (all.length === 1) return all[0]!
    if (all.length === 0) {
      throw new LlmError('NO_PROVIDER', { wanted: undefined, registered: '(none)' })
    }
    throw new LlmError('AMBIGUOUS_PROVIDER', { providers: this.providers() })
  }

  providers(): string[] {
    return [...this.adapters.keys()]
  }

  private describeRegistered(): string {
    return this.adapters.size === 0 ? '(none)' : this.providers().join(', ')
  }
}

namespace LlmService {
  export type Config = z.output<typeof LlmService.Config>
}

export default LlmService
