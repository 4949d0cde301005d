/**
 * Process entry of the `conch` bin (bin/conch.js registers tsx, then imports this file).
 * Runs the command, waits until stdout and stderr have flushed, and exits with its code.
 */
import { main } from './cli.ts'

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
