/**
 * `@conch/tool-pty-codex`: the Codex-shaped tool profile over `ctx.pty` — `exec_command` and
 * `write_stdin` with Codex's fields and result shape, answered by conch's readiness. A composition
 * loads it instead of (or beside) `@conch/tool-pty`.
 */
import type { Context } from 'cordis'
import { Config } from './config.ts'
import { registerExecTools } from './exec.ts'

export { Config }

export const name = 'tool-pty-codex'
export const inject = ['pty', 'tools']

export const apply = (ctx: Context, config: Config) => {
  registerExecTools(ctx.pty, ctx.tools, config)
}
