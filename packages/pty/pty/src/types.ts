/**
 * The terminal contract behind `ctx.pty`.
 *
 * A **session** is one PTY with its shell (or REPL), owned by exactly one owner (an agent). A **send**
 * writes input and waits until the terminal is ready for more; **ready** always has a reason.
 * Backends implement `PtyBackend`; the service owns ids, ownership, the one-send-at-a-time
 * reservation and lifecycle, so every backend gets the same rules.
 */
import { errorClass, type ErrorMessages, type ErrorOf, type SessionLog } from '@conch/session'

/** The owner of terminal sessions (structural; an Agent is one). Ownership compares the exact object. */
export interface PtyOwner {
  /** Shown in errors, e.g. `agent-1`. */
  readonly id: string
  /** Its session log: the sandbox policy a terminal starts under is resolved from it. */
  readonly session: SessionLog
  readonly state: 'live' | 'disposing' | 'disposed'
  /** Aborted when the owner's disposal starts: its spawns stop. */
  readonly signal: AbortSignal
  /** Registers a cleanup awaited when the owner is disposed (its sessions close); returns a disposer. */
  onDispose(cleanup: () => void | Promise<void>): () => void
  /**
   * The prefix of this owner's session ids, numbered on their own (default `pty`: `pty-1`, …);
   * lower-case letters and digits. An owner whose terminals are not the model's takes another.
   */
  readonly sessionPrefix?: string
}

/** Signals a model may send to a terminal's foreground process group (signal(7)). */
export const PTY_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGTSTP', 'SIGHUP'] as const
export type PtySignal = (typeof PTY_SIGNALS)[number]

/**
 * Why a send settled.
 * - `stdin_read`: proved ready — the shell printed its own controlled prompt, or the kernel
 *   shows the foreground process group blocked reading this terminal.
 * - `inferred_idle`: no output for `idleSilenceMs`; a guess (a `sleep` looks the same).
 * - `timeout`: `timeoutMs` passed; the command may still be running. Never means exited.
 * - `session_exit`: the session's top-level shell exited.
 */
export type WaitReason = 'stdin_read' | 'inferred_idle' | 'timeout' | 'session_exit'

export type SessionStatus =
  | { state: 'running' }
  | { state: 'exited'; exitCode: number | null; signal: string | null }

/** The signals that stop a job instead of ending it (signal(7)): Ctrl-Z's SIGTSTP, SIGSTOP, and the background read and write stops. */
export const STOP_SIGNALS = ['SIGTSTP', 'SIGSTOP', 'SIGTTIN', 'SIGTTOU'] as const
export type StopSignal = (typeof STOP_SIGNALS)[number]

/**
 * A job the shell reported stopped, not ended: bash keeps it in its job table (`jobs`), and `fg`
 * resumes it in front, `bg` in the background.
 */
export interface StoppedJob {
  /** The signal that stopped it: from the shell's `$?` (128+N, bash(1) EXIT STATUS). */
  signal: StopSignal
  /** Its process group's leader (`sleep`), redacted like `SignalResult.target`. */
  program: string
}

/**
 * What the terminal is waiting for after a send, when known.
 * - `prompt`: a primary prompt (bash's controlled PS1, or a reader the backend has no reason to doubt).
 * - `continuation`: a secondary prompt — bash PS2 (`> `) or Python's `... `; the next input
 *   joins an open block. Finish it (often an empty line) or interrupt with SIGINT.
 * - `not_reading`: the send was written while nothing in the foreground was reading the terminal.
 * - `hidden`: the reader waits with echo off in canonical mode (termios(3): `ECHO` cleared,
 *   `ICANON` set — how getpass(3), `read -s`, sudo and ssh-keygen ask for a secret); type it with
 *   a `secret` send.
 */
export type InputState = 'prompt' | 'continuation' | 'not_reading' | 'hidden'

