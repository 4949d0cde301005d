/**
 * The event-log contract behind `ctx.sessions`.
 *
 * A session is the append-only history of one agent: every user message, model reply, tool
 * call and result, turn boundary and policy change is an event. Events are persisted as JSON
 * Lines (one `SessionEvent` per line) so a restarted harness replays the same history and the
 * same policy decisions.
 */

/** One persisted event. `seq` starts at 1 and increases by one per appended event of a session. */
export interface SessionEvent<T = unknown> {
  readonly seq: number
  /** ISO-8601 timestamp of the append. */
  readonly ts: string
  readonly sessionId: string
  readonly type: string
  readonly data: T
  /**
   * Bytes of string data cut so the event fits the service's `maxEventBytes` (each cut string
   * ends with a notice); absent when nothing was cut.
   */
  readonly omittedBytes?: number
}

/** An event as presented to interceptors, before it has a `seq` and before it is stored. */
export interface PendingEvent<T = unknown> {
  readonly sessionId: string
  readonly type: string
  readonly data: T
}

/** Data of the `session/start` event, the first event of every session. */
export interface SessionStartData {
  /** Absolute workspace root chosen when the session was created (for example an ACP `cwd`). */
  workspaceRoot?: string
}

/**
 * A synchronous pre-append hook. Throwing vetoes the append: the event is not stored, not
 * persisted, subscribers never see it, and `append()` rethrows the listener's error unchanged.
 */
export type SessionInterceptor = (event: PendingEvent, log: SessionLog) => void

export type { SessionRedactor } from './bound.ts'
import type { SessionRedactor } from './bound.ts'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/errors'

/** Called after an event is stored (and written, when persistence is on). Errors are logged, never rethrown. */
export type SessionSubscriber = (event: SessionEvent, log: SessionLog) => void

export interface SessionLog {
  readonly id: string
  /** Data of the `session/start` event. */
  readonly start: SessionStartData
  /**
   * The events kept in memory, in append order (a read-only view; do not mutate): every event
   * but a nested call's (data with a `parentCallId`), which is only written and given to
   * subscribers. `seq` counts every event, so the kept ones can skip numbers.
   */
  events(): readonly SessionEvent[]
  /** `text` as the log would record it: every redactor registered with `ctx.sessions.redact` applied. */
  redact(text: string): string
  /**
   * The same for a stream shown as it arrives (a tool's progress): `push(piece)` returns what can
   * be shown now, holding back a tail that could begin a value; `push('', true)` ends it.
   */
  liveRedaction(): { push(text: string, end?: boolean): string }
  /** The latest event of `type`, if any. */
  last<T = unknown>(type: string): SessionEvent<T> | undefined
  /**
   * Appends an event. Runs every interceptor first (synchronously, registration order); a
   * throwing interceptor vetoes the event and its error propagates to the caller.
   * @throws SessionError `SESSION_CLOSED` after the log was closed.
   */
  append<T>(type: string, data: T): SessionEvent<T>
}

