/**
 * A provider's private state folder (the per-run homes of a Codex or Claude Code child: their
 * config, and whatever credentials a run is given), made mode 0700 and hidden from every conch
 * sandbox while the provider is loaded (`ctx.sandbox.hide`, @conch/sandbox), so that no
 * confined terminal of any agent reads or rewrites another run's home. The child itself is not
 * confined by ctx.sandbox (it runs in its own sandbox), so hiding does not take it from it.
 */
import { mkdirSync } from 'node:fs'
import type { Context } from 'cordis'

/** What this uses of `ctx.sandbox`, structurally (an older seam may not hide). */
interface Hiding {
  hide?(paths: readonly string[]): () => void
}

/**
 * Makes `root` (recursive, mode 0700) and hides it in every sandbox whenever `ctx.sandbox` is
 * loaded; `name` names the provider in the warning a seam that cannot hide gets.
 * @throws Error from mkdir(2) when the folder cannot be made.
 */
export function hidePrivateRoot(ctx: Context, root: string, name: string): void {
  mkdirSync(root, { recursive: true, mode: 0o700 })
  ctx.inject(['sandbox'], (scope) => {
    const sandbox = scope.get('sandbox') as Hiding | undefined
    if (sandbox?.hide === undefined) {
      scope.logger.warn(`${name}: ctx.sandbox cannot hide paths; confined terminals may read the run homes in ${root}`)
      return
    }
    sandbox.hide([root])
  })
}
