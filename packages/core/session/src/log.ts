/**
 * One live session: the in-memory event list, the optional JSONL file, and the append
 * pipeline (interceptors → seq → write → store → subscribers). The file is open only while a
 * line is written, so idle sessions hold no descriptor.
 */
import { appendFileSync, closeSync } from 'node:fs'
import { boundEvent, LiveRedaction, redactJson, type SessionRedactor } from './bound.ts'
import {
  SessionError,
  type PendingEvent,
  type SessionEvent,
  type SessionInterceptor,
  type SessionLog,
  type SessionStartData,
  type SessionSubscriber,
} from './types.ts'

/** What a session needs from its service: the current hooks, its bounds and a place to report subscriber errors. */
export interface SessionHooks {
  interceptors(): readonly SessionInterceptor[]
  redactors(): readonly SessionRedactor[]
  maxEventBytes: number
  subscribers(): readonly SessionSubscriber[]
  subscriberFailed(error: unknown, event: SessionEvent, log: SessionLog): void
}

/**
 * Whether an event is kept in memory. A nested call's events (data with a `parentCallId`: the
 * calls a tool such as run_code makes) are written and given to subscribers, but no replay reads
 * them (the conversation holds only the model's own calls), so memory does not keep them.
 */
export function retained(event: { data: unknown }): boolean {
  const data = event.data as { parentCallId?: unknown } | null
  return typeof data !== 'object' || data === null || typeof data.parentCallId !== 'string'
}

export class Session implements SessionLog {
  private closed = false

  /**
   * @param stored replayed history, the events kept in memory (empty for a new session; its first append must be `session/start`)
   * @param seq the last `seq` given, events not kept included (0 for a new session)
   * @param openFile opens `file` for appending (the caller's path checks) and returns its
   *   descriptor, or undefined without persistence
   */
  constructor(
    readonly id: string,
    private readonly stored: SessionEvent[],
    private seq: number,
    private readonly hooks: SessionHooks,
    readonly file: string | undefined,
    private readonly openFile: (() => number) | undefined,
  ) {}

  redact(text: string): string {
    let out = text
    for (const redactor of this.hooks.redactors()) out = redactor.redact(out)
    return out
  }

  liveRedaction(): LiveRedaction {
    return new LiveRedaction([...this.hooks.redactors()])
  }

  get start(): SessionStartData {
    return (this.stored[0]?.data ?? {}) as SessionStartData
  }

  events(): readonly SessionEvent[] {
    return this.stored
  }

  last<T = unknown>(type: string): SessionEvent<T> | undefined {
    for (let index = this.stored.length - 1; index >= 0; index--) {
      const event = this.stored[index]!
      if (event.type === type) return event as SessionEvent<T>
    }
    return undefined
  }

  /**
   * Runs the interceptors (a throw vetoes: nothing is stored or written and the error propagates
   * unchanged), then assigns `seq` and `ts`, writes the JSON line synchronously, stores the event
   * and calls the subscribers. The stored and returned event is the JSON round-trip of `data`,
   * exactly what a replay of the file yields.
   * @throws SessionError `SESSION_CLOSED`; TypeError for an empty type or data that JSON cannot
   *   represent (`undefined`, BigInt, cycles).
   */
  append<T>(type: string, data: T): SessionEvent<T> {
    if (this.closed) throw new SessionError('SESSION_CLOSED', { sessionId: this.id })
    if (typeof type !== 'string' || type === '') throw new TypeError(`session ${this.id}: event type must be a non-empty string`)
    if (data === undefined) throw new TypeError(`session ${this.id}: data of ${type} is undefined; use null or an object`)
    const pending: PendingEvent<T> = { sessionId: this.id, type, data }
    for (const interceptor of [...this.hooks.interceptors()]) interceptor(pending, this)
    // An interceptor may have closed the session (for example by disposing its agent).
    if (this.closed) throw new SessionError('SESSION_CLOSED', { sessionId: this.id })
    // The JSON form first (what a replay yields; TypeError for what JSON cannot hold), then the
    // redactors on every string, then the bound.
    let value = JSON.parse(JSON.stringify(data) ?? 'null') as unknown
    if (this.hooks.redactors().length > 0) value = redactJson(value, (text) => this.redact(text))
    const seq = this.seq + 1
    const ts = new Date().toISOString()
    const line = boundEvent(
      value,
      (bounded, omittedBytes) => JSON.stringify({ seq, ts, sessionId: this.id, type, data: bounded, ...(omittedBytes > 0 && { omittedBytes }) }),
      this.hooks.maxEventBytes,
    )
    const event = JSON.parse(line) as SessionEvent<T>
    if (this.openFile !== undefined) {
      const fd = this.openFile()
      try {
        appendFileSync(fd, line + '\n')
      } finally {
        closeSync(fd)
      }
    }
    this.seq = seq
    if (retained(event)) this.stored.push(event)
    for (const subscriber of [...this.hooks.subscribers()]) {
      try {
        subscriber(event, this)
      } catch (error) {
        this.hooks.subscriberFailed(error, event, this)
      }
    }
    return event
  }

  /** Stops accepting appends. Idempotent. */
  close(): void {
    this.closed = true
  }
}
