/**
 * `ctx.tasks`: background work owned by an agent. See `types.ts` for the contract.
 *
 * A task lives `running → completed | stopped | failed | killed`. Its `run` is called
 * synchronously by `start`; whatever `run` does, the task ends exactly once, when `run` settles.
 * `kill` only asks (the `cancel` hook, then the abort signal) and waits for that settling, so a
 * task is never reported ended while its producer still runs.
 */
import { Service, type Context, type Logger } from 'cordis'
import { z } from 'zod'
import type { Agent } from '@conch/agent'
import { messageOf, utf8Suffix } from '@conch/session'
import { OutputBuffer } from './output.ts'
import {
  TaskError,
  type KillReport,
  type LinePattern,
  type TaskController,
  type TaskInfo,
  type TaskOutcome,
  type TaskSnapshot,
  type TaskSpec,
  type TaskStatus,
  type TasksServiceApi,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    tasks: TasksService
  }
}

const Config = z
  .strictObject({
    outputLimitBytes: z
      .number()
      .int()
      .positive()
      .default(262_144)
      .describe('Bound on the unread output kept per task, in UTF-8 bytes; older unread output is dropped first.'),
    notifyTailLines: z.number().int().min(0).default(5).describe('Last lines of output a notification carries.'),
    notifyTailBytes: z.number().int().min(0).default(1024).describe('Bound on those lines, in UTF-8 bytes (the newest kept).'),
  })
  .prefault({})

interface TaskRecord {
  readonly id: string
  readonly spec: TaskSpec
  readonly owner: Agent
  readonly output: OutputBuffer
  readonly abort: AbortController
  readonly startedAt: string
  status: TaskStatus
  fields: Record<string, string>
  meta: Record<string, unknown>
  error?: string
  endedAt?: string
  /** Resolves (never rejects) once `run` has settled and the final status is set. */
  settled: Promise<void>
  /** Set by the first `kill`; later kills await the same promise. */
  killing?: Promise<void>
  /** Unregisters the owner-dispose cleanup. */
  unregister: () => void
  /** The newest output not yet read, for notifications (about `TAIL_KEEP_BYTES`; trimmed past twice that). */
  recent: string
  /** Events notified that the owner has not seen (neither delivered nor shown by a read), oldest first. */
  unseen: TaskEvent[]
  /** Called when an event is notified (`wait` listens). */
  readonly waiters: Set<() => void>
  /** Lines of the input's echo still to come (`echoLines`): the task's output keeps them; notifications do not. */
  echo: number
  /** The pattern not yet matched, and the incomplete last line it is tried on. */
  watch?: { pattern: LinePattern; partial: string } | undefined
  /** Releases the owner's wake hold (`notify`, `notifyOn`). */
  release: () => void
}

/** What a notification says happened (`matched "Listening on"`, `exited 2`); `end` when it is the task's end, which a read's status says. */
interface TaskEvent {
  readonly event: string
  readonly end: boolean
}

/** Newest output kept per task for notifications, and longest partial line a pattern is tried on (bytes / characters). */
const TAIL_KEEP_BYTES = 16_384
const PARTIAL_LINE_CHARS = 4096

export default class TasksService extends Service implements TasksServiceApi {
  static Config = Config

  private readonly records = new Map<string, TaskRecord>()
  private readonly counters = { created: 0 }
  private readonly lifecycle = { disposing: false }
  private readonly log: Logger

  constructor(ctx: Context, public config: TasksService.Config) {
    super(ctx, 'tasks')
    this.log = ctx.logger('tasks')
    ctx.effect(() => () => this.killAll(), 'tasks.dispose')
  }

  start(spec: TaskSpec): { id: string } {
    if (this.lifecycle.disposing) throw new TaskError('SERVICE_DISPOSING', { kind: spec.kind })
    if (spec.owner.state !== 'live') {
      throw new TaskError('OWNER_NOT_LIVE', { kind: spec.kind, owner: spec.owner.id, state: spec.owner.state })
    }
    const limit = spec.outputLimitBytes ?? this.config.outputLimitBytes
    if (!Number.isSafeInteger(limit) || limit <= 0) {
      throw new RangeError(`outputLimitBytes must be a positive integer number of bytes, got ${limit}`)
    }
    const id = `task-${++this.counters.created}`
    const abort = new AbortController()
    const record: TaskRecord = {
      id,
      spec,
      owner: spec.owner,
      output: new OutputBuffer(limit),
      abort,
      startedAt: new Date().toISOString(),
      status: 'running',
      fields: {},
      meta: {},
      settled: Promise.resolve(),
      unregister: () => {},
      recent: '',
      unseen: [],
      waiters: new Set(),
      echo: spec.echoLines ?? 0,
      ...(spec.notifyOn && { watch: { pattern: spec.notifyOn, partial: '' } }),
      release: spec.notify || spec.notifyOn ? spec.owner.holdWake() : () => {},
    }
    record.unregister = spec.owner.onDispose(() => this.forget(record))
    this.records.set(id, record)
    const controller: TaskController = {
      signal: abort.signal,
      write: (text) => this.ingest(record, text),
      changed: () => {
        if (record.watch && record.status === 'running') this.drain(record)
      },
    }
    record.settled = this.execute(record, controller)
    return { id }
  }

