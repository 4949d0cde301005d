/**
 * The host-owned directory whose files bubblewrap reads while it builds a sandbox: the compiled
 * seccomp filter and an empty file and directory that mask paths. Every sandbox binds it
 * read-only, outside its private /tmp, so no confined process can change what the next sandbox
 * loads. `<base>/conch-sandbox-<uid>`, mode 0700, opened beneath `base` without following a link;
 * files are written through its descriptor (`O_CREAT | O_EXCL | O_NOFOLLOW`, then renamed) and
 * read back before each use: one that is not exactly what conch wrote is replaced.
 */
import { createHash, randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { SandboxError } from '@conch/sandbox'
import { beneath, BeneathError, ensurePrivateFolder, nodeBeneathFs, openFile, openFolder, readOpen, type BeneathFs, type OpenFolder } from '@conch/subprocess'

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

/** This process's uid (0 where there are none). */
export const uid = (): number => (typeof process.getuid === 'function' ? process.getuid() : 0)

/** The runtime directory's path under `base`: `<base>/conch-sandbox-<uid>`. */
export const runtimeDirPath = (base: string): string => join(base, `conch-sandbox-${uid()}`)

/** Opens the runtime directory under `base` (e.g. `/tmp`, trusted as it is), creating it when it is missing. */
export function openRuntimeDir(base: string, fs: BeneathFs = nodeBeneathFs): RuntimeDir {
  const path = runtimeDirPath(base)
  const inFolder = <T>(use: (folder: OpenFolder) => T): T => {
    let folder: OpenFolder
    try {
      folder = ensurePrivateFolder(path, { root: base, fs })
    } catch (error) {
      if (!(error instanceof BeneathError)) throw error
      throw new SandboxError('RUNTIME_DIR_UNSAFE', { path, uid: uid() })
    }
    try {
      return use(folder)
    } finally {
      fs.close(folder.fd)
    }
  }

  const named = (name: string, content: Buffer, mode: number): string =>
    inFolder((folder) => {
      if (matches(folder, name, content, mode, fs)) return join(path, name)
      const temporary = `.${name}.${process.pid}.${randomBytes(6).toString('hex')}`
      const fd = openFile(folder, temporary, 'create', { perm: mode, fs })
      try {
        fs.fchmod(fd, mode) // exact, whatever the umask
        let offset = 0
        while (offset < content.length) offset += fs.write(fd, content, offset)
      } finally {
        fs.close(fd)
      }
      fs.rename(beneath(folder, temporary), beneath(folder, name))
      return join(path, name)
    })

  return {
    path,
    filter: (program) => named(`seccomp-${createHash('sha256').update(program).digest('hex').slice(0, 16)}.bpf`, program, 0o400),
    emptyFile: () => named('empty', Buffer.alloc(0), 0o444),
    emptyDir: () =>
      inFolder((folder) => {
        const dir = join(path, 'empty.d')
        const open = () => openFolder(dir, { root: path, create: false, fs })
        const make = () => {
          fs.mkdir(beneath(folder, 'empty.d'), 0o555)
          const made = open()!
          try {
            fs.fchmod(made.fd, 0o555)
          } finally {
            fs.close(made.fd)
          }
        }
        try {
          make()
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        }
        let good = false
        try {
          const found = open()
          if (found !== undefined) {
            try {
              good = found.stats.uid === uid() && (found.stats.mode & 0o7777) === 0o555 && fs.readdir(beneath(found, '.')).length === 0
            } finally {
              fs.close(found.fd)
            }
          }
        } catch (error) {
          if (!(error instanceof BeneathError)) throw error
        }
        if (!good) {
          rmSync(dir, { recursive: true, force: true })
          make()
        }
        return dir
      }),
  }
}

/** Whether `name` in `folder` is a regular file (not followed through a symlink) with exactly `content` and `mode`. */
function matches(folder: OpenFolder, name: string, content: Buffer, mode: number, fs: BeneathFs): boolean {
  let fd: number
  try {
    fd = openFile(folder, name, 'read', { fs })
  } catch {
    return false
  }
  try {
    const stat = fs.fstat(fd)
    if (stat.uid !== uid() || (stat.mode & 0o7777) !== mode || stat.size !== content.length) return false
    return readOpen(fd, content.length + 1, fs).equals(content)
  } finally {
    fs.close(fd)
  }
}
