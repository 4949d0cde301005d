/**
 * Where `@conch/llm-openai` sends requests and which key goes with them: the config schema and
 * the rule, without the SDK (the CLI checks a key before any model is loaded).
 */
import { z } from 'zod'

const VARIABLE = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable, not a key')

export const Config = z.strictObject({
  endpoints: z
    .array(z.strictObject({ apiKeyEnv: VARIABLE, baseURL: z.url(), baseURLEnv: VARIABLE.optional(), model: z.string().min(1) }))
    .min(1)
    .default([
      { apiKeyEnv: 'DEEPSEEK_API_KEY', baseURL: 'https://api.deepseek.com', model: 'deepseek-chat' },
      { apiKeyEnv: 'OPENAI_API_KEY', baseURL: 'https://api.openai.com/v1', baseURLEnv: 'OPENAI_BASE_URL', model: 'gpt-4.1-mini' },
    ])
    .describe("Key variables, each with the only endpoint its key is sent to (baseURLEnv's value when set); the first that is set is used."),
  baseURL: z.url().optional().describe('An endpoint for any key (unset: CONCH_BASE_URL).'),
  model: z.string().min(1).optional().describe("Model name sent with each request (unset: CONCH_MODEL, then the endpoint's)."),
  provider: z.string().min(1).default('openai').describe('Provider name the adapter registers under.'),
  timeoutMs: z.number().int().positive().default(120000).describe('Per attempt: ms until the response headers arrive.'),
  maxRetries: z.number().int().min(0).default(3).describe('Retries on 408/409/429/5xx and connection errors, with backoff.'),
  temperature: z.number().min(0).max(2).optional().describe('Sampling temperature; unset: the endpoint default.'),
}).prefault({})
export type Config = z.output<typeof Config>

/** Where requests go and with which key (`apiKeyEnv` undefined: none, for a named endpoint). */
export interface ResolvedEndpoint {
  baseURL: string
  model: string
  apiKeyEnv: string | undefined
}

/** The variable that names an endpoint for any key when the config names none. */
export const BASE_URL_VARIABLE = 'CONCH_BASE_URL'
/** The variable that names the model when the config names none. */
export const MODEL_VARIABLE = 'CONCH_MODEL'

/**
 * The endpoint of the next request:
 * - an endpoint the user names for conch (`baseURL`, else `CONCH_BASE_URL`) gets the first key
 *   of `endpoints` that is set, or none (a local server);
 * - else the first `endpoints` entry whose key is set, and its key goes to that entry's own
 *   endpoint only: its `baseURLEnv`'s value when set (OpenAI's key to `OPENAI_BASE_URL`), else
 *   its `baseURL` — never another entry's;
 * - else, with no key at all, an entry's `baseURLEnv` that is set names a server without a key.
 * The model is `model`, else `CONCH_MODEL`, else the entry's.
 * @returns undefined when no key is set and no endpoint is named.
 */
export function resolveEndpoint(
  options: Pick<Config, 'endpoints' | 'baseURL' | 'model'>,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedEndpoint | undefined {
  const model = options.model ?? (env[MODEL_VARIABLE] || undefined)
  const keyed = options.endpoints.find((endpoint) => env[endpoint.apiKeyEnv])
  const named = options.baseURL ?? (env[BASE_URL_VARIABLE] || undefined)
  if (named !== undefined) return { baseURL: named, model: model ?? keyed?.model ?? options.endpoints[0]!.model, apiKeyEnv: keyed?.apiKeyEnv }
  const movedURL = (endpoint: Config['endpoints'][number]) => (endpoint.baseURLEnv === undefined ? undefined : env[endpoint.baseURLEnv] || undefined)
  if (keyed !== undefined) return { baseURL: movedURL(keyed) ?? keyed.baseURL, model: model ?? keyed.model, apiKeyEnv: keyed.apiKeyEnv }
  const keyless = options.endpoints.find((endpoint) => movedURL(endpoint) !== undefined)
  return keyless && { baseURL: movedURL(keyless)!, model: model ?? keyless.model, apiKeyEnv: undefined }
}

/** The message of `NO_API_KEY`: which variables to set and where each key goes, or how to run without a model. */
export function missingKeyMessage(options: Pick<Config, 'endpoints'>): string {
  const keys = options.endpoints.map((endpoint) => `${endpoint.apiKeyEnv} (sent to ${endpoint.baseURL})`).join(' or ')
  return `no API key for the model: set ${keys}, or name an OpenAI-compatible endpoint with ${BASE_URL_VARIABLE} (and ${MODEL_VARIABLE}), or run with --script FILE to use a scripted model`
}
