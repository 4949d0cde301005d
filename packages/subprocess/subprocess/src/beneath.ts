/**
 * Files and folders beneath a trusted root, reached without following anything a less trusted
 * process could have planted: each folder opened one component at a time relative to the one
 * above (`/proc/self/fd/<fd>/<name>`, `O_DIRECTORY | O_NOFOLLOW`), each file through its folder
 * (`O_NOFOLLOW | O_NONBLOCK`, then fstat(2)). README: "Paths beneath a trusted root".
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  rmdirSync,
  unlinkSync,
  writeSync,
  type Dirent,
  type Stats,
} from 'node:fs'
import { basename, dirname, isAbsolute, join, normalize, relative, resolve, sep } from 'node:path'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/errors'

/** The file-system calls conch makes on host paths, injectable for tests of races. */
export interface BeneathFs {
  open(path: string, flags: number, mode?: number): number
  fstat(fd: number): Stats
  lstat(path: string): Stats
  mkdir(path: string, mode: number): void
  readdir(path: string): Dirent[]
  readlink(path: string): string
  realpath(path: string): string
  read(fd: number, buffer: Buffer, offset: number, length: number, position: number | null): number
  write(fd: number, buffer: Buffer, offset: number): number
  fchmod(fd: number, mode: number): void
  rename(from: string, to: string): void
  unlink(path: string): void
  rmdir(path: string): void
  close(fd: number): void
  uid(): number
}

export const nodeBeneathFs: BeneathFs = {
  open: (path, flags, mode) => openSync(path, flags, mode),
  fstat: (fd) => fstatSync(fd),
  lstat: (path) => lstatSync(path),
  mkdir: (path, mode) => mkdirSync(path, { mode }),
  readdir: (path) => readdirSync(path, { withFileTypes: true }),
  readlink: (path) => readlinkSync(path),
  realpath: (path) => realpathSync(path),
  read: (fd, buffer, offset, length, position) => readSync(fd, buffer, offset, length, position),
  write: (fd, buffer, offset) => writeSync(fd, buffer, offset),
  fchmod: (fd, mode) => fchmodSync(fd, mode),
  rename: (from, to) => renameSync(from, to),
  unlink: (path) => unlinkSync(path),
  rmdir: (path) => rmdirSync(path),
  close: (fd) => closeSync(fd),
  uid: () => (typeof process.getuid === 'function' ? process.getuid() : 0),
}

/** `fs` with `before(call, path)` run before each call that names a path, for tests of races. */
export function interceptedFs(before: (call: 'open' | 'lstat' | 'mkdir' | 'readdir' | 'rename' | 'unlink' | 'rmdir', path: string) => void, fs: BeneathFs = nodeBeneathFs): BeneathFs {
  return {
    ...fs,
    open: (path, flags, mode) => (before('open', path), fs.open(path, flags, mode)),
    lstat: (path) => (before('lstat', path), fs.lstat(path)),
    mkdir: (path, mode) => (before('mkdir', path), fs.mkdir(path, mode)),
    readdir: (path) => (before('readdir', path), fs.readdir(path)),
    rename: (from, to) => (before('rename', from), fs.rename(from, to)),
    unlink: (path) => (before('unlink', path), fs.unlink(path)),
    rmdir: (path) => (before('rmdir', path), fs.rmdir(path)),
  }
}

