/**
 * The OpenAI-compatible model adapter: streams chat completions with tool calling through the
 * official `openai` SDK, which also retries 408/409/429/5xx and connection failures with
 * exponential backoff (honouring `retry-after` / `retry-after-ms`).
 */
import OpenAI from 'openai'
import { LlmError, type ModelAdapter, type ModelChunk, type ModelRequest } from '@conch/llm'
import { fromWireChunk, toWireMessages, toWireTools } from './convert.ts'

export interface OpenAIAdapterOptions {
  provider: string
  baseURL: string
  model: string
  apiKeyEnv: string
  timeoutMs: number
  maxRetries: number
  temperature?: number | undefined
}

/** The variable the key comes from: `apiKeyEnv` when set and non-empty, else `OPENAI_API_KEY`. */
export function apiKeySource(options: { apiKeyEnv?: string }, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const primary = options.apiKeyEnv ?? 'DEEPSEEK_API_KEY'
  if (env[primary]) return primary
  if (env['OPENAI_API_KEY']) return 'OPENAI_API_KEY'
  return undefined
}

/** Whether a key is available for this config (the CLI asks before starting a live run). */
export function hasApiKey(options: { apiKeyEnv?: string } = {}, env: NodeJS.ProcessEnv = process.env): boolean {
  return apiKeySource(options, env) !== undefined
}

/** The message of `NO_API_KEY`: which variables to set, or how to run without a model. */
export function missingKeyMessage(options: { apiKeyEnv?: string } = {}): string {
  const primary = options.apiKeyEnv ?? 'DEEPSEEK_API_KEY'
  const variables = primary === 'OPENAI_API_KEY' ? 'OPENAI_API_KEY' : `${primary} (or OPENAI_API_KEY)`
  return `no API key for the model: set ${variables} in the environment, or run with --script FILE to use a scripted model`
}

export class OpenAIAdapter implements ModelAdapter {
  readonly provider: string
  readonly model: string
  private client: { key: string; api: OpenAI } | undefined

  constructor(private readonly options: OpenAIAdapterOptions) {
    this.provider = options.provider
    this.model = options.model
  }

  /**
   * Streams one chat completion. Aborting `request.signal` closes the HTTP stream and rejects
   * with the signal's reason.
   * @throws LlmError `NO_API_KEY` when neither variable is set; `MODEL_ERROR` naming the endpoint
   *   and the HTTP status or connection failure once the SDK's retries are exhausted.
   */
  stream(request: ModelRequest): AsyncIterable<ModelChunk> {
    return this.play(request)
  }

  private async *play(request: ModelRequest): AsyncGenerator<ModelChunk> {
    const signal = request.signal
    signal?.throwIfAborted()
    const api = this.api()
    const body: OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming = {
      model: this.options.model,
      messages: toWireMessages(request.messages),
      stream: true,
      stream_options: { include_usage: true },
    }
    if (request.tools.length > 0) body.tools = toWireTools(request.tools)
    if (this.options.temperature !== undefined) body.temperature = this.options.temperature
    try {
      const stream = await api.chat.completions.create(body, signal ? { signal } : {})
      for await (const chunk of stream) {
        yield* fromWireChunk(chunk)
      }
      // The SDK ends the iteration quietly when its request is aborted; an aborted stream must
      // not pass for a complete response.
      signal?.throwIfAborted()
    } catch (error) {
      if (signal?.aborted) throw signal.reason
      throw this.describe(error)
    }
  }

  private api(): OpenAI {
    const source = apiKeySource(this.options)
    if (source === undefined) throw new LlmError('NO_API_KEY', missingKeyMessage(this.options))
    const key = process.env[source]!
    if (this.client?.key !== key) {
      this.client = {
        key,
        api: new OpenAI({
          apiKey: key,
          baseURL: this.options.baseURL,
          timeout: this.options.timeoutMs,
          maxRetries: this.options.maxRetries,
        }),
      }
    }
    return this.client.api
  }

  private describe(error: unknown): LlmError {
    const where = `the model API at ${this.options.baseURL}`
    const retries = `after ${this.options.maxRetries} retries`
    if (error instanceof LlmError) return error
    if (error instanceof OpenAI.APIConnectionTimeoutError) {
      return new LlmError('MODEL_ERROR', `${where} did not answer within ${this.options.timeoutMs} ms (${retries}); raise timeoutMs or try again`, { cause: error })
    }
    if (error instanceof OpenAI.APIConnectionError) {
      return new LlmError('MODEL_ERROR', `cannot reach ${where} (${retries}): ${error.message}; check baseURL and the network`, { cause: error })
    }
    if (error instanceof OpenAI.APIError && typeof error.status === 'number') {
      const hint =
        error.status === 401 || error.status === 403
          ? `; check the key in ${apiKeySource(this.options) ?? this.options.apiKeyEnv}`
          : error.status === 404
            ? `; check baseURL and model (${this.options.model})`
            : error.status === 429 || error.status >= 500
              ? ` (${retries}); try again later`
              : ''
      return new LlmError('MODEL_ERROR', `${where} answered HTTP ${error.message}${hint}`, { cause: error })
    }
    const message = error instanceof Error ? error.message : String(error)
    return new LlmError('MODEL_ERROR', `the stream from ${where} failed: ${message}`, { cause: error })
  }
}
