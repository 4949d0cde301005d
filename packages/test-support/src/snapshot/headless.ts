/**
 * Headless scenarios: `conch run --output stream-json` as a process, from a scenario folder
 * holding `input.json` (`{kind, config, prompt}`), `script.jsonl` and the expectations.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { startConch } from './process.ts'

export const HeadlessInput = z
  .object({
    /** `pinned` (the memory backend: compared as is) or `real` (node-pty: pids, times, evidence normalised). */
    kind: z.enum(['pinned', 'real']),
    /** The composition, relative to the example folder (e.g. `pinned.snapshot.yml`). */
    config: z.string().min(1),
    /** The task given to `conch run`. */
    prompt: z.string().min(1),
    /** Expected exit status (default 0: the run completed). */
    exitCode: z.number().int().default(0),
  })
  .strict()
export type HeadlessInput = z.output<typeof HeadlessInput>

export function readHeadlessInput(scenarioDir: string): HeadlessInput {
  return HeadlessInput.parse(JSON.parse(readFileSync(join(scenarioDir, 'input.json'), 'utf8')))
}

export interface HeadlessRun {
  code: number
  /** The stream-json lines, parsed. */
  lines: Record<string, unknown>[]
  stderr: string
}

/** Runs the scenario in `workspace` (the agent's `--cwd`). */
export async function runHeadless(options: { exampleDir: string; scenarioDir: string; input: HeadlessInput; workspace: string }): Promise<HeadlessRun> {
  const conch = startConch([
    'run',
    '--config',
    join(options.exampleDir, options.input.config),
    '--script',
    join(options.scenarioDir, 'script.jsonl'),
    '--output',
    'stream-json',
    '--cwd',
    options.workspace,
    options.input.prompt,
  ])
  let stdout = ''
  conch.child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  conch.child.stdin.end()
  const code = await conch.exit
  const lines = stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>
      } catch {
        throw new Error(`conch run wrote a line that is not JSON to stdout: ${JSON.stringify(line)}\nstderr:\n${conch.stderr()}`)
      }
    })
  return { code, lines, stderr: conch.stderr() }
}
