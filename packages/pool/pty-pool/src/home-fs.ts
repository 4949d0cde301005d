/**
 * The host's reads and writes inside a pooled CLI's home. The CLI may have replaced any name in
 * it by a link, so every path is reached from a trusted folder (the checked state folder, or `/`)
 * through `@conch/subprocess`'s beneath module; its refusals become `HOME_PATH_UNSAFE`.
 */
import { appendFile, BeneathError, createFile, newestFile, nodeBeneathFs, openFolder, readFile, type BeneathFs, type BeneathOptions, type OpenFile } from '@conch/subprocess'
import { PoolError } from './errors.ts'
import { stateDirIdentity } from './state-dir.ts'

/** Runs `use`, restating a `BeneathError` as `HOME_PATH_UNSAFE`. */
function restated<T>(use: () => T): T {
  try {
    return use()
  } catch (error) {
    if (!(error instanceof BeneathError)) throw error
    throw new PoolError('HOME_PATH_UNSAFE', { refusal: error.code, beneath: error.details }, { cause: error })
  }
}

/** Walk options from `base`: when it is a state folder the pool opened, it must still be that folder. */
function from(base: string, fs?: BeneathFs): BeneathOptions {
  const identity = stateDirIdentity(base)
  return { root: base, ...(identity ? { rootIdentity: identity } : {}), ...(fs ? { fs } : {}) }
}

/** Makes the folder `dir` (and what is missing above it, mode 0700), reached from `base`. */
export function makeHomeDir(base: string, dir: string, fs?: BeneathFs): void {
  restated(() => (fs ?? nodeBeneathFs).close(openFolder(dir, { ...from(base, fs), create: true })!.fd))
}

/**
 * Creates `file` (absolute) with `content` and `mode`, reached from `base`; nothing in its place is written through.
 * @throws PoolError `HOME_PATH_UNSAFE` naming the path (a link on the way, or the name taken).
 */
export function createHomeFile(base: string, file: string, content: string | Buffer, mode = 0o600, fs?: BeneathFs): void {
  restated(() => createFile(file, content, { ...from(base, fs), perm: mode }))
}

/**
 * The newest regular file below `dir` whose name `accept`s, reached from `base` (`newestFile`).
 * @throws PoolError `HOME_PATH_UNSAFE` when `dir` itself, or a folder above it, is a link.
 */
export function newestFileBeneath(base: string, dir: string, accept: (name: string) => boolean, limits: { maxDepth: number; maxEntries: number }, fs?: BeneathFs): { file: OpenFile | undefined; truncated: boolean } {
  return restated(() => newestFile(dir, accept, limits, from(base, fs)))
}

/**
 * Appends `text` to `file` (absolute), a log in a folder a confined process may write (the
 * failure log lies in the workspace by default), reached from `/`.
 * @throws PoolError `HOME_PATH_UNSAFE` naming the path; file-system errors otherwise.
 */
export function appendNoFollow(file: string, text: string, fs?: BeneathFs): void {
  restated(() => appendFile(file, text, fs ? { fs } : {}))
}

/**
 * The first `maxBytes` of the regular file `file` (absolute), reached from `/`; undefined when it is missing.
 * @throws PoolError `HOME_PATH_UNSAFE` for a link or a special file on the way.
 */
export function readNoFollow(file: string, maxBytes: number, fs?: BeneathFs): Buffer | undefined {
  return restated(() => readFile(file, maxBytes, fs ? { fs } : {}))
}
