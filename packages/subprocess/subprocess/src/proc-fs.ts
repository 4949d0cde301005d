import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import type { ProcFs } from './types.ts'

/**
 * The real /proc (text read as UTF-8). Reads are synchronous, wrapped in promises: the kernel
 * generates these files in memory and a read takes microseconds, while a libuv thread-pool round
 * trip per file made a scan of every process several times slower.
 */
export const nodeProcFs: ProcFs = {
  readFile: async (path) => readFileSync(path, 'utf8'),
  readdir: async (path) => readdirSync(path),
  readlink: async (path) => readlinkSync(path),
}
