/**
 * The one place that touches node-pty, guarding what it does after its child exited (`resize()`
 * throws EBADF, `kill()` would signal a possibly reused pid). Input is written here, not by
 * node-pty's queue, so a caller learns when it is in the kernel and a write queued at the close
 * is dropped quietly instead of failing with EBADF.
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
   * The slave's `st_rdev` and devpts instance `st_dev` (stat(2)); negative when unknown. A device
   * number alone is unique only within one devpts: a sandbox mounts its own (bwrap(1) `--dev`).
   */
  readonly slave: { dev: number; rdev: number }
  /** Queues input in order; resolves once all is in the kernel, or the rest was dropped at the close. */
  write(data: string): Promise<void>
  resize(cols: number, rows: number): void
  onData(listener: (chunk: Buffer) => void): () => void
  /**
   * Reads the output waiting for the master at once, handing it to `onData` listeners; whether
   * any came. Output sits in the flip buffer until a kernel worker moves it (drivers/tty/pty.c),
   * unpollable while the program may already block reading; a read(2) waits for that work
   * (n_tty_read → tty_buffer_flush_work), so all written before the call is delivered. False
   * where the master descriptor is unknown.
   */
  readPending(): boolean
  onExit(listener: (exit: TerminalExit) => void): () => void
  /**
   * Resolves when node-pty reports the exit (reaped, master at EOF). node-pty's `kill()` and
   * `destroy()` are never called: both signal a pid number that may be reused.
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
  // The master descriptor of node-pty's UnixTerminal; elsewhere node-pty's own write is used.
  const masterFd = (child as unknown as { fd?: unknown }).fd
  const fd = typeof masterFd === 'number' && masterFd >= 0 ? masterFd : undefined
  const dataListeners = new Set<(chunk: Buffer) => void>()
  const deliver = (chunk: Buffer): void => {
    for (const listener of [...dataListeners]) listener(chunk)
  }
  child.onData((chunk) => deliver(chunk as unknown as Buffer))
  const writer = new InputWriter((buffer, offset, callback) => writeFd(fd!, buffer, offset, buffer.length - offset, null, callback), () => closed || exited, (buffer, offset) => writeSync(fd!, buffer, offset, buffer.length - offset))
  // After node-pty's `close` the descriptor number may be reused by another file.
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
      // After `close` the number may be another file's; after the exit node-pty reads the rest.
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

/** More than a PTY holds for the master (64 KiB flip buffer, 4 KiB line discipline), but bounded. */
const PENDING_READS = 16
const PENDING_READ_BYTES = 16 * 1024

type WriteCall = (buffer: Buffer, offset: number, callback: (error: NodeJS.ErrnoException | null, written: number) => void) => void
/** write(2) at once: bytes written, or throws (EAGAIN when the input queue is full). */
type TryWrite = (buffer: Buffer, offset: number) => number

/**
 * An ordered queue of writes to the non-blocking master. EAGAIN (input queue full) retries at
 * once a few times, then every ms, so a slow reader does not keep a core spinning; any other
 * error or `isClosed()` drops the rest, resolving every write. With nothing queued a write is
 * tried at once (`tryWrite`), skipping the thread-pool round trip for short sends.
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
