/**
 * Where persisted session logs live by default: outside every workspace, in the user's state
 * folder, one subfolder per workspace.
 *
 * - The state home is `$XDG_STATE_HOME` when it is set to an absolute path, else
 *   `$HOME/.local/state` (XDG Base Directory Specification 0.8: relative values are ignored).
 * - Logs go to `<state home>/conch/sessions/<workspace id>/`.
 * - A workspace id is a readable slug of the workspace folder's name and the first 12 hex
 *   digits of the SHA-256 of its canonical path (`myproject-3f2a…`), so two folders of the same
 *   name never share logs and the id stays a safe file name.
 */
import { createHash } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, isAbsolute, join, resolve } from 'node:path'

/** The state home (see above), from `env` (`XDG_STATE_HOME`, `HOME`). */
export function stateHome(env: Readonly<Record<string, string | undefined>>): string {
  const state = env['XDG_STATE_HOME']
  const home = env['HOME'] && isAbsolute(env['HOME']) ? env['HOME'] : homedir()
  return resolve(state && isAbsolute(state) ? state : join(home, '.local', 'state'))
}

/** `<state home>/conch/sessions`, from `env` (`XDG_STATE_HOME`, `HOME`). */
export function defaultLogBase(env: Readonly<Record<string, string | undefined>>): string {
  return join(stateHome(env), 'conch', 'sessions')
}

/** The workspace's canonical absolute path: symlinks resolved (realpath(3)) when it exists. */
export function canonicalWorkspace(workspaceRoot: string): string {
  const absolute = resolve(workspaceRoot)
  try {
    return realpathSync(absolute)
  } catch {
    return absolute
  }
}

/** `<slug>-<12 hex>` for a canonical workspace path; the slug is `root` for `/`. */
export function workspaceId(canonical: string): string {
  const slug =
    basename(canonical)
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[-._]+|[-._]+$/g, '')
      .slice(0, 40) || 'root'
  const hash = createHash('sha256').update(canonical).digest('hex').slice(0, 12)
  return `${slug}-${hash}`
}
