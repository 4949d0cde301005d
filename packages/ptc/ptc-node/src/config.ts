import { existsSync } from 'node:fs'
import { isAbsolute } from 'node:path'
import { z } from 'zod'

export const Config = z
  .strictObject({
    timeoutMs: z.number().int().positive().default(120_000).describe('Deadline of a program that asks for none, in ms; covers preparation, execution and nested tool calls.'),
    maxTimeoutMs: z.number().int().positive().default(600_000).describe('The largest deadline a request may ask for, in ms; larger ones are capped.'),
    maxOutputBytes: z.number().int().positive().default(67_108_864).describe('Budget of captured logs plus the JSON completion value, in UTF-8 bytes.'),
    maxOldGenerationSizeMb: z.number().int().min(16).default(512).describe("V8's old-generation heap cap of the program's process (--max-old-space-size), in MiB."),
    maxMessageBytes: z
      .number()
      .int()
      .min(1024)
      .default(134_217_728)
      .describe('Bound of one control frame, of unfinished frame bytes and of queued writes to the program, in bytes.'),
    maxChannelBytes: z
      .number()
      .int()
      .min(1024)
      .default(268_435_456)
      .describe('Budget of the control frames (calls, logs, the completion) a program sends in one run, in bytes; a frame past it ends the run as protocol.'),
    maxNestingDepth: z
      .number()
      .int()
      .min(16)
      .default(256)
      .describe("Deepest nesting of brackets a program may write; deeper ones are refused before the type stripper, whose parser recurses once per level."),
    maxPendingCalls: z.number().int().positive().default(128).describe('Binding calls a program may have in flight at once; one more ends the run as protocol.'),
    graceMs: z.number().int().nonnegative().default(3000).describe('Time between SIGTERM and SIGKILL when the process tree of a run whose program was sent is ended, in ms.'),
    nodeExecutable: z
      .string()
      .min(1)
      .default(() => process.execPath)
      .describe('The node executable of the program process (as seen inside the sandbox). Default: the running Node.'),
    bootstrapPath: z
      .string()
      .refine(isAbsolute, 'must be an absolute path')
      .refine(existsSync, 'does not exist')
      .optional()
      .describe("Absolute path of a pre-installed bootstrap; default this package's src/bootstrap.cjs."),
    spare: z.boolean().default(true).describe('Keep one booted process per (owner, policy, cwd, heap) waiting for its program, so a run skips the cold start.'),
    spareIdleMs: z.number().int().positive().default(60_000).describe('How long an unused spare lives, in ms.'),
  })
  .refine((config) => config.timeoutMs <= config.maxTimeoutMs, { message: 'timeoutMs must not exceed maxTimeoutMs', path: ['timeoutMs'] })
  .prefault({})

export type Config = z.output<typeof Config>
