/**
 * A provider's private state folder (the per-run homes of a Codex or Claude Code child: their
 * config, and whatever credentials a run is given), made mode 0700 and hidden from every conch
 * sandbox while the provider is loaded (`ctx.sandbox.hide`, @conch/sandbox), so that no
 * confined terminal of any agent reads or rewrites another run's home. The child itself is not
 * confined by ctx.sandbox (it runs in its own sandbox), so hiding does not take it from it.
 */
import { closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync } from 'node:fs'
import type { Context } from 'cordis'
import { SubagentError } from './types.ts'

/** What this uses of `ctx.sandbox`, structurally (an older seam may not hide). */
interface Hiding {
  hide?(paths: readonly string[]): () => void
}

/**
 * Makes `root` (recursive, mode 0700), closes it to everyone else and hides it in every sandbox
 * whenever `ctx.sandbox` is loaded; `name` names the provider in the warning a seam that cannot
 * hide gets. A recursive mkdir(2) leaves a folder that already exists as it is (an older
 * `~/.cache/conch/codex` made 0755 stays 0755), so the folder is checked with lstat(2), opened
 * with `O_DIRECTORY | O_NOFOLLOW` and set to mode 0700 with fchmod(2) on that descriptor.
 * @throws SubagentError `PRIVATE_ROOT_UNSAFE` naming `root` when it is a symbolic link or not a
 *   folder; Error from mkdir(2) or fchmod(2) when the folder cannot be made or closed.
 */
export function hidePrivateRoot(ctx: Context, root: string, name: string): void {
  mkdirSync(root, { recursive: true, mode: 0o700 })
  closePrivateRoot(root, name)
  ctx.inject(['sandbox'], (scope) => {
    const sandbox = scope.get('sandbox') as Hiding | undefined
    if (sandbox?.hide === undefined) {
      scope.logger.warn(`${name}: ctx.sandbox cannot hide paths; confined terminals may read the run homes in ${root}`)
      return
    }
    sandbox.hide([root])
  })
}

/** lstat(2), then open without following and fchmod(2) 0700 (see `hidePrivateRoot`). */
function closePrivateRoot(root: string, name: string): void {
  const unsafe = (why: string) => new SubagentError('PRIVATE_ROOT_UNSAFE', { reason: `${name}: the private state folder ${root} ${why}; remove it (conch makes it again), or configure another folder` })
  if (lstatSync(root).isSymbolicLink()) throw unsafe('is a symbolic link, which conch does not follow to the run homes')
  let fd: number
  try {
    fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ELOOP' || code === 'ENOTDIR') throw unsafe('is a symbolic link or not a folder')
    throw error
  }
  try {
    if (!fstatSync(fd).isDirectory()) throw unsafe('is not a folder')
    fchmodSync(fd, 0o700)
  } finally {
    closeSync(fd)
  }
}