/** Which mechanism settled a send, and what it saw. */
export interface ReadinessEvidence {
  tier: 'prompt' | 'proc' | 'silence' | 'timeout' | 'exit' | 'cancel' | 'fixed'
  /**
   * One human-readable line, e.g. `controlled prompt`,
   * `python3[4121] pselect6 fd0 /dev/pts/3`, `no output for 3000 ms`.
   */
  detail: string
  /** For `proc`: the reading task (its name and path redacted like `SignalResult.target`, and so in `detail`). */
  process?: { name: string; pid: number; tid: number; syscall: string; fd: number; path: string }
  /**
   * For `proc`, when the read alone did not prove the program waits for input: what else could
   * wake it (`socket fd 21`, `timer in 200 ms`), and for how long (ms) the prompt-shaped last line
   * stayed quiet while the group acted only on its own (`detail` says how).
   */
  corroborated?: { sources: string[]; quietMs: number }
}

/** The settled outcome of one send. */
export interface SendResult {
  /** What a person would have seen appear during the send, as lines joined by `\n` (escape sequences removed, redraws collapsed). */
  viewport: string
  waitReason: WaitReason
  sessionStatus: SessionStatus
  /** Whether the viewport lost data to the send's byte bound. */
  truncated: boolean
  /**
   * A flood keeps its head and its tail: the viewport's first `headLines` lines are the send's
   * first lines, and `bytes` UTF-8 bytes in `lines` lines between them and the rest were dropped.
   */
  omitted?: { headLines: number; bytes: number; lines: number }
  inputState?: InputState
  /**
   * When the send settled at the shell's own prompt: the exit status the shell reported there for
   * what ran (its `$?`, bash(1) Special Parameters; 128+N after signal N). Absent elsewhere (a
   * REPL, a program still running, a prompt proved only by /proc).
   */
  exitStatus?: number
  /**
   * When the send settled at the shell's prompt because the job in front was stopped (Ctrl-Z,
   * `kill -STOP`), not ended: the shell's `$?` names the signal and the kernel shows the job's
   * processes stopped (state `T`, proc(5)). `exitStatus` is then absent: nothing exited.
   */
  stopped?: StoppedJob
  /**
   * The input was typed ahead (`inputState` `not_reading`): the command then in front (`bash,
   * sleep`), and when its prompt came during the send, the `$?` it carried and how many of the
   * viewport's first lines were its output (absent when the viewport was cut or is a screen).
   * Also, with its status, on the next result once that command's prompt came, when it had not
   * by this one's end.
   */
  earlier?: { program: string; exitStatus?: number; lines?: number }
  /**
   * Settled on silence or timeout while a probe found a program other than the shell in front and
   * not reading the terminal: its processes' names (`sleep`) — the command is still running.
   */
  running?: string
  evidence: ReadinessEvidence
  /** Time from the write to settling, in ms. */
  elapsedMs: number
}

/**
 * Per-send time limits, in ms, replacing the backend's configured ones for this send only:
 * `timeoutMs` bounds the send (settling `timeout`), `idleMs` is the output silence after which it
 * settles `inferred_idle`. Positive integers; the tool caps `timeoutMs` (`maxTimeoutMs`).
 */
export interface SendLimits {
  timeoutMs?: number
  idleMs?: number
}

/**
 * One entry of a `keys` send: a key name (`Enter`, `Up`, `C-c`, `M-f`, `F5`, …; the backend
 * lists the names it knows when one is unknown), a single character typed as itself (`q`, `:`),
 * or `{text}` — literal text typed as it is, never read as a key name.
 */
export type KeyEntry = string | { text: string }

/**
 * A deployment secret to type: its configured name (the only part a result, a log or the model
 * ever shows) and its value, read by the caller just before the send. The backend replaces the
 * value wherever the terminal prints it with `[secret NAME]` from then on.
 */
export interface SecretValue {
  name: string
  value: string
}

/**
 * What to type — exactly one of:
 * - `text`: typed as given (line breaks as Enter); with `submit`, Enter follows;
 * - `keys`: each entry its own key press, encoded for the terminal's current modes; `submit` is
 *   ignored (name `Enter` where it belongs);
 * - `secret`: the secret's value, then Enter.
 */
