/**
 * `ctx.sessions`: creates, replays and closes per-agent event logs, and owns the interceptor
 * (vetoing pre-append hook) and subscriber (post-append listener) registrations.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, lstatSync, unlinkSync } from 'node:fs'
import { join, resolve, sep } from 'node:path'
import { Service, type Context, type Logger } from 'cordis'
import { z } from 'zod'
import { BeneathError } from '@conch/subprocess'
import { openLogDir, openLogFile } from './files.ts'
import { registerListed } from './registry.ts'
import { retained, Session, type SessionHooks } from './log.ts'
import { readSessionLog } from './replay.ts'
import { canonicalWorkspace, defaultLogBase, workspaceId } from './workspace.ts'
import {
  SessionError,
  type SessionEvent,
  type SessionInterceptor,
  type SessionLog,
  type SessionRedactor,
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
    .strictObject({
      // persist and allowInsideWorkspace are optional (false when absent) rather than defaulted,
      // so configs built literally before they existed stay valid.
      persist: z
        .boolean()
        .optional()
        .describe('Write session logs to `$XDG_STATE_HOME/conch/sessions/<workspace id>/<id>.jsonl` (outside every workspace). Setting `dir` turns persistence on too.'),
      dir: z
        .string()
        .min(1)
        .optional()
        .describe('Folder for `<id>.jsonl` session logs instead of the state folder; relative to the working directory. Unset (and `persist` false): memory only.'),
      allowInsideWorkspace: z
        .boolean()
        .optional()
        .describe("Allow a `dir` inside a session's workspace root, where its terminals can edit the log. Refused by default."),
      maxEventBytes: z
        .number()
        .int()
        .min(4096)
        .default(1_048_576)
        .describe("Bound of one event's JSON line, in UTF-8 bytes: the longest strings of a larger event are cut, each with a notice, and the event records `omittedBytes`."),
    })
    .prefault({})

  private readonly live = new Map<string, Session>()
  private readonly interceptors: SessionInterceptor[] = []
  private readonly subscribers: SessionSubscriber[] = []
  private readonly redactors: SessionRedactor[] = []
  private readonly hooks: SessionHooks
  private readonly logger: Logger
  /** The absolute configured `dir`, or undefined (state folder or memory only; see `logDir`). */
  readonly dir: string | undefined

  readonly config: z.output<typeof SessionService.Config>

  /** `config` as written (a literal `{}` included): the schema fills the defaults. */
  constructor(ctx: Context, config: SessionService.Config) {
    super(ctx, 'sessions')
    this.config = SessionService.Config.parse(config)
    this.dir = this.config.dir === undefined ? undefined : resolve(this.config.dir)
    this.logger = ctx.logger('sessions')
    this.hooks = {
      interceptors: () => this.interceptors,
      subscribers: () => this.subscribers,
      redactors: () => this.redactors,
      maxEventBytes: this.config.maxEventBytes,
      subscriberFailed: (error, event, log) => {
        this.logger.warn('subscriber failed on %s #%d of session %s: %s', event.type, event.seq, log.id, error)
      },
    }
    ctx.effect(() => () => {
      for (const session of this.live.values()) session.close()
      this.live.clear()
    }, 'sessions.closeAll')
  }

  create(options: { id?: string; workspaceRoot?: string } = {}): SessionLog {
    const dir = this.checkedLogDir(options.workspaceRoot)
    const id = options.id ?? this.freshId(dir)
    this.checkId(id)
    if (this.live.has(id)) throw new SessionError('DUPLICATE_SESSION', { sessionId: id })
    let file: string | undefined
    if (dir !== undefined) {
      file = join(dir, `${id}.jsonl`)
      const folder = openLogDir(dir, { create: true })!
      try {
        // Owner-only: a session log holds tool output, which may include secrets.
        closeSync(openLogFile(folder, `${id}.jsonl`, 'create'))
      } catch (error) {
        if (error instanceof BeneathError && error.code === 'PATH_EXISTS') {
          throw new SessionError('DUPLICATE_SESSION', { sessionId: id, file })
        }
        throw error
      } finally {
        closeSync(folder.fd)
      }
    }
    const session = new Session(id, [], 0, this.hooks, file, dir === undefined ? undefined : appender(dir, id))
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

  open(id: string, options: { workspaceRoot?: string } = {}): SessionLog {
    const existing = this.live.get(id)
    if (existing) return existing
    this.checkId(id)
    const dir = this.checkedLogDir(options.workspaceRoot)
    if (dir === undefined) {
      throw new SessionError('NO_SESSION', { sessionId: id })
    }
    const file = join(dir, `${id}.jsonl`)
    const folder = openLogDir(dir, { create: false })
    if (folder === undefined) throw new SessionError('NO_SESSION', { sessionId: id, file })
    let history: { events: SessionEvent[]; seq: number }
    try {
      let readFd: number
      try {
        readFd = openLogFile(folder, `${id}.jsonl`, 'read')
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new SessionError('NO_SESSION', { sessionId: id, file })
        throw error
      }
      try {
        history = readSessionLog(readFd, id, file, retained)
      } finally {
        closeSync(readFd)
      }
      // Appending must work: a log that cannot be opened for writing is refused now, not at the first event.
      closeSync(openLogFile(folder, `${id}.jsonl`, 'append'))
    } finally {
      closeSync(folder.fd)
    }
    const session = new Session(id, history.events, history.seq, this.hooks, file, appender(dir, id))
    this.live.set(id, session)
    return session
  }

  logDir(workspaceRoot: string = process.cwd()): string | undefined {
    if (this.dir !== undefined) return this.dir
    if (!this.config.persist) return undefined
    return join(defaultLogBase(process.env), workspaceId(canonicalWorkspace(workspaceRoot)))
  }

  get(id: string): SessionLog | undefined {
    return this.live.get(id)
  }

  /** Live session ids in creation (or open) order. */
  ids(): string[] {
    return [...this.live.keys()]
  }

  intercept(interceptor: SessionInterceptor): () => void {
    return registerListed(this.ctx, this.interceptors, interceptor, 'sessions.intercept')
  }

  subscribe(subscriber: SessionSubscriber): () => void {
    return registerListed(this.ctx, this.subscribers, subscriber, 'sessions.subscribe')
  }

  redact(redactor: SessionRedactor): () => void {
    return registerListed(this.ctx, this.redactors, redactor, 'sessions.redact')
  }

  close(id: string): void {
    const session = this.live.get(id)
    if (!session) return
    this.live.delete(id)
    session.close()
  }

  /** `logDir`, refusing a folder inside the workspace (its terminals could edit the history). */
  private checkedLogDir(workspaceRoot: string | undefined): string | undefined {
    const dir = this.logDir(workspaceRoot)
    if (dir === undefined || this.config.allowInsideWorkspace) return dir
    const workspace = canonicalWorkspace(workspaceRoot ?? process.cwd())
    if (dir === workspace || dir.startsWith(workspace.endsWith(sep) ? workspace : workspace + sep)) {
      throw new SessionError('LOG_IN_WORKSPACE', { dir, workspace })
    }
    return dir
  }

  /** A fresh id (never one the folder already holds; `create` still opens exclusively). */
  private freshId(dir: string | undefined): string {
    while (true) {
      const id = `session-${randomBytes(4).toString('hex')}`
      if (this.live.has(id)) continue
      if (dir !== undefined && existsNoFollow(join(dir, `${id}.jsonl`))) continue
      return id
    }
  }

  private checkId(id: string): void {
    if (typeof id !== 'string' || !SESSION_ID.test(id)) {
      throw new SessionError('INVALID_SESSION_ID', { id })
    }
  }
}

/**
 * Opens `<dir>/<sessionId>.jsonl` for appending with the same path checks as when it was created.
 * @throws SessionError `NO_SESSION` when the file was deleted or moved while the session was live.
 */
function appender(dir: string, sessionId: string): () => number {
  const name = `${sessionId}.jsonl`
  return () => {
    const gone = (cause?: unknown) => new SessionError('NO_SESSION', { sessionId, file: join(dir, name), gone: true }, { cause })
    const folder = openLogDir(dir, { create: false })
    if (folder === undefined) throw gone()
    try {
      return openLogFile(folder, name, 'append')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      throw gone(error)
    } finally {
      closeSync(folder.fd)
    }
  }
}

function existsNoFollow(path: string): boolean {
  try {
    lstatSync(path)
    return true
  } catch {
    return false
  }
}

namespace SessionService {
  /** The config as written; every key may be left out. */
  export type Config = z.input<typeof SessionService.Config>
}

export default SessionService
