/**
 * `conch gc`: the sandbox providers of the composition remove what conch processes that are gone
 * left of their agents' sandboxes (`ctx.sandbox.sweep`, the sweep each provider runs before it
 * makes an agent's sandbox). Only the sandbox seam and its providers are started: no model, no
 * terminals, no API key.
 */
import type { SandboxServiceApi } from '@conch/sandbox'
import type { GcArgs } from './args.ts'
import { boot } from './boot.ts'
import { readComposition } from './compose.ts'
import { interpolateEnv } from './env.ts'
import { enabledRows } from './resolve.ts'
import { noteOwnComposition, type CommandIo } from './run.ts'
import { visible } from './transcript.ts'

/** The rows `conch gc` starts: the sandbox seam and its providers. */
const SANDBOX_ROWS = new Set(['@conch/sandbox', '@conch/sandbox-local', '@conch/sandbox-docker'])

/** Runs `conch gc`; resolves to the exit code (0 once the sweep ran). */
export async function gcCommand(args: GcArgs, io: CommandIo): Promise<number> {
  noteOwnComposition(args, io.stderr)
  const composition = readComposition(args.config)
  const rows = enabledRows(composition.entries)
    .filter((row) => SANDBOX_ROWS.has(row.name))
    .map(({ children: _children, ...row }) => row)
  const app = await boot({ ...composition, entries: interpolateEnv(rows, io.env) }, { stderr: io.stderr, logLevel: 'warn' })
  try {
    const { swept, removed } = (await (app.ctx.get('sandbox') as SandboxServiceApi | undefined)?.sweep?.()) ?? { swept: [], removed: [] }
    // Which providers swept, so a user whose containers remain knows to pass another --config.
    const providers = `swept: ${swept.length === 0 ? 'no sandbox provider' : swept.join(', ')}`
    if (args.output === 'json') io.stdout.write(`${JSON.stringify({ swept, removed })}\n`)
    else if (removed.length === 0) io.stdout.write(`nothing to remove (${providers})\n`)
    else {
      for (const item of removed) io.stdout.write(visible(`removed ${item.kind} ${item.name} (${item.provider})\n`))
      io.stdout.write(`${providers}\n`)
    }
    return 0
  } finally {
    await app.shutdown()
  }
}
