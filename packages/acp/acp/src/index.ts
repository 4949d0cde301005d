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
import { readableFrom, writableTo } from './stdio.ts'

export { Config, type ConfigInput } from './config.ts'
export { AcpError, RPC, type AcpErrorCode } from './errors.ts'
export { PROMPT_CAPABILITIES, promptText } from './prompt.ts'
export { AcpServer, initializeResponse, stopReason, type AcpServerOptions } from './server.ts'
export { readableFrom, writableTo } from './stdio.ts'
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
}

export type AcpSetupErrorCode = 'NO_AGENT_SERVICE'

/** The composition cannot serve ACP. */
export class AcpSetupError extends Error {
  override readonly name = 'AcpSetupError'
  constructor(
    readonly code: AcpSetupErrorCode,
    message: string,
  ) {
    super(message)
  }
}

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
  if (agents === undefined) {
    throw new AcpSetupError('NO_AGENT_SERVICE', "the composition has no agent service: add an entry {id: agents, name: '@conch/agent'}")
  }
  const logger = options.ctx.logger('acp')
  const server = new AcpServer({ agents, config, logger })
  if (options.signal?.aborted) return
  const connection = server.app.connect(ndJsonStream(writableTo(options.output), readableFrom(options.input)))
  // Answer every pending prompt `cancelled` (bounded) before the connection closes.
  const stop = () => void server.cancelTurns(config.shutdownGraceMs).finally(() => setImmediate(() => connection.close()))
  options.signal?.addEventListener('abort', stop, { once: true })
  try {
    await connection.closed
  } finally {
    options.signal?.removeEventListener('abort', stop)
    await server.dispose()
  }
}
