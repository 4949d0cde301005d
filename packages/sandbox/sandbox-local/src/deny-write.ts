/**
 * The deny-write list (`denyWritePaths`, `checkDenyWritePaths` of `@conch/sandbox`): files and
 * folders a confined process may not write, create, remove or rename even inside a writable workspace — what the host reads and runs on its own (shell and
 * tool startup files, editors' and agents' project configuration, git's hooks and config).
 *
 * Entries are relative to the workspace root and to each `readWritePaths` entry (the paths
 * writable like the workspace), under workspace-write only (read-only has nothing writable to
 * guard). The policy's own `writablePaths` are not covered: a private folder conch made for one
 * program (a pooled CLI's home) holds that program's own configuration, which it must write.
 *
 * An entry that exists is bound read-only onto itself, with the folders between the writable path
 * and it bound onto themselves (a mount point cannot be renamed), as protected paths are. An entry
 * that does not exist cannot be bound: bubblewrap would create the mount point on the host itself,
 * and leave it there. conch makes that mount point itself — an **empty folder**, for file entries
 * too: git does not track empty folders, so a placeholder never shows in `git status` nor is
 * committed by `git add -A`, and inside the sandbox the name can neither be written (`Is a
 * directory`), filled (`Read-only file system`) nor removed (`Device or resource busy`). Only
 * where the entry's parent folder exists (`.git/hooks` is held in a repository, not in a folder
 * that has no `.git`: a placeholder `.git` would make `git init` fail). `release` removes the
 * placeholders when the provider goes, each one that is still the empty folder conch made and is
 * a mount point in no mount namespace (removing one while a sandbox still mounts it would unmount
 * it there, proc(5) mountinfo, Linux ≥ 3.18). A ledger in the runtime folder lists them with the
 * process that made them, so the next conch to stop removes those a conch that has ended left (it
 * was killed, or its sandboxes outlived it).
 */
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync } from 'node:fs'
import { basename, dirname, sep } from 'node:path'
import { beneath, BeneathError, ensurePrivateFolder, nodeBeneathFs, openFile, openFolder, parseProcStat, readOpen, type BeneathFs, type OpenFolder } from '@conch/subprocess'

/**
 * A placeholder conch made: its path, the writable root it lies beneath, its device, inode and
 * ctime (a folder made again at the same inode differs in ctime), and the process that made it
 * (pid and start time, proc(5) stat field 22).
 */
export interface PlaceholderEntry {
  path: string
  root: string
  dev: number
  ino: number
  ctimeMs: number
  owner: ProcessMark
}

/** A process: its pid and start time (clock ticks since boot), which a reused pid does not repeat. */
export interface ProcessMark {
  pid: number
  startTime: string
}

/** This process's mark, or one of another pid (undefined when it is not running). */
export function processMark(pid: number = process.pid): ProcessMark | undefined {
  try {
    const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))
    return stat === undefined ? undefined : { pid, startTime: stat.startTime }
  } catch {
    return undefined
  }
}

/**
 * Where the placeholders are recorded, one file each (named by a hash of the path), so that any
 * conch of this user removes them once no sandbox mounts them: those a conch that was killed
 * left, and those another conch made that were still mounted when it stopped.
 */
export interface PlaceholderLedger {
  record(entry: PlaceholderEntry): void
  entries(): PlaceholderEntry[]
  forget(path: string): void
}

/** A ledger in the private folder `folder()` (made mode 0700 beneath its parent, which is trusted: the runtime folder). */
export function folderLedger(folder: () => string, fs: BeneathFs = nodeBeneathFs): PlaceholderLedger {
  const name = (path: string) => `${createHash('sha256').update(path).digest('hex').slice(0, 32)}.json`
  const inLedger = <T>(use: (open: OpenFolder) => T): T => {
    const path = folder()
    const open = ensurePrivateFolder(path, { root: dirname(path), fs })
    try {
      return use(open)
    } finally {
      fs.close(open.fd)
    }
  }
  const isEntry = (value: unknown): value is PlaceholderEntry => {
    const entry = value as Partial<PlaceholderEntry> | null
    return typeof entry?.path === 'string' && typeof entry.root === 'string' && typeof entry.dev === 'number' && typeof entry.ino === 'number' && typeof entry.ctimeMs === 'number' && typeof entry.owner?.pid === 'number'
  }
  return {
    record: (entry) =>
      inLedger((open) => {
        rmSync(beneath(open, name(entry.path)), { force: true })
        const fd = openFile(open, name(entry.path), 'create', { fs })
        try {
          const bytes = Buffer.from(JSON.stringify(entry))
          for (let offset = 0; offset < bytes.length; ) offset += fs.write(fd, bytes, offset)
        } finally {
          fs.close(fd)
        }
      }),
    entries: () =>
      inLedger((open) =>
        fs.readdir(beneath(open, '.')).flatMap((file) => {
          try {
            const fd = openFile(open, file.name, 'read', { fs })
            try {
              const entry: unknown = JSON.parse(readOpen(fd, 64 * 1024, fs).toString('utf8'))
              return isEntry(entry) ? [entry] : []
            } finally {
              fs.close(fd)
            }
          } catch {
            return []
          }
        }),
      ),
    forget: (path) => inLedger((open) => rmSync(beneath(open, name(path)), { force: true })),
  }
}

