/**
 * The `conch` command: dispatch, signals and exit codes.
 *
 * Signals: the first SIGINT or SIGTERM aborts the running turn and shuts the composition down
 * in reverse order (terminals close before their service); the command then exits 130 / 143.
 * A second signal exits at once without waiting for the shutdown.
 */
import { constants } from 'node:os'
import type { Context } from 'cordis'
import { ACP_USAGE, GC_USAGE, parseAcpArgs, parseGcArgs, parseRunArgs, POOL_WORKER_USAGE, RUN_USAGE, USAGE, type AcpArgs } from './args.ts'
import { describeError } from './boot.ts'
import { CliError } from './errors.ts'
import { gcCommand } from './gc.ts'
import { bootFor, runCommand, workspaceRefusal, type CommandIo } from './run.ts'
import { visible } from './transcript.ts'

/**
 * What `@conch/acp` exports for `conch acp`: serve ACP on `input`/`output` with the booted
 * composition's services, resolving when the connection closes (end of `input`) or `signal`
 * aborts, after disposing every agent it created.
 */
export type RunAcp = (options: {
  ctx: Context
  input: NodeJS.ReadableStream
  output: NodeJS.WritableStream
  signal: AbortSignal
  /** Why a session's `cwd` cannot be its workspace (`session/new` is refused with it), or undefined. */
  workspaceProblem?: (cwd: string) => string | undefined
}) => Promise<void>

/**
 * What `@conch/acp` exports to answer `initialize` while the composition boots: `input` and
 * `output` replace the process's streams for `runAcp`; `close` stops reading when nothing will
 * serve them.
 */
export type AnswerInitializeEarly = (options: {
  input: NodeJS.ReadableStream
  output: NodeJS.WritableStream
  onMismatch?(early: unknown, server: unknown): void
}) => { input: NodeJS.ReadableStream; output: NodeJS.WritableStream; close(): void }

export interface MainIo {
  stdin: NodeJS.ReadableStream
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
  env: NodeJS.ProcessEnv
}

/** Runs the command line `argv` (without `node` and the script); resolves to the exit code. */
export async function main(argv: readonly string[], io: MainIo): Promise<number> {
  const [command, ...rest] = argv
  const signals = trapSignals(io.stderr)
  const help = (text: string): number => {
    io.stdout.write(`${text}\n`)
    return 0
  }
  try {
    switch (command) {
      case undefined:
        io.stderr.write(`${USAGE}\n`)
        return 2
      case '-h':
      case '--help':
      case 'help':
        return help(USAGE)
      case 'run': {
        const args = parseRunArgs(rest)
        if (args === 'help') return help(RUN_USAGE)
        const code = await runCommand(args, { stdout: io.stdout, stderr: io.stderr, env: io.env, signal: signals.signal })
        return signals.exitCode ?? code
      }
      case 'acp': {
        const args = parseAcpArgs(rest)
        if (args === 'help') return help(ACP_USAGE)
        // Stopping the server after a signal is a normal end, as after the client closed stdin.
        return await acpCommand(args, { ...io, signal: signals.signal })
      }
      case 'gc': {
        const args = parseGcArgs(rest)
        if (args === 'help') return help(GC_USAGE)
        return await gcCommand(args, { stdout: io.stdout, stderr: io.stderr, env: io.env, signal: signals.signal })
      }
      case 'pool-worker': {
        if (rest[0] === '-h' || rest[0] === '--help') return help(POOL_WORKER_USAGE)
        if (rest.length > 0) throw new CliError('USAGE', { reason: `conch pool-worker takes no arguments, got ${JSON.stringify(rest[0])} (see conch pool-worker --help)` })
        // @conch/pty-pool starts this with the protocol on fd 3; under `terminal: conch` the
        // worker composes its own confined terminals.
        const { runPoolWorker } = await import('@conch/pty-pool')
        const { composeWorkerTerminals } = await import('./pool-worker.ts')
        await runPoolWorker({ signal: signals.signal, log: (line) => io.stderr.write(visible(`conch pool-worker: ${line}\n`)), conchTerminals: composeWorkerTerminals })
        return 0
      }
      default:
        throw new CliError('USAGE', { reason: `unknown command ${JSON.stringify(command)}; the commands are run, acp and gc (see conch --help)` })
    }
  } catch (error) {
    // Messages that name their subcommand (`conch run: missing the task`) carry their own prefix.
    const message = describeError(error, 'warn')
    io.stderr.write(visible(message.startsWith('conch ') ? `${message}\n` : `conch: ${message}\n`))
    return error instanceof CliError ? error.exitCode : 1
  } finally {
    signals.dispose()
  }
}

