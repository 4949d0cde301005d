/**
 * The OpenAI-compatible model adapter: streams chat completions with tool calling through the
 * official `openai` SDK, which also retries 408/409/429/5xx and connection failures with
 * exponential backoff (honouring `retry-after` / `retry-after-ms`).
 */
import OpenAI from 'openai'
import { LlmError, type ModelAdapter, type ModelChunk, type ModelRequest } from '@conch/llm'
import { fromWireChunk, toWireMessages, toWireTools } from './convert.ts'
import { missingKeyMessage, resolveEndpoint, type Config, type ResolvedEndpoint } from './endpoint.ts'

export class OpenAIAdapter implements ModelAdapter {
  readonly provider: string
  private client: { key: string | undefined; baseURL: string; api: OpenAI } | undefined

  constructor(private readonly options: Config) {
    this.provider = options.provider
  }

  /** The model the next request names (it follows the environment, see `resolveEndpoint`). */
  get model(): string {
    return resolveEndpoint(this.options)?.model ?? this.options.model ?? this.options.endpoints[0]!.model
  }

  /**
   * Streams one chat completion. Aborting `request.signal` closes the HTTP stream and rejects
   * with the signal's reason.
   * @throws LlmError `NO_API_KEY` when neither variable is set; `MODEL_ERROR` naming the endpoint
   *   and the HTTP status or connection failure once the SDK's retries are exhausted.
   */
  async *stream(request: ModelRequest): AsyncGenerator<ModelChunk> {
    const signal = request.signal
    signal?.throwIfAborted()
    const endpoint = resolveEndpoint(this.options)
    if (endpoint === undefined) throw new LlmError('NO_API_KEY', { reason: missingKeyMessage(this.options) })
    const body: OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming = {
      model: endpoint.model,
      messages: toWireMessages(request.messages),
      stream: true,
      stream_options: { include_usage: true },
    }
    if (request.tools.length > 0) body.tools = toWireTools(request.tools)
    if (this.options.temperature !== undefined) body.temperature = this.options.temperature
    try {
      const stream = await this.api(endpoint).chat.completions.create(body, signal ? { signal } : {})
      for await (const chunk of stream) {
        yield* fromWireChunk(chunk)
      }
      // The SDK ends the iteration quietly when its request is aborted; an aborted stream must
      // not pass for a complete response.
      signal?.throwIfAborted()
    } catch (error) {
      if (signal?.aborted) throw signal.reason
      throw this.describe(error, endpoint)
    }
  }

  private api(endpoint: ResolvedEndpoint): OpenAI {
    const key = endpoint.apiKeyEnv === undefined ? undefined : process.env[endpoint.apiKeyEnv]
    if (this.client === undefined || this.client.key !== key || this.client.baseURL !== endpoint.baseURL) {
      this.client = {
        key,
        baseURL: endpoint.baseURL,
        api: new OpenAI({
          // A named endpoint without a key (a local server) gets no Authorization header.
          apiKey: key ?? 'none',
          ...(key === undefined ? { defaultHeaders: { authorization: null } } : {}),
          baseURL: endpoint.baseURL,
          timeout: this.options.timeoutMs,
          maxRetries: this.options.maxRetries,
        }),
      }
    }
    return this.client.api
  }

  private describe(error: unknown, endpoint: ResolvedEndpoint): LlmError {
    const where = `the model API at ${endpoint.baseURL}`
    const retries = `after ${this.options.maxRetries} retries`
    if (error instanceof LlmError) return error
    if (error instanceof OpenAI.APIConnectionTimeoutError) {
      return new LlmError('MODEL_ERROR', { reason: `${where} did not answer within ${this.options.timeoutMs} ms (${retries}); raise timeoutMs or try again` }, { cause: error })
    }
    if (error instanceof OpenAI.APIConnectionError) {
      return new LlmError('MODEL_ERROR', { reason: `cannot reach ${where} (${retries}): ${error.message}; check baseURL and the network` }, { cause: error })
    }
    if (error instanceof OpenAI.APIError && typeof error.status === 'number') {
      const hint =
        error.status === 401 || error.status === 403
          ? `; check the key in ${endpoint.apiKeyEnv ?? 'the environment (none was sent)'}`
          : error.status === 404
            ? `; check baseURL and model (${endpoint.model})`
            : error.status === 429 || error.status >= 500
              ? ` (${retries}); try again later`
              : ''
      return new LlmError('MODEL_ERROR', { reason: `${where} answered HTTP ${error.message}${hint}` }, { cause: error })
    }
    const message = error instanceof Error ? error.message : String(error)
    return new LlmError('MODEL_ERROR', { reason: `the stream from ${where} failed: ${message}` }, { cause: error })
  }
}
