/**
 * The deny-write list (`denyWritePaths` of `@conch/sandbox`) on the host: the README's "Deny-write
 * list" gives the whole design. An entry that exists is bound read-only as a protected path. A
 * missing one cannot be bound (bubblewrap would create the mount point on the host and leave it),
 * so conch makes a **placeholder**, an empty folder (git tracks none, and inside it can be neither
 * written, filled nor removed). A missing entry whose parent is missing too is covered by its
 * topmost missing folder, a **held folder**, which each sandbox covers with a writable folder of
 * its own (agent-sandbox.ts). `release` removes a placeholder only while it is still conch's empty
 * folder and a mount point in no mount namespace (proc(5) mountinfo: removing it would unmount
 * it there); a ledger in the runtime folder lets a later conch remove those an ended one left.
 */
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync, unlinkSync } from 'node:fs'
import { basename, dirname, join, relative, sep } from 'node:path'
import { currentOwner, ownerEnded, placeholderContent, type ProcessOwner } from '@conch/sandbox'
import { beneath, BeneathError, ensurePrivateFolder, nodeBeneathFs, openFile, openFolder, readOpen, type BeneathFs, type OpenFolder } from '@conch/subprocess'

/**
 * A placeholder conch made: its path, the writable root it lies beneath, its device, inode and
 * ctime (a folder made again at the same inode differs in ctime), and the process that made it
 * (`ProcessOwner`, @conch/sandbox: its PID namespace, pid and start time).
 */
export interface PlaceholderEntry {
  path: string
  root: string
  dev: number
  ino: number
  ctimeMs: number
  owner: ProcessOwner
  /** A held folder (the topmost missing folder of an entry), which each sandbox covers with its own. */
  held?: boolean
  /** A placeholder file's content (`placeholderContent`): an entry whose reader fails on a folder. */
  content?: string
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
  /**
   * Makes an empty folder (mode 0755) at each of `paths` that is missing and whose parent folder
   * exists, beneath its root; where the parent is missing too, at its topmost missing folder (a
   * held folder). Returns the held folders `paths` lie in (made now, or before and still empty).
   */
  hold(paths: readonly string[], roots: readonly string[]): string[]
  /**
   * Removes each placeholder this process made, or the ledger lists for a process that has ended,
   * that is still the empty folder conch made and a mount point in no mount namespace (only those
   * of `paths`, when given); returns those left in place (a running conch's are its own to remove).
   */
  release(paths?: readonly string[]): string[]
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
  /** Whether the process that made a placeholder has ended (default: `ownerEnded`, never one of another PID namespace). */
  ended?: (owner: ProcessOwner) => boolean
}

