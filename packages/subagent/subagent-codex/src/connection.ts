/**
 * JSON-RPC 2.0 over JSON Lines, as `codex app-server` speaks it (no `"jsonrpc"` member). The
 * child is not trusted: a line that is not a JSON object, a response to no request, or a line
 * over `maxLineBytes` is a violation, reported once through `onViolation`; pending requests reject.
 */
import { SubagentError } from '@conch/subagent'
import type { RequestId } from './protocol.ts'

export interface IncomingRequest {
  id: RequestId
  method: string
  params: unknown
}

export interface ConnectionHandlers {
  onNotification(method: string, params: unknown): void
  onRequest(request: IncomingRequest): void
  onViolation(reason: string): void
}

type Json = Record<string, unknown>

export class JsonLinesConnection {
  private nextId = 1
  private readonly pending = new Map<RequestId, { method: string; resolve(value: unknown): void; reject(error: Error): void }>()
  private buffer = ''
  private closedReason: string | undefined

  constructor(
    private readonly write: (line: string) => void,
    private readonly handlers: ConnectionHandlers,
    private readonly maxLineBytes = 16 * 1024 * 1024,
  ) {}

  /** Feeds stdout text; complete lines are handled in order. */
  feed(chunk: string): void {
    if (this.closedReason !== undefined) return
    this.buffer += chunk
    let newline: number
    while ((newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline).trim()
      this.buffer = this.buffer.slice(newline + 1)
      if (line !== '') this.handle(line)
      if (this.closedReason !== undefined) return
    }
    if (Buffer.byteLength(this.buffer) > this.maxLineBytes) this.violate(`a line longer than ${this.maxLineBytes} bytes`)
  }

  /** The output ended (EOF) or the child went away: pending requests reject with `reason`. */
  close(reason: string): void {
    if (this.closedReason !== undefined) return
    this.closedReason = reason
    for (const [id, entry] of this.pending) {
      this.pending.delete(id)
      entry.reject(new SubagentError('RPC_FAILED', { method: entry.method, closed: reason }))
    }
  }

  get closed(): boolean {
    return this.closedReason !== undefined
  }

  request<T>(method: string, params: unknown): Promise<T> {
    if (this.closedReason !== undefined) return Promise.reject(new SubagentError('RPC_FAILED', { method, closed: this.closedReason }))
    const id = this.nextId++
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { method, resolve: resolve as (value: unknown) => void, reject })
      this.send({ id, method, params })
    })
  }

  notify(method: string, params?: unknown): void {
    if (this.closedReason !== undefined) return
    this.send(params === undefined ? { method } : { method, params })
  }

  respond(id: RequestId, result: unknown): void {
    if (this.closedReason !== undefined) return
    this.send({ id, result })
  }

  respondError(id: RequestId, code: number, message: string): void {
    if (this.closedReason !== undefined) return
    this.send({ id, error: { code, message } })
  }

  private send(message: Json): void {
    this.write(`${JSON.stringify(message)}\n`)
  }

  private handle(line: string): void {
    let message: unknown
    try {
      message = JSON.parse(line)
    } catch {
      return this.violate(`a line that is not JSON: ${line.slice(0, 120)}`)
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return this.violate(`a line that is not a JSON object: ${line.slice(0, 120)}`)
    const json = message as Json
    const id = json.id
    const hasId = typeof id === 'string' || typeof id === 'number'
    if (typeof json.method === 'string') {
      if (hasId) this.handlers.onRequest({ id, method: json.method, params: json.params })
      else this.handlers.onNotification(json.method, json.params)
      return
    }
    if (!hasId) return this.violate(`a message with neither method nor id: ${line.slice(0, 120)}`)
    const entry = this.pending.get(id)
    if (entry === undefined) return this.violate(`a response to request ${JSON.stringify(id)}, which was never sent or already answered`)
    this.pending.delete(id)
    if ('error' in json && json.error !== undefined && json.error !== null) {
      const error = json.error as { code?: unknown; message?: unknown }
      entry.reject(new SubagentError('RPC_FAILED', { method: entry.method, error: typeof error.message === 'string' ? error.message : JSON.stringify(error) }))
    } else {
      entry.resolve(json.result)
    }
  }

  private violate(reason: string): void {
    const text = `codex app-server sent ${reason}`
    this.close(text)
    this.handlers.onViolation(text)
  }
}
