/**
 * The one place that touches node-pty. Everything node-pty does after its child exited is
 * guarded here: `write()` after exit silently does nothing, `resize()` throws EBADF, and
 * `kill()` would still signal the old pid number — which may by then belong to an unrelated
 * process. Signals go through the identity-fenced primitives of `@conch/subprocess`.
 *
 * Input is written here, not by node-pty's own queue, so that a caller learns when its input is
 * fully in the kernel (a 1 MiB paste takes seconds while the reader drains the terminal's input
 * queue) and so that a write still queued when the terminal closes is dropped quietly instead
 * of failing with EBADF on a closed descriptor.
 */
import { readSync, statSync, write as writeFd, writeSync } from 'node:fs'

type NodePty = typeof import('node-pty')
/** node-pty once loaded: a native addon, loaded on the first terminal rather than at import. */
let pty: NodePty | undefined
let loading: Promise<void> | undefined

/** Loads node-pty; `spawnTerminal` needs it first (the backend awaits this in every spawn). */
export function loadNodePty(): Promise<void> {
  return (loading ??= import('node-pty').then((module) => {
    pty = ((module as { default?: NodePty }).default ?? module) as NodePty
  }))
}

export interface TerminalExit {
  exitCode: number
  signal: number | undefined
}

export interface TerminalProcess {
  /** pid of the PTY's first process (the session leader; its controlling terminal is the PTY). */
  readonly pid: number
  /** Path of the PTY slave as this process sees it, e.g. `/dev/pts/3`. */
  readonly slavePath: string
  /**
   * The slave's identity, to recognise it behind any descriptor (stat(2)): `rdev` its device
   * number (`st_rdev`), `dev` the devpts instance it lives in (`st_dev`); both negative when
   * unknown. A device number alone names a terminal only within one devpts instance: a sandbox
   * mounts its own (bwrap(1) `--dev`), whose ptys are numbered from 0 again.
   */
  readonly slave: { dev: number; rdev: number }
  /**
   * Queues input after everything queued before it. Resolves once every byte is in the
   * kernel's input queue of the terminal, or when the rest was dropped because the terminal
   * closed (callers report `SESSION_EXITED` first; a write after the close is dropped quietly).
   */
  write(data: string): Promise<void>
  resize(cols: number, rows: number): void
  onData(listener: (chunk: Buffer) => void): () => void
  /**
   * Reads the output waiting for the master at once, handing it to the `onData` listeners before
   * it returns; whether any came. What a program writes goes into the PTY's flip buffer, and a
   * kernel worker moves it to the master's line discipline later (pty_write →
   * tty_insert_flip_string_and_push_buffer, drivers/tty/pty.c): until then the master does not
   * poll readable, and a program can already be seen blocked in its next read. A read(2) that
   * finds nothing available first waits for that work (n_tty_read → tty_buffer_flush_work,
   * drivers/tty/n_tty.c), so once this returns, everything written before the call has been
   * delivered. Measured under load (load average 16 on 2 cores): 11 times in 300 the output of
   * a program seen blocked in its read was not pollable yet; a non-blocking read got it each time.
   * A no-op (false) where the master descriptor is unknown.
   */
  readPending(): boolean
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

/**
 * Starts `argv` on a new PTY. Output arrives as raw bytes (`encoding: null`). Throws what
 * node-pty throws (e.g. a missing program), and an Error when `loadNodePty()` has not resolved.
 */
export function spawnTerminal(options: SpawnTerminalOptions): TerminalProcess {
  if (pty === undefined) throw new Error('spawnTerminal: node-pty is not loaded; await loadNodePty() first')
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
  let closed = false
  // The master descriptor, as node-pty's UnixTerminal exposes it (`fd`); undefined elsewhere,
  // where node-pty's own write is used.
  const masterFd = (child as unknown as { fd?: unknown }).fd
  const fd = typeof masterFd === 'number' && masterFd >= 0 ? masterFd : undefined
  const dataListeners = new Set<(chunk: Buffer) => void>()
  const deliver = (chunk: Buffer): void => {
    for (const listener of [...dataListeners]) listener(chunk)
  }
  child.onData((chunk) => deliver(chunk as unknown as Buffer))
  const writer = new InputWriter((buffer, offset, callback) => writeFd(fd!, buffer, offset, buffer.length - offset, null, callback), () => closed || exited, (buffer, offset) => writeSync(fd!, buffer, offset, buffer.length - offset))
  // node-pty emits `close` when it closed the master (EOF or EIO on read); nothing may be
  // written to that descriptor number afterwards, since it can be reused by another file.
  ;(child as unknown as { on?: (event: string, listener: () => void) => void }).on?.('close', () => {
    closed = true
    writer.drop()
  })
  const exitListeners = new Set<(exit: TerminalExit) => void>()
  const exit = new Promise<TerminalExit>((resolve) => {
    child.onExit(({ exitCode, signal }) => {
      exited = true
      writer.drop()
      resolve({ exitCode, signal })
      for (const listener of [...exitListeners]) listener({ exitCode, signal })
    })
  })
  return {
    pid: child.pid,
    slavePath,
    slave,
    write(data) {
      if (exited || closed) return Promise.resolve()
      if (fd === undefined) {
        child.write(data)
        return Promise.resolve()
      }
      return writer.write(Buffer.from(data, 'utf8'))
    },
    resize(cols, rows) {
      if (!exited) child.resize(cols, rows)
    },
    onData(listener) {
      dataListeners.add(listener)
      return () => dataListeners.delete(listener)
    },
    readPending() {
      // After `close` the descriptor number may belong to another file; after the exit node-pty
      // reads what is left itself. The master is non-blocking (as the writes rely on).
      if (fd === undefined || exited || closed) return false
      const scratch = Buffer.allocUnsafe(PENDING_READ_BYTES)
      let delivered = false
      for (let read = 0; read < PENDING_READS; read++) {
        let bytes: number
        try {
          bytes = readSync(fd, scratch, 0, scratch.length, null)
        } catch {
          // EAGAIN: nothing more; EIO: the slave side is gone, which node-pty's own read reports.
          break
        }
        if (bytes <= 0) break
        delivered = true
        deliver(Buffer.from(scratch.subarray(0, bytes)))
      }
      return delivered
    },
    onExit(listener) {
      exitListeners.add(listener)
      return () => exitListeners.delete(listener)
    },
    exit,
  }
}

/**
 * One `readPending` reads at most `PENDING_READS` times `PENDING_READ_BYTES`: more than a PTY can
 * hold for the master (its flip buffer, 64 KiB, and the line discipline's 4 KiB), so a program
 * that stopped writing is read whole, while one that keeps writing cannot hold the event loop.
 */
const PENDING_READS = 16
const PENDING_READ_BYTES = 16 * 1024

type WriteCall = (buffer: Buffer, offset: number, callback: (error: NodeJS.ErrnoException | null, written: number) => void) => void
/** write(2) at once: bytes written, or throws (EAGAIN when the input queue is full). */
type TryWrite = (buffer: Buffer, offset: number) => number

/**
 * An ordered queue of writes to a non-blocking descriptor (node-pty opens the master with
 * O_NONBLOCK). EAGAIN (the terminal's input queue is full, write(2)) retries: at once for the
 * first few times, then once a millisecond, so a reader slowly draining a large paste does not
 * keep a core spinning. Any other error (EBADF, EIO once the slave side is gone) or `isClosed()`
 * drops what is left; every queued write resolves either way.
 *
 * A write with nothing queued before it is first tried at once (`tryWrite`): the descriptor is
 * non-blocking, so write(2) returns what fit without waiting, and a short send (a command, a
 * key) skips the thread-pool round trip of `writeCall`; whatever did not fit goes the queued way.
 */
class InputWriter {
  private readonly queue: { buffer: Buffer; offset: number; done: () => void }[] = []
  private retries = 0
  private timer: NodeJS.Timeout | undefined
  private immediate: NodeJS.Immediate | undefined

