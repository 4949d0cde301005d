/**
 * The host's reads and writes inside a pooled CLI's home, made so that nothing the CLI planted
 * there is followed. A CLI may write its own home (it is its one writable path in the state
 * folder), so any name in it may be a symbolic link to a host file, and any folder in it may have
 * been replaced by a link to a host folder, by the time the host (often root) touches it.
 *
 * - A folder is reached from a trusted starting folder — the pool's state folder, checked at load
 *   and unwritable by every CLI (`state-dir.ts`), or `/` for a folder outside it — one component at
 *   a time: each is opened with `O_RDONLY | O_DIRECTORY | O_NOFOLLOW` relative to the descriptor of
 *   the folder above it, through `/proc/self/fd/<fd>/<name>` (the kernel resolves the descriptor's
 *   magic link to the very folder opened, as openat(2) would — proc(5)). A link in any component
 *   fails the open (open(2): `ELOOP`, or `ENOTDIR` with `O_DIRECTORY`; `HOME_PATH_UNSAFE`), so
 *   neither a planted link nor a folder swapped for one between two steps is followed. A missing
 *   component is made with mkdir(2) mode 0700 through the same handle (mkdir never follows a link
 *   in its last component) when the caller creates.
 * - A file is created through its folder's handle with `O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK`:
 *   a name that already exists — a planted link, FIFO or file — is refused (`HOME_PATH_UNSAFE`)
 *   rather than written through. Prompt files get a fresh random name on every turn.
 * - A file is read through its folder's handle with `O_RDONLY | O_NOFOLLOW | O_NONBLOCK` and must be
 *   a regular file by fstat(2) of the open descriptor.
 *
 * On a system without `/proc/self/fd` (macOS) the same flags are applied to the joined path, which
 * checks only the last component: the pool's confinement is bubblewrap's, which is Linux's.
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readSync, writeSync, type Dirent, type Stats } from 'node:fs'
import { dirname, basename, isAbsolute, join, relative, sep } from 'node:path'
import { stateDirIdentity } from './state-dir.ts'

/** The file-system calls this module makes, injectable for tests of races. */
export interface HomeFs {
  open(path: string, flags: number, mode?: number): number
  fstat(fd: number): Stats
  lstat(path: string): Stats
  mkdir(path: string, mode: number): void
  readdir(path: string): Dirent[]
  read(fd: number, buffer: Buffer, offset: number, length: number, position: number): number
  write(fd: number, buffer: Buffer, offset: number): number
  close(fd: number): void
}

export const nodeHomeFs: HomeFs = {
  open: (path, flags, mode) => openSync(path, flags, mode),
  fstat: (fd) => fstatSync(fd),
  lstat: (path) => lstatSync(path),
  mkdir: (path, mode) => mkdirSync(path, { mode }),
  readdir: (path) => readdirSync(path, { withFileTypes: true }),
  read: (fd, buffer, offset, length, position) => readSync(fd, buffer, offset, length, position),
  write: (fd, buffer, offset) => writeSync(fd, buffer, offset),
  close: (fd) => closeSync(fd),
}

export type HomePathErrorCode =
  /** A component is a symbolic link, not a folder, or a file to create already exists. */
  | 'HOME_PATH_UNSAFE'

