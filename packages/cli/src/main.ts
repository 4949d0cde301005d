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

// After SIGINT or SIGTERM a reader that stopped reading must not hold the exit: the last
// writes get FLUSH_AFTER_SIGNAL_MS once the command has returned, then are dropped.
const FLUSH_AFTER_SIGNAL_MS = 1000
const signalled = { value: false }
const mark = () => void (signalled.value = true)
process.once('SIGINT', mark)
process.once('SIGTERM', mark)

const code = await main(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
})
const flushed = Promise.all([flush(process.stdout), flush(process.stderr)])
if (signalled.value) await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, FLUSH_AFTER_SIGNAL_MS))])
else await flushed
process.exit(code)

function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()))
}
