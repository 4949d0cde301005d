/** `@conch/llm-replay`: registers the scripted model on `ctx.llm`. */
import { resolve } from 'node:path'
import type { Context } from 'cordis'
import { z } from 'zod'
import { ReplayAdapter } from './adapter.ts'
import { readScript } from './script.ts'

export { ReplayAdapter } from './adapter.ts'
export { parseScript, readScript, type ScriptStep } from './script.ts'

export const name = 'llm-replay'
export const inject = ['llm']

export const Config = z.strictObject({
  script: z.string().min(1).describe('Path of the JSON Lines script; relative paths resolve against the working directory.'),
  provider: z.string().min(1).default('replay').describe('Provider name the adapter registers under.'),
})
  // A row without `config:` parses as {}, so the error names the required field.
  .prefault({} as never)
export type Config = z.output<typeof Config>

/**
 * Reads and validates the whole script, then registers the adapter (unregistered when the
 * plugin unloads). A malformed line fails the load with `<file>:<line>: <what is wrong>`.
 */
export const apply = (ctx: Context, config: Config) => {
  const steps = readScript(resolve(config.script), config.script)
  ctx.llm.register(new ReplayAdapter(config.provider, config.script, steps))
}
