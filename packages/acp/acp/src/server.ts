/**
 * The ACP agent: one `AcpServer` per connection. Each ACP session is its own conch Agent
 * (`ctx.agents.create({workspaceRoot: cwd})`), so its terminals, tasks and history belong to
 * it alone; closing the session or the connection disposes the agent, which closes its
 * terminals and kills its tasks.
 *
 * Methods (ACP v1): `initialize`, `session/new`, `session/prompt`, `session/cancel`,
 * `session/close`. The SDK answers every other method with -32601 (method not found) and
 * rejects requests before `initialize` with -32600.
 */
import { realpath, stat } from 'node:fs/promises'
import { isAbsolute, resolve } from 'node:path'
import {
  agent as agentApp,
  methods,
  PROTOCOL_VERSION,
  type AgentApp,
  type AgentContext,
  type InitializeResponse,
  type NewSessionRequest,
  type PromptRequest,
  type PromptResponse,
  type SessionUpdate,
  type StopReason,
} from '@agentclientprotocol/sdk'
import type { Logger } from 'cordis'
import { AgentError, type Agent, type AgentServiceApi, type RunResult } from '@conch/agent'
import type { Config } from './config.ts'
import { AcpError } from './errors.ts'
import { PROMPT_CAPABILITIES, promptText } from './prompt.ts'
import { TurnReporter } from './updates.ts'
import { unreachable } from '@conch/session'

export interface AcpServerOptions {
  agents: AgentServiceApi
  config: Config
  logger: Logger
  /** See `RunAcpOptions.workspaceProblem`. */
  workspaceProblem?: (cwd: string) => string | undefined
}

interface Turn {
  controller: AbortController
  /** Resolves when the prompt handler has returned (its response is then the SDK's to send). */
  ended: Promise<void>
}

interface AcpSession {
  /** The ACP session id: the id of the agent's session log. */
  readonly id: string
  readonly agent: Agent
  /** Containers, not reassigned fields: state read by concurrent handlers. */
  readonly state: { turn?: Turn; closing?: Promise<void> }
}

/**
 * The `initialize` answer: protocol version 1 (the one this agent speaks, whatever the client
 * asked for; ACP initialization: "the latest protocol version supported by the agent"), no
 * `session/load`, text prompts with embedded text resources, no MCP servers, `session/close`.
 */
export function initializeResponse(config: Config): InitializeResponse {
  return {
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: {
      loadSession: false,
      promptCapabilities: { ...PROMPT_CAPABILITIES },
      mcpCapabilities: { http: false, sse: false },
      sessionCapabilities: { close: {} },
    },
    authMethods: [],
    agentInfo: { name: config.agentName, title: config.agentTitle, version: config.agentVersion },
  }
}

/**
 * The ACP stop reason of a finished run (ACP prompt-turn, "Stop Reasons"): `completed` →
 * `end_turn`, `cancelled` → `cancelled`, `max_steps` → `max_turn_requests`. A run that failed
 * after the client cancelled is `cancelled` too (ACP cancellation: the agent must answer
 * `cancelled`, not an error).
 * @throws AcpError `MODEL_ERROR` for a failed run that was not cancelled.
 */
export function stopReason(result: RunResult, cancelled: boolean): StopReason {
  switch (result.status) {
    case 'completed':
      return 'end_turn'
    case 'cancelled':
      return 'cancelled'
    case 'max_steps':
      return 'max_turn_requests'
    case 'error': {
      if (cancelled) return 'cancelled'
      const code = (result.error as { code?: unknown } | undefined)?.code
      throw new AcpError('MODEL_ERROR', `the model failed: ${result.text}`, typeof code === 'string' ? { cause: code } : {})
    }
    default:
      return unreachable(result.status, 'run status')
  }
}

/** One connection's sessions and the handlers that serve them. */
export class AcpServer {
  readonly app: AgentApp
  private readonly agents: AgentServiceApi
  private readonly config: Config
  private readonly logger: Logger
  private readonly workspaceProblem: ((cwd: string) => string | undefined) | undefined
  private readonly sessions = new Map<string, AcpSession>()
  /** `opening`: `session/new` requests past the cap check whose agent is not created yet. */
  private readonly state: { disposing?: Promise<void>; opening: number } = { opening: 0 }

  constructor(options: AcpServerOptions) {
    this.agents = options.agents
    this.config = options.config
    this.logger = options.logger
    this.workspaceProblem = options.workspaceProblem
    this.app = agentApp({ name: 'conch' })
      .onRequest(methods.agent.initialize, ({ params }) => {
        this.logger.debug('initialize from %s (protocol version %d)', params.clientInfo?.name ?? 'a client', params.protocolVersion)
        return initializeResponse(this.config)
      })
      .onRequest(methods.agent.session.new, ({ params }) => this.newSession(params))
      .onRequest(methods.agent.session.prompt, ({ params, signal, client }) => this.prompt(params, signal, client))
      .onNotification(methods.agent.session.cancel, ({ params }) => this.cancel(params.sessionId))
      .onRequest(methods.agent.session.close, async ({ params }) => {
        await this.close(this.session(params.sessionId))
        return {}
      })
  }

