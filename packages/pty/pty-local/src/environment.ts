import { scrubbedEnv, type SessionTag } from '@conch/subprocess'
import type { ControlledPrompt } from './prompt.ts'

/** Environment variable that tags every process of one session, for the teardown sweep. */
export const SESSION_TAG_VARIABLE = 'CONCH_SESSION_TAG'

export interface ShellEnvironmentOptions {
  parent: NodeJS.ProcessEnv
  trusted: Record<string, string>
  /** Parent variables passed although the scrubbing policy drops them (`scrubbedEnv`'s `allow`). */
  allow?: readonly string[]
  prompt: ControlledPrompt
  tag: SessionTag
}

/**
 * The environment a session's shell starts with:
 * - the parent's environment under the scrubbing policy of `scrubbedEnv` in `@conch/subprocess`
 *   (secrets by name and value, credential pointers, package-manager launch variables, `CONCH_*`),
 *   except names in `allow`, plus the `trusted` entries;
 * - `PAGER`, `GIT_PAGER` and `MANPAGER` set to `cat`, so output never stops in a pager unasked;
 * - a UTF-8 locale (`LANG=C.UTF-8`) when none of `LC_ALL`, `LC_CTYPE`, `LANG` is set;
 * - `TERM=xterm-256color`; `HISTFILE` and `NODE_REPL_HISTORY` empty: no history is written to
 *   the user's files (and the Node REPL has no flush timer waking it after every input);
 * - the controlled `PS1`, the bootstrap `PROMPT_COMMAND` (no nonce: see prompt.ts) and the
 *   session tag.
 */
export function shellEnvironment(options: ShellEnvironmentOptions): Record<string, string> {
  const env = scrubbedEnv(options.parent, { trusted: options.trusted, allow: options.allow ?? [] })
  Object.assign(env, { PAGER: 'cat', GIT_PAGER: 'cat', MANPAGER: 'cat' })
  if (!env.LC_ALL && !env.LC_CTYPE && !env.LANG) env.LANG = 'C.UTF-8'
  env.TERM = 'xterm-256color'
  env.HISTFILE = ''
  env.NODE_REPL_HISTORY = ''
  env.PS1 = options.prompt.ps1
  env.PROMPT_COMMAND = options.prompt.promptCommand
  env[options.tag.name] = options.tag.value
  return env
}