  constructor(
    private readonly writeCall: WriteCall,
    private readonly isClosed: () => boolean,
    private readonly tryWrite?: TryWrite,
  ) {}

  write(buffer: Buffer): Promise<void> {
    if (buffer.length === 0 || this.isClosed()) return Promise.resolve()
    let offset = 0
    if (this.queue.length === 0 && this.tryWrite !== undefined) {
      try {
        offset = this.tryWrite(buffer, 0)
      } catch (error) {
        // EAGAIN: the queue retries; any other error drops the write, as a queued one would.
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return Promise.resolve()
      }
      if (offset >= buffer.length) return Promise.resolve()
    }
    return new Promise((resolve) => {
      this.queue.push({ buffer, offset, done: resolve })
      if (this.queue.length === 1) this.next()
    })
  }

  /** Drops every queued write (resolving them). */
  drop(): void {
    clearTimeout(this.timer)
    if (this.immediate !== undefined) clearImmediate(this.immediate)
    this.timer = undefined
    this.immediate = undefined
    for (const task of this.queue.splice(0)) task.done()
  }

  private next(): void {
    this.timer = undefined
    this.immediate = undefined
    const task = this.queue[0]
    if (task === undefined) return
    if (this.isClosed()) return this.drop()
    this.writeCall(task.buffer, task.offset, (error, written) => {
      if (this.queue[0] !== task) return // dropped meanwhile
      if (error !== null) {
        if (error.code !== 'EAGAIN') return this.drop()
        this.retries++
        if (this.retries <= 3) this.immediate = setImmediate(() => this.next())
        else this.timer = setTimeout(() => this.next(), 1)
        return
      }
      this.retries = 0
      task.offset += written
      if (task.offset >= task.buffer.length) {
        this.queue.shift()
        task.done()
      }
      this.next()
    })
  }
}
