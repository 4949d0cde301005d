/**
 * A provider's private state folder (the per-run homes of a Codex or Claude Code child: their
 * config, and whatever credentials a run is given), made mode 0700 and hidden from every conch
 * sandbox while the provider is loaded (`ctx.sandbox.hide`, @conch/sandbox), so that no
 * confined terminal of any agent reads or rewrites another run's home. The child itself is not
 * confined by ctx.sandbox (it runs in its own sandbox), so hiding does not take it from it.
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
 * Makes `root` (recursive, mode 0700), closes it to everyone else and hides it in every sandbox
 * whenever `ctx.sandbox` is loaded; `name` names the provider in the warning a seam that cannot
 * hide gets. The folder above it is made as it is (recursive mkdir(2)); the folder itself is
 * opened from there without following a link and set to mode 0700 with fchmod(2) on that
 * descriptor (`ensurePrivateFolder` with `repair`, @conch/subprocess), as an older
 * `~/.cache/conch/codex` made 0755 would otherwise stay 0755.
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