const BENEATH_ERRORS = {
  /** Not an absolute, normalised path (`name`: not a file name). */
  PATH_INVALID: (d: { path: string; expected: 'absolute' | 'normalised' | 'name' }) =>
    d.expected === 'name' ? `${JSON.stringify(d.path)} is not a file name` : `${d.path} is not ${d.expected === 'absolute' ? 'an absolute path' : 'a normalised absolute path (no ".", ".." or doubled slashes)'}`,
  /** A component is a symbolic link. */
  PATH_SYMLINK: (d: { path: string }) => `${d.path} is a symbolic link`,
  /** A component is not a folder. */
  PATH_NOT_FOLDER: (d: { path: string }) => `${d.path} is not a folder`,
  /** The file is a link or a special file (`open`), or not a regular file with a single link (`fstat`). */
  PATH_NOT_REGULAR: (d: { path: string; found: 'open' | 'fstat' }) => `${d.path} is ${d.found === 'open' ? 'a symbolic link or a special file' : 'not a regular file with a single link'}`,
  /** A file to create exclusively already exists. */
  PATH_EXISTS: (d: { path: string }) => `${d.path} already exists`,
  /** The root is no longer the folder recorded. */
  PATH_CHANGED: (d: { path: string }) => `${d.path} was moved or replaced since it was opened`,
  /** The path lies directly in `parent`, a folder every user can write, or (no `parent`) below one and is not this user's. */
  PATH_SHARED: (d: { path: string; parent?: string; uid: number }) =>
    d.parent !== undefined
      ? `${d.path} lies directly in ${d.parent}, a folder every user can write (anyone could have made it, or replace it)`
      : `${d.path} lies under a folder every user can write and is not a folder of uid ${d.uid} closed to others' writes`,
  /** A private folder is not this user's with mode 0700; `mode` is its permission bits. */
  PATH_NOT_PRIVATE: (d: { path: string; uid: number; mode: number }) => `${d.path} is not a private folder of uid ${d.uid} (mode 0700, it is ${d.mode.toString(8).padStart(4, '0')})`,
} satisfies ErrorMessages

export type BeneathErrorCode = keyof typeof BENEATH_ERRORS
/** A path refused; `details.path` is the component at fault. Callers restate it in their own error type. */
export const BeneathError = errorClass('BeneathError', BENEATH_ERRORS)
export type BeneathError<C extends BeneathErrorCode = BeneathErrorCode> = ErrorOf<typeof BENEATH_ERRORS, C>

/** Device and inode of a folder, to check a root is still the one recorded. */
export interface FolderIdentity {
  dev: number
  ino: number
}

/** A folder or file open by descriptor, its path (for messages) and its fstat(2). The caller closes `fd`. */
export interface OpenFolder {
  fd: number
  path: string
  stats: Stats
}

/** A regular file open for reading, as `OpenFolder`. */
export type OpenFile = OpenFolder

export interface BeneathOptions {
  /** The trusted folder the walk starts from (absolute); `/` by default, and when `path` is not inside it. */
  root?: string
  /** Device and inode `root` must still have. */
  rootIdentity?: FolderIdentity
  /**
   * Below a folder every user may write (`o+w`, such as `/tmp`) other than the root, refuse
   * (`PATH_SHARED`) the target directly in it, and a folder on the way not this user's or open to
   * others' writes: anyone could have made or could replace it.
   */
  checkShared?: boolean
  fs?: BeneathFs
}

const LINUX = process.platform === 'linux'
const FOLDER = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW

/** `name` inside the folder open as `fd` (whose path is `path`), as openat(2) would see it. */
export function beneath(folder: { fd: number; path: string }, name: string): string {
  return LINUX ? `/proc/self/fd/${folder.fd}/${name}` : join(folder.path, name)
}

/**
 * Opens the folder `path` from the root (see the module comment), making missing folders (mode
 * 0700) when `create` is set.
 * @returns undefined when a folder is missing and `create` is off.
 * @throws BeneathError `PATH_INVALID`, `PATH_SYMLINK`, `PATH_NOT_FOLDER`, `PATH_SHARED` or
 *   `PATH_CHANGED` naming the component; Error from open(2) or mkdir(2) otherwise.
 */