/** A path in a CLI's home the pool refused to use; the message names it. */
export class HomePathError extends Error {
  override readonly name = 'HomePathError'
  constructor(readonly code: HomePathErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}

const LINUX = process.platform === 'linux'
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW

/** `name` inside the folder open as `fd` (whose path is `path`), as openat(2) would see it. */
export function beneath(fd: number, path: string, name: string): string {
  return LINUX ? `/proc/self/fd/${fd}/${name}` : join(path, name)
}

/** A folder open by descriptor, and its path (for messages). The caller closes `fd`. */
export interface OpenDir {
  fd: number
  path: string
}

/**
 * Opens the folder `target` (absolute, normalised) component by component from `base` when it lies
 * inside it (the pool's state folder), else from `/`, never following a link (module comment).
 * `baseIdentity`, when given, is the device and inode `base` must still have once opened.
 * @returns undefined when a component is missing and `create` is off.
 * @throws HomePathError `HOME_PATH_UNSAFE` naming the component that is a link or not a folder.
 */
export function openDirBeneath(base: string, target: string, options: { create: boolean; fs?: HomeFs; baseIdentity?: { dev: number; ino: number } }): OpenDir | undefined {
  const fs = options.fs ?? nodeHomeFs
  if (!isAbsolute(target)) throw new HomePathError('HOME_PATH_UNSAFE', `${target} is not an absolute path`)
  const inside = target === base || target.startsWith(base === sep ? sep : base + sep)
  const start = inside ? base : sep
  const parts = relative(start, target).split(sep).filter((part) => part !== '')
  if (parts.some((part) => part === '.' || part === '..')) throw new HomePathError('HOME_PATH_UNSAFE', `${target} is not a normalised absolute path`)
  let path = start
  let fd = openComponent(fs, start, start)
  if (inside && options.baseIdentity) {
    // The folder opened must be the one checked at load (a process that can rename a folder
    // above it could have put another in its place).
    const opened = fs.fstat(fd)
    if (opened.dev !== options.baseIdentity.dev || opened.ino !== options.baseIdentity.ino) {
      fs.close(fd)
      throw new HomePathError('HOME_PATH_UNSAFE', `the pool's state folder ${base} was moved or replaced since the pool opened it; nothing is written or read there`)
    }
  }
  for (const part of parts) {
    const next = join(path, part)
    const child = beneath(fd, path, part)
    let childFd: number | undefined
    try {
      try {
        childFd = openComponent(fs, child, next)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
        if (!options.create) return undefined
        try {
          fs.mkdir(child, 0o700)
        } catch (mkdirError) {
          if ((mkdirError as NodeJS.ErrnoException).code !== 'EEXIST') throw mkdirError
        }
        childFd = openComponent(fs, child, next)
      }
    } finally {
      fs.close(fd)
    }
    fd = childFd
    path = next
  }
  return { fd, path }
}

/** Makes the folder `dir` (and what is missing above it, mode 0700) as `openDirBeneath` walks. */
export function makeHomeDir(base: string, dir: string, fs: HomeFs = nodeHomeFs): void {
  fs.close(openDirBeneath(base, dir, { create: true, fs, ...baseCheck(base) })!.fd)
}

/** The identity `base` must keep when it is a state folder the pool opened (`stateDirIdentity`). */
function baseCheck(base: string): { baseIdentity?: { dev: number; ino: number } } {
  const identity = stateDirIdentity(base)
  return identity ? { baseIdentity: identity } : {}
}

/** open(2) of one folder without following it; a link or a non-folder is `HOME_PATH_UNSAFE`. */
function openComponent(fs: HomeFs, open: string, named: string): number {
  try {
    return fs.open(open, DIR_FLAGS)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    // Linux answers a link opened with O_DIRECTORY | O_NOFOLLOW with ENOTDIR (ELOOP without
    // O_DIRECTORY): lstat(2) of the same name tells a link from a file.
    let link = code === 'ELOOP'
    if (code === 'ENOTDIR') {
      try {
        link = fs.lstat(open).isSymbolicLink()
      } catch {
        link = false
      }
    }
    if (link) {
      throw new HomePathError('HOME_PATH_UNSAFE', `${named} is a symbolic link; the pool never follows links in a CLI's home (the CLI may have planted it to redirect the host)`, { cause: error })
    }
    if (code === 'ENOTDIR') throw new HomePathError('HOME_PATH_UNSAFE', `${named} is not a folder; the pool uses only folders it finds or makes there`, { cause: error })
    throw error
  }
}

/**
 * Creates `file` (absolute) with `content` and `mode`, its folder opened from `base` as
 * `openDirBeneath` does (missing folders made, mode 0700) and the file itself made with
 * `O_CREAT | O_EXCL | O_NOFOLLOW`, so nothing in its place is written through.
 * @throws HomePathError `HOME_PATH_UNSAFE` naming the path (a link on the way, or the name taken).
 */
export function createHomeFile(base: string, file: string, content: string | Buffer, mode = 0o600, fs: HomeFs = nodeHomeFs): void {
  const dir = openDirBeneath(base, dirname(file), { create: true, fs, ...baseCheck(base) })!
  let fd: number
  try {
    try {
      fd = fs.open(beneath(dir.fd, dir.path, basename(file)), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NONBLOCK, mode)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EEXIST' || code === 'ELOOP') {
        throw new HomePathError('HOME_PATH_UNSAFE', `${file} already exists (a link or a file the CLI may have planted); the pool writes only files it creates`, { cause: error })
      }
      throw error
    }
  } finally {
    fs.close(dir.fd)
  }
  try {
    const bytes = typeof content === 'string' ? Buffer.from(content) : content
    let offset = 0
    while (offset < bytes.length) offset += fs.write(fd, bytes, offset)
  } finally {
    fs.close(fd)
  }
}

/** A regular file open for reading, with its fstat(2). The caller closes `fd`. */
export interface OpenFile {
  fd: number
  path: string
  stats: Stats
}

/**
 * The newest regular file (by mtime) below the folder `dir` whose name `accept`s, walked from
 * `base` without following any link (module comment), at most `maxDepth` folders deep and over
 * at most `maxEntries` directory entries in all.
 * @returns the file open for reading, and `truncated` when the walk stopped at `maxEntries`;
 *   `file` is undefined when the folder is missing or holds no such file.
 * @throws HomePathError `HOME_PATH_UNSAFE` when `dir` itself, or a folder above it, is a link.
 */
