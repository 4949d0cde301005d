/**
 * Opening session logs without following a path the sandbox could have changed.
 *
 * A confined terminal may be able to write near the log folder (a folder inside its workspace,
 * or one it shares). Following a symlink planted there would make the host — often root —
 * create or append a file wherever the link points. So:
 *
 * 1. every component of the (absolute) folder is checked with lstat(2) from `/` down, and a
 *    symlink anywhere is refused (`LOG_DIR_SYMLINK`, naming it); missing components are created
 *    one at a time (mkdir(2), mode 0700), never through a link;
 * 2. the folder is opened with `O_DIRECTORY | O_NOFOLLOW` and fstat(2)-compared with the last
 *    lstat, so a swap between the check and the open is refused too;
 * 3. on Linux the file is opened relative to that directory handle, through
 *    `/proc/self/fd/<fd>/<name>` (the kernel resolves the descriptor's magic link to the very
 *    directory opened in step 2, as openat(2) would — proc(5)), with `O_NOFOLLOW`, so a symlink
 *    as the file itself fails (`ELOOP`); elsewhere it is opened by path with `O_NOFOLLOW`, which
 *    leaves a window between step 2 and the open;
 * 4. the opened file must be a regular file (`O_NONBLOCK` keeps a planted FIFO from blocking
 *    the open), else `LOG_NOT_REGULAR`.
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, type Stats } from 'node:fs'
import { isAbsolute, join, sep } from 'node:path'
import { SessionError } from './types.ts'

/** The file-system calls this module makes, injectable for tests of races. */
export interface LogFs {
  lstat(path: string): Stats
  mkdir(path: string, mode: number): void
  open(path: string, flags: number, mode?: number): number
  fstat(fd: number): Stats
  close(fd: number): void
}

export const nodeLogFs: LogFs = {
  lstat: (path) => lstatSync(path),
  mkdir: (path, mode) => mkdirSync(path, { mode }),
  open: (path, flags, mode) => openSync(path, flags, mode),
  fstat: (fd) => fstatSync(fd),
  close: (fd) => closeSync(fd),
}

/** How a log file is opened: `create` exclusively (a new session), `read` or `append` an existing one. */
export type LogOpenMode = 'create' | 'read' | 'append'

const FLAGS: Record<LogOpenMode, number> = {
  create: constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_EXCL,
  read: constants.O_RDONLY,
  append: constants.O_WRONLY | constants.O_APPEND,
}

/**
 * Checks `dir` component by component (creating missing ones when `create` is set), opens it
 * without following links, and returns its descriptor. The caller closes it.
 * @throws SessionError `LOG_DIR_SYMLINK` naming the symlinked component, `LOG_DIR_INVALID` when
 *   a component is not a directory, changed while it was opened, or (without `create`) is missing
 *   (`code` of the cause is kept as `cause`).
 */
export function openLogDir(dir: string, options: { create: boolean; fs?: LogFs }): number {
  const fs = options.fs ?? nodeLogFs
  if (!isAbsolute(dir)) throw new SessionError('LOG_DIR_INVALID', { reason: `session log folder ${dir} is not an absolute path` })
  const parts = dir.split(sep).filter((part) => part !== '')
  let current: string = sep
  let last = checkComponent(fs, current, false)
  for (const part of parts) {
    if (part === '.' || part === '..') {
      throw new SessionError('LOG_DIR_INVALID', { reason: `session log folder ${dir} contains "${part}"; give a normalised absolute path` })
    }
    current = join(current, part)
    last = checkComponent(fs, current, options.create)
  }
  let fd: number
  try {
    fd = fs.open(current, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  } catch (error) {
    throw refusal(current, error)
  }
  const opened = fs.fstat(fd)
  if (opened.dev !== last.dev || opened.ino !== last.ino) {
    fs.close(fd)
    throw new SessionError('LOG_DIR_INVALID', { reason: `session log folder ${current} changed while it was opened; refusing to write there` })
  }
  return fd
}

/**
 * Opens `name` inside the folder open as `dirFd` (see the module comment) and returns the file
 * descriptor. `dir` is the folder's path, for messages and the non-Linux fallback.
 * @throws SessionError `LOG_NOT_REGULAR` (a symlink, FIFO, device or folder in the log's place);
 *   file-system errors otherwise (`EEXIST` for `create` on an existing name, `ENOENT`).
 */
export function openLogFile(dirFd: number, dir: string, name: string, mode: LogOpenMode, fs: LogFs = nodeLogFs): number {
  if (name.includes('/') || name === '.' || name === '..') throw new TypeError(`invalid log file name ${JSON.stringify(name)}`)
  const path = process.platform === 'linux' ? `/proc/self/fd/${dirFd}/${name}` : join(dir, name)
  let fd: number
  try {
    fd = fs.open(path, FLAGS[mode] | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ELOOP' || code === 'EMLINK' || code === 'ENXIO') {
      throw new SessionError('LOG_NOT_REGULAR', { reason: `session log ${join(dir, name)} is not a regular file (a symlink or special file is in its place); refusing to open it` })
    }
    throw error
  }
  if (!fs.fstat(fd).isFile()) {
    fs.close(fd)
    throw new SessionError('LOG_NOT_REGULAR', { reason: `session log ${join(dir, name)} is not a regular file; refusing to use it` })
  }
  return fd
}

function checkComponent(fs: LogFs, path: string, create: boolean): Stats {
  let stats: Stats
  try {
    stats = fs.lstat(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || !create) throw refusal(path, error)
    try {
      fs.mkdir(path, 0o700)
    } catch (mkdirError) {
      if ((mkdirError as NodeJS.ErrnoException).code !== 'EEXIST') throw refusal(path, mkdirError)
    }
    stats = fs.lstat(path)
  }
  if (stats.isSymbolicLink()) {
    throw new SessionError('LOG_DIR_SYMLINK', {
      reason: `session log folder component ${path} is a symbolic link; conch never follows links on the way to its logs (something may have replaced it to redirect them). Remove it, or configure a folder without links`,
    })
  }
  if (!stats.isDirectory()) throw new SessionError('LOG_DIR_INVALID', { reason: `session log folder component ${path} is not a directory` })
  return stats
}

function refusal(path: string, error: unknown): SessionError {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ELOOP') {
    return new SessionError('LOG_DIR_SYMLINK', { reason: `session log folder ${path} is a symbolic link; conch never follows links on the way to its logs` })
  }
  return new SessionError('LOG_DIR_INVALID', { reason: `cannot use session log folder ${path}: ${(error as Error).message}` }, { cause: error })
}
