/**
 * The `conch` process around `main`: stdout errors, signals, flushing and the exit code. Both
 * entries run it — `main.ts` (the sources, through tsx) and `bundle.ts` (the built bin).
 */
import { main } from './cli.ts'

/** After SIGINT or SIGTERM, how long the last writes get to flush once the command has returned, in ms. */
const FLUSH_AFTER_SIGNAL_MS = 1000

/** Runs the command line of this process, waits until stdout and stderr have flushed, and exits with its code. */
export async function runProcess(): Promise<never> {
  // A reader that goes away (`conch run … | head -1`) must not crash the process before the
  // composition is shut down: later writes are dropped instead.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error
  })

  // After SIGINT or SIGTERM a reader that stopped reading must not hold the exit: the last
  // writes get FLUSH_AFTER_SIGNAL_MS once the command has returned, then are dropped.
  const signalled = { value: false }
  const mark = () => void (signalled.value = true)
  process.once('SIGINT', mark)
  process.once('SIGTERM', mark)

  const code = await main(process.argv.slice(2), {
    // Read when a command uses it (conch acp): creating the stream costs a start that never reads.
    get stdin() {
      return process.stdin
    },
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  })
  const flushed = Promise.all([flush(process.stdout), flush(process.stderr)])
  if (signalled.value) await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, FLUSH_AFTER_SIGNAL_MS))])
  else await flushed
  process.exit(code)
}

function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()))
}