export type SendPayload =
  | { text: string; keys?: undefined; secret?: undefined }
  | { keys: readonly KeyEntry[]; text?: undefined; secret?: undefined }
  | { secret: SecretValue; text?: undefined; keys?: undefined }

/** What a backend is asked to type (see `SendPayload`). `submit`: Enter follows a `text`. */
export type BackendSendInput = SendLimits & SendPayload & { submit: boolean }

/** What a caller of `ctx.pty.startSend` asks for; `signal` cancels the send (SIGINT after the write). */
export type SendInput = BackendSendInput & { signal?: AbortSignal }

/** A send in progress, returned synchronously by `startSend`. */
export interface SendOperation {
  /**
   * Settles exactly once. Rejects only with `PtyError`: `SEND_CANCELLED` when cancelled before
   * anything was written (nothing was written), or another code for a backend failure.
   */
  readonly done: Promise<SendResult>
  /** Output produced since the previous call (as viewport lines), consumed. For background sends and live streaming. */
  readOutput(): string
  /** Registers a listener called synchronously whenever `readOutput()` has new text. Returns a disposer. */
  onOutput(listener: () => void): () => void
  /**
   * The current screen as a result shows it (`[screen: …]`, then the rows) while the program in
   * front draws one (vim, top); undefined while output is lines. Optional.
   */
  screen?(): string | undefined
  /**
   * Interrupts the send: input not yet written never is; otherwise a real SIGINT (never a written
   * `\x03`) goes to the foreground process group. Resolves once delivered; `done` then settles.
   */
  cancel(): Promise<void>
}

export interface SpawnOptions {
  /** Backend type, e.g. `shell`. */
  type: string
  /** Display name, unique among the owner's sessions; 1–`MAX_SESSION_NAME_CHARS` characters. */
  name?: string
  /** Working directory; must exist. Defaults to the owner's workspace root. */
  cwd?: string
  /** Terminal size in cells, 1–`MAX_TERMINAL_ROWS` rows and 1–`MAX_TERMINAL_COLS` columns; defaults are the backend's. */
  rows?: number
  cols?: number
  /**
   * A program to run in place of the shell: an absolute path, or a name looked up on the
   * session's PATH. No shell prompt then: the open returns once it started (`motd` empty), sends
   * settle on the kernel and silence tiers, and the backend keeps a full screen model.
   */
  command?: string
  /** Arguments of `command` (argv[1…]). */
  args?: string[]
  /**
   * Variables set over the backend's scrubbed environment — never over the host's (the scrubbing
   * still drops the host's secrets; what is given here is passed as it is).
   */
  env?: Record<string, string>
  /**
   * Network access of this terminal's sandbox, overriding the sandbox provider's default
   * (`SandboxPolicy.network` of `@conch/sandbox`). Undefined: the provider's default.
   */
  network?: boolean
  /**
   * Absolute folders writable inside this terminal's sandbox whatever the owner's mode
   * (`SandboxPolicy.writablePaths`): a private home the caller made for the program.
   */
  writablePaths?: string[]
  /**
   * Ports (1–65535) of the owner's sandbox loopback to make reachable on host 127.0.0.1 ports,
   * besides those the policy exposes; the result's `exposed` says where.
   */
  expose?: number[]
  /**
   * Secret values replaced with `[secret NAME]` in everything the session outputs from the
   * start, not only once a send types them (so a terminal reading a secret's file shows its name).
   */
  redact?: SecretValue[]
}

/** Most UTF-16 code units of a session's `name` (repeated in every list of sessions). */
export const MAX_SESSION_NAME_CHARS = 64

/** Bounds of a terminal size (`rows`, `cols` of spawn and resize). */
export const MAX_TERMINAL_ROWS = 500
export const MAX_TERMINAL_COLS = 1000

/** A terminal size in cells. */
export interface TerminalSize {
  rows: number
  cols: number
}