export function openFolder(path: string, options: BeneathOptions & { create: boolean }): OpenFolder | undefined {
  const fs = options.fs ?? nodeBeneathFs
  if (!isAbsolute(path)) throw new BeneathError('PATH_INVALID', { path, expected: 'absolute' })
  const trimmed = path.length > 1 ? path.replace(/\/+$/, '') : path
  if (normalize(trimmed) !== trimmed) throw new BeneathError('PATH_INVALID', { path, expected: 'normalised' })
  const given = options.root === undefined ? sep : resolve(options.root)
  const inside = trimmed === given || trimmed.startsWith(given === sep ? sep : given + sep)
  const root = inside ? given : sep
  let folder: OpenFolder = { fd: openStep(fs, root, root), path: root, stats: undefined as unknown as Stats }
  folder.stats = fs.fstat(folder.fd)
  const identity = inside ? options.rootIdentity : undefined
  if (identity && (folder.stats.dev !== identity.dev || folder.stats.ino !== identity.ino)) {
    fs.close(folder.fd)
    throw new BeneathError('PATH_CHANGED', { path: root })
  }
  const uid = fs.uid()
  const parts = relative(root, trimmed).split(sep).filter((part) => part !== '')
  let shared = false
  for (const [index, part] of parts.entries()) {
    const parent = folder
    const next = join(parent.path, part)
    try {
      // The root is trusted as it is; below it, a folder every user can write taints what follows.
      const parentShared = options.checkShared === true && index > 0 && (parent.stats.mode & 0o002) !== 0
      if (parentShared && index === parts.length - 1) {
        throw new BeneathError('PATH_SHARED', { path: next, parent: parent.path, uid })
      }
      shared ||= parentShared
      const child = beneath(parent, part)
      let fd: number
      try {
        fd = openStep(fs, child, next)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
        if (!options.create) return undefined
        try {
          fs.mkdir(child, 0o700)
        } catch (mkdirError) {
          if ((mkdirError as NodeJS.ErrnoException).code !== 'EEXIST') throw mkdirError
        }
        fd = openStep(fs, child, next)
      }
      const stats = fs.fstat(fd)
      if (shared && index < parts.length - 1 && (stats.uid !== uid || (stats.mode & 0o022) !== 0)) {
        fs.close(fd)
        throw new BeneathError('PATH_SHARED', { path: next, uid })
      }
      folder = { fd, path: next, stats }
    } finally {
      fs.close(parent.fd)
    }
  }
  return folder
}

/** open(2) of one folder without following it; a link is `PATH_SYMLINK`, a non-folder `PATH_NOT_FOLDER`. */
function openStep(fs: BeneathFs, open: string, named: string): number {
  try {
    return fs.open(open, FOLDER)
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
    if (link) throw new BeneathError('PATH_SYMLINK', { path: named }, { cause: error })
    if (code === 'ENOTDIR') throw new BeneathError('PATH_NOT_FOLDER', { path: named }, { cause: error })
    throw error
  }
}

/**
 * Opens (creating what is missing, mode 0700) the folder `path` as `openFolder` does, and makes
 * sure it is this user's with no group or other bits; `repair` fchmod(2)s it to 0700 instead.
 * @throws BeneathError `PATH_NOT_PRIVATE`, or as `openFolder`.
 */
export function ensurePrivateFolder(path: string, options: BeneathOptions & { repair?: boolean }): OpenFolder {
  const fs = options.fs ?? nodeBeneathFs
  const folder = openFolder(path, { checkShared: true, ...options, create: true })!
  const uid = fs.uid()
  const mode = folder.stats.mode & 0o777
  if (folder.stats.uid === uid && (mode & 0o077) !== 0 && options.repair) {
    fs.fchmod(folder.fd, 0o700)
    folder.stats = fs.fstat(folder.fd)
  }
  if (folder.stats.uid !== uid || (folder.stats.mode & 0o077) !== 0) {
    fs.close(folder.fd)
    throw new BeneathError('PATH_NOT_PRIVATE', { path: folder.path, uid, mode })
  }
  return folder
}

/** How a file is opened: `create` exclusively, `append` (creating it), `read`. */
export type FileMode = 'create' | 'append' | 'append-existing' | 'read'

const FILE_FLAGS: Record<FileMode, number> = {
  create: constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
  append: constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT,
  'append-existing': constants.O_WRONLY | constants.O_APPEND,
  read: constants.O_RDONLY,
}

/**
 * Opens `name` in `folder` (see the module comment) and returns its descriptor; the caller closes it.
 * @throws BeneathError `PATH_EXISTS` (`create` on a name taken), `PATH_NOT_REGULAR`; Error from
 *   open(2) otherwise (`ENOENT`).
 */
