/**
 * Process-tree primitives shared by every package that starts processes, and the
 * `ctx.subprocess` contract. Pids are recycled, so a process is its pid plus its start time
 * (Linux: /proc/<pid>/stat field 22, proc(5); macOS: `ps -o lstart`), re-read before each signal.
 */
import type { Duplex } from 'node:stream'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/errors'

/** Minimal async filesystem used to read /proc; injectable so tests run on fixtures. */
export interface ProcFs {
  /** Rejects (for example ENOENT, EACCES, ESRCH) when the file cannot be read. */
  readFile(path: string): Promise<string>
  readdir(path: string): Promise<string[]>
  readlink(path: string): Promise<string>
}

/** Fields of /proc/<pid>/stat (proc(5)), parsed after the *last* `)` so no `comm` can shift them. */
export interface ProcStat {
  pid: number
  /** Executable name as the kernel reports it (at most 15 bytes). */
  comm: string
  /** Field 3: R, S, D, Z, T, t, X, I, … */
  state: string
  ppid: number
  /** Field 5, process group id. */
  pgrp: number
  /** Field 6, session id. */
  session: number
  /** Field 7, controlling terminal device number. */
  ttyNr: number
  /** Field 8, foreground process group of the controlling terminal, -1 when none. */
  tpgid: number
  /** Field 20, `num_threads`: the process's threads (tasks). */
  threads: number
  /** Field 22, start time in clock ticks since boot, kept as a decimal string. */
  startTime: string
}

/** A process as listed by a `ProcessTable`. */
export interface ProcessEntry extends ProcessRecord {
  ppid: number
  pgid: number
  sid: number
  /** Foreground group of its controlling terminal, -1 when none or unknown. */
  tpgid: number
  /** Single-letter state; `Z` is a zombie (counted as gone by teardown). */
  state: string
}

/** What teardown reports about one process. */
export interface ProcessRecord {
  pid: number
  /** Start identity: Linux stat field 22, macOS `lstart` text. */
  startTime: string
  comm: string
}

export interface ProcessTable {
  /** Every process visible now. Processes that vanish while listing are skipped. */
  snapshot(): Promise<ProcessEntry[]>
  /** One process, or undefined when it is gone (or its stat cannot be read). */
  get(pid: number): Promise<ProcessEntry | undefined>
  /** Variable `name` of the process's initial environment (/proc/<pid>/environ, `ps -E`); undefined when absent or unreadable. */
  environ(pid: number, name: string): Promise<string | undefined>
  /**
   * The pids of `pid`'s children, read from the process itself: on Linux
   * `/proc/<pid>/task/<tid>/children` of each thread (proc(5)). `[]` when the process is gone;
   * undefined when this kernel or platform cannot list children this way (callers then scan).
   */
  children?(pid: number): Promise<number[] | undefined>
  /**
   * The children a re-parented process would be listed under in `pid`: the kernel adopts an
   * orphan into the first live thread (kernel/exit.c, `find_alive_thread`), so on Linux this
   * reads the leader's list alone while it runs, every thread's once it has exited.
   */
  adoptedChildren?(pid: number): Promise<number[] | undefined>
  /**
   * Whether `pid` is the init of a PID namespace nested below the one this table reads (Linux:
   * the `NSpid` line of `/proc/<pid>/status` lists more than one pid and ends in 1). False when
   * not, or when gone or unreadable.
   */
  namespaceInit?(pid: number): Promise<boolean>
}

/** Tags a process tree through the environment, so re-parented daemons can still be found. */
export interface SessionTag {
  /** Environment variable name, e.g. `CONCH_SESSION_TAG`. */
  name: string
  /** A value unique to one session (random, at least 96 bits). */
  value: string
}

export interface TerminateTreeOptions {
  /** The root of the tree (for a terminal, the shell or the sandbox runner). */
  rootPid: number
  /**
   * The root's start identity (`ProcessEntry.startTime`) when it was started: a process on
   * `rootPid` with another is a stranger on a recycled pid (a gone root), and the tag sweep skips
   * processes older than the root. Without it the root is taken as listed.
   */
  rootStartTime?: string
  /** Also stop the root after its descendants. */
  includeRoot: boolean
  /**
   * Signal sent to the root first (default SIGTERM; terminals use SIGHUP). SIGKILL skips the
   * root's grace, and its children are read again right after it (see `terminateTree`).
   */
  rootSignal?: NodeJS.Signals
  /** How long to wait after TERM before KILL, in ms. */
  graceMs: number
  /**
   * Also capture (and stop) every process whose environment carries this tag. Needs `discovery`
   * `'scan'` or `'orphans'` (`'namespace'` sweeps it only when it falls back to a scan).
   */
  tag?: SessionTag
  /**
   * How the tree is found (default `scan`; README "Discovery"). A table without `children` is
   * always scanned.
   * - `scan`: a `snapshot` of every process per discovery, descendants by ppid, plus the tag
   *   sweep (finds `setsid`/`nohup` daemons that re-parented to init with the tag);
   * - `children`: only the root's descendants, through `ProcessTable.children`. Complete only
   *   when the tree cannot leave the root, as under a PID namespace whose init is in it;
   * - `namespace`: the `children` walk, proven complete by the first descendant that is a PID
   *   namespace's init: all below it is gone once it is (pid_namespaces(7)). Without one, a scan;
   * - `orphans`: the `children` walk, and the tag sweep over the children of init, this process
   *   and its ancestors, where an orphan is re-parented (prctl(2) PR_SET_CHILD_SUBREAPER).
   */
  discovery?: 'scan' | 'children' | 'namespace' | 'orphans'
  /**
   * Also treat every member of the root's session as tagged when the root leads one: a process
   * that dropped the tag but never called setsid keeps the session id (credentials(7)). Where the
   * tag sweep looks (`scan`, `orphans`), for processes no older than the root (needs
   * `rootStartTime`), while the root's pid leads no other session.
   */
  session?: boolean
  /** Settles when the root has exited (a child's `exit` event): a wait then looks again at once. */
  rootExited?: PromiseLike<unknown>
  /** Defaults to the platform table. */
  table?: ProcessTable
  /** Longest poll interval while waiting for processes to go, in ms (default 5; 1, 2, 4 ms before). */
  pollMs?: number
  /** How long to wait for KILLed processes to be gone before reporting them as survivors, in ms (default 2000). */
  killWaitMs?: number
  /** The first signal for a captured descendant; default SIGTERM (interactive shells ignore it: bash(1) SIGNALS). */
  signalFor?: (record: ProcessRecord) => NodeJS.Signals | undefined
  /** Sends a signal; defaults to `process.kill`. Injectable so the identity fence is testable on fixtures. */
  kill?: (pid: number, signal: NodeJS.Signals) => void
}

