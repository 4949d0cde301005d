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
 * - it is opened from `/` one component at a time (`ensurePrivateFolder`, @conch/subprocess): a
 *   symbolic link anywhere is refused (conch never follows a link to the homes); missing
 *   components are created one at a time with mkdir(2) mode 0700;
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
import { BeneathError, ensurePrivateFolder, nodeBeneathFs, type BeneathFs, type FolderIdentity } from '@conch/subprocess'
import { homedir } from 'node:os'
import type { Stats } from 'node:fs'
import { isAbsolute, join, resolve, sep } from 'node:path'
import { PoolError } from './errors.ts'

/** `<state home>/conch/pool` from `env` (`XDG_STATE_HOME`, `HOME`). */
export function defaultStateDir(env: Readonly<Record<string, string | undefined>>): string {
  const state = env['XDG_STATE_HOME']
  const home = env['HOME'] && isAbsolute(env['HOME']) ? env['HOME'] : homedir()
  const base = state && isAbsolute(state) ? state : join(home, '.local', 'state')
  return join(resolve(base), 'conch', 'pool')
}

/**
 * The folder of the owner agents' home folders (`agentHome` of `@conch/sandbox`) in `stateDir`,
 * provisioned to the sandbox: a provider with fixed mounts (a container) binds each agent its own.
 */
export function agentHomes(stateDir: string): string {
  return join(stateDir, 'agents')
}

export interface OpenStateDirOptions {
  /** The config field the path came from, named in errors (`stateDir`). */
  field: string
  /** Workspace roots (absolute, canonical) the folder must stay out of. */
  workspaces?: readonly string[]
  fs?: BeneathFs
}

/** What the pool adds to each refusal of `ensurePrivateFolder`. */
const FIX: Record<string, (path: string) => string> = {
  PATH_SYMLINK: () => ` conch never follows links on the way to the pooled CLIs' homes (something may have replaced it to redirect them). Remove it, or configure a folder without links`,
  PATH_SHARED: () => ' choose a folder of your own',
  PATH_NOT_PRIVATE: (path) => ` run \`chmod 700 ${path}\`, or choose another folder`,
}

/**
 * Checks `path` as the module comment says, creating what is missing, and returns it.
 * @throws PoolError `CONFIG_INVALID` naming `options.field` and the component at fault.
 */
export function openStateDir(path: string, options: OpenStateDirOptions): string {
  const refuse = (why: string) => new PoolError('CONFIG_INVALID', { field: `pool config: ${options.field}`, problem: why })
  const trimmed = path.length > 1 ? path.replace(/\/+$/, '') : path
  if (trimmed === '/') throw refuse('/ cannot hold the private homes')
  for (const workspace of options.workspaces ?? []) {
    if (workspace === trimmed || trimmed.startsWith(workspace === '/' ? '/' : workspace + sep)) {
      throw refuse(`${trimmed} is inside the workspace ${workspace}, where terminals can write; leave ${options.field} unset (the homes go to the state folder) or choose a folder outside every workspace`)
    }
  }
  const fs = options.fs ?? nodeBeneathFs
  let stats: Stats
  try {
    const folder = ensurePrivateFolder(trimmed, { fs })
    fs.close(folder.fd)
    stats = folder.stats
  } catch (error) {
    if (!(error instanceof BeneathError)) throw refuse(`cannot use ${trimmed}: ${(error as Error).message}`)
    const fix = error.code === 'PATH_SHARED' && error.details.path === trimmed ? ` choose a folder of your own, or leave ${options.field} unset` : FIX[error.code]?.(trimmed)
    throw refuse(`${error.message}${fix ? `;${fix}` : ''}`)
  }
  opened.set(trimmed, { dev: stats.dev, ino: stats.ino })
  return trimmed
}

/** Device and inode of each folder `openStateDir` accepted, by path. */
const opened = new Map<string, FolderIdentity>()

/** Device and inode `openStateDir` recorded for `path`, or undefined for a folder it did not open. */
export function stateDirIdentity(path: string): FolderIdentity | undefined {
  return opened.get(path)
}

/**
 * Checks, before a home is made in `path`, that it is still the folder `openStateDir` accepted
 * (lstat(2): the same device and inode, a directory): a confined process whose workspace holds
 * it could rename it or a folder above it and put its own in its place.
 * @throws Error naming the folder when it was moved or replaced.
 */
export function assertStateDirUnchanged(path: string, fs: Pick<BeneathFs, 'lstat'> = nodeBeneathFs): void {
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