export interface SessionInfo {
  /** `pty-1`, `pty-2`, … per service, in creation order. */
  sessionId: string
  name?: string
  type: string
  /** The top-level process (the shell, or the sandbox runner that holds it). */
  pid?: number
  status: SessionStatus
  /** Whether a send is active (foreground or background). */
  busy: boolean
  /** ISO-8601. */
  createdAt: string
}

export interface SpawnResult extends SessionInfo {
  /** What the terminal printed before its first prompt, normalised like a viewport. */
  motd: string
  /** The absolute working directory the terminal started in, when the backend says. */
  cwd?: string
  /** Ports of the owner's sandbox loopback reachable from the host: `127.0.0.1:<hostPort>` there. */
  exposed?: ExposedPort[]
}

/** A port of the sandbox loopback (`port`) reachable on the host's `127.0.0.1:<hostPort>`. */
export interface ExposedPort {
  port: number
  hostPort: number
}

export interface ReadOptions {
  /** Lines to skip back from the newest retained line (0 = end). Default 0. */
  offset?: number
  /** Lines to return. Default 500. */
  count?: number
}

/**
 * A page of retained scrollback. Lines are numbered from 1 = the oldest line ever retained by
 * the session (numbers keep counting when old lines are dropped). `lineBegin..lineEnd` is
 * inclusive; an empty page has `lineBegin = lineEnd + 1`.
 */
export interface ReadPage {
  text: string
  /** Lines the session has produced in total (including dropped ones). */
  totalLines: number
  /** Oldest line number still retained. */
  firstRetainedLine: number
  lineBegin: number
  lineEnd: number
  /** Whether *this* page lost data: lines it reaches for were dropped, or a line or the page was cut to the byte bound. */
  truncated: boolean
  /**
   * Lines dropped between a flood's retained first lines and the newest ones. A page comes from
   * one side: a range ending inside the gap returns the first lines it reaches, if any.
   */
  gap?: { first: number; last: number }
  /** The oldest line returned was cut to the page's byte bound: its first `bytes` UTF-8 bytes are left out. */
  cut?: { line: number; bytes: number }
}

export interface SignalResult {
  signal: PtySignal
  delivered: boolean
  /** The foreground process group signalled. */
  targetPgid: number
  /** Name of the group leader, e.g. `sleep`; one holding a secret (or a piece) shows as `[secret NAME]`. */
  target: string
  /**
   * When no send was active: what the terminal printed since the previous result, up to the
   * moment it was ready again after the signal (e.g. a `KeyboardInterrupt` traceback), as
   * viewport lines. Absent when a send was active — that send's result carries the output.
   */
  output?: string
  /** Whether `output` lost data to the byte bound. */
  outputTruncated?: boolean
  /** What a flood dropped between the head and the tail of `output` (as `SendResult.omitted`). */
  outputOmitted?: SendResult['omitted']
  /**
   * When no send was active: `stdin_read` when the terminal was ready for input again within
   * the backend's wait, else the reason that wait ended.
   */
  waitReason?: WaitReason
  /**
   * When no send was active and the terminal was ready again at the shell's own prompt: the `$?`
   * it reported there, as `SendResult.exitStatus` (130 after SIGINT ended a command).
   */
  exitStatus?: number
  /** The session's status once the signal's effect was seen (`exited` when it ended the shell). */
  sessionStatus?: SessionStatus
  /** When no send was active: the job the signal stopped (`SendResult.stopped`), once the shell reported it. */
  stopped?: StoppedJob
  /** When no send was active: the command earlier input was typed ahead of, ended meanwhile (`SendResult.earlier`; its lines count in `output`). */
  earlier?: SendResult['earlier']
}

/** A process a close stopped or could not stop. */
export interface ClosedProcess {
  pid: number
  /** The process's name (`comm`), redacted like `SignalResult.target`. */
  name: string
}

export interface CloseResult {
  /** Final status of the shell. */
  status: SessionStatus
  /** The session's own processes it stopped: the shell and what it started, not the launchers it runs through. */
  stopped: ClosedProcess[]
  /** Non-empty only when the close failed (`close` then rejects with `CLOSE_FAILED`, and may be retried). */
  survivors: ClosedProcess[]
}