  /**
   * Cancels every turn and disposes every session's agent (closing its terminals), awaiting
   * all of them. Later `session/new` requests fail with `SESSION_CLOSING`. Idempotent.
   */
  dispose(): Promise<void> {
    return (this.state.disposing ??= (async () => {
      const results = await Promise.allSettled([...this.sessions.values()].map((session) => this.close(session)))
      for (const result of results) {
        if (result.status === 'rejected') this.logger.error('closing a session failed: %s', result.reason)
      }
    })())
  }

  private async newSession(params: NewSessionRequest): Promise<{ sessionId: string }> {
    const { cwd } = params
    if (!isAbsolute(cwd)) {
      throw new AcpError('CWD_NOT_ABSOLUTE', `cwd must be an absolute path, got ${JSON.stringify(cwd)}; send the project folder as an absolute path`, { cwd })
    }
    // The workspace is the folder `cwd` leads to now (links resolved once), and that is what is
    // judged too: a link changed after the check cannot move the session into a refused folder.
    const workspaceRoot = await realpath(cwd).catch(() => undefined)
    const isDirectory =
      workspaceRoot !== undefined &&
      (await stat(workspaceRoot).then(
        (stats) => stats.isDirectory(),
        () => false,
      ))
    if (!isDirectory) throw new AcpError('CWD_NOT_DIRECTORY', `cwd ${cwd} is not a directory; send an existing folder`, { cwd })
    const problem = this.workspaceProblem?.(cwd) ?? (workspaceRoot === resolve(cwd) ? undefined : this.workspaceProblem?.(workspaceRoot))
    if (problem !== undefined) throw new AcpError('CWD_REFUSED', problem, { cwd })
    if (params.mcpServers.length > 0) {
      throw new AcpError(
        'UNSUPPORTED_OPTION',
        `conch does not connect to MCP servers (mcpCapabilities are false), got ${params.mcpServers.length}; send mcpServers: []`,
        { option: 'mcpServers' },
      )
    }
    if (params.additionalDirectories !== undefined && params.additionalDirectories.length > 0) {
      throw new AcpError(
        'UNSUPPORTED_OPTION',
        'conch works in one folder per session and does not take additionalDirectories; leave it out and open a session per folder',
        { option: 'additionalDirectories' },
      )
    }
    if (this.state.disposing) throw new AcpError('SESSION_CLOSING', 'the agent is shutting down; no new sessions are accepted')
    const held = this.sessions.size + this.state.opening
    if (held >= this.config.maxSessions) {
      throw new AcpError(
        'TOO_MANY_SESSIONS',
        `this connection already has ${held} open sessions (maxSessions: ${this.config.maxSessions}); close one with session/close first`,
        { maxSessions: this.config.maxSessions },
      )
    }
    this.state.opening++
    let agent: Agent
    try {
      agent = await this.agents.create({ workspaceRoot })
    } finally {
      this.state.opening--
    }
    const session: AcpSession = { id: agent.session.id, agent, state: {} }
    this.sessions.set(session.id, session)
    this.logger.info('session %s: %s in %s', session.id, agent.id, workspaceRoot)
    return { sessionId: session.id }
  }

  private session(sessionId: string): AcpSession {
    const session = this.sessions.get(sessionId)
    if (session === undefined) {
      throw new AcpError('UNKNOWN_SESSION', `unknown session ${sessionId}; create one with session/new`, { sessionId })
    }
    return session
  }