  read(owner: Agent, id: string): TaskSnapshot {
    return this.snapshot(this.lookup(owner, id))
  }

  async wait(
    owner: Agent,
    id: string,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<TaskSnapshot & { timedOut: boolean }> {
    const record = this.lookup(owner, id)
    // An event the owner has not seen is news at once; one delivered or read before is not.
    if (record.status === 'running' && record.unseen.length === 0 && !options.signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer)
          options.signal?.removeEventListener('abort', done)
          record.waiters.delete(done)
          resolve()
        }
        const timer = setTimeout(done, Math.max(0, options.timeoutMs))
        options.signal?.addEventListener('abort', done, { once: true })
        record.waiters.add(done)
        void record.settled.then(done)
      })
    }
    const snapshot = this.snapshot(record)
    return { ...snapshot, timedOut: snapshot.status === 'running' && snapshot.events.length === 0 }
  }

  async kill(owner: Agent, id: string): Promise<TaskSnapshot> {
    const record = this.lookup(owner, id)
    await this.stop(record)
    return this.snapshot(record)
  }

  list(owner: Agent): TaskInfo[] {
    return [...this.records.values()]
      .filter((record) => record.owner === owner)
      .map((record) => ({
        id: record.id,
        kind: record.spec.kind,
        label: record.spec.label,
        status: record.status,
        fields: { ...record.fields },
        startedAt: record.startedAt,
        ...(record.endedAt === undefined ? {} : { endedAt: record.endedAt }),
      }))
  }

  /** Runs the producer and records how it ended. Never rejects. */
  private async execute(record: TaskRecord, controller: TaskController): Promise<void> {
    let outcome: TaskOutcome | void = undefined
    let failure: { error: unknown } | undefined
    try {
      outcome = await record.spec.run(controller)
    } catch (error) {
      failure = { error }
    }
    // Pull producers: collect what was produced between the last read and the end.
    this.drain(record)
    if (outcome) {
      record.fields = { ...outcome.fields }
      record.meta = { ...outcome.meta }
    }
    if (record.killing) {
      record.status = 'killed'
    } else if (failure) {
      record.status = 'failed'
      record.error = messageOf(failure.error)
    } else {
      record.status = outcome?.status ?? 'completed'
    }
    record.endedAt = new Date().toISOString()
    record.unregister()
    if (record.status !== 'killed') {
      const event = outcome?.event ?? (record.status === 'failed' ? `failed: ${record.error ?? 'no reason given'}` : record.status)
      this.notify(record, { event, end: true }, outcome?.evidence, Boolean(record.spec.notify || record.spec.notifyOn))
    }
    record.release()
  }

  /** Takes output into the task: its unread buffer, and past the input's echo the recent tail and the pattern watch. */
  private ingest(record: TaskRecord, text: string): void {
    if (!text) return
    record.output.append(text)
    const fresh = pastEcho(record, text)
    if (!fresh) return
    // Trimmed only when twice the bound (in UTF-16 units), so many small writes stay cheap.
    record.recent += fresh
    if (record.recent.length > 2 * TAIL_KEEP_BYTES) record.recent = utf8Suffix(record.recent, TAIL_KEEP_BYTES)
    const watch = record.watch
    if (!watch) return
    const lines = (watch.partial + fresh).split('\n')
    watch.partial = lines.at(-1)!.slice(-PARTIAL_LINE_CHARS)
    const line = lines.find((candidate) => watch.pattern.test(candidate.replace(/\r$/, '')))
    if (line === undefined) return
    record.watch = undefined
    this.notify(record, { event: `matched ${JSON.stringify(watch.pattern.source)}`, end: false }, line.replace(/\r$/, '').slice(0, 200), true)
    record.release()
  }

  /**
   * Queues a notification about the task on its owner, with the last lines of its output the
   * owner has not read, and ends a `wait` for news. A read before delivery shows the event (and
   * those lines), which withdraws it. Delivered, the event is seen and the tail counts as read:
   * the next read starts after it, and counts the unread lines before it as omitted.
   */
  private notify(record: TaskRecord, news: TaskEvent, evidence: string | undefined, wake: boolean): void {
    const { notifyTailLines, notifyTailBytes } = this.config
    // Lines as the evidence of a match is: without the carriage return a terminal ends them with.
    const lines = notifyTailLines === 0 ? '' : record.recent.replace(/\n+$/, '').split('\n').slice(-notifyTailLines).map((line) => line.replace(/\r$/, '')).join('\n')
    const tail = utf8Suffix(lines, notifyTailBytes)
    const end = record.output.end
    // A line cut at its head by the byte bound was not seen whole.
    const seenLines = tail === '' ? 0 : tail.split('\n').length - (tail === lines ? 0 : 1)
    // Delivered only when no read came since (a read takes every unseen event, which withdraws it).
    const delivered = () => {
      record.unseen = record.unseen.filter((unseen) => unseen !== news)
      if (tail === '') return
      const since = record.output.end - end
      record.output.forget(end, seenLines)
      // Nor does a later notification's tail repeat it.
      record.recent = since === 0 ? '' : record.recent.slice(-since)
    }
    record.unseen.push(news)
    record.owner.notify({
      source: record.id,
      event: news.event,
      label: record.spec.label,
      ...(evidence !== undefined && { evidence }),
      ...(tail !== '' && { tail }),
      wake,
      withdrawn: () => !record.unseen.includes(news),
      delivered,
    })
    for (const waiter of [...record.waiters]) waiter()
  }

  /** Asks a running task to stop and waits until its `run` has settled. */
  private stop(record: TaskRecord): Promise<void> {
    if (record.status !== 'running') return record.settled
    record.killing ??= (async () => {
      let report: KillReport | void = undefined
      try {
        report = await record.spec.cancel?.()
      } catch (error) {
        this.log.warn('cancel hook of %s (%s) failed: %s', record.id, record.spec.kind, messageOf(error))
      }
      record.abort.abort(new DOMException(`${record.id} was killed`, 'AbortError'))
      await record.settled
      if (report?.output) this.ingest(record, report.output)
      if (report?.fields) record.fields = { ...record.fields, ...report.fields }
    })()
    return record.killing
  }

  /** The owner-dispose cleanup of one task: stop it, then drop it (its owner can no longer read it). */
  private async forget(record: TaskRecord): Promise<void> {
    await this.stop(record)
    this.records.delete(record.id)
  }

  private async killAll(): Promise<void> {
    this.lifecycle.disposing = true
    const records = [...this.records.values()]
    await Promise.all(records.map((record) => this.stop(record)))
    this.records.clear()
  }

  private lookup(owner: Agent, id: string): TaskRecord {
    const record = this.records.get(id)
    if (!record) {
      throw new TaskError('NO_TASK', { id, own: this.list(owner).map((info) => info.id) })
    }
    if (record.owner !== owner) {
      throw new TaskError('FOREIGN_TASK', { id })
    }
    return record
  }

  private drain(record: TaskRecord): void {
    const drain = record.spec.drain
    if (!drain) return
    try {
      this.ingest(record, drain.call(record.spec))
    } catch (error) {
      this.log.warn('drain of %s (%s) failed: %s', record.id, record.spec.kind, messageOf(error))
    }
  }

  /** Reads the task: drains a running pull producer, then takes the unread output. */
  private snapshot(record: TaskRecord): TaskSnapshot {
    if (record.status === 'running') this.drain(record)
    const { text, dropped } = record.output.take()
    // What the model reads now is not repeated in a notification's tail, nor are the events it shows.
    record.recent = ''
    const events = record.unseen.filter((unseen) => !unseen.end).map((unseen) => unseen.event)
    record.unseen = []
    return {
      id: record.id,
      kind: record.spec.kind,
      label: record.spec.label,
      status: record.status,
      output: text,
      omitted: dropped,
      events,
      fields: { ...record.fields },
      meta: { ...record.meta },
      ...(record.error === undefined ? {} : { error: record.error }),
      startedAt: record.startedAt,
      ...(record.endedAt === undefined ? {} : { endedAt: record.endedAt }),
    }
  }
}

/** `text` without the lines of the input's echo still to come; an incomplete line among them is the start of one. */
function pastEcho(record: TaskRecord, text: string): string {
  let rest = text
  for (; record.echo > 0; record.echo--) {
    const end = rest.indexOf('\n')
    if (end < 0) return ''
    rest = rest.slice(end + 1)
  }
  return rest
}

export namespace TasksService {
  export type Config = z.output<typeof Config>
}

