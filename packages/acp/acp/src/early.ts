/**
 * Answering `initialize` while the composition boots: its answer (`initializeResponse(config)`)
 * depends on nothing the plugins start. The server is not bypassed: every input byte, the
 * request included, still reaches `runAcp`, and its own answer to that request is the one frame
 * dropped from the output, after it was compared with the early one.
 */
import { PassThrough, Writable } from 'node:stream'
import { isDeepStrictEqual } from 'node:util'
import { Config, type ConfigInput } from './config.ts'
import { initializeResponse } from './server.ts'

/** Longest first frame looked at, in bytes; a longer one is left to the server. */
const MAX_EARLY_FRAME_BYTES = 64 * 1024

export interface EarlyInitializeOptions {
  /** The process's stdin: JSON-RPC frames, one per line. */
  input: NodeJS.ReadableStream
  /** The process's stdout. */
  output: NodeJS.WritableStream
  /** The same options `runAcp` gets. */
  config?: ConfigInput
  /** Called when the server's own answer differs from the early one (it never should; the early one stands). */
  onMismatch?(early: unknown, server: unknown): void
}

export interface EarlyInitialize {
  /** For `runAcp`: every byte of `input` from the first, the `initialize` request included. */
  readonly input: NodeJS.ReadableStream
  /** For `runAcp`: `output`, less the server's answer to an `initialize` answered early. */
  readonly output: NodeJS.WritableStream
  /** Whether `initialize` was answered early (so far). */
  readonly answered: boolean
  /** Stops reading `input` (the composition failed to boot; nothing will serve it). Idempotent. */
  close(): void
}

interface Request {
  jsonrpc: '2.0'
  id: string | number
  method: string
  params?: unknown
}

/**
 * Starts reading `input` at once and answers its first frame when it is an `initialize` request
 * with a numeric `protocolVersion` (any other first frame is left to the server, which answers
 * or refuses it as usual).
 * @throws a zod error naming the field when `config` is invalid (as `runAcp` would).
 */
export function answerInitializeEarly(options: EarlyInitializeOptions): EarlyInitialize {
  const config = Config.parse(options.config)
  const input = new PassThrough()
  const state: { answeredId?: string | number; early?: unknown; peeking: boolean; head: Buffer[]; headBytes: number } = {
    peeking: true,
    head: [],
    headBytes: 0,
  }

  const peek = (chunk: Buffer | string) => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    const newline = bytes.indexOf(10)
    state.head.push(newline === -1 ? bytes : bytes.subarray(0, newline))
    state.headBytes += newline === -1 ? bytes.length : newline
    if (newline === -1 && state.headBytes <= MAX_EARLY_FRAME_BYTES) return
    stopPeeking()
    if (newline === -1) return
    const request = initializeRequest(Buffer.concat(state.head).toString('utf8'))
    if (request === undefined) return
    const answer = { jsonrpc: '2.0', id: request.id, result: initializeResponse(config) }
    state.answeredId = request.id
    state.early = answer
    options.output.write(`${JSON.stringify(answer)}\n`)
  }
  const stopPeeking = () => {
    if (!state.peeking) return
    state.peeking = false
    options.input.off('data', peek)
  }
  options.input.on('data', peek)
  options.input.pipe(input)

  // Drops the server's answer to the request answered early, then passes everything through.
  let pending = ''
  let dropped = false
  const output = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      if (dropped || state.answeredId === undefined) {
        options.output.write(chunk, (error?: Error | null) => callback(error ?? null))
        return
      }
      pending += typeof chunk === 'string' ? chunk : chunk.toString('utf8')
      let out = ''
      for (let newline = pending.indexOf('\n'); newline !== -1 && !dropped; newline = pending.indexOf('\n')) {
        const line = pending.slice(0, newline + 1)
        pending = pending.slice(newline + 1)
        const frame = parse(line)
        if (isAnswerTo(frame, state.answeredId)) {
          dropped = true
          if (!isDeepStrictEqual(frame, state.early)) options.onMismatch?.(state.early, frame)
        } else {
          out += line
        }
      }
      if (dropped) {
        out += pending
        pending = ''
      }
      if (out === '') callback()
      else options.output.write(out, (error?: Error | null) => callback(error ?? null))
    },
  })

  return {
    input,
    output,
    get answered() {
      return state.answeredId !== undefined
    },
    close() {
      stopPeeking()
      options.input.unpipe(input)
      input.end()
    },
  }
}

function parse(line: string): unknown {
  try {
    return JSON.parse(line)
  } catch {
    return undefined
  }
}

/** A JSON-RPC 2.0 `initialize` request (an id, not a notification) with a numeric protocol version. */
function initializeRequest(line: string): Request | undefined {
  const frame = parse(line) as Partial<Request> | undefined
  if (typeof frame !== 'object' || frame === null || Array.isArray(frame)) return undefined
  if (frame.jsonrpc !== '2.0' || frame.method !== 'initialize') return undefined
  if (typeof frame.id !== 'string' && typeof frame.id !== 'number') return undefined
  const params = frame.params as { protocolVersion?: unknown } | undefined
  if (typeof params !== 'object' || params === null || typeof params.protocolVersion !== 'number') return undefined
  return frame as Request
}

/** A response (result or error, no method) with this id. */
function isAnswerTo(frame: unknown, id: string | number): boolean {
  if (typeof frame !== 'object' || frame === null) return false
  const message = frame as { id?: unknown; method?: unknown; result?: unknown; error?: unknown }
  return message.id === id && message.method === undefined && ('result' in message || 'error' in message)
}
