/**
 * The fake model server: one HTTP server on 127.0.0.1 that answers the OpenAI Responses API
 * (`POST …/responses`, what Codex calls), the Anthropic Messages API (`POST …/messages`,
 * with or without `?beta=true`, what Claude Code calls) and OpenAI chat completions
 * (`POST …/chat/completions`, what @conch/llm-openai calls) with scripted streams, and records
 * every request so tests can assert on what the client sent.
 *
 * Answers come from the queue (`enqueue`), else `respond(request)`, else `defaultAnswer`.
 * Side endpoints answer plainly: `POST …/messages/count_tokens` → `{input_tokens}`,
 * `GET …/models` → an empty list; anything else is a 404 (recorded as `other`).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { text as readBody } from 'node:stream/consumers'
import { setTimeout as delay } from 'node:timers/promises'
import { chatEncoder, fakeId, formatSse, messagesEncoder, messagesJson, responsesEncoder, roughTokens, type SseEvent, type StreamEncoder, type ToolCall } from './encode.ts'
import { parseChatBody, parseMessagesBody, parseResponsesBody } from './parse.ts'
import { chooseSentinel, DEFAULT_SENTINEL_PATTERN, defaultFrame } from './sentinel.ts'
import type { FakeAnswer, FakeApi, FakeModelOptions, FakeOutcome, FakeRequest, ParsedBody } from './types.ts'

export interface FakeModelServer {
  /** `http://127.0.0.1:PORT` — the Anthropic base URL (`ANTHROPIC_BASE_URL`). */
  readonly url: string
  /** `http://127.0.0.1:PORT/v1` — the OpenAI base URL (a Codex provider's `base_url`, a chat completions `baseURL`). */
  readonly openaiBaseUrl: string
  readonly port: number
  /** Every request so far, in arrival order; records update live while they are answered. */
  readonly requests: readonly FakeRequest[]
  /** Answers the next streamed requests, in order, before `respond` and the default. */
  enqueue(...answers: FakeAnswer[]): void
  /**
   * Resolves with the first truthy value `probe` returns, evaluated now and after every
   * change (a request arrives, a delta is written, a response ends). Rejects with the
   * signal's reason when `signal` aborts, or when the server closes.
   */
  waitFor<T>(probe: (requests: readonly FakeRequest[]) => T | undefined | null | false, options?: { signal?: AbortSignal }): Promise<T>
  /** The first request (existing or future) matching `predicate` (default: any streamed request). */
  waitForRequest(predicate?: (request: FakeRequest) => boolean, options?: { signal?: AbortSignal }): Promise<FakeRequest>
  /** Continues every stream held by `stallAfterChunks`. */
  release(): void
  /** Stops listening and destroys every open connection; pending waits reject. Idempotent. */
  close(): Promise<void>
}

interface Waiter {
  check(): boolean
  fail(reason: unknown): void
}

/** Method, path suffix and API of each route, first match wins; anything else is `other`. */
const ROUTES: readonly (readonly [string, string, FakeApi])[] = [
  ['POST', '/responses', 'responses'],
  ['POST', '/chat/completions', 'chat'],
  ['POST', '/messages/count_tokens', 'count_tokens'],
  ['POST', '/messages', 'messages'],
  ['GET', '/models', 'models'],
]

/** Splits text into deltas of one word each, the whitespace before a word going with it. */
export function splitWords(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? (text ? [text] : [])
}