export function openFile(folder: { fd: number; path: string }, name: string, mode: FileMode, options: { perm?: number; fs?: BeneathFs } = {}): number {
  const fs = options.fs ?? nodeBeneathFs
  if (name.includes(sep) || name === '' || name === '.' || name === '..') throw new BeneathError('PATH_INVALID', { path: name, expected: 'name' })
  const path = join(folder.path, name)
  let fd: number
  try {
    fd = fs.open(beneath(folder, name), FILE_FLAGS[mode] | constants.O_NOFOLLOW | constants.O_NONBLOCK, options.perm ?? 0o600)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new BeneathError('PATH_EXISTS', { path }, { cause: error })
    if (code === 'ELOOP' || code === 'EMLINK' || code === 'ENXIO') throw new BeneathError('PATH_NOT_REGULAR', { path, found: 'open' }, { cause: error })
    throw error
  }
  const stats = fs.fstat(fd)
  if (!stats.isFile() || (mode !== 'read' && stats.nlink !== 1)) {
    fs.close(fd)
    throw new BeneathError('PATH_NOT_REGULAR', { path, found: 'fstat' })
  }
  return fd
}

/** Runs `use` on `path`'s folder opened from the root as `openFolder` does; undefined when it is missing. */
function inFolder<T>(path: string, options: BeneathOptions & { create: boolean }, use: (folder: OpenFolder) => T): T | undefined {
  const folder = openFolder(dirname(path), options)
  if (folder === undefined) return undefined
  try {
    return use(folder)
  } finally {
    ;(options.fs ?? nodeBeneathFs).close(folder.fd)
  }
}

/** Writes all of `bytes` to `fd`, then closes it. */
function writeAll(fs: BeneathFs, fd: number, bytes: Buffer): void {
  try {
    let offset = 0
    while (offset < bytes.length) offset += fs.write(fd, bytes, offset)
  } finally {
    fs.close(fd)
  }
}

/**
 * Creates the file `path` (absolute) with `content`, exactly mode `perm` (0600 by default), its
 * folders made (mode 0700) from the root; nothing already in its place is written through.
 * @throws BeneathError `PATH_EXISTS`, or as `openFolder`.
 */
export function createFile(path: string, content: string | Buffer, options: BeneathOptions & { perm?: number } = {}): void {
  const fs = options.fs ?? nodeBeneathFs
  const fd = inFolder(path, { ...options, create: true }, (folder) => openFile(folder, basename(path), 'create', { fs, ...(options.perm === undefined ? {} : { perm: options.perm }) }))!
  if (options.perm !== undefined) fs.fchmod(fd, options.perm) // exact, whatever the umask
  writeAll(fs, fd, typeof content === 'string' ? Buffer.from(content) : content)
}

/**
 * Appends `text` to the regular file `path` (absolute, made mode 0600 when missing), its folders
 * made (mode 0700) from the root.
 * @throws BeneathError `PATH_NOT_REGULAR` (a link, FIFO or hard link in its place), or as `openFolder`.
 */
export function appendFile(path: string, text: string | Buffer, options: BeneathOptions = {}): void {
  const fs = options.fs ?? nodeBeneathFs
  const fd = inFolder(path, { ...options, create: true }, (folder) => openFile(folder, basename(path), 'append', { fs }))!
  writeAll(fs, fd, typeof text === 'string' ? Buffer.from(text) : text)
}

/**
 * The first `maxBytes` of the regular file `path` (absolute), reached from the root; undefined
 * when it or its folder is missing.
 * @throws BeneathError `PATH_NOT_REGULAR`, or as `openFolder`.
 */
