/**
 * `@conch/llm-openai`: registers an OpenAI-compatible chat-completions adapter on `ctx.llm`
 * (DeepSeek by default). A namespace plugin (no default export, so the loader keeps `inject`).
 * The API key is read from the environment, never from config.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import { OpenAIAdapter } from './adapter.ts'

export { OpenAIAdapter, apiKeySource, hasApiKey, missingKeyMessage, type OpenAIAdapterOptions } from './adapter.ts'
export { fromWireChunk, toFinishReason, toWireMessages, toWireTools } from './convert.ts'

export const name = 'llm-openai'
export const inject = ['llm']

export const Config = z.strictObject({
  baseURL: z.url().default('https://api.deepseek.com').describe('Chat-completions endpoint base URL.'),
  model: z.string().min(1).default('deepseek-chat').describe('Model name sent with each request.'),
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable, not a key')
    .default('DEEPSEEK_API_KEY')
    .describe('Environment variable holding the API key; OPENAI_API_KEY is the fallback.'),
  provider: z.string().min(1).default('openai').describe('Provider name the adapter registers under.'),
  timeoutMs: z.number().int().positive().default(120000).describe('Per attempt: ms until the response headers arrive.'),
  maxRetries: z.number().int().min(0).default(3).describe('Retries on 408/409/429/5xx and connection errors, with backoff.'),
  temperature: z.number().min(0).max(2).optional().describe('Sampling temperature; unset: the endpoint default.'),
}).prefault({})
export type Config = z.output<typeof Config>

/** Registers the adapter. Loads without a key; a model call then fails with `NO_API_KEY`. */
export const apply = (ctx: Context, config: Config) => {
  ctx.llm.register(new OpenAIAdapter(config))
}
