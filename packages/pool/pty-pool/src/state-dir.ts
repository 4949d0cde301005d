/**
 * Where the pool keeps the private homes of its CLIs (`stateDir`): each home holds a CLI's seeded
 * configuration (Claude Code's `.claude/settings.json`, whose hooks it runs) and its transcripts, so
 * whoever can write one can run code in another owner's CLI, and whoever can read one reads
 * another owner's conversation. The folder therefore lies where no terminal's sandbox can reach
 * and no other user can read:
 *
 * - default: `<state home>/conch/pool`, the state home being `$XDG_STATE_HOME` when it is set to an
 *   absolute path, else `$HOME/.local/state` (XDG Base Directory Specification 0.8) — beside the
 *   session logs (`@conch/session`), outside every workspace;
 * - every component is checked with lstat(2) from `/` down: a symbolic link anywhere is refused
 *   (conch never follows a link to the homes); missing components are created one at a time with
 *   mkdir(2) mode 0700;
 * - a folder directly inside one every user may write (mode `o+w`: `/tmp`, `/var/tmp`, `/dev/shm`)
 *   is refused — anyone could have made it, or could replace it — and below such a folder every
 *   component must belong to this user and be closed to group and others' writes;
 * - the folder itself must be a directory of this user with mode 0700 (no group or other bits);
 * - it must not lie inside a workspace the caller names (the pool's `cwd`, the sandbox policy's
 *   configured `workspaceRoot`), where terminals may write.
 *
 * The pool then hides the folder in every sandbox (`ctx.sandbox.hide`), and a pooled CLI's own
 * sandbox gets its own home, and nothing else of the folder, back (`writablePaths`).
 */
import { homedir } from 'node:os'
import { lstatSync, mkdirSync, type Stats } from 'node:fs'
import { isAbsolute, join, normalize, resolve, sep } from 'node:path'
import { PoolError } from './errors.ts'

/** The file-system calls this module makes, injectable for tests of refusals. */
export interface StateDirFs {
  lstat(path: string): Stats
  mkdir(path: string, mode: number): void
  uid(): number
}

export const nodeStateDirFs: StateDirFs = {
  lstat: (path) => lstatSync(path),
  mkdir: (path, mode) => mkdirSync(path, { mode }),
  uid: () => (typeof process.getuid === 'function' ? process.getuid() : 0),
}

/** `<state home>/conch/pool` from `env` (`XDG_STATE_HOME`, `HOME`). */
export function defaultStateDir(env: Readonly<Record<string, string | undefined>>): string {
  const state = env['XDG_STATE_HOME']
  const home = env['HOME'] && isAbsolute(env['HOME']) ? env['HOME'] : homedir()
  const base = state && isAbsolute(state) ? state : join(home, '.local', 'state')
  return join(resolve(base), 'conch', 'pool')
}

export interface OpenStateDirOptions {
  /** The config field the path came from, named in errors (`stateDir`). */
  field: string
  /** Workspace roots (absolute, canonical) the folder must stay out of. */
  workspaces?: readonly string[]
  fs?: StateDirFs
}

/**
 * Checks `path` as the module comment says, creating what is missing, and returns it.
 * @throws PoolError `CONFIG_INVALID` naming `options.field` and the component at fault.
 */
export function openStateDir(path: string, options: OpenStateDirOptions): string {
  const fs = options.fs ?? nodeStateDirFs
  const refuse = (why: string) => new PoolError('CONFIG_INVALID', `pool config: ${options.field}: ${why}`)
  if (!isAbsolute(path)) throw refuse(`${path} is not an absolute path`)
  const trimmed = path.length > 1 ? path.replace(/\/+$/, '') : path
  if (normalize(trimmed) !== trimmed) throw refuse(`${path} is not a normalised absolute path (no ".", ".." or doubled slashes)`)
  if (trimmed === '/') throw refuse('/ cannot hold the private homes')
  path = trimmed
  for (const workspace of options.workspaces ?? []) {
    if (workspace === path || path.startsWith(workspace === '/' ? '/' : workspace + sep)) {
      throw refuse(`${path} is inside the workspace ${workspace}, where terminals can write; leave ${options.field} unset (the homes go to the state folder) or choose a folder outside every workspace`)
    }
  }
  const uid = fs.uid()
  const parts = path.split(sep).filter((part) => part !== '')
  let current: string = sep
  let shared = false
  let stats = fs.lstat(current)
  for (const [index, part] of parts.entries()) {
    const parent = current
    const parentShared = stats.isDirectory() && (stats.mode & 0o002) !== 0
    if (parentShared) shared = true
    current = join(current, part)
    const last = index === parts.length - 1
    if (parentShared && last) {
      throw refuse(`${path} lies directly in ${parent}, a folder every user can write (anyone could have made it, or replace it); choose a folder of your own, or leave ${options.field} unset`)
    }
    stats = check(fs, current, refuse)
    if (shared && (stats.uid !== uid || (stats.mode & 0o022) !== 0) && !last) {
      throw refuse(`${current} lies under a folder every user can write and is not a folder of uid ${uid} closed to others' writes; choose a folder of your own`)
    }
  }
  if (stats.uid !== uid || (stats.mode & 0o077) !== 0) {
    throw refuse(`${path} is not a private folder of uid ${uid} (mode 0700, it is ${(stats.mode & 0o777).toString(8).padStart(4, '0')}); run \`chmod 700 ${path}\`, or choose another folder`)
  }
  opened.set(path, { dev: stats.dev, ino: stats.ino })
  return path
}

/** Device and inode of each folder `openStateDir` accepted, by path. */
const opened = new Map<string, { dev: number; ino: number }>()

/** Device and inode `openStateDir` recorded for `path`, or undefined for a folder it did not open. */
export function stateDirIdentity(path: string): { dev: number; ino: number } | undefined {
  return opened.get(path)
}

/**
 * Checks, before a home is made in `path`, that it is still the folder `openStateDir` accepted
 * (lstat(2): the same device and inode, a directory): a confined process whose workspace holds
 * it could rename it or a folder above it and put its own in its place.
 * @throws Error naming the folder when it was moved or replaced.
 */
export function assertStateDirUnchanged(path: string, fs: Pick<StateDirFs, 'lstat'> = nodeStateDirFs): void {
  const was = opened.get(path)
  if (was === undefined) return
  let now: Stats | undefined
  try {
    now = fs.lstat(path)
  } catch {
    now = undefined
  }
  if (now === undefined || !now.isDirectory() || now.dev !== was.dev || now.ino !== was.ino) {
    throw new Error(`the pool's state folder ${path} was moved or replaced since the pool opened it; no home is made there`)
  }
}

/** lstat(2) of `path`, creating it (mode 0700) when it is missing; refuses a link or a non-directory. */
function check(fs: StateDirFs, path: string, refuse: (why: string) => PoolError): Stats {
  let stats: Stats
  try {
    stats = fs.lstat(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw refuse(`cannot use ${path}: ${(error as Error).message}`)
    try {
      fs.mkdir(path, 0o700)
    } catch (mkdirError) {
      if ((mkdirError as NodeJS.ErrnoException).code !== 'EEXIST') throw refuse(`cannot create ${path}: ${(mkdirError as Error).message}`)
    }
    stats = fs.lstat(path)
  }
  if (stats.isSymbolicLink()) {
    throw refuse(`${path} is a symbolic link; conch never follows links on the way to the pooled CLIs' homes (something may have replaced it to redirect them). Remove it, or configure a folder without links`)
  }
  if (!stats.isDirectory()) throw refuse(`${path} is not a directory`)
  return stats
}
