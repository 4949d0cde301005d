/** Configuration of the terminal tools; defaults live here and nowhere else. */
import path from 'node:path'
import { z } from 'zod'
import { MIN_RESULT_BYTES } from '@conch/tools'

/** Where a secret's value is read, at each send that types it (never at load, never cached). */
export const SecretSource = z.union([
  z.strictObject({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env must name an environment variable').describe('Environment variable of the conch process holding the value.') }),
  z.strictObject({
    file: z
      .string()
      .refine((file) => path.isAbsolute(file), 'file must be an absolute path')
      .describe('Absolute path of a file holding the value (one trailing line break is dropped).'),
  }),
], { error: 'a secret is {env: VARIABLE} or {file: /absolute/path}: exactly one of the two keys' })
export type SecretSource = z.output<typeof SecretSource>

export const Config = z
  .strictObject({
    enableRunInBackground: z
      .boolean()
      .default(true)
      .describe('Offer `run_in_background` on terminal_send (needs ctx.tasks at run time). false removes it from the schema and refuses it.'),
    maxOutputBytes: z
      .number()
      .int()
      .min(MIN_RESULT_BYTES)
      .default(30000)
      .describe('Budget of a terminal tool result, in UTF-8 bytes, unless the call gives `maxOutputBytes`; longer output keeps its head and tail around a marker that says what was dropped and how to page it.'),
    maxResultBytes: z
      .number()
      .int()
      .min(MIN_RESULT_BYTES)
      .default(262144)
      .describe('Largest `maxOutputBytes` a call may ask for, in UTF-8 bytes (the bound ctx.tools enforces).'),
    maxInputBytes: z.number().int().positive().default(1048576).describe('Largest `text` terminal_send accepts, in UTF-8 bytes.'),
    maxTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(600000)
      .describe('Largest `timeoutMs` (and `idleMs`) one terminal_send may ask for, in ms.'),
    secrets: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/, 'a secret name is a letter or _, then letters, digits, _ . or -, at most 64 characters'), SecretSource)
      .default({})
      .describe(
        'Secrets terminal_send can type by name (`secret: NAME`): name → {env: VARIABLE} or {file: /absolute/path}. The model sees only the names; a typed value is shown as [secret NAME] wherever the terminal prints it.',
      ),
    killEscalation: z
      .array(z.enum(['SIGTERM', 'SIGKILL']))
      .default(['SIGTERM', 'SIGKILL'])
      .describe('Signals task_kill sends, in order, to the foreground process group of a background send that SIGINT did not stop; each waits for the terminal to be ready again (up to the backend\'s signal wait) before the next.'),
  })
  .refine((config) => config.maxOutputBytes <= config.maxResultBytes, { message: 'maxOutputBytes must not exceed maxResultBytes', path: ['maxOutputBytes'], when: (payload) => payload.issues.length === 0 })
  .prefault({})

export type Config = z.output<typeof Config>
