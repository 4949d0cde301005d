import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import type { ProcFs } from './types.ts'

/**
 * The real /proc (text read as UTF-8). Reads are synchronous, wrapped in promises: the kernel
 * generates these files in memory and a read takes microseconds, while a libuv thread-pool round
 * trip per file made a scan of every process several times slower (measured here with about 90
 * processes: a /proc probe took 2–3 ms synchronously against 15–22 ms through fs/promises).
 */
export const nodeProcFs: ProcFs = {
  readFile: (path) => settle(() => readFileSync(path, 'utf8')),
  readdir: (path) => settle(() => readdirSync(path)),
  readlink: (path) => settle(() => readlinkSync(path)),
}

function settle<T>(read: () => T): Promise<T> {
  try {
    return Promise.resolve(read())
  } catch (error) {
    return Promise.reject(error)
  }
}
