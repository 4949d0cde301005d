import { realpathSync } from 'node:fs'
import { isAbsolute } from 'node:path'
import { z } from 'zod'

/** An absolute path that exists now, made canonical (symlinks resolved) at load. */
const existingPath = z
  .string()
  .refine((path) => isAbsolute(path), { message: 'must be an absolute path' })
  .transform((path, ctx) => {
    try {
      return realpathSync(path)
    } catch {
      ctx.issues.push({ code: 'custom', message: `${path} does not exist`, input: path })
      return z.NEVER
    }
  })

export const Config = z
  .object({
    network: z
      .boolean()
      .default(true)
      .describe('Whether confined processes may use the network; false gives them no interface but loopback.'),
    readWritePaths: z
      .array(existingPath)
      .default([])
      .describe('Extra absolute paths writable under workspace-write (bound read-only under read-only).'),
    readOnlyPaths: z
      .array(existingPath)
      .default([])
      .describe('Absolute paths kept read-only even inside a writable path (e.g. the workspace .git).'),
    runnerCommand: z
      .string()
      .min(1)
      .default('bwrap')
      .describe('The bubblewrap executable, or another bubblewrap-compatible runner (Linux).'),
    sandboxExecCommand: z
      .string()
      .min(1)
      .default('/usr/bin/sandbox-exec')
      .describe('The sandbox-exec executable (macOS).'),
    probeTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(10_000)
      .describe('How long the one-time probe of a runner may take, in ms.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>