/** Where conch made placeholders, and their removal. */
export interface Placeholders {
  /** Makes an empty folder (mode 0755) at each of `paths` that is missing and whose parent folder exists, beneath its root. */
  hold(paths: readonly string[], roots: readonly string[]): void
  /**
   * Removes each placeholder this process made, or the ledger lists for a process that has ended,
   * that is still the empty folder conch made and a mount point in no mount namespace; returns
   * those left in place (a running conch's are its own to remove).
   */
  release(): string[]
}

/** Every mount point of every mount namespace this process can see (proc(5): /proc/<pid>/mountinfo, field 5). */
export function mountPointsEverywhere(): Set<string> {
  const points = new Set<string>()
  const seen = new Set<string>()
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const namespace = readlinkSync(`/proc/${pid}/ns/mnt`)
      if (seen.has(namespace)) continue
      seen.add(namespace)
      for (const line of readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n')) {
        const point = line.split(' ')[4]
        if (point !== undefined) points.add(point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return points
}

export interface PlaceholderOptions {
  /** Where the placeholders are recorded across processes (none: only this process's are removed). */
  ledger?: PlaceholderLedger
  fs?: BeneathFs
  /** The mount points of every mount namespace (default: `mountPointsEverywhere`). */
  mounted?: () => Set<string>
  /** Whether the process `mark` names is still running (default: its /proc stat has the same start time). */
  running?: (mark: ProcessMark) => boolean
}

/** Whether the process `mark` names still runs: its pid's /proc stat has the same start time. */
export const stillRunning = (mark: ProcessMark): boolean => processMark(mark.pid)?.startTime === mark.startTime

export function placeholders(options: PlaceholderOptions = {}): Placeholders {
  const { ledger, fs = nodeBeneathFs, mounted = mountPointsEverywhere, running = stillRunning } = options
  const made = new Map<string, PlaceholderEntry>()
  let self: ProcessMark | undefined
  /** Runs `use` with the parent folder of `path` opened beneath `root`; nothing when it (or the root itself) is missing or not a plain folder. */
  const inParent = (path: string, root: string, use: (parent: { fd: number; path: string }) => void) => {
    let parent
    try {
      parent = openFolder(dirname(path), { root, create: false, fs })
    } catch (error) {
      if (error instanceof BeneathError || (error as NodeJS.ErrnoException).code === 'ENOENT') return
      throw error
    }
    if (parent === undefined) return
    try {
      use(parent)
    } finally {
      fs.close(parent.fd)
    }
  }
  return {
    hold(paths, roots) {
      for (const path of paths) {
        const root = roots.find((candidate) => path.startsWith(candidate + sep))
        if (root === undefined) continue
        inParent(path, root, (parent) => {
          const at = beneath(parent, basename(path))
          try {
            fs.lstat(at)
            return
          } catch {
            // missing: make it
          }
          try {
            fs.mkdir(at, 0o755)
          } catch (error) {
            // Taken meanwhile; or a folder this user cannot write, where a confined process (the same user, no capabilities) cannot either.
            if (['EEXIST', 'EACCES', 'EPERM', 'EROFS'].includes((error as NodeJS.ErrnoException).code ?? '')) return
            throw error
          }
          const stat = fs.lstat(at)
          self ??= processMark() ?? { pid: process.pid, startTime: '' }
          const entry = { path, root, dev: stat.dev, ino: stat.ino, ctimeMs: stat.ctimeMs, owner: self }
          made.set(path, entry)
          ledger?.record(entry)
        })
      }
    },
    release() {
      const known = new Map(made)
      let recorded: PlaceholderEntry[] = []
      try {
        recorded = ledger?.entries() ?? []
      } catch {
        // no runtime folder yet: nothing was recorded
      }
      for (const entry of recorded) if (!known.has(entry.path) && !running(entry.owner)) known.set(entry.path, entry)
      if (known.size === 0) return []
      const points = mounted()
      const left: string[] = []
      for (const { path, root, dev, ino, ctimeMs } of known.values()) {
        if (points.has(path)) {
          left.push(path)
          continue
        }
        made.delete(path)
        inParent(path, root, (parent) => {
          const at = beneath(parent, basename(path))
          try {
            const stat = fs.lstat(at)
            if (stat.isDirectory() && stat.dev === dev && stat.ino === ino && stat.ctimeMs === ctimeMs && fs.readdir(at).length === 0) rmdirSync(at)
          } catch {
            // already gone, or no longer the empty folder conch made
          }
        })
        ledger?.forget(path)
      }
      return left
    },
  }
}