/** The codes of `PtyError`, each with its details (the ids it names, or the whole `reason`) and its message. */
const PTY_ERRORS = {
  DUPLICATE_BACKEND: (d: { type: string }) => `a PTY backend for type "${d.type}" is already registered; unload it first or give this one another type`,
  NO_BACKEND: (d: { type: string; known: string[] }) => `no PTY backend for type "${d.type}"; registered types: ${d.known.length ? d.known.join(', ') : '(none)'}`,
  SEND_ACTIVE: (d: { reason: string }) => d.reason,
  SEND_CANCELLED: (d: { reason: string }) => d.reason,
  /** `closed`: the caller's own session, closed (`reason`: what `closeIfIdle` was given); absent, an id it never had. */
  NO_SESSION: (d: { sessionId: string; closed?: { reason?: string } }) =>
    d.closed === undefined ? `unknown PTY session ${d.sessionId}` : `PTY session ${d.sessionId} was closed${d.closed.reason === undefined ? '' : ` ${d.closed.reason}`}`,
  FOREIGN_SESSION: (d: { sessionId: string }) => `PTY session ${d.sessionId} belongs to another agent`,
  OWNER_NOT_LIVE: (d: { owner: string; state: string }) => `agent ${d.owner} is ${d.state === 'live' ? 'being disposed' : d.state}; its PTY sessions are closed with it`,
  SERVICE_DISPOSING: (_: Record<string, never>) => 'the PTY service is shutting down; no new work is accepted',
  DUPLICATE_NAME: (d: { owner: string; name: string; holder: string }) => `${d.owner} already has a PTY session named "${d.name}" (${d.holder}); pick another name or close it`,
  SESSION_EXITED: (d: { reason: string }) => d.reason,
  SIGNAL_REFUSED: (d: { reason: string }) => d.reason,
  NO_FOREGROUND: (d: { reason: string }) => d.reason,
  SPAWN_FAILED: (d: { reason: string }) => d.reason,
  CLOSE_FAILED: (d: { reason: string }) => d.reason,
  INVALID_INPUT: (d: { reason: string }) => d.reason,
  UNKNOWN_KEY: (d: { reason: string }) => d.reason,
  LINE_TOO_LONG: (d: { reason: string }) => d.reason,
  UNKNOWN_SECRET: (d: { name: string; configured: string }) => `unknown secret ${JSON.stringify(d.name)}; configured secrets: ${d.configured}; nothing was written`,
  SECRET_UNAVAILABLE: (d: { reason: string }) => d.reason,
  /** The owner already holds `maxSessionsPerOwner` terminals. */
  TOO_MANY_SESSIONS: (d: { owner: string; held: number; max: number }) => `${d.owner} already has ${d.held} open terminals (pty.maxSessionsPerOwner: ${d.max}); close one first`,
} satisfies ErrorMessages

export type PtyErrorCode = keyof typeof PTY_ERRORS
export const PtyError = errorClass('PtyError', PTY_ERRORS)
export type PtyError<C extends PtyErrorCode = PtyErrorCode> = ErrorOf<typeof PTY_ERRORS, C>

// ─── Backend contract ─────────────────────────────────────────────────────────────

/** What a backend opens: the caller's `SpawnOptions` as the service validated them (an absent size: the backend's default). */
export interface BackendSpawnRequest extends Omit<SpawnOptions, 'type'> {
  owner: PtyOwner
  /** Id the service will publish the session under. */
  sessionId: string
  /** Aborted when the caller cancels, the owner is disposed or the service disposes. */
  signal: AbortSignal
}

/**
 * The screen model's state, for a caller that drives a full-screen program itself.
 * `rows` are the rendered rows (wrapped rows joined, trailing blanks trimmed, trailing empty
 * rows dropped): the viewport, or with `scrollback` every retained row from the oldest on.
 */