export function newestFileBeneath(
  base: string,
  dir: string,
  accept: (name: string) => boolean,
  limits: { maxDepth: number; maxEntries: number },
  fs: HomeFs = nodeHomeFs,
): { file: OpenFile | undefined; truncated: boolean } {
  const root = openDirBeneath(base, dir, { create: false, fs, ...baseCheck(base) })
  if (root === undefined) return { file: undefined, truncated: false }
  let best: OpenFile | undefined
  let seen = 0
  let truncated = false
  const walk = (folder: OpenDir, depth: number): void => {
    let entries: Dirent[]
    try {
      entries = fs.readdir(LINUX ? `/proc/self/fd/${folder.fd}` : folder.path)
    } catch {
      return
    }
    for (const entry of entries) {
      if (++seen > limits.maxEntries) {
        truncated = true
        return
      }
      // Dirent types come from the folder itself (d_type): a link is neither a folder nor a file.
      if (entry.isDirectory() && depth < limits.maxDepth) {
        let child: number
        try {
          child = fs.open(beneath(folder.fd, folder.path, entry.name), DIR_FLAGS)
        } catch {
          continue
        }
        try {
          walk({ fd: child, path: join(folder.path, entry.name) }, depth + 1)
        } finally {
          fs.close(child)
        }
        if (truncated) return
      } else if (entry.isFile() && accept(entry.name)) {
        let fd: number
        try {
          fd = fs.open(beneath(folder.fd, folder.path, entry.name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
        } catch {
          continue
        }
        const stats = fs.fstat(fd)
        if (stats.isFile() && (best === undefined || stats.mtimeMs > best.stats.mtimeMs)) {
          if (best) fs.close(best.fd)
          best = { fd, path: join(folder.path, entry.name), stats }
        } else fs.close(fd)
      }
    }
  }
  try {
    walk(root, 0)
  } finally {
    fs.close(root.fd)
  }
  return { file: best, truncated }
}

/**
 * Appends `text` to `file` (absolute), a log in a folder a confined process may write (the
 * failure log lies in the workspace by default): its folder is opened from `/` as
 * `openDirBeneath` does (missing folders made, mode 0700), and the file with
 * `O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK` (mode 0600) through that handle; it must
 * be a regular file with one link (a hard link to another file is refused too).
 * @throws HomePathError `HOME_PATH_UNSAFE` naming the path; file-system errors otherwise.
 */
export function appendNoFollow(file: string, text: string, fs: HomeFs = nodeHomeFs): void {
  const dir = openDirBeneath(sep, dirname(file), { create: true, fs })!
  let fd: number
  try {
    try {
      fd = fs.open(beneath(dir.fd, dir.path, basename(file)), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ELOOP' || code === 'ENXIO') throw new HomePathError('HOME_PATH_UNSAFE', `${file} is a symbolic link or a special file; the pool appends only to a regular file`, { cause: error })
      throw error
    }
  } finally {
    fs.close(dir.fd)
  }
  try {
    const stats = fs.fstat(fd)
    if (!stats.isFile() || stats.nlink !== 1) throw new HomePathError('HOME_PATH_UNSAFE', `${file} is not a regular file with a single link; the pool appends only to its own log`)
    const bytes = Buffer.from(text)
    let offset = 0
    while (offset < bytes.length) offset += fs.write(fd, bytes, offset)
  } finally {
    fs.close(fd)
  }
}

/**
 * The first `maxBytes` of the regular file `file` (absolute), reached as `openDirBeneath` walks
 * from `/` and opened with `O_RDONLY | O_NOFOLLOW | O_NONBLOCK`; undefined when it is missing.
 * @throws HomePathError `HOME_PATH_UNSAFE` for a link or a special file on the way.
 */
export function readNoFollow(file: string, maxBytes: number, fs: HomeFs = nodeHomeFs): Buffer | undefined {
  const dir = openDirBeneath(sep, dirname(file), { create: false, fs })
  if (dir === undefined) return undefined
  let fd: number
  try {
    try {
      fd = fs.open(beneath(dir.fd, dir.path, basename(file)), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return undefined
      if (code === 'ELOOP') throw new HomePathError('HOME_PATH_UNSAFE', `${file} is a symbolic link; the pool reads only regular files`, { cause: error })
      throw error
    }
  } finally {
    fs.close(dir.fd)
  }
  try {
    const stats = fs.fstat(fd)
    if (!stats.isFile()) throw new HomePathError('HOME_PATH_UNSAFE', `${file} is not a regular file; the pool reads only regular files`)
    const buffer = Buffer.allocUnsafe(Math.min(maxBytes, stats.size))
    let got = 0
    while (got < buffer.length) {
      const n = fs.read(fd, buffer, got, buffer.length - got, got)
      if (n === 0) break
      got += n
    }
    return buffer.subarray(0, got)
  } finally {
    fs.close(fd)
  }
}
