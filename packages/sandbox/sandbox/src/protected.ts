/**
 * What a protected path must look like for its protection to hold. A provider binds the
 * canonical path read-only (a mount covers the file, not a name of it), so another hard link of
 * a file, or a symbolic link on the way to it, in a writable path escapes it.
 */
import { isWithin, nodeBeneathFs, type BeneathFs } from '@conch/subprocess'
import type { Stats } from 'node:fs'
import { dirname, join, sep } from 'node:path'
import type { SandboxErrorCode } from './types.ts'

/** A path registered with `protect`: as it was given, and made canonical then. */
export interface ProtectedPath {
  given: string
  canonical: string
}

/** What the checks read of the file system (`BeneathFs`, @conch/subprocess): undefined for a path that cannot be read. */
type Reads = { lstat(path: string): Stats | undefined; realpath(path: string): string | undefined; readlink(path: string): string | undefined }

function reads(fs: BeneathFs): Reads {
  const tried =
    <T>(call: (path: string) => T) =>
    (path: string): T | undefined => {
      try {
        return call(path)
      } catch {
        return undefined
      }
    }
  return { lstat: tried((path) => fs.lstat(path)), realpath: tried((path) => fs.realpath(path)), readlink: tried((path) => fs.readlink(path)) }
}

export interface ProtectedPathProblem {
  code: Extract<SandboxErrorCode, 'PROTECTED_PATH_LINKED' | 'PROTECTED_PATH_SYMLINK'>
  message: string
}

/**
 * The first protected path whose protection a process that may write `writable` (canonical
 * folders) could get around, or undefined: `PROTECTED_PATH_SYMLINK` when a component of the path
 * as given is a symbolic link whose entry lies in a writable path; `PROTECTED_PATH_LINKED` when
 * the canonical path is a regular file with `st_nlink` > 1 on a writable path's device. Files
 * inside a protected folder are not looked at (a pnpm install hard-links them from its store).
 */
export function protectedPathProblem(
  paths: readonly ProtectedPath[],
  writable: readonly string[],
  beneathFs: BeneathFs = nodeBeneathFs,
): ProtectedPathProblem | undefined {
  if (writable.length === 0) return undefined
  const fs = reads(beneathFs)
  const devices = new Map<string, number>()
  for (const root of writable) {
    const stat = fs.lstat(root)
    if (stat) devices.set(root, stat.dev)
  }
  for (const path of paths) {
    const link = symlinkOnTheWay(path.given, writable, fs)
    if (link !== undefined) {
      return {
        code: 'PROTECTED_PATH_SYMLINK',
        message:
          `cannot confine: the protected path ${path.given} goes through the symbolic link ${link.link} -> ${link.target}, ` +
          `inside the writable ${link.root}: a confined process could replace the link and point the next run at a file of its own. ` +
          `Use the target directly (e.g. --config ${path.canonical}) or put the file itself where the link is`,
      }
    }
    const stat = fs.lstat(path.canonical)
    if (!stat || !stat.isFile() || stat.nlink <= 1) continue
    const roots = writable.filter((candidate) => devices.get(candidate) === stat.dev)
    if (roots.length === 0) continue
    return {
      code: 'PROTECTED_PATH_LINKED',
      message:
        `cannot confine: the protected file ${path.canonical} has ${stat.nlink} hard links, and a writable path on its device ` +
        `(${roots.join(', ')}) may hold another name for it, which a confined process could write to rewrite it. ` +
        `Find the other names with \`find ${roots.join(' ')} -xdev -samefile ${path.canonical}\` and remove them ` +
        `(or give the file a single name: \`cp ${path.canonical} x && mv x ${path.canonical}\`)`,
    }
  }
  return undefined
}

/**
 * The first symbolic link met while resolving `given` component by component whose directory
 * entry (its canonical folder and name) lies inside one of `writable`.
 */
function symlinkOnTheWay(
  given: string,
  writable: readonly string[],
  fs: Reads,
): { link: string; target: string; root: string } | undefined {
  let current = '/'
  for (const part of given.split(sep).filter((segment) => segment !== '' && segment !== '.')) {
    if (part === '..') {
      current = dirname(current)
      continue
    }
    const candidate = join(current, part)
    const stat = fs.lstat(candidate)
    if (!stat) return undefined // missing: nothing is protected there
    if (!stat.isSymbolicLink()) {
      current = candidate
      continue
    }
    const root = writable.find((folder) => folder !== candidate && isWithin(candidate, folder))
    if (root !== undefined) return { link: candidate, target: fs.readlink(candidate) ?? '?', root }
    const resolved = fs.realpath(candidate)
    if (resolved === undefined) return undefined
    current = resolved
  }
  return undefined
}
