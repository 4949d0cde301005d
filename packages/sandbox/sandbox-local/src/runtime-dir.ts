/**
 * The host-owned directory whose files bubblewrap reads while it builds a sandbox: the compiled
 * seccomp filter (opened on a descriptor by the argv's first process, see `bubblewrapArgv`), and
 * an empty file and an empty directory that mask paths. Every sandbox binds it read-only, and it
 * lives outside the sandbox's private /tmp, so no confined process can change what the next
 * sandbox loads.
 *
 * The directory is `<base>/conch-sandbox-<uid>`, mode 0700, created with mkdir(2) (which never
 * follows a symlink in its last component) and checked with lstat(2): it must be a real
 * directory owned by this user and closed to everyone else, or nothing is used. Files are
 * written under a unique temporary name with `O_CREAT | O_EXCL | O_NOFOLLOW` and renamed into
 * place, and read back with `O_NOFOLLOW` before each use: a file that is not exactly what conch
 * wrote is replaced.
 */
import { createHash, randomBytes } from 'node:crypto'
import {
  closeSync,
  chmodSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  readdirSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'
import { SandboxError } from '@conch/sandbox'

export interface RuntimeDir {
  /** The directory (absolute). */
  readonly path: string
  /** The filter file for `program`, written if it is missing or differs. Returns its path. */
  filter(program: Buffer): string
  /** An empty, read-only regular file (for masking files). */
  emptyFile(): string
  /** An empty, read-only directory (for masking directories). */
  emptyDir(): string
}

const uid = (): number => (typeof process.getuid === 'function' ? process.getuid() : 0)

/** The runtime directory's path under `base`: `<base>/conch-sandbox-<uid>`. */
export const runtimeDirPath = (base: string): string => join(base, `conch-sandbox-${uid()}`)

/** Opens the runtime directory under `base` (e.g. `/tmp`), creating it when it is missing. */
export function openRuntimeDir(base: string): RuntimeDir {
  const path = runtimeDirPath(base)
  const ensure = (): void => {
    try {
      mkdirSync(path, { mode: 0o700 })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    const stat = lstatSync(path)
    if (!stat.isDirectory() || stat.uid !== uid() || (stat.mode & 0o077) !== 0) {
      throw new SandboxError('RUNTIME_DIR_UNSAFE', { path, uid: uid() })
    }
  }

  const named = (name: string, content: Buffer, mode: number): string => {
    ensure()
    const file = join(path, name)
    if (matches(file, content, mode)) return file
    const temporary = join(path, `.${name}.${process.pid}.${randomBytes(6).toString('hex')}`)
    const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode)
    try {
      fchmodSync(fd, mode) // exact, whatever the umask
      let offset = 0
      while (offset < content.length) offset += writeSync(fd, content, offset)
    } finally {
      closeSync(fd)
    }
    renameSync(temporary, file)
    return file
  }

  return {
    path,
    filter: (program) => named(`seccomp-${createHash('sha256').update(program).digest('hex').slice(0, 16)}.bpf`, program, 0o400),
    emptyFile: () => named('empty', Buffer.alloc(0), 0o444),
    emptyDir: () => {
      ensure()
      const dir = join(path, 'empty.d')
      const make = () => {
        mkdirSync(dir, { mode: 0o555 })
        chmodSync(dir, 0o555)
      }
      try {
        make()
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      }
      const stat = lstatSync(dir)
      if (!stat.isDirectory() || stat.uid !== uid() || (stat.mode & 0o7777) !== 0o555 || readdirSync(dir).length > 0) {
        rmSync(dir, { recursive: true, force: true })
        make()
      }
      return dir
    },
  }
}

/** Whether `file` is a regular file (not followed through a symlink) with exactly `content` and `mode`. */
function matches(file: string, content: Buffer, mode: number): boolean {
  let fd: number
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch {
    return false
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile() || stat.uid !== uid() || (stat.mode & 0o7777) !== mode || stat.size !== content.length) return false
    const read = Buffer.alloc(content.length + 1)
    let length = 0
    for (;;) {
      const n = readSync(fd, read, length, read.length - length, null)
      if (n === 0) break
      length += n
      if (length > content.length) return false
    }
    return length === content.length && read.subarray(0, length).equals(content)
  } finally {
    closeSync(fd)
  }
}