/** The codes of `SessionError`, each with its details and its message. */
const SESSION_ERRORS = {
  /** Not live and: sessions are not persisted (no `file`), its `file` does not exist, or (`gone`) its file went while it was live. */
  NO_SESSION: (d: { sessionId: string; file?: string; gone?: true }) =>
    d.file === undefined
      ? `no live session ${d.sessionId}, and sessions are not persisted (set the sessions "dir" config, or "persist: true", to keep them)`
      : d.gone
        ? `session log ${d.file} is gone (deleted or moved while the session was live); nothing was appended`
        : `no session ${d.sessionId}: ${d.file} does not exist`,
  SESSION_CLOSED: (d: { sessionId: string }) => `session ${d.sessionId} is closed; open it again to append`,
  /** Live already, or (`file`) its log exists. */
  DUPLICATE_SESSION: (d: { sessionId: string; file?: string }) =>
    d.file === undefined ? `session ${d.sessionId} is already live` : `session ${d.sessionId} already exists at ${d.file}; open it instead of creating it`,
  /** `line`: 1-based line of the log file. */
  CORRUPT_LOG: (d: { file: string; line: number; problem: string }) => `corrupt session log ${d.file}:${d.line}: ${d.problem}`,
  /** An id that is not a safe file name: `[A-Za-z0-9][A-Za-z0-9._-]*`, at most 128 characters. */
  INVALID_SESSION_ID: (d: { id: unknown }) => `invalid session id ${JSON.stringify(d.id)}: use 1-128 characters of [A-Za-z0-9._-], starting with a letter or digit`,
  /** A component of the log folder is a symbolic link (never followed). */
  LOG_DIR_SYMLINK: (d: { path: string }) =>
    `session log folder component ${d.path} is a symbolic link; conch never follows links on the way to its logs (something may have replaced it to redirect them). Remove it, or configure a folder without links`,
  /** The log folder `dir` is not an absolute path of folders (`problem`: the refusal naming the component), or cannot be opened (`problem`: the system's error). */
  LOG_DIR_INVALID: (d: { dir: string; problem: string }) => `cannot use session log folder ${d.dir}: ${d.problem}; give a normalised absolute path of folders`,
  /** Something other than a regular file with a single link (a symlink, FIFO, device, hard link) is where the log `file` should be. */
  LOG_NOT_REGULAR: (d: { file: string }) => `session log ${d.file} is not a regular file with a single link (a symlink, special file or hard link is in its place); refusing to open it`,
  /** The log folder lies inside the session's workspace, which its terminals can write. */
  LOG_IN_WORKSPACE: (d: { dir: string; workspace: string }) =>
    `session log folder ${d.dir} is inside the workspace ${d.workspace}, where the agent's terminals can rewrite its history; leave "dir" unset (logs go to the state folder with "persist: true"), choose a folder outside the workspace, or set "allowInsideWorkspace: true"`,
} satisfies ErrorMessages

export type SessionErrorCode = keyof typeof SESSION_ERRORS
export const SessionError = errorClass('SessionError', SESSION_ERRORS)
export type SessionError<C extends SessionErrorCode = SessionErrorCode> = ErrorOf<typeof SESSION_ERRORS, C>

/** The public surface of `ctx.sessions` (implemented by the default-exported `SessionService`). */
export interface SessionServiceApi {
  /**
   * Creates a session and appends its `session/start` event (`{workspaceRoot?}`, made absolute).
   * `id` defaults to `session-<8 hex>`; with persistence on, the log `<logDir(workspaceRoot)>/<id>.jsonl`
   * is created exclusively (O_EXCL), its folder on demand.
   * @throws SessionError `DUPLICATE_SESSION` when `id` is live or already on disk,
   *   `INVALID_SESSION_ID` when `id` is not a safe file name; `LOG_DIR_SYMLINK`,
   *   `LOG_DIR_INVALID`, `LOG_NOT_REGULAR`, `LOG_IN_WORKSPACE` when the log's path is not trustworthy;
   *   an interceptor's error when it vetoes `session/start` (nothing is left behind, not even the file).
   */
  create(options?: { id?: string; workspaceRoot?: string }): SessionLog
  /**
   * Returns a live session, or replays `<log folder>/<id>.jsonl` (without running interceptors or
   * subscribers) into a live one appending to the same file; the log folder is the one of
   * `workspaceRoot` (default: the working directory) — see `logDir`.
   * @throws SessionError `NO_SESSION` (not live, and no file or persistence off),
   *   `INVALID_SESSION_ID`, or `CORRUPT_LOG` naming the file and line;
   *   `LOG_DIR_SYMLINK`, `LOG_DIR_INVALID`, `LOG_NOT_REGULAR` when the path is not trustworthy.
   */
  open(id: string, options?: { workspaceRoot?: string }): SessionLog
  /**
   * The absolute folder that logs of sessions in `workspaceRoot` (default: the working
   * directory) are written to: the configured `dir`, else with `persist`
   * `<state home>/conch/sessions/<workspace id>`, else undefined (memory only).
   */
  logDir(workspaceRoot?: string): string | undefined
  /** A live session, or undefined. */
  get(id: string): SessionLog | undefined
  /** Registers a vetoing pre-append hook; the disposer is tied to the caller's plugin scope. */
  intercept(interceptor: SessionInterceptor): () => void
  /** Registers a post-append listener; the disposer is tied to the caller's plugin scope. */
  subscribe(subscriber: SessionSubscriber): () => void
  /**
   * Registers a redactor applied to every string of every event's data (and object key) before
   * it is written, stored or given to subscribers, and by `SessionLog.redact`; the disposer is
   * tied to the caller's plugin scope.
   */
  redact(redactor: SessionRedactor): () => void
  /** Stops accepting appends on a session, closes its file (which stays) and forgets it. Unknown ids are ignored. */
  close(id: string): void
}
