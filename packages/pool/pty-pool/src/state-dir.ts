/**
 * Where the pool keeps its CLIs' private homes (`stateDir`). A home holds a CLI's seeded config
 * (whose hooks it runs) and its transcripts, so whoever can write one runs code in another
 * owner's CLI: the folder is opened from `/` without following a link, refused directly inside a
 * world-writable folder or inside a named workspace, and must be this user's with mode 0700.
 * The README's "Where the homes live" gives the rules in full.
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
