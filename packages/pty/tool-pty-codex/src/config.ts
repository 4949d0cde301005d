/** Configuration of the Codex-shaped tools; defaults live here and nowhere else. */
import { z } from 'zod'
import { MIN_RESULT_BYTES } from '@conch/tools'

export const Config = z
  .strictObject({
    shell: z.string().min(1).default('shell').describe('ctx.pty terminal type each exec_command opens (a bash with the controlled prompt).'),
    execYieldMs: z.number().int().positive().default(10000).describe('Upper bound of an exec_command that gives no yield_time_ms, in ms; it returns earlier when the program ends or waits for input.'),
    writeYieldMs: z.number().int().positive().default(10000).describe('Upper bound of a write_stdin that gives no yield_time_ms, in ms; it returns earlier when the program ends or waits for input.'),
    maxYieldMs: z.number().int().positive().default(300000).describe('Largest yield_time_ms honoured, in ms; a larger one is clamped to it.'),
    maxOutputTokens: z.number().int().positive().default(10000).describe('Output budget of a call that gives no max_output_tokens, in tokens.'),
    bytesPerToken: z.number().int().positive().default(4).describe('UTF-8 bytes counted as one token: the byte budget is max_output_tokens times this.'),
    maxResultBytes: z.number().int().min(MIN_RESULT_BYTES).default(262144).describe('Bound of every result, in UTF-8 bytes, whatever max_output_tokens asks.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>