export async function startFakeModel(options: FakeModelOptions = {}): Promise<FakeModelServer> {
  const queue: FakeAnswer[] = []
  const requests: FakeRequest[] = []
  const waiters = new Set<Waiter>()
  const sockets = new Set<Socket>()
  const releaseListeners = new Set<() => void>()
  const sentinelPattern = options.sentinelPattern ?? DEFAULT_SENTINEL_PATTERN
  const frame = options.frame ?? defaultFrame
  let closing: Promise<void> | undefined

  const notify = () => {
    for (const waiter of [...waiters]) if (waiter.check()) waiters.delete(waiter)
  }

  const server = createServer((req, res) => {
    readBody(req).then(
      (raw) => handle(req, res, raw),
      () => res.destroy(),
    )
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo

  function record(req: IncomingMessage, body: unknown, api: FakeApi, parsed: ParsedBody | undefined): FakeRequest {
    const [path = '', query = ''] = (req.url ?? '').split(/\?(.*)/s)
    const entry: FakeRequest = {
      seq: requests.length + 1,
      api,
      method: req.method ?? 'GET',
      path,
      query,
      headers: req.headers,
      body,
      ...(parsed ?? { stream: false, system: '', userText: '', toolResults: [], tools: [] }),
      receivedAt: Date.now(),
      chunksSent: 0,
      stalled: false,
    }
    requests.push(entry)
    notify()
    return entry
  }

  const finish = (entry: FakeRequest, outcome: FakeOutcome) => {
    entry.outcome ??= outcome
    entry.stalled = false
    notify()
  }

  function handle(req: IncomingMessage, res: ServerResponse, raw: string): void {
    const path = (req.url ?? '').split('?')[0] ?? ''
    const api = ROUTES.find(([method, suffix]) => req.method === method && path.endsWith(suffix))?.[2] ?? 'other'
    let body: unknown
    let badJson = false
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw)
      } catch {
        badJson = true
      }
    }
    const parsed = api === 'responses' ? parseResponsesBody(body) : api === 'chat' ? parseChatBody(body) : api === 'messages' || api === 'count_tokens' ? parseMessagesBody(body) : undefined
    const entry = record(req, body, api, parsed)
    if (badJson) return httpError(res, entry, 400, 'invalid_request_error', 'the request body is not JSON')
    switch (api) {
      case 'other':
        return httpError(res, entry, 404, 'not_found_error', `the fake model does not serve ${req.method} ${path}`)
      case 'models':
        return json(res, entry, 200, { object: 'list', data: [], models: [] })
      case 'count_tokens':
        return json(res, entry, 200, { input_tokens: roughTokens(raw) })
      case 'responses':
      case 'messages':
      case 'chat': {
        const answer = queue.shift() ?? options.respond?.(entry) ?? options.defaultAnswer ?? { text: 'ok' }
        entry.answer = answer
        if (answer.httpStatus !== undefined) return httpError(res, entry, answer.httpStatus, 'api_error', `scripted HTTP ${answer.httpStatus}`, answer)
        const model = entry.model ?? 'fake-model'
        const inputTokens = roughTokens(raw)
        if (api === 'messages' && !entry.stream) {
          // A whole message has no deltas: a crash anywhere in it drops the connection unanswered.
          if (answer.closeAfterChunks !== undefined) {
            res.destroy()
            return finish(entry, 'closed')
          }
          return json(res, entry, 200, wholeMessage(entry, answer, model, inputTokens))
        }
        const encoder = (api === 'responses' ? responsesEncoder : api === 'chat' ? chatEncoder : messagesEncoder)({ model, inputTokens })
        void stream(res, entry, answer, encoder)
        return
      }
    }
  }

  function httpError(res: ServerResponse, entry: FakeRequest, status: number, type: string, message: string, answer?: FakeAnswer): void {
    const body = answer?.httpBody ?? { type: 'error', error: { type, code: type, message } }
    res.writeHead(status, { 'content-type': 'application/json', ...answer?.httpHeaders }).end(JSON.stringify(body))
    finish(entry, 'http-error')
  }

  function json(res: ServerResponse, entry: FakeRequest, status: number, value: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value))
    finish(entry, 'answered')
  }

  /** The answer's text deltas, with the sentinel appended when one applies. */
  function textDeltas(entry: FakeRequest, answer: FakeAnswer): string[] {
    const chunks = answer.chunks ?? splitWords(answer.text ?? '')
    const sentinel = chooseSentinel(answer.sentinel, entry.system, sentinelPattern)
    if (sentinel === undefined) return chunks
    entry.sentinel = sentinel
    const text = chunks.join('')
    const framed = frame(text, sentinel)
    return framed.startsWith(text) ? [...chunks, framed.slice(text.length)] : splitWords(framed)
  }

  const toolCallsOf = (answer: FakeAnswer): ToolCall[] =>
    (answer.toolCalls ?? []).map((call) => ({ name: call.name, arguments: call.arguments, id: call.id ?? fakeId('call_') }))

  function stopReasonOf(answer: FakeAnswer, calls: ToolCall[]): 'end_turn' | 'max_tokens' | 'refusal' | 'tool_use' {
    return answer.stopReason ?? (calls.length > 0 ? 'tool_use' : 'end_turn')
  }

  function wholeMessage(entry: FakeRequest, answer: FakeAnswer, model: string, inputTokens: number): unknown {
    const calls = toolCallsOf(answer)
    return messagesJson({ model, inputTokens, text: textDeltas(entry, answer).join(''), toolCalls: calls, stopReason: stopReasonOf(answer, calls) })
  }

  /**
   * Writes one scripted stream. Before delta k (k = 0 … n, where k = n is just before the
   * closing events) the knobs apply in order: `firstTokenDelayMs` (k = 0) or `chunkDelayMs`
   * (0 < k < n) waits, then `closeAfterChunks` = k destroys the connection, then
   * `stallAfterChunks` = k holds the stream until `release()`.
   */
  async function stream(res: ServerResponse, entry: FakeRequest, answer: FakeAnswer, encoder: StreamEncoder): Promise<void> {
    const gone = new AbortController()
    res.on('close', () => {
      if (!res.writableFinished) gone.abort()
    })
    let flushed: Promise<void> = Promise.resolve()
    const write = (events: SseEvent[]) => {
      for (const event of events) flushed = new Promise((resolve) => res.write(formatSse(event), () => resolve()))
    }
    const raw = answer.sse
    const deltas = raw ? [] : textDeltas(entry, answer)
    const calls = raw ? [] : toolCallsOf(answer)
    const total = (raw?.length ?? 0) + deltas.length + calls.length
    let stallSpent = false
    let k = 0
    const gate = async (k: number): Promise<boolean> => {
      const wait = k === 0 ? answer.firstTokenDelayMs : k < total ? answer.chunkDelayMs : undefined
      if (wait) await delay(wait, undefined, { signal: gone.signal }).catch(() => undefined)
      if (gone.signal.aborted || res.destroyed) return false
      if (answer.closeAfterChunks === k) {
        // Let what was written reach the client first: destroy() drops unflushed writes.
        await flushed
        res.destroy()
        finish(entry, 'closed')
        return false
      }
      if (answer.stallAfterChunks === k && !stallSpent) {
        stallSpent = true
        entry.stalled = true
        notify()
        await new Promise<void>((resolve) => {
          const done = () => {
            releaseListeners.delete(done)
            gone.signal.removeEventListener('abort', done)
            resolve()
          }
          releaseListeners.add(done)
          gone.signal.addEventListener('abort', done, { once: true })
        })
        entry.stalled = false
        notify()
      }
      return !gone.signal.aborted && !res.destroyed
    }
    /** Writes one counted chunk once its gate opens; false when the response ended first. */
    const chunk = async (events: Parameters<typeof write>[0]): Promise<boolean> => {
      if (!(await gate(k))) return false
      write(events)
      entry.chunksSent = ++k
      notify()
      return true
    }
    try {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      if (raw) {
        for (const data of raw) if (!(await chunk([{ data }]))) return
        if (!(await gate(k))) return
        write([{ data: '[DONE]' }])
        res.end()
        finish(entry, 'completed')
        return
      }
      write(encoder.open())
      if (answer.commentary) write(encoder.commentary(answer.commentary))
      if (deltas.length > 0) {
        write(encoder.textStart())
        for (const delta of deltas) if (!(await chunk(encoder.textDelta(delta)))) return
        write(encoder.textEnd(deltas.join('')))
      }
      for (const call of calls) if (!(await chunk(encoder.toolCall(call)))) return
      if (!(await gate(k))) return
      if (answer.fail) {
        write(encoder.fail({ code: answer.fail.code, message: answer.fail.message ?? `scripted failure: ${answer.fail.code}` }))
        res.end()
        finish(entry, 'failed')
        return
      }
      write(encoder.finish(stopReasonOf(answer, calls)))
      res.end()
      finish(entry, 'completed')
    } finally {
      if (gone.signal.aborted) finish(entry, 'client-gone')
    }
  }

  function waitFor<T>(probe: (requests: readonly FakeRequest[]) => T | undefined | null | false, waitOptions: { signal?: AbortSignal } = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const { signal } = waitOptions
      const onAbort = () => {
        waiters.delete(waiter)
        reject(signal?.reason)
      }
      const waiter: Waiter = {
        check() {
          const value = probe(requests)
          if (!value) return false
          signal?.removeEventListener('abort', onAbort)
          resolve(value)
          return true
        },
        fail(reason) {
          signal?.removeEventListener('abort', onAbort)
          reject(reason)
        },
      }
      if (signal?.aborted) return reject(signal.reason)
      if (closing) return reject(new Error('the fake model server is closed'))
      if (waiter.check()) return
      signal?.addEventListener('abort', onAbort, { once: true })
      waiters.add(waiter)
    })
  }

  return {
    url: `http://127.0.0.1:${port}`,
    openaiBaseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    enqueue: (...answers) => {
      queue.push(...answers)
    },
    waitFor,
    waitForRequest: (predicate = (request) => request.api === 'responses' || request.api === 'messages' || request.api === 'chat', waitOptions) =>
      waitFor((all) => all.find(predicate), waitOptions),
    release: () => {
      for (const listener of [...releaseListeners]) listener()
    },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        for (const waiter of waiters) waiter.fail(new Error('the fake model server closed'))
        waiters.clear()
        // Destroying the sockets ends every stream (stalled ones too) as `client-gone`.
        server.close(() => resolve())
        for (const socket of sockets) socket.destroy()
      })),
  }
}
