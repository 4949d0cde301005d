/**
 * `@conch/llm-openai`: registers an OpenAI-compatible chat-completions adapter on `ctx.llm`
 * (DeepSeek or OpenAI, by the key that is set). The API key is read from the environment,
 * never from config.
 */
import type { Context } from 'cordis'
import { OpenAIAdapter } from './adapter.ts'
import type { Config } from './endpoint.ts'

export { BASE_URL_VARIABLE, Config, MODEL_VARIABLE, missingKeyMessage, resolveEndpoint, type ResolvedEndpoint } from './endpoint.ts'
export { fromWireChunk, toFinishReason, toWireMessages, toWireTools } from './convert.ts'

export const name = 'llm-openai'
export const inject = ['llm']

/** Registers the adapter. Loads without a key; a model call then fails with `NO_API_KEY`. */
export const apply = (ctx: Context, config: Config) => {
  ctx.llm.register(new OpenAIAdapter(config))
}