/** Result of a teardown: captured processes gone (zombies included), and those left after KILL (a failure to retry). */
export interface TerminateReport {
  stopped: ProcessRecord[]
  survivors: ProcessRecord[]
}

/** A one-shot child started by `ctx.subprocess.spawn`. */
export interface ChildHandle {
  readonly pid: number
  readonly stdout: NodeJS.ReadableStream
  readonly stderr: NodeJS.ReadableStream
  /** The pipes of `SpawnOptions.extraPipes` (duplex sockets): `extra[0]` is the child's fd 3, … */
  readonly extra: readonly Duplex[]
  write(data: string | Uint8Array): void
  end(): void
  /** Resolves when the child has exited and its stdio closed. */
  readonly done: Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }>
  /**
   * TERM the child's tree, KILL after `graceMs`, and resolve when everything captured is gone.
   * `rootSignal` is the child's own first signal (default SIGTERM; see `TerminateTreeOptions`).
   */
  terminate(options?: { graceMs?: number; rootSignal?: NodeJS.Signals }): Promise<TerminateReport>
}

export interface SpawnOptions {
  argv: [string, ...string[]]
  cwd?: string
  /** The complete child environment (not merged with the parent's). Use `scrubbedEnv` to derive one. */
  env?: Record<string, string>
  /** Aborting terminates the child's tree. */
  signal?: AbortSignal
  /** How many pipes beyond stdio to open, seen as fd 3, 4, … (default 0, at most 4). */
  extraPipes?: number
  /**
   * How the child's tree is found when it is terminated (default `tagged`):
   * - `tagged`: the root's descendants plus every process carrying the child's tag (a scan); the
   *   child stays owned after it exited while a tagged process is left;
   * - `descendants`: only the root's descendants (discovery `children`); let go of at exit. For a
   *   tree that cannot leave it (a PID namespace) or cannot carry the tag;
   * - `session`: as `descendants`, plus the child's session members that left the tree (discovery
   *   `orphans`, `session`): for an unconfined program that empties its environment; it misses
   *   only a process that also called setsid.
   */
  tree?: 'tagged' | 'descendants' | 'session'
  /**
   * Whether the tag supervisor watches the child's tag while it is owned (default false): if
   * conch dies, even by SIGKILL, what carries the tag is killed. For an unconfined child.
   */
  supervised?: boolean
  /**
   * Folders an agent may write (its workspace root and writable paths), for a program run outside
   * its sandbox: a bare `argv[0]` is never taken from a PATH folder inside one (`resolveExecutable`);
   * found only there, the spawn fails with `SPAWN_FAILED` naming it. A path in `argv[0]` is run as given.
   */
  agentWritable?: readonly string[]
}

/** The codes of `SubprocessError`, each with its details and its message. */
const SUBPROCESS_ERRORS = {
  /** `problem`: a missing or unexecutable program or working directory, or what spawn(2) reported. */
  SPAWN_FAILED: (d: { program: string; problem: string }) => `cannot spawn ${d.program}: ${d.problem}`,
  SERVICE_DISPOSING: (d: { program: string }) => `cannot spawn ${d.program}: the subprocess service is shutting down`,
  INVALID_ARGV: (d: { program: string; problem: string }) => `cannot spawn ${d.program}: ${d.problem}`,
  UNSUPPORTED_PLATFORM: (d: { platform: string }) => `no process table for platform ${d.platform}: conch reads /proc (Linux) or ps(1) (macOS, BSD)`,
} satisfies ErrorMessages

export type SubprocessErrorCode = keyof typeof SUBPROCESS_ERRORS
export const SubprocessError = errorClass('SubprocessError', SUBPROCESS_ERRORS)
export type SubprocessError<C extends SubprocessErrorCode = SubprocessErrorCode> = ErrorOf<typeof SUBPROCESS_ERRORS, C>

/** The public surface of `ctx.subprocess` (implemented by the default-exported `SubprocessService`). */
export interface SubprocessServiceApi {
  /**
   * Starts `argv` with piped stdio in its own session and process group, owned by the service
   * and the caller's plugin scope: disposing either, or aborting `signal`, terminates its tree and
   * awaits it (an already aborted signal throws its reason). Without `env` the environment is
   * `scrubbedEnv(process.env, {allow: allowEnv})`; `CONCH_SUBPROCESS_TAG` is added. It stays owned
   * until it has exited and (with `tree: 'tagged'`) no tagged process is left.
   * @throws SubprocessError `INVALID_ARGV` (empty program, NUL byte), `SPAWN_FAILED` naming the
   *   program and the likely cause (missing program or working directory), `SERVICE_DISPOSING`.
   */
  spawn(options: SpawnOptions): ChildHandle
}