export function placeholders(options: PlaceholderOptions = {}): Placeholders {
  const { ledger, fs = nodeBeneathFs, mounted = mountPointsEverywhere, ended = ownerEnded } = options
  const made = new Map<string, PlaceholderEntry>()
  let self: ProcessOwner | undefined
  const ledgerEntries = (): PlaceholderEntry[] => {
    try {
      return ledger?.entries() ?? []
    } catch {
      return [] // no runtime folder yet: nothing was recorded
    }
  }
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
  const empty = (at: string): boolean => {
    try {
      return fs.readdir(at).length === 0
    } catch {
      return false
    }
  }
  /** Whether `at` is still the empty folder (or the file with its content) `entry` records. */
  const unchanged = (at: string, entry: PlaceholderEntry): boolean => {
    try {
      const stat = fs.lstat(at)
      if (stat.dev !== entry.dev || stat.ino !== entry.ino || stat.ctimeMs !== entry.ctimeMs) return false
      return entry.content === undefined ? stat.isDirectory() && empty(at) : stat.isFile() && readFileSync(at, 'utf8') === entry.content
    } catch {
      return false
    }
  }
  const exists = (path: string): boolean => {
    try {
      fs.lstat(path)
      return true
    } catch {
      return false
    }
  }
  /** Makes the placeholder `path` (a held folder when `isHeld`); false when it was taken meanwhile. */
  const make = (path: string, root: string, isHeld: boolean): boolean => {
    let taken = false
    const content = isHeld ? undefined : placeholderContent(path)
    inParent(path, root, (parent) => {
      const at = beneath(parent, basename(path))
      if (exists(at)) return void (taken = true)
      try {
        if (content === undefined) fs.mkdir(at, 0o755)
        else {
          const fd = openFile(parent, basename(path), 'create', { perm: 0o644, fs })
          try {
            fs.write(fd, Buffer.from(content), 0)
          } finally {
            fs.close(fd)
          }
        }
      } catch (error) {
        if (error instanceof BeneathError && error.code === 'PATH_EXISTS') return void (taken = true)
        // Taken meanwhile; or a folder this user cannot write, where a confined process (the same user, no capabilities) cannot either.
        if (['EEXIST', 'EACCES', 'EPERM', 'EROFS'].includes((error as NodeJS.ErrnoException).code ?? '')) return void (taken = (error as NodeJS.ErrnoException).code === 'EEXIST')
        throw error
      }
      const stat = fs.lstat(at)
      self ??= currentOwner() ?? { pid: process.pid, startTime: '' }
      const entry = { path, root, dev: stat.dev, ino: stat.ino, ctimeMs: stat.ctimeMs, owner: self, ...(isHeld && { held: true }), ...(content !== undefined && { content }) }
      made.set(path, entry)
      ledger?.record(entry)
    })
    return !taken
  }
  return {
    hold(paths, roots) {
      const held = new Set<string>()
      let recorded: PlaceholderEntry[] | undefined
      /** Whether `folder` is a held folder conch made (this process, or one the ledger lists) and still the empty folder it made. */
      const isHeld = (folder: string, root: string): boolean => {
        let still = false
        inParent(folder, root, (parent) => {
          const at = beneath(parent, basename(folder))
          // The ledger is read only for an empty folder: a repository's .git is not one.
          if (!empty(at)) return
          const entry = made.get(folder) ?? (recorded ??= ledgerEntries()).find((candidate) => candidate.path === folder)
          still = entry?.held === true && unchanged(at, entry)
        })
        return still
      }
      for (const path of paths) {
        const root = roots.find((candidate) => path.startsWith(candidate + sep))
        if (root === undefined) continue
        // The folders from the root down to the entry's parent, outermost first.
        const folders = relative(root, dirname(path)).split(sep).filter((part) => part !== '').map((_, index, parts) => join(root, ...parts.slice(0, index + 1)))
        // Twice at most: a folder another conch made meanwhile is looked at again.
        for (let attempt = 0; attempt < 2; attempt++) {
          const inHeld = folders.find((folder) => isHeld(folder, root))
          if (inHeld !== undefined) {
            held.add(inHeld)
            break
          }
          const missing = [...folders, path].find((candidate) => !exists(candidate))
          if (missing === undefined) break
          // A file on the way (`.git` a gitfile) is not a folder to make anything in: inParent does nothing there.
          if (make(missing, root, missing !== path)) {
            if (made.get(missing)?.held === true) held.add(missing)
            break
          }
          recorded = undefined
        }
      }
      return [...held]
    },
    release(paths) {
      const wanted = (path: string) => paths === undefined || paths.includes(path)
      const known = new Map([...made].filter(([path]) => wanted(path)))
      for (const entry of ledgerEntries()) if (wanted(entry.path) && !known.has(entry.path) && ended(entry.owner)) known.set(entry.path, entry)
      if (known.size === 0) return []
      const points = mounted()
      const left: string[] = []
      for (const entry of known.values()) {
        const { path, root } = entry
        if (points.has(path)) {
          left.push(path)
          continue
        }
        made.delete(path)
        inParent(path, root, (parent) => {
          const at = beneath(parent, basename(path))
          try {
            if (unchanged(at, entry)) (entry.content === undefined ? rmdirSync : unlinkSync)(at)
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
