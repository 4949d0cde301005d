/**
 * The managed worker's protocol: line-delimited JSON on the worker's fd 3 (never its stdout or
 * stderr). The main process treats the worker as hostile: every inbound line is bounded
 * (`maxMessageBytes`, counted before a line is complete), must be JSON and must match a strict
 * shape below, else it is a `PoolError` `PROTOCOL_VIOLATION`.
 */
import { z } from 'zod'
import { FAILURE_REASONS, PoolError } from './errors.ts'

const Id = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)
const Text = (max: number) => z.string().max(max)

export const KeySchema = z.strictObject({
  owner: Text(512),
  conversation: Text(512),
  kind: Text(128),
  model: Text(256),
  account: Text(256),
  bare: z.boolean(),
})

/** Counters the worker may raise (the names of `PoolMetrics` fields). */
export const WORKER_COUNTERS = ['cacheHits', 'spawns', 'evictedIdle', 'evictedUnhealthy', 'evictedShutdown'] as const
export type WorkerCounter = (typeof WORKER_COUNTERS)[number]

export const SessionInfoSchema = z.strictObject({
  key: KeySchema,
  state: z.enum(['booting', 'idle', 'busy', 'unhealthy', 'closing', 'closed']),
  turns: z.number().int().nonnegative(),
  pid: z.number().int().positive().optional(),
})
export type SessionInfo = z.output<typeof SessionInfoSchema>

/** What the worker may send; `maxText` bounds answer and message text (characters). */
export function workerMessageSchema(maxText: number, maxSessions: number) {
  return z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('ready'), pid: z.number().int().positive() }),
    z.strictObject({ type: z.literal('pong'), id: Id }),
    z.discriminatedUnion('ok', [
    z.strictObject({
      type: z.literal('result'),
      id: Id,
      ok: z.literal(true),
      text: Text(maxText),
      source: z.enum(['screen', 'transcript']),
      path: z.enum(['warm', 'booted', 'one-shot-pty']),
      bootMs: z.number().nonnegative().optional(),
      phases: z.strictObject({ echo: z.number().nonnegative(), answer: z.number().nonnegative(), settle: z.number().nonnegative(), transcript: z.number().nonnegative() }).optional(),
    }),
    z.strictObject({
      type: z.literal('result'),
      id: Id,
      ok: z.literal(false),
      reason: z.enum([...FAILURE_REASONS, 'cancelled']),
      message: Text(maxText),
      midTask: z.boolean(),
      elapsedMs: z.number().nonnegative(),
      bootMs: z.number().nonnegative().optional(),
    }),
    ]),
    z.strictObject({ type: z.literal('count'), name: z.enum(WORKER_COUNTERS) }),
    z.strictObject({ type: z.literal('sessions'), sessions: z.array(SessionInfoSchema).max(maxSessions) }),
  ])
}
export type WorkerMessage = z.output<ReturnType<typeof workerMessageSchema>>

/** An absolute path without NUL or `..` segments, bounded (PATH_MAX of Linux, limits.h). */
const AbsolutePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((path) => path.startsWith('/') && !path.includes('\0') && !path.split('/').includes('..'), 'must be an absolute path without NUL or ".." segments')

/** The owner's sandbox policy as the main process resolved it, as data; the worker opens the owner's CLIs under exactly this. */
export const OwnerPolicySchema = z.strictObject({
  mode: z.enum(['read-only', 'workspace-write', 'danger-full-access']),
  workspaceRoot: AbsolutePath,
  protectedPaths: z.array(AbsolutePath).max(1024),
  /** Paths hidden in the CLI's sandbox (`ctx.sandbox.hiddenPaths()` and the pool's `stateDir`); its own home stays visible. */
  hiddenPaths: z.array(AbsolutePath).max(1024).optional(),
})
export type OwnerPolicy = z.output<typeof OwnerPolicySchema>

/** The `@conch/sandbox-local` and `@conch/pty-local` config a worker composes its terminals from (checked by their schemas there). */
export const TerminalSectionsSchema = z.strictObject({
  sandboxLocal: z.unknown(),
  ptyLocal: z.unknown(),
})
export type TerminalSections = z.output<typeof TerminalSectionsSchema>

export const MainMessageSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('init'), config: z.unknown(), env: z.record(z.string(), z.string()), terminal: TerminalSectionsSchema.optional() }),
  z.strictObject({
    type: z.literal('invoke'),
    id: Id,
    key: KeySchema,
    prompt: z.string(),
    capMs: z.number().positive(),
    stallMs: z.number().positive(),
    cwd: z.string(),
    oneShot: z.boolean(),
    policy: OwnerPolicySchema.optional(),
  }),
  z.strictObject({ type: z.literal('cancel'), id: Id }),
  z.strictObject({ type: z.literal('ping'), id: Id }),
  z.strictObject({ type: z.literal('evict_tick') }),
  z.strictObject({ type: z.literal('set_evict_every'), ms: z.number().int().positive() }),
])
export type MainMessage = z.output<typeof MainMessageSchema>

/**
 * Splits a byte stream into `\n`-ended lines of at most `maxBytes` bytes (newline not counted),
 * each decoded as UTF-8 once complete and parsed as JSON. `feed` returns the values, then the
 * first violation, after which it returns nothing more.
 */
export class LineDecoder {
  private pending: Buffer[] = []
  private pendingBytes = 0
  private broken = false

  constructor(private readonly maxBytes: number) {}

  feed(chunk: Buffer): { values: unknown[]; violation?: PoolError<'PROTOCOL_VIOLATION'> } {
    const values: unknown[] = []
    if (this.broken) return { values }
    let start = 0
    for (;;) {
      const newline = chunk.indexOf(0x0a, start)
      const end = newline < 0 ? chunk.length : newline
      if (this.pendingBytes + (end - start) > this.maxBytes) return this.fail(values, `a line longer than ${this.maxBytes} bytes`)
      if (newline < 0) {
        if (end > start) {
          this.pending.push(chunk.subarray(start))
          this.pendingBytes += end - start
        }
        return { values }
      }
      const line = Buffer.concat([...this.pending, chunk.subarray(start, end)]).toString('utf8')
      this.pending = []
      this.pendingBytes = 0
      start = newline + 1
      if (line.trim() === '') return this.fail(values, 'an empty line')
      try {
        values.push(JSON.parse(line))
      } catch {
        return this.fail(values, `a line that is not JSON: ${JSON.stringify(line.slice(0, 80))}`)
      }
    }
  }

  private fail(values: unknown[], what: string) {
    this.broken = true
    this.pending = []
    return { values, violation: new PoolError('PROTOCOL_VIOLATION', { sent: what }) }
  }
}

/** One line of the protocol. */
export function encodeLine(message: MainMessage | WorkerMessage): string {
  return `${JSON.stringify(message)}\n`
}
