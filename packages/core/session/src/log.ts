/**
 * One live session: the in-memory event list, the optional JSONL file, and the append
 * pipeline (interceptors → seq → write → store → subscribers). The file is open only while a
 * line is written, so idle sessions hold no descriptor.
 */
import { appendFileSync, closeSync } from 'node:fs'
import {
  SessionError,
  type PendingEvent,
  type SessionEvent,
  type SessionInterceptor,
  type SessionLog,
  type SessionStartData,
  type SessionSubscriber,
} from './types.ts'

/** What a session needs from its service: the current hooks and a place to report subscriber errors. */
export interface SessionHooks {
  interceptors(): readonly SessionInterceptor[]
  subscribers(): readonly SessionSubscriber[]
  subscriberFailed(error: unknown, event: SessionEvent, log: SessionLog): void
}

export class Session implements SessionLog {
  private readonly stored: SessionEvent[]
  private closed = false

  /**
   * @param events replayed history (empty for a new session; its first append must be `session/start`)
   * @param openFile opens `file` for appending (the caller's path checks) and returns its
   *   descriptor, or undefined without persistence
   */
  constructor(
    readonly id: string,
    events: SessionEvent[],
    private readonly hooks: SessionHooks,
    readonly file: string | undefined,
    private readonly openFile: (() => number) | undefined,
  ) {
    this.stored = events
  }

  get start(): SessionStartData {
    return (this.stored[0]?.data ?? {}) as SessionStartData
  }

  get isClosed(): boolean {
    return this.closed
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
    if (this.closed) {
      throw new SessionError('SESSION_CLOSED', `session ${this.id} is closed; open it again to append`)
    }
    if (typeof type !== 'string' || type === '') throw new TypeError(`session ${this.id}: event type must be a non-empty string`)
    if (data === undefined) throw new TypeError(`session ${this.id}: data of ${type} is undefined; use null or an object`)
    const pending: PendingEvent<T> = { sessionId: this.id, type, data }
    for (const interceptor of [...this.hooks.interceptors()]) interceptor(pending, this)
    // An interceptor may have closed the session (for example by disposing its agent).
    if (this.closed) {
      throw new SessionError('SESSION_CLOSED', `session ${this.id} is closed; open it again to append`)
    }
    const line = JSON.stringify({
      seq: this.stored.length + 1,
      ts: new Date().toISOString(),
      sessionId: this.id,
      type,
      data,
    })
    const event = JSON.parse(line) as SessionEvent<T>
    if (this.openFile !== undefined) {
      const fd = this.openFile()
      try {
        appendFileSync(fd, line + '\n')
      } finally {
        closeSync(fd)
      }
    }
    this.stored.push(event)
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
