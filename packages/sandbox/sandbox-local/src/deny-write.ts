/**
 * The deny-write list: files and folders a confined process may not write, create, remove or
 * rename even inside a writable workspace — what the host reads and runs on its own (shell and
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
 * it there, proc(5) mountinfo, Linux ≥ 3.18).
 */
import { readdirSync, readFileSync, readlinkSync, rmdirSync } from 'node:fs'
import { basename, dirname, join, relative, sep } from 'node:path'
import { protectedPathProblem, SandboxError, type SandboxPolicy } from '@conch/sandbox'
import { beneath, BeneathError, nodeBeneathFs, openFolder, type BeneathFs } from '@conch/subprocess'

/** The absolute paths `denyWrite` names for `policy` (see the module comment), without trailing slashes. */
export function denyWritePaths(policy: SandboxPolicy, options: { denyWrite: readonly string[]; readWritePaths: readonly string[] }): string[] {
  if (policy.mode !== 'workspace-write') return []
  const roots = [policy.workspaceRoot, ...options.readWritePaths]
  return [...new Set(roots.flatMap((root) => options.denyWrite.map((entry) => join(root, entry).replace(/\/+$/, ''))))]
}

/**
 * Refuses (`PROTECTED_PATH_SYMLINK`) a deny-write path reached through a symbolic link at or
 * below its writable root — a mount covers the link's target, not the link, which a confined
 * process could replace — and (`PROTECTED_PATH_LINKED`) a file with another hard link there.
 */
export function checkDenyWritePaths(paths: readonly string[], roots: readonly string[], fs: BeneathFs = nodeBeneathFs): void {
  for (const path of paths) {
    const root = roots.find((candidate) => path.startsWith(candidate + sep))
    if (root === undefined) continue
    let current = root
    for (const part of relative(root, path).split(sep)) {
      current = join(current, part)
      let stat
      try {
        stat = fs.lstat(current)
      } catch {
        break
      }
      if (!stat.isSymbolicLink()) continue
      throw new SandboxError('PROTECTED_PATH_SYMLINK', {
        reason:
          `cannot confine: ${current} is a symbolic link (-> ${fs.readlink(current)}) inside the writable ${root}, and ${path} is on the deny-write list: ` +
          `a confined process could replace the link and write what the host reads there. Put the folder or file itself in place of the link, ` +
          `or remove ${relative(root, path)} from denyWrite in the sandbox-local config`,
      })
    }
  }
  const problem = protectedPathProblem(
    paths.map((path) => ({ given: path, canonical: path })),
    roots,
    fs,
  )
  if (problem !== undefined) throw new SandboxError(problem.code, { reason: problem.message })
}

/** Where conch made placeholders, and their removal. */
export interface Placeholders {
  /** Makes an empty folder (mode 0755) at each of `paths` that is missing and whose parent folder exists, beneath its root. */
  hold(paths: readonly string[], roots: readonly string[]): void
  /** Removes the placeholders made that are still empty folders and no mount point anywhere; returns those left in place. */
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

export function placeholders(fs: BeneathFs = nodeBeneathFs, mounted: () => Set<string> = mountPointsEverywhere): Placeholders {
  const made = new Map<string, { root: string; dev: number; ino: number }>()
  /** Runs `use` with the parent folder of `path` opened beneath `root`; nothing when it is missing or not a plain folder. */
  const inParent = (path: string, root: string, use: (parent: { fd: number; path: string }) => void) => {
    let parent
    try {
      parent = openFolder(dirname(path), { root, create: false, fs })
    } catch (error) {
      if (error instanceof BeneathError) return
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
            if ((error as NodeJS.ErrnoException).code === 'EEXIST') return
            throw error
          }
          const stat = fs.lstat(at)
          made.set(path, { root, dev: stat.dev, ino: stat.ino })
        })
      }
    },
    release() {
      if (made.size === 0) return []
      const points = mounted()
      const left: string[] = []
      for (const [path, { root, dev, ino }] of made) {
        if (points.has(path)) {
          left.push(path)
          continue
        }
        made.delete(path)
        inParent(path, root, (parent) => {
          const at = beneath(parent, basename(path))
          try {
            const stat = fs.lstat(at)
            if (stat.isDirectory() && stat.dev === dev && stat.ino === ino && fs.readdir(at).length === 0) rmdirSync(at)
          } catch {
            // already gone, or no longer the empty folder conch made
          }
        })
      }
      return left
    },
  }
}