export interface ScreenState {
  buffer: 'normal' | 'alternate'
  rows: string[]
  /** 1-based cursor position in the viewport. */
  cursorRow: number
  cursorCol: number
  /**
   * DEC private modes the program set or reset (DECSET/DECRST, XTerm Control Sequences), by
   * number: e.g. `2004` bracketed paste, `1` application cursor keys. Absent: never changed.
   */
  decModes: Record<number, boolean>
}

/** What `screenState` renders. */
export interface ScreenStateOptions {
  /** Every retained row instead of the viewport. */
  scrollback?: boolean
}

/**
 * A backend's session. The service guarantees at most one active send at a time, never calls
 * anything but `close`/`status`/`read` after `close` began, and calls `close` on every session
 * it received, published or not.
 */
export interface BackendSession {
  readonly pid: number | undefined
  /** Startup output up to the first ready point. */
  readonly motd: string
  /** The absolute working directory the shell or program started in; optional. */
  readonly cwd?: string
  /** The owner's sandbox ports reachable from the host, as the open made them; optional. */
  readonly exposed?: ExposedPort[] | undefined
  status(): SessionStatus
  /** Registers a listener for the shell's exit (after its output is drained). Returns a disposer. */
  onExit(listener: (status: SessionStatus) => void): () => void
  /** Synchronous: returns at once; writing happens after. */
  startSend(input: BackendSendInput): SendOperation
  read(options: { offset: number; count: number }): ReadPage
  /** @throws PtyError `SESSION_EXITED`, `SIGNAL_REFUSED` (SIGKILL to the shell), `NO_FOREGROUND`. */
  signal(signal: PtySignal): Promise<SignalResult>
  /** The current screen as the model sees it (`[screen: …]`, then the rows). Optional. */
  screen?(): string
  /**
   * Resizes the terminal (the foreground program gets SIGWINCH). Optional.
   * @throws PtyError `SESSION_EXITED`.
   */
  resize?(size: TerminalSize): void
  /**
   * Writes `data` as it is (no readiness wait, no Enter, no bracketed paste); resolves once every
   * byte is in the terminal's input queue. Optional; called only while no send is active.
   * @throws PtyError `SESSION_EXITED`.
   */
  write?(data: string): Promise<void>
  /** The full screen model's state (see `ScreenState`). Optional: a backend keeps one only for some sessions. */
  screenState?(options: ScreenStateOptions): ScreenState
  /** Registers a listener called after each chunk reached the screen model, and on exit. Optional; returns a disposer. */
  onChange?(listener: () => void): () => void
  /**
   * What a close would stop besides the shell itself, by the close's own look: what the shell's
   * commands left running or stopped (`sleep 300 &`, a job stopped with Ctrl-Z), daemons that left
   * its process tree included; named as `CloseResult.stopped`. Undefined when the backend cannot
   * tell. Optional.
   */
  leftRunning?(): Promise<ClosedProcess[] | undefined>
  /**
   * Stops the whole process tree and resolves with what it stopped. Idempotent while a close is
   * in flight; a close that left survivors may be retried.
   */
  close(): Promise<CloseResult>
}

export interface PtyBackend {
  /** Session type it serves, e.g. `shell`. */
  readonly type: string
  /**
   * Starts a session and resolves once it is ready for its first send.
   * Rejects with `signal.reason` when the signal aborts during startup (after closing what it
   * started), or `PtyError` `SPAWN_FAILED` naming the cause.
   */
  spawn(request: BackendSpawnRequest): Promise<BackendSession>
}