  private async prompt(params: PromptRequest, requestSignal: AbortSignal, client: AgentContext): Promise<PromptResponse> {
    const { sessionId } = params
    const session = this.session(sessionId)
    if (session.state.closing) throw new AcpError('SESSION_CLOSING', `session ${sessionId} is closing; create a new session`, { sessionId })
    if (session.state.turn) {
      throw new AcpError('PROMPT_ACTIVE', `session ${sessionId} is still running a prompt; wait for its response or send session/cancel`, { sessionId })
    }
    const text = promptText(params.prompt)
    let markEnded!: () => void
    const turn: Turn = { controller: new AbortController(), ended: new Promise<void>((resolve) => (markEnded = resolve)) }
    session.state.turn = turn
    const onRequestAbort = () => turn.controller.abort(new Error('the prompt request was cancelled'))
    requestSignal.addEventListener('abort', onRequestAbort, { once: true })
    if (requestSignal.aborted) onRequestAbort()

    const updates = new UpdateQueue(client, sessionId, this.logger)
    const reporter = new TurnReporter({
      send: (update) => updates.push(update),
      streamBytes: this.config.streamBytes,
      streamIntervalMs: this.config.streamIntervalMs,
    })
    try {
      let result: RunResult
      try {
        result = await this.agents.run(session.agent, {
          prompt: text,
          signal: turn.controller.signal,
          onEvent: (event) => reporter.onEvent(event),
        })
      } catch (error) {
        if (error instanceof AgentError && (error.code === 'AGENT_NOT_LIVE' || error.code === 'AGENT_DISPOSED')) {
          throw new AcpError('SESSION_CLOSING', `session ${sessionId} is closing; create a new session`, { sessionId })
        }
        throw error
      }
      reporter.finish()
      // Every update of the turn goes out before the response (ACP prompt-turn §4).
      await updates.drain()
      this.logger.debug('session %s: turn ended %s after %d model calls', sessionId, result.status, result.steps)
      return { stopReason: stopReason(result, turn.controller.signal.aborted) }
    } finally {
      reporter.finish()
      requestSignal.removeEventListener('abort', onRequestAbort)
      if (session.state.turn === turn) delete session.state.turn
      markEnded()
    }
  }

  /**
   * Shutting down (SIGTERM): cancels every running turn and waits, up to `graceMs`, for their
   * prompt handlers to return, so each pending `session/prompt` is answered `cancelled` before
   * the connection closes.
   */
  async cancelTurns(graceMs: number): Promise<void> {
    const turns = [...this.sessions.values()].flatMap((session) => (session.state.turn ? [session.state.turn] : []))
    for (const turn of turns) turn.controller.abort(new Error('the agent is shutting down'))
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.all(turns.map((turn) => turn.ended)), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))])
    clearTimeout(timer)
  }

  /** `session/cancel`: aborts the running turn (its terminal send gets SIGINT). Unknown ids are ignored (a notification has no answer). */
  private cancel(sessionId: string): void {
    const turn = this.sessions.get(sessionId)?.state.turn
    if (turn === undefined) {
      this.logger.debug('session/cancel for %s: no prompt is running', sessionId)
      return
    }
    turn.controller.abort(new Error('cancelled by the client (session/cancel)'))
  }

  private close(session: AcpSession): Promise<void> {
    return (session.state.closing ??= (async () => {
      session.state.turn?.controller.abort(new Error('the session was closed'))
      try {
        await this.agents.dispose(session.agent)
      } finally {
        this.sessions.delete(session.id)
        this.logger.info('session %s closed', session.id)
      }
    })())
  }
}

/**
 * `session/update` notifications of one turn, sent one after another in order, each once the
 * previous one was written. A client that stops reading stalls the writes; meanwhile the queue
 * coalesces live output: a live-output update (`tool_call_update` with `content` and no
 * `status`, which replaces the call's whole content — ACP tool-calls "Updating") takes the
 * place of an unsent one of the same call, so a stalled client costs at most one queued live
 * update per tool call. Every other update — results, statuses, message chunks — is kept.
 */
class UpdateQueue {
  private readonly queue: SessionUpdate[] = []
  private sending: Promise<void> | undefined
  /** Live updates replaced before they were sent (for the debug log). */
  private coalesced = 0

  constructor(
    private readonly client: AgentContext,
    private readonly sessionId: string,
    private readonly logger: Logger,
  ) {}

  push(update: SessionUpdate): void {
    const call = liveOutputCall(update)
    if (call !== undefined) {
      const index = this.queue.findIndex((queued) => liveOutputCall(queued) === call)
      if (index !== -1) {
        this.queue[index] = update
        this.coalesced++
        return
      }
    }
    this.queue.push(update)
    this.sending ??= this.pump()
  }

  /** Resolves once every pushed update was written (or failed). */
  drain(): Promise<void> {
    return this.sending ?? Promise.resolve()
  }

  private async pump(): Promise<void> {
    while (this.queue.length > 0) {
      const update = this.queue.shift()!
      await this.client.notify(methods.client.session.update, { sessionId: this.sessionId, update }).catch((error: unknown) => {
        this.logger.debug('session %s: an update was not delivered: %s', this.sessionId, error)
      })
    }
    if (this.coalesced > 0) {
      this.logger.debug('session %s: %d live-output updates were merged into later ones (the client read slowly)', this.sessionId, this.coalesced)
      this.coalesced = 0
    }
    this.sending = undefined
  }
}

/** The tool call a live-output update belongs to, or undefined for any other update. */
function liveOutputCall(update: SessionUpdate): string | undefined {
  if (update.sessionUpdate !== 'tool_call_update') return undefined
  if (update.status !== undefined && update.status !== null) return undefined
  return update.content === undefined || update.content === null ? undefined : update.toolCallId
}
