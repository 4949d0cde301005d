/**
 * `@conch/acp`: conch as an Agent Client Protocol agent over stdio (`conch acp`). Each ACP
 * session is its own conch Agent working in the session's `cwd`; clients watch it drive
 * terminals through `tool_call` / `tool_call_update` updates, with a foreground
 * `terminal_send`'s output streamed as it arrives.
 */
import { ndJsonStream } from '@agentclientprotocol/sdk'
import type { Context } from 'cordis'
import type { AgentServiceApi } from '@conch/agent'
import { Config, type ConfigInput } from './config.ts'
import { AcpServer } from './server.ts'
import { readableFrom, writableTo } from '@conch/subprocess'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'

export { Config, type ConfigInput } from './config.ts'
export { answerInitializeEarly, type EarlyInitialize, type EarlyInitializeOptions } from './early.ts'
export { AcpError, RPC, type AcpErrorCode } from './errors.ts'
export { PROMPT_CAPABILITIES, promptText } from './prompt.ts'
export { AcpServer, initializeResponse, stopReason, type AcpServerOptions } from './server.ts'
export { readableFrom, writableTo } from '@conch/subprocess'
export { acpToolKind, TurnReporter, type TurnReporterOptions } from './updates.ts'

export interface RunAcpOptions {
  /** A booted composition; it must provide `agents` (`@conch/agent`). */
  ctx: Context
  /** Where JSON-RPC frames come from, one per line (the process's stdin). */
  input: NodeJS.ReadableStream
  /** Where JSON-RPC frames go, one per line (the process's stdout). Nothing else is written to it. */
  output: NodeJS.WritableStream
  /** Stops serving: the connection is closed and every session disposed (SIGTERM). */
  signal?: AbortSignal
  /** Options; see `Config`. */
  config?: ConfigInput
  /**
   * Why `cwd` (absolute, an existing directory) cannot be a session's workspace, or undefined
   * when it can; a reason refuses that `session/new` with `CWD_REFUSED` and the reason as its
   * message. `conch acp` passes the sandbox's rule for temporary folders every user shares.
   */
  workspaceProblem?: (cwd: string) => string | undefined
}

/** The codes of `AcpSetupError` (the composition cannot serve ACP), each with its details and its message. */
const ACP_SETUP_ERRORS = {
  NO_AGENT_SERVICE: (_: Record<string, never>) => "the composition has no agent service: add an entry {id: agents, name: '@conch/agent'}",
} satisfies ErrorMessages

export type AcpSetupErrorCode = keyof typeof ACP_SETUP_ERRORS
export const AcpSetupError = errorClass('AcpSetupError', ACP_SETUP_ERRORS)
export type AcpSetupError = ErrorOf<typeof ACP_SETUP_ERRORS>

/**
 * Serves ACP on `input` / `output` until `input` ends or `signal` aborts, then cancels every
 * running turn and disposes every session's agent (closing its terminals, killing its tasks),
 * awaiting them, and resolves. Diagnostics go to the `acp` logger, never to `output`.
 * @throws AcpSetupError `NO_AGENT_SERVICE` when `ctx` has no `agents` service; a zod error
 *   naming the field when `config` is invalid.
 */
export async function runAcp(options: RunAcpOptions): Promise<void> {
  const config = Config.parse(options.config)
  const agents = options.ctx.get('agents') as AgentServiceApi | undefined
  if (agents === undefined) throw new AcpSetupError('NO_AGENT_SERVICE', {})
  const logger = options.ctx.logger('acp')
  const server = new AcpServer({ agents, config, logger, ...(options.workspaceProblem && { workspaceProblem: options.workspaceProblem }) })
  if (options.signal?.aborted) return
  const input = readableFrom(options.input, {
    maxFrameBytes: config.maxFrameBytes,
    onOversized: (limit) =>
      logger.error('an incoming frame of more than %d bytes (maxFrameBytes) was answered with a parse error and discarded', limit),
  })
  // The SDK's own limit sits above ours, so an oversized frame is cut here instead of closing the connection.
  const connection = server.app.connect(ndJsonStream(writableTo(options.output), input, { maxMessageBytes: config.maxFrameBytes + 1024 }))
  // Answer every pending prompt `cancelled` (bounded) before the connection closes. A client
  // that stopped reading keeps the last frames unwritten forever: after the grace, stop
  // waiting for the connection to close and dispose the sessions anyway.
  let deadline: NodeJS.Timeout | undefined
  let giveUp = () => {}
  const gaveUp = new Promise<void>((resolve) => (giveUp = resolve))
  const stop = () => {
    // The turns get the grace; their final frames one second more.
    deadline = setTimeout(giveUp, config.shutdownGraceMs + 1000)
    void server.cancelTurns(config.shutdownGraceMs).finally(() => setImmediate(() => connection.close()))
  }
  options.signal?.addEventListener('abort', stop, { once: true })
  try {
    await Promise.race([
      connection.closed,
      gaveUp.then(() => logger.warn('the client did not take the last frames within shutdownGraceMs; closing without them')),
    ])
  } finally {
    clearTimeout(deadline)
    options.signal?.removeEventListener('abort', stop)
    await server.dispose()
  }
}
