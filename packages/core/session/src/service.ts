/**
 * `ctx.sessions`: creates, replays and closes per-agent event logs, and owns the interceptor
 * (vetoing pre-append hook) and subscriber (post-append listener) registrations.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, openSync, unlinkSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Service, type Context, type Logger } from 'cordis'
import { z } from 'zod'
import { Session, type SessionHooks } from './log.ts'
import { readSessionLog } from './replay.ts'
import {
  SessionError,
  type SessionEvent,
  type SessionInterceptor,
  type SessionLog,
  type SessionServiceApi,
  type SessionStartData,
  type SessionSubscriber,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    sessions: SessionService
  }
}

/** Session ids become file names, so they are restricted to a safe alphabet. */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

class SessionService extends Service implements SessionServiceApi {
  static Config = z
    .object({
      dir: z
        .string()
        .min(1)
        .optional()
        .describe('Folder for `<id>.jsonl` session logs; relative to the working directory. Unset: memory only.'),
    })
    .prefault({})

  private readonly live = new Map<string, Session>()
  private readonly interceptors: SessionInterceptor[] = []
  private readonly subscribers: SessionSubscriber[] = []
  private readonly hooks: SessionHooks
  private readonly logger: Logger
  /** Absolute persistence folder, or undefined when sessions live in memory only. */
  readonly dir: string | undefined

  constructor(ctx: Context, public config: SessionService.Config) {
    super(ctx, 'sessions')
    this.dir = config.dir === undefined ? undefined : resolve(config.dir)
    this.logger = ctx.logger('sessions')
    this.hooks = {
      interceptors: () => this.interceptors,
      subscribers: () => this.subscribers,
      subscriberFailed: (error, event, log) => {
        this.logger.warn('subscriber failed on %s #%d of session %s: %s', event.type, event.seq, log.id, error)
      },
    }
    ctx.effect(() => () => {
      for (const session of this.live.values()) session.close()
      this.live.clear()
    }, 'sessions.closeAll')
  }

  /**
   * Creates a session and appends its `session/start` event (`{workspaceRoot?}`, made absolute).
   * With `dir` set, creates `<dir>/<id>.jsonl` exclusively (O_EXCL), creating the folder on demand.
   * @throws SessionError `DUPLICATE_SESSION`, `INVALID_SESSION_ID`; an interceptor's error when it
   *   vetoes `session/start` (nothing is left behind, not even the file).
   */
  create(options: { id?: string; workspaceRoot?: string } = {}): SessionLog {
    const id = options.id ?? this.freshId()
    this.checkId(id)
    if (this.live.has(id)) throw new SessionError('DUPLICATE_SESSION', `session ${id} is already live`)
    let file: string | undefined
    let fd: number | undefined
    if (this.dir !== undefined) {
      mkdirSync(this.dir, { recursive: true })
      file = join(this.dir, `${id}.jsonl`)
      try {
        // Owner-only: a session log holds tool output, which may include secrets.
        fd = openSync(file, 'wx', 0o600)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
          throw new SessionError('DUPLICATE_SESSION', `session ${id} already exists at ${file}; open it instead of creating it`)
        }
        throw error
      }
    }
    const session = new Session(id, [], this.hooks, file, fd)
    const start: SessionStartData = {}
    if (options.workspaceRoot !== undefined) start.workspaceRoot = resolve(options.workspaceRoot)
    try {
      session.append('session/start', start)
    } catch (error) {
      session.close()
      if (file !== undefined) unlinkSync(file)
      throw error
    }
    this.live.set(id, session)
    return session
  }

  /**
   * Returns the live session `id`, or replays `<dir>/<id>.jsonl` (without running interceptors or
   * subscribers) into a live session that appends to the same file.
   * @throws SessionError `NO_SESSION` (not live, and no file or persistence off),
   *   `INVALID_SESSION_ID`, `CORRUPT_LOG` naming the file and line.
   */
  open(id: string): SessionLog {
    const existing = this.live.get(id)
    if (existing) return existing
    this.checkId(id)
    if (this.dir === undefined) {
      throw new SessionError('NO_SESSION', `no live session ${id}, and sessions are not persisted (set the sessions "dir" config to keep them)`)
    }
    const file = join(this.dir, `${id}.jsonl`)
    if (!existsSync(file)) throw new SessionError('NO_SESSION', `no session ${id}: ${file} does not exist`)
    const events: SessionEvent[] = readSessionLog(file, id)
    const fd = openSync(file, 'a')
    const session = new Session(id, events, this.hooks, file, fd)
    this.live.set(id, session)
    return session
  }

  get(id: string): SessionLog | undefined {
    return this.live.get(id)
  }

  /** Live session ids in creation (or open) order. */
  ids(): string[] {
    return [...this.live.keys()]
  }

  intercept(interceptor: SessionInterceptor): () => void {
    return this.ctx.effect(() => {
      this.interceptors.push(interceptor)
      return () => remove(this.interceptors, interceptor)
    }, 'sessions.intercept')
  }

  subscribe(subscriber: SessionSubscriber): () => void {
    return this.ctx.effect(() => {
      this.subscribers.push(subscriber)
      return () => remove(this.subscribers, subscriber)
    }, 'sessions.subscribe')
  }

  /** Stops appends on session `id`, closes its file and forgets it. Unknown ids are ignored. */
  close(id: string): void {
    const session = this.live.get(id)
    if (!session) return
    this.live.delete(id)
    session.close()
  }

  private freshId(): string {
    while (true) {
      const id = `session-${randomBytes(4).toString('hex')}`
      if (this.live.has(id)) continue
      if (this.dir !== undefined && existsSync(join(this.dir, `${id}.jsonl`))) continue
      return id
    }
  }

  private checkId(id: string): void {
    if (typeof id !== 'string' || !SESSION_ID.test(id)) {
      throw new SessionError(
        'INVALID_SESSION_ID',
        `invalid session id ${JSON.stringify(id)}: use 1-128 characters of [A-Za-z0-9._-], starting with a letter or digit`,
      )
    }
  }
}

function remove<T>(list: T[], item: T): void {
  const index = list.indexOf(item)
  if (index >= 0) list.splice(index, 1)
}

namespace SessionService {
  export type Config = z.output<typeof SessionService.Config>
}

export default SessionService
