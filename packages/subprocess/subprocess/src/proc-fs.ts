import { readdir, readFile, readlink } from 'node:fs/promises'
import type { ProcFs } from './types.ts'

/** The real /proc, through `node:fs/promises` (text read as UTF-8). */
export const nodeProcFs: ProcFs = {
  readFile: (path) => readFile(path, 'utf8'),
  readdir: (path) => readdir(path),
  readlink: (path) => readlink(path),
}