export function readFile(path: string, maxBytes: number, options: BeneathOptions = {}): Buffer | undefined {
  const fs = options.fs ?? nodeBeneathFs
  let fd: number | undefined
  try {
    fd = inFolder(path, { ...options, create: false }, (folder) => openFile(folder, basename(path), 'read', { fs }))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  if (fd === undefined) return undefined
  try {
    return readOpen(fd, Math.min(maxBytes, fs.fstat(fd).size), fs)
  } finally {
    fs.close(fd)
  }
}

/** Up to `maxBytes` from the start of the open file `fd` (positional reads). */
export function readOpen(fd: number, maxBytes: number, fs: BeneathFs = nodeBeneathFs): Buffer {
  const buffer = Buffer.allocUnsafe(maxBytes)
  let got = 0
  while (got < buffer.length) {
    const n = fs.read(fd, buffer, got, buffer.length - got, got)
    if (n === 0) break
    got += n
  }
  return buffer.subarray(0, got)
}

/** How deep `removeTree` descends (one open descriptor a level) before moving a deeper folder up to the top. */
const REMOVE_DEPTH = 64

/**
 * Removes `path` (absolute) and everything below it, reached as `openFolder` does. Each folder is
 * opened without following a link and emptied through its descriptor; anything else is unlinked,
 * never followed (a name swapped for a link meanwhile is unlinked as a link). What lies deeper
 * than `REMOVE_DEPTH` is moved up into the top folder first, bounding descriptors and stack.
 * Nothing happens when `path` is missing.
 * @throws BeneathError as `openFolder`, for a folder above `path`; Error from unlink(2), rmdir(2) or rename(2) otherwise.
 */
export function removeTree(path: string, options: BeneathOptions = {}): void {
  const fs = options.fs ?? nodeBeneathFs
  const gone = (error: unknown) => (error as NodeJS.ErrnoException).code === 'ENOENT'
  let moved = 0
  /** Moves `name` in `folder` to a free name in `top`. */
  const moveUp = (folder: { fd: number; path: string }, name: string, top: { fd: number; path: string }): void => {
    for (;;) {
      try {
        return fs.rename(beneath(folder, name), beneath(top, `.removing-${++moved}`))
      } catch (error) {
        if (!['EEXIST', 'ENOTEMPTY', 'ENOTDIR', 'EISDIR'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error
      }
    }
  }
  const remove = (parent: { fd: number; path: string }, name: string, top?: { fd: number; path: string }, depth = 0): void => {
    const at = beneath(parent, name)
    let fd: number
    try {
      fd = fs.open(at, FOLDER)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return
      if (code !== 'ENOTDIR' && code !== 'ELOOP') throw error
      try {
        fs.unlink(at)
      } catch (unlinkError) {
        if (!gone(unlinkError)) throw unlinkError
      }
      return
    }
    const folder = { fd, path: join(parent.path, name) }
    try {
      // The top reads itself again while deeper levels moved folders up into it.
      for (let before = -1; before !== moved; ) {
        before = moved
        for (const entry of fs.readdir(LINUX ? `/proc/self/fd/${fd}` : folder.path)) {
          if (depth < REMOVE_DEPTH) remove(folder, entry.name, top ?? folder, depth + 1)
          else moveUp(folder, entry.name, top!)
        }
        if (top !== undefined) break
      }
    } finally {
      fs.close(fd)
    }
    try {
      fs.rmdir(at)
    } catch (error) {
      if (!gone(error)) throw error
    }
  }
  const trimmed = path.length > 1 ? path.replace(/\/+$/, '') : path
  inFolder(trimmed, { ...options, create: false }, (folder) => remove(folder, basename(trimmed)))
}

/**
 * The newest regular file (by mtime) below the folder `path` whose name `accept`s, reached from
 * the root and walked without following any link, at most `maxDepth` folders deep and over at
 * most `maxEntries` directory entries in all.
 * @returns the file open for reading, and `truncated` when the walk stopped at `maxEntries`;
 *   `file` is undefined when the folder is missing or holds no such file.
 * @throws BeneathError as `openFolder`, for `path` itself or a folder above it.
 */
export function newestFile(
  path: string,
  accept: (name: string) => boolean,
  limits: { maxDepth: number; maxEntries: number },
  options: BeneathOptions = {},
): { file: OpenFile | undefined; truncated: boolean } {
  const fs = options.fs ?? nodeBeneathFs
  const top = openFolder(path, { ...options, create: false })
  if (top === undefined) return { file: undefined, truncated: false }
  let best: OpenFile | undefined
  let seen = 0
  let truncated = false
  const walk = (folder: { fd: number; path: string }, depth: number): void => {
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
          child = fs.open(beneath(folder, entry.name), FOLDER)
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
          fd = openFile(folder, entry.name, 'read', { fs })
        } catch {
          continue
        }
        const stats = fs.fstat(fd)
        if (best === undefined || stats.mtimeMs > best.stats.mtimeMs) {
          if (best) fs.close(best.fd)
          best = { fd, path: join(folder.path, entry.name), stats }
        } else fs.close(fd)
      }
    }
  }
  try {
    walk(top, 0)
  } finally {
    fs.close(top.fd)
  }
  return { file: best, truncated }
}
