/** Configuration of the terminal tools; defaults live here and nowhere else. */
import { z } from 'zod'
import { MIN_RESULT_BYTES } from '@conch/tools'

export const Config = z
  .object({
    enableRunInBackground: z
      .boolean()
      .default(true)
      .describe('Offer `run_in_background` on terminal_send (needs ctx.tasks at run time). false removes it from the schema and refuses it.'),
    maxResultBytes: z
      .number()
      .int()
      .min(MIN_RESULT_BYTES)
      .default(262144)
      .describe('Bound of every terminal tool result, in UTF-8 bytes; output keeps its newest bytes, metadata lines are kept.'),
    maxInputBytes: z.number().int().positive().default(1048576).describe('Largest `text` terminal_send accepts, in UTF-8 bytes.'),
    maxTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(600000)
      .describe('Largest `timeoutMs` (and `idleMs`) one terminal_send may ask for, in ms.'),
    killEscalation: z
      .array(z.enum(['SIGTERM', 'SIGKILL']))
      .default(['SIGTERM', 'SIGKILL'])
      .describe('Signals task_kill sends, in order, to the foreground process group of a background send that SIGINT did not stop; each waits for the terminal to be ready again (up to the backend\'s signal wait) before the next.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>