/** The public surface of `ctx.pty` (implemented by the default-exported `PtyService`). */
export interface PtyServiceApi {
  /**
   * Registers a backend; the disposer, tied to the caller's plugin scope, leaves its sessions open.
   * @throws PtyError `DUPLICATE_BACKEND`.
   */
  registerBackend(backend: PtyBackend): () => void
  /** Registered backend types. */
  types(): string[]
  /**
   * Opens a session for `owner`. The backend's session is published only after the caller's
   * signal, service disposal and owner liveness are re-checked; otherwise it is closed
   * (rolled back). A cancelled spawn rejects with the caller's exact `signal.reason`.
   * @throws PtyError `NO_BACKEND`, `DUPLICATE_NAME`, `OWNER_NOT_LIVE`, `SERVICE_DISPOSING`, `SPAWN_FAILED`.
   */
  spawn(owner: PtyOwner, options: SpawnOptions, signal?: AbortSignal): Promise<SpawnResult>
  /**
   * Reserves the session synchronously and starts a send.
   * @throws PtyError `SEND_ACTIVE`, `NO_SESSION`, `FOREIGN_SESSION`, `OWNER_NOT_LIVE`,
   * `SERVICE_DISPOSING`, `SESSION_EXITED` — all before anything is written.
   */
  startSend(owner: PtyOwner, sessionId: string, input: SendInput): SendOperation
  read(owner: PtyOwner, sessionId: string, options?: ReadOptions): ReadPage
  /**
   * The session's current screen, rendered.
   * @throws PtyError `NO_SESSION`, `FOREIGN_SESSION`, `INVALID_INPUT` when its backend keeps no screen.
   */
  screen(owner: PtyOwner, sessionId: string): string
  /**
   * Resizes the session's terminal; its foreground program gets SIGWINCH.
   * @throws PtyError `NO_SESSION`, `FOREIGN_SESSION`, `SESSION_EXITED`, `INVALID_INPUT` (a size
   * out of bounds, or a backend that cannot resize).
   */
  resize(owner: PtyOwner, sessionId: string, size: TerminalSize): void
  signal(owner: PtyOwner, sessionId: string, signal: PtySignal): Promise<SignalResult>
  /**
   * Writes `data` to the session as it is: no readiness wait, no Enter, no paste framing.
   * Resolves once it is in the terminal's input queue.
   * @throws PtyError `SEND_ACTIVE` while a send is in flight (the send's input and readiness
   * must not be interleaved), `NO_SESSION`, `FOREIGN_SESSION`, `SESSION_EXITED`, `INVALID_INPUT`
   * (not a string, or a backend without raw writes) — all before anything is written.
   */
  write(owner: PtyOwner, sessionId: string, data: string): Promise<void>
  /**
   * The session's full screen model (rows with or without scrollback, cursor, DEC modes).
   * @throws PtyError `NO_SESSION`, `FOREIGN_SESSION`, `INVALID_INPUT` when its backend keeps none for it.
   */
  screenState(owner: PtyOwner, sessionId: string, options?: ScreenStateOptions): ScreenState
  /**
   * `BackendSession.onChange` of the session; closing the session ends the calls.
   * @throws PtyError `NO_SESSION`, `FOREIGN_SESSION`, `INVALID_INPUT` for a backend that cannot report it.
   */
  onChange(owner: PtyOwner, sessionId: string, listener: () => void): () => void
  /**
   * Closes a session and resolves when its process tree is gone; the session is then forgotten.
   * @throws PtyError `CLOSE_FAILED` listing survivors (the session stays listed; retry later).
   */
  close(owner: PtyOwner, sessionId: string): Promise<CloseResult>
  /**
   * Closes the session only while it is idle: running, no send active, and nothing left in it but
   * the shell (`BackendSession.leftRunning` reports none: no job running or stopped). A later call
   * naming it is `NO_SESSION` saying it `was closed <reason>` (`when its task task-2 ended`).
   * Resolves with the close's result, or undefined when the session stays open (busy, a job, a
   * backend that cannot tell).
   * @throws what `close` throws; `NO_SESSION`, `FOREIGN_SESSION`.
   */
  closeIfIdle(owner: PtyOwner, sessionId: string, reason: string): Promise<CloseResult | undefined>
  /** The owner's sessions (running and exited-but-not-closed), in creation order. */
  list(owner: PtyOwner): SessionInfo[]
  /** True while the owner has sessions, spawns in flight, or unreported cleanup failures. */
  hasOwnerActivity(owner: PtyOwner): boolean
  /** Session ids (published and opening) for display in refusals. */
  activity(owner: PtyOwner): string[]
}
