/**
 * A provider's private state folder (the per-run homes of Codex or Claude Code children), mode
 * 0700 and hidden in every conch sandbox, so no confined terminal reads or rewrites a run's home.
 * The child runs in its own sandbox, so hiding does not take the folder from it.
 */
import { BeneathError, ensurePrivateFolder } from '@conch/subprocess'
import { closeSync, mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import type { Context } from 'cordis'
import { SubagentError } from './types.ts'

/** What this uses of `ctx.sandbox`, structurally (an older seam may not hide). */
interface Hiding {
  hide?(paths: readonly string[]): () => void
}

/**
 * Makes `root` and hides it in every sandbox whenever `ctx.sandbox` is loaded (`name` names the
 * provider in a warning). The folder itself is opened without following a link and set to 0700
 * through that descriptor (`ensurePrivateFolder` with `repair`), so an older one made 0755 is fixed.
 * @throws SubagentError `PRIVATE_ROOT_UNSAFE` naming `root` when it is a symbolic link or not a
 *   folder, or not this user's; Error from mkdir(2) or fchmod(2) when the folder cannot be made or closed.
 */
export function hidePrivateRoot(ctx: Context, root: string, name: string): void {
  const path = resolve(root)
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  try {
    closeSync(ensurePrivateFolder(path, { root: dirname(path), repair: true }).fd)
  } catch (error) {
    if (!(error instanceof BeneathError)) throw error
    throw new SubagentError('PRIVATE_ROOT_UNSAFE', { owner: name, refusal: error.code, beneath: error.details })
  }
  ctx.inject(['sandbox'], (scope) => {
    const sandbox = scope.get('sandbox') as Hiding | undefined
    if (sandbox?.hide === undefined) {
      scope.logger.warn(`${name}: ctx.sandbox cannot hide paths; confined terminals may read the run homes in ${root}`)
      return
    }
    sandbox.hide([root])
  })
}