/**
 * `conch acp`: `initialize` is answered as soon as it arrives (by `@conch/acp`'s
 * `answerInitializeEarly`), while the composition boots; the server then takes the connection
 * over from the first byte.
 */
async function acpCommand(args: AcpArgs, io: CommandIo & { stdin: NodeJS.ReadableStream }): Promise<number> {
  const acp = await loadAcp()
  const early = acp.answerInitializeEarly?.({
    input: io.stdin,
    output: io.stdout,
    onMismatch: (answered, server) =>
      io.stderr.write(visible(`conch: the early initialize answer ${JSON.stringify(answered)} differs from the server's ${JSON.stringify(server)}\n`)),
  })
  try {
    // The boot is mostly one chain of microtasks that reading stdin would wait behind: two check
    // phases have a poll phase between them, so an initialize already in the pipe is answered first.
    if (early) for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve))
    const app = await bootFor(args, io)
    try {
      // A cwd conch run would refuse is refused at session/new, not at each terminal.
      const workspaceProblem = (cwd: string): string | undefined => {
        const refusal = workspaceRefusal(app, cwd)
        if (refusal === undefined) return undefined
        const fix = refusal.code === 'CWD_REFUSED' ? "Send a folder of your own as the session's cwd" : "Send the project the agent works on as the session's cwd"
        return `cwd ${cwd} ${refusal.reason}. ${fix}`
      }
      if (!io.signal.aborted) {
        await acp.runAcp({ ctx: app.ctx, input: early?.input ?? io.stdin, output: early?.output ?? io.stdout, signal: io.signal, workspaceProblem })
      }
      return 0
    } finally {
      await app.shutdown()
    }
  } finally {
    early?.close()
  }
}

async function loadAcp(): Promise<{ runAcp: RunAcp; answerInitializeEarly?: AnswerInitializeEarly }> {
  let exports: { runAcp?: unknown; answerInitializeEarly?: unknown }
  try {
    exports = (await import('@conch/acp')) as { runAcp?: unknown }
  } catch (error) {
    throw new CliError('UNAVAILABLE', { reason: `conch acp is not available: @conch/acp cannot be loaded (${describeError(error, 'warn')})` })
  }
  if (typeof exports.runAcp !== 'function') {
    throw new CliError('UNAVAILABLE', { reason: 'conch acp is not available yet: @conch/acp does not export runAcp' })
  }
  return {
    runAcp: exports.runAcp as RunAcp,
    ...(typeof exports.answerInitializeEarly === 'function' && { answerInitializeEarly: exports.answerInitializeEarly as AnswerInitializeEarly }),
  }
}

/** First SIGINT/SIGTERM: abort and let the command shut down. Second: exit at once. */
function trapSignals(stderr: NodeJS.WritableStream) {
  const controller = new AbortController()
  const state: { exitCode?: number } = {}
  const handler = (signal: NodeJS.Signals) => {
    const code = 128 + (constants.signals[signal] ?? 0)
    if (state.exitCode !== undefined) {
      stderr.write(`conch: ${signal} again: exiting without waiting for the shutdown\n`)
      process.exit(code)
    }
    state.exitCode = code
    stderr.write(`conch: ${signal}: stopping the run and shutting down (send it again to exit at once)\n`)
    controller.abort(new Error(`interrupted by ${signal}`))
  }
  process.on('SIGINT', handler)
  process.on('SIGTERM', handler)
  return {
    signal: controller.signal,
    get exitCode() {
      return state.exitCode
    },
    dispose() {
      process.off('SIGINT', handler)
      process.off('SIGTERM', handler)
    },
  }
}
