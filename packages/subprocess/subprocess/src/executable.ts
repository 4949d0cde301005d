/** Finding a program as execvp(3) does, so that a missing one fails by name before anything starts. */
import { accessSync, constants, readlinkSync, realpathSync, statSync } from 'node:fs'
import { delimiter, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'

/** Whether `file` is a regular file this process may execute (access(2) `X_OK`). */
export function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Whether `path` is `root` or inside it, by their names (both absolute; nothing is resolved). */
export function isWithin(path: string, root: string): boolean {
  if (root === '/') return true
  const rest = relative(root, path)
  return rest === '' || (!rest.startsWith(`..${sep}`) && rest !== '..' && !isAbsolute(rest))
}

/**
 * The system's folders: a program conch runs for itself outside any sandbox (bwrap, busybox,
 * nsenter, mount, umount, perl) is looked up only in these, as PATH orders them (`systemFolders`).
 * Any other folder on PATH (a project's node_modules/.bin or .venv/bin, ~/bin) may be one a
 * confined process can write, and a program planted there would run on the host as conch's user.
 * A program elsewhere is named by its absolute path.
 */
export const SYSTEM_FOLDERS: readonly string[] = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']

/** The folders of `path` (a PATH string) that are `SYSTEM_FOLDERS`, in its order. */
export function systemFolders(path: string): string[] {
  return path.split(delimiter).filter((folder) => SYSTEM_FOLDERS.includes(folder))
}

/**
 * `command` as an executable file: itself when it names one by a path (a `/` in it: the caller
 * chose it), else its first match in the absolute folders of `path` (a PATH string, or its
 * folders) that an agent cannot write. execvp(3)'s search without
 * - the relative and empty entries, which name the working directory: the workspace;
 * - a match whose folder or file is reached through a folder inside `writable` (the folders an
 *   agent may write: its workspace root and writable paths) at any hop (`hops`): the folder itself,
 *   a link's own location, or any link target on the way. A confined agent could have put the
 *   program there (`npm exec` puts `<repo>/node_modules/.bin` first on PATH), or repoint a link
 *   there at any time, for conch to run its program unconfined.
 * Undefined when none is left (`skippedExecutables` names what this skipped).
 */
export function resolveExecutable(command: string, path: string | readonly string[], writable: readonly string[] = []): string | undefined {
  if (command.includes('/')) return isExecutableFile(command) ? command : undefined
  return candidates(command, path, writable).find((candidate) => candidate.skipped === undefined)?.file
}

/**
 * Why `resolveExecutable` found no `command` although PATH has one: e.g. `claude was found only in
 * /w/node_modules/.bin (inside /w), which an agent may write; …: give its absolute path`.
 * Undefined when it skipped none (or found one).
 */
export function skippedExecutables(command: string, path: string | readonly string[], writable: readonly string[]): string | undefined {
  if (command.includes('/')) return undefined
  const found = candidates(command, path, writable)
  if (found.length === 0 || found.some((candidate) => candidate.skipped === undefined)) return undefined
  return `${command} was found only in ${found.map((candidate) => candidate.skipped).join(', ')}, which an agent may write; a program conch starts is never taken from there: give its absolute path`
}

/**
 * `path` (a PATH string) as a program run outside an agent's sandbox gets it: only the absolute
 * folders `resolveExecutable` searches with `writable` (relative and empty entries, and folders
 * reached through `writable` at any hop, dropped), else `/bin:/usr/bin` (execvp(3)'s default;
 * an empty PATH would name the working directory). What that program starts by name in turn —
 * `node` for an npm CLI's `#!/usr/bin/env node`, `npx`'s packages — is not the agent's either.
 */
export function pathOutside(path: string, writable: readonly string[]): string {
  const roots = realRoots(writable)
  const kept = path.split(delimiter).filter((folder) => isAbsolute(folder) && writableHop(roots, folder) === undefined)
  return kept.length > 0 ? kept.join(delimiter) : '/bin:/usr/bin'
}

const realRoots = (writable: readonly string[]): string[] => writable.map((root) => realpathOf(root) ?? resolve(root))
/** The first of `roots` (real paths) that a hop of resolving `path` lies in (`hops`), if any. */
function writableHop(roots: readonly string[], path: string): string | undefined {
  if (roots.length > 0) for (const hop of hops(path)) for (const root of roots) if (isWithin(hop, root)) return root
  return undefined
}

/** Each executable `<folder>/<command>` of the absolute folders of `path`, with the folder of `writable` it is reached through, if any. */
function candidates(command: string, path: string | readonly string[], writable: readonly string[]): { file: string; skipped?: string }[] {
  const folders = (typeof path === 'string' ? path.split(delimiter) : path).filter((folder) => isAbsolute(folder))
  const roots = realRoots(writable)
  return folders.flatMap((folder) => {
    const file = join(folder, command)
    if (!isExecutableFile(file)) return []
    const holder = writableHop(roots, folder)
    if (holder !== undefined) return [{ file, skipped: `${folder} (inside ${holder})` }]
    const target = writableHop(roots, file)
    return [target === undefined ? { file } : { file, skipped: `${file} (a link into ${target})` }]
  })
}

/** Links one resolution may follow before it fails with ELOOP (Linux's MAXSYMLINKS, path_resolution(7)). */
const MAX_LINKS = 40

/**
 * Every path resolving the absolute `path` looks up, in order, as path_resolution(7) walks it:
 * each component under its parent as resolved so far — so a link's own location — then, for a
 * link, each component of its target (a relative one from the link's folder). It stops at a
 * component that is missing or unreadable, or after `MAX_LINKS` links (a loop), with what it
 * looked up until then: the kernel's walk would fail there too.
 */
function hops(path: string): string[] {
  const parts = (text: string) => text.split('/').filter((part) => part !== '' && part !== '.')
  const looked: string[] = []
  const rest = parts(path)
  let at = '/'
  let links = 0
  for (let name = rest.shift(); name !== undefined; name = rest.shift()) {
    if (name === '..') {
      at = dirname(at)
      continue
    }
    const next = join(at, name)
    looked.push(next)
    let target: string
    try {
      target = readlinkSync(next)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EINVAL') return looked
      at = next // not a link
      continue
    }
    if (++links > MAX_LINKS) return looked
    if (isAbsolute(target)) at = '/'
    rest.unshift(...parts(target))
  }
  return looked
}

/** realpath(3) of `path`, or undefined when it cannot be resolved. */
function realpathOf(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}
