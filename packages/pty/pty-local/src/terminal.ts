/**
 * The one place that touches node-pty. Everything node-pty does after its child exited is
 * guarded here (PITFALLS.md): `write()` after exit silently does nothing, `resize()` throws
 * EBADF, and `kill()` would still signal the old pid number — which may by then belong to an
 * unrelated process. Signals go through the identity-fenced primitives of `@conch/subprocess`.
 */
import { statSync } from 'node:fs'
import pty from 'node-pty'

export interface TerminalExit {
  exitCode: number
  signal: number | undefined
}

export interface TerminalProcess {
  /** pid of the PTY's first process (the session leader; its controlling terminal is the PTY). */
  readonly pid: number
  /** Path of the PTY slave as this process sees it, e.g. `/dev/pts/3`. */
  readonly slavePath: string
  /** Device identity of the slave (stat(2) `st_dev` and `st_rdev`), to recognise it behind any descriptor. */
  readonly slave: { dev: number; rdev: number }
  readonly exited: boolean
  /** Writes input; ignored once the process exited (callers report `SESSION_EXITED` first). */
  write(data: string): void
  resize(cols: number, rows: number): void
  onData(listener: (chunk: Buffer) => void): () => void
  onExit(listener: (exit: TerminalExit) => void): () => void
  /**
   * Resolves when node-pty reports the exit — after it reaped the process and read the master
   * to EOF, which needs every holder of the slave gone. conch never calls node-pty's `kill()` or
   * `destroy()`: both signal the pid number, which may already be reaped and reused.
   */
  readonly exit: Promise<TerminalExit>
}

export interface SpawnTerminalOptions {
  argv: readonly [string, ...string[]]
  cwd: string
  env: Record<string, string>
  cols: number
  rows: number
}

/** Starts `argv` on a new PTY. Output arrives as raw bytes (`encoding: null`). Throws what node-pty throws (e.g. a missing program). */
export function spawnTerminal(options: SpawnTerminalOptions): TerminalProcess {
  const [file, ...args] = options.argv
  const child = pty.spawn(file, args, {
    name: options.env.TERM ?? 'xterm-256color',
    cols: options.cols,
    rows: options.rows,
    cwd: options.cwd,
    env: options.env,
    encoding: null,
  })
  // `ptsName` is a getter of node-pty's UnixTerminal that its typings do not declare.
  const slavePath = String((child as unknown as { ptsName?: string }).ptsName ?? '')
  let slave = { dev: -1, rdev: -1 }
  try {
    const stat = statSync(slavePath)
    slave = { dev: stat.dev, rdev: stat.rdev }
  } catch {
    // Without the slave's identity the exact readiness tier is off; the other tiers still work.
  }
  let exited = false
  const exitListeners = new Set<(exit: TerminalExit) => void>()
  const exit = new Promise<TerminalExit>((resolve) => {
    child.onExit(({ exitCode, signal }) => {
      exited = true
      resolve({ exitCode, signal })
      for (const listener of [...exitListeners]) listener({ exitCode, signal })
    })
  })
  return {
    pid: child.pid,
    slavePath,
    slave,
    get exited() {
      return exited
    },
    write(data) {
      if (!exited) child.write(data)
    },
    resize(cols, rows) {
      if (!exited) child.resize(cols, rows)
    },
    onData(listener) {
      const subscription = child.onData((chunk) => listener(chunk as unknown as Buffer))
      return () => subscription.dispose()
    },
    onExit(listener) {
      exitListeners.add(listener)
      return () => exitListeners.delete(listener)
    },
    exit,
  }
}
