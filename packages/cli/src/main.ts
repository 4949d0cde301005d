/**
 * Process entry of the `conch` bin (bin/conch.js registers tsx, then imports this file).
 * Runs the command, waits until stdout and stderr have flushed, and exits with its code.
 */
import { main } from './cli.ts'

// A reader that goes away (`conch run … | head -1`) must not crash the process before the
// composition is shut down: later writes are dropped instead.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error
})

const code = await main(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
})
await Promise.all([flush(process.stdout), flush(process.stderr)])
process.exit(code)

function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()))
}
