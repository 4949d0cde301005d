/**
 * The /proc reads of the exact tier through descriptors kept open: opening a /proc file costs
 * several times reading it (docs/performance-log/14). A kept descriptor answers like a fresh open
 * (proc(5), fs/seq_file.c): per-task files are generated anew by a pread(2) at offset 0, and a
 * descriptor is bound to its task (or `mem` to its address space), so once that is gone its
 * reads fail and the path is read afresh: a reused pid is read as the new process. At most
 * `maxOpen` are kept, least recently used closed first.
 */
import { closeSync, openSync, read, readFileSync, readSync, statSync } from 'node:fs'
import { nodeProcFs } from '@conch/subprocess'
import type { ProcReader } from './inspect-linux.ts'

/** Files generated per read whose kept descriptor stays valid while their task lives. */
const KEPT = /^\/proc\/(?:\d+\/(?:task\/\d+\/)?|thread-self\/)(?:stat|status|syscall|sched|io|children|fdinfo\/\d+)$/

/** Files that may legitimately be empty (a task without children): an empty read is an answer there. */
const MAY_BE_EMPTY = /\/children$/

/** A read into the shared buffer this long may be cut short: the file is read whole instead. */
const BUFFER_BYTES = 64 * 1024

/** A kept descriptor; `busy` reads on the thread pool keep it open until they return. */
interface Kept {
  fd: number
  busy: number
  dropped: boolean
}

export class ProcFileCache implements ProcReader {
  private readonly kept = new Map<string, Kept>()
  private readonly buffer = Buffer.allocUnsafe(BUFFER_BYTES)
  readonly readdir = nodeProcFs.readdir
  readonly readlink = nodeProcFs.readlink

  /** `maxOpen`: the default is enough for the probes of a few dozen sessions at once. */
  constructor(private readonly maxOpen = 256) {}

  /** Descriptors held now (for tests and diagnostics). */
  get size(): number {
    return this.kept.size
  }

  async readFile(path: string): Promise<string> {
    return this.readText(path)
  }

  async stat(path: string): Promise<{ dev: number; rdev: number }> {
    const { dev, rdev } = statSync(path)
    return { dev, rdev }
  }

  /**
   * Process memory through a kept /proc/<pid>/mem, read on the thread pool (it takes the target's
   * mmap lock). A failed or short read retries once through a fresh descriptor. A descriptor is
   * never closed while a read of it is on its way (its number could be reused meanwhile).
   */
  async readMemory(pid: number, address: bigint, length: number): Promise<Buffer> {
    // User-space addresses on x86_64 and arm64 are below 2^53, the largest number position.
    if (address > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`address 0x${address.toString(16)} is beyond 2^53`)
    const path = `/proc/${pid}/mem`
    const buffer = Buffer.alloc(length)
    for (let attempt = 0; ; attempt++) {
      const entry = this.entry(path)
      entry.busy++
      let bytesRead: number
      try {
        bytesRead = await readAt(entry.fd, buffer, Number(address))
      } catch (error) {
        this.drop(path, entry)
        if (attempt > 0) throw error
        continue
      } finally {
        entry.busy--
        if (entry.dropped && entry.busy === 0) closeQuietly(entry.fd)
      }
      if (bytesRead === length) return buffer
      this.drop(path, entry)
      if (attempt > 0) throw new Error(`short read of ${path} at 0x${address.toString(16)}: ${bytesRead} of ${length} bytes`)
    }
  }

  /** Closes every kept descriptor (once no read of it is on its way); later reads open them again. */
  close(): void {
    for (const [path, entry] of [...this.kept]) this.drop(path, entry)
  }

  private readText(path: string): string {
    if (!KEPT.test(path)) return readFileSync(path, 'utf8')
    const entry = this.entry(path)
    let bytesRead: number
    try {
      bytesRead = readSync(entry.fd, this.buffer, 0, BUFFER_BYTES, 0)
    } catch {
      this.drop(path, entry)
      return readFileSync(path, 'utf8')
    }
    if (bytesRead === BUFFER_BYTES || (bytesRead === 0 && !MAY_BE_EMPTY.test(path))) {
      // Longer than the buffer, or an empty answer where there is always text: read afresh.
      if (bytesRead === 0) this.drop(path, entry)
      return readFileSync(path, 'utf8')
    }
    return this.buffer.toString('utf8', 0, bytesRead)
  }

  /** The kept descriptor of `path`, opened now when there is none (throws what open(2) throws). */
  private entry(path: string): Kept {
    const kept = this.kept.get(path)
    if (kept !== undefined) {
      // Most recently used last.
      this.kept.delete(path)
      this.kept.set(path, kept)
      return kept
    }
    const entry: Kept = { fd: openSync(path, 'r'), busy: 0, dropped: false }
    this.kept.set(path, entry)
    while (this.kept.size > this.maxOpen) {
      const [oldest, old] = this.kept.entries().next().value as [string, Kept]
      this.drop(oldest, old)
    }
    return entry
  }

  /** Forgets `entry`; its descriptor closes now, or when the last read on its way returns. */
  private drop(path: string, entry: Kept): void {
    if (this.kept.get(path) === entry) this.kept.delete(path)
    if (entry.dropped) return
    entry.dropped = true
    if (entry.busy === 0) closeQuietly(entry.fd)
  }
}

/** The cache the Linux inspectors of this process share by default (closed by the plugin's disposal). */
export const procFiles = new ProcFileCache()

function readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, buffer, 0, buffer.length, position, (error, bytesRead) => (error === null ? resolve(bytesRead) : reject(error))))
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd)
  } catch {
    // already closed
  }
}
