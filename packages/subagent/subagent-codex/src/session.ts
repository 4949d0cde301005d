/**
 * One Codex run over an app-server connection, one state machine:
 * handshake → thread → turn → ended (the README gives message ownership and stop reasons).
 */
import type { ProviderOutcome, SubagentUpdate } from '@conch/subagent'
import type { IncomingRequest, JsonLinesConnection } from './connection.ts'
import {
  APPROVAL_REQUESTS,
  USER_INPUT_REQUEST,
  type AgentMessageDeltaNotification,
  type ErrorNotification,
  type ItemNotification,
  type ThreadItem,
  type ThreadStartParams,
  type ThreadStartResponse,
  type Turn,
  type TurnNotification,
  type TurnStartResponse,
} from './protocol.ts'

export type SessionState = 'handshake' | 'thread' | 'turn' | 'ended'

type Held = { kind: 'notification'; method: string; params: unknown } | { kind: 'request'; request: IncomingRequest }

interface AgentMessage {
  id: string
  text: string
  phase: string | null
}

/** JSON-RPC error codes (JSON-RPC 2.0 § 5.1), and one in the server-error range for "no person". */
const METHOD_NOT_FOUND = -32601
const INVALID_PARAMS = -32602
const NO_PERSON = -32000

type Json = Record<string, unknown>
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

/** The title of each kind of the child's tool calls that is reported; other items are not tool calls. */
const TOOL_TITLES: Record<string, (item: Json) => string> = {
  commandExecution: (item) => `$ ${String(item.command ?? '')}`,
  fileChange: () => 'file change',
  mcpToolCall: (item) => `${String(item.server ?? 'mcp')}: ${String(item.tool ?? 'tool')}`,
  webSearch: (item) => `web search ${String(item.query ?? '')}`.trim(),
  dynamicToolCall: (item) => String(item.tool ?? 'tool'),
}

export interface CodexSessionOptions {
  connection: JsonLinesConnection
  update(update: SubagentUpdate): void
  /** Extra text for diagnostics about the child's death (its stderr tail). */
  detail(): string
}

export class CodexSession {
  state: SessionState = 'handshake'
  threadId: string | undefined
  turnId: string | undefined
  readonly outcome: Promise<ProviderOutcome>
  private settle!: (outcome: ProviderOutcome) => void
  private readonly held: Held[] = []
  private readonly messages: AgentMessage[] = []
  private readonly streamed = new Set<string>()
  private lastError: ErrorNotification['error'] | undefined
  private interruptRequested = false
  /** Approval requests declined so far (for diagnostics and tests). */
  declined = 0
  /** Messages dropped because they named another thread or turn. */
  foreign = 0

  constructor(private readonly options: CodexSessionOptions) {
    this.outcome = new Promise((resolve) => (this.settle = resolve))
  }

  private get connection(): JsonLinesConnection {
    return this.options.connection
  }

  /** initialize → initialized → thread/start. Resolves with the thread start result. */
  async handshake(params: ThreadStartParams): Promise<ThreadStartResponse> {
    await this.connection.request('initialize', { clientInfo: { name: 'conch', title: 'conch', version: '0.1.0' }, capabilities: null })
    this.connection.notify('initialized')
    const started = await this.connection.request<ThreadStartResponse>('thread/start', params)
    const id = started?.thread?.id
    if (typeof id !== 'string' || id === '') throw new Error('thread/start answered without a thread id')
    this.threadId = id
    this.state = 'thread'
    this.replay()
    return started
  }

  /** turn/start with the prompt; the turn id from the response commits held messages. */
  startTurn(text: string): void {
    if (this.state !== 'thread' || this.threadId === undefined) return
    this.connection
      .request<TurnStartResponse>('turn/start', { threadId: this.threadId, input: [{ type: 'text', text, text_elements: [] }] })
      .then(
        (response) => {
          const id = response?.turn?.id
          if (typeof id !== 'string' || id === '') return this.end({ stopReason: 'error', diagnostic: 'codex answered turn/start without a turn id' })
          if (this.state !== 'thread') return
          this.turnId = id
          this.state = 'turn'
          this.replay()
        },
        (error: Error) => this.end({ stopReason: 'error', diagnostic: `codex refused the turn: ${error.message}` }),
      )
  }

  /** Best-effort `turn/interrupt`; the caller's teardown is the authority. */
  async interrupt(): Promise<void> {
    this.interruptRequested = true
    if (this.state !== 'turn' || this.threadId === undefined || this.turnId === undefined || this.connection.closed) return
    await this.connection.request('turn/interrupt', { threadId: this.threadId, turnId: this.turnId }).catch(() => undefined)
  }

  onNotification(method: string, params: unknown): void {
    if (this.state === 'ended') return
    const owner = this.ownership(params)
    if (owner === 'held') return void this.held.push({ kind: 'notification', method, params })
    if (owner === 'foreign') return void this.foreign++
    if (owner === 'none') return
    this.apply(method, params)
  }

  onRequest(request: IncomingRequest): void {
    if (this.state === 'ended') return this.connection.respondError(request.id, INVALID_PARAMS, 'the run has ended')
    const owner = this.ownership(request.params)
    if (owner === 'held') return void this.held.push({ kind: 'request', request })
    if (owner === 'foreign') {
      this.foreign++
      return this.connection.respondError(request.id, INVALID_PARAMS, `this client runs thread ${this.threadId ?? '(none yet)'} turn ${this.turnId ?? '(none yet)'} only`)
    }
    this.answer(request)
  }

  /** The protocol broke (a bad line): the run ends as `protocol`. */
  onViolation(reason: string): void {
    this.end({ stopReason: 'protocol', diagnostic: reason })
  }

  /** The child's output ended or it exited: an unfinished run ends as an error. */
  onGone(description: string): void {
    if (this.state === 'ended') return
    const detail = this.options.detail()
    this.end({ stopReason: 'error', diagnostic: `codex ${description} before the turn completed${detail ? `; its stderr ends with: ${detail}` : ''}` })
  }

  /**
   * Whose a message is: `none` (names no thread: account or server status), `held` (names a
   * thread or turn not known yet), `foreign` (another thread or turn), `own`.
   */
  private ownership(params: unknown): 'none' | 'held' | 'foreign' | 'own' {
    if (!isObject(params)) return 'none'
    const thread = typeof params.threadId === 'string' ? params.threadId : typeof params.conversationId === 'string' ? params.conversationId : undefined
    const turn = typeof params.turnId === 'string' ? params.turnId : isObject(params.turn) && typeof params.turn.id === 'string' ? params.turn.id : undefined
    if (thread === undefined && turn === undefined) return 'none'
    if (this.threadId === undefined) return 'held'
    if (thread !== undefined && thread !== this.threadId) return 'foreign'
    if (turn === undefined) return 'own'
    if (this.turnId === undefined) return this.state === 'thread' ? 'held' : 'foreign'
    return turn === this.turnId ? 'own' : 'foreign'
  }

  private replay(): void {
    const held = this.held.splice(0)
    for (const entry of held) {
      if (entry.kind === 'notification') this.onNotification(entry.method, entry.params)
      else this.onRequest(entry.request)
    }
  }

  private apply(method: string, params: unknown): void {
    switch (method) {
      case 'item/agentMessage/delta': {
        const { itemId, delta } = params as AgentMessageDeltaNotification
        if (typeof delta !== 'string' || delta === '') return
        if (typeof itemId === 'string') this.streamed.add(itemId)
        this.options.update({ type: 'text', text: delta })
        return
      }
      case 'item/started':
        return this.tool((params as ItemNotification).item, 'running')
      case 'item/completed': {
        const item = (params as ItemNotification).item
        if (isObject(item) && item.type === 'agentMessage') {
          const message = item as Extract<ThreadItem, { type: 'agentMessage' }>
          const text = typeof message.text === 'string' ? message.text : ''
          this.messages.push({ id: String(message.id), text, phase: typeof message.phase === 'string' ? message.phase : null })
          // A message that arrived whole (no deltas) still belongs to the partial output.
          if (!this.streamed.has(String(message.id)) && text !== '') this.options.update({ type: 'text', text })
          return
        }
        return this.tool(item, undefined)
      }
      case 'error': {
        const { error, willRetry } = params as ErrorNotification
        if (!willRetry && isObject(error)) this.lastError = error
        return
      }
      case 'turn/completed':
        return this.completed((params as TurnNotification).turn)
      default:
        return
    }
  }

  /** The child's own tool calls, reported for progress displays. */
  private tool(item: unknown, phase: 'running' | undefined): void {
    if (!isObject(item) || typeof item.id !== 'string' || !Object.hasOwn(TOOL_TITLES, String(item.type))) return
    const status = phase ?? (item.status === 'completed' ? 'completed' : 'failed')
    this.options.update({ type: 'tool', callId: item.id, title: TOOL_TITLES[String(item.type)]!(item), status })
  }

  private answer(request: IncomingRequest): void {
    const { method } = request
    if (Object.hasOwn(APPROVAL_REQUESTS, method)) {
      this.declined++
      this.connection.respond(request.id, APPROVAL_REQUESTS[method as keyof typeof APPROVAL_REQUESTS])
      return
    }
    if (method === USER_INPUT_REQUEST) {
      this.connection.respondError(request.id, NO_PERSON, 'no person answers questions for this agent: it runs unattended as a sub-agent; decide yourself or say what you need in your answer')
      return
    }
    this.connection.respondError(request.id, METHOD_NOT_FOUND, `conch does not answer ${method}`)
    this.end({ stopReason: 'error', diagnostic: `codex sent a request conch does not answer (${method}); the run was stopped rather than guess what it would grant` })
  }

  private completed(turn: Turn): void {
    if (!isObject(turn)) return this.end({ stopReason: 'error', diagnostic: 'codex sent turn/completed without a turn' })
    switch (turn.status) {
      case 'completed': {
        const answer = [...this.messages].reverse().find((message) => message.phase === 'final_answer') ?? this.messages.at(-1)
        if (answer === undefined || answer.text.trim() === '') {
          return this.end({ stopReason: 'error', diagnostic: 'codex completed the turn without an answer' })
        }
        return this.end({ stopReason: 'completed', output: [{ type: 'text', text: answer.text }] })
      }
      case 'interrupted':
        return this.end(
          this.interruptRequested
            ? { stopReason: 'aborted', diagnostic: 'the turn was interrupted' }
            : { stopReason: 'error', diagnostic: 'codex interrupted the turn by itself' },
        )
      case 'failed': {
        const error = turn.error ?? this.lastError
        if (error?.codexErrorInfo === 'contextWindowExceeded') {
          return this.end({ stopReason: 'max-tokens', diagnostic: `codex ran out of context: ${error.message}` })
        }
        return this.end({ stopReason: 'error', diagnostic: `codex failed the turn: ${error?.message ?? 'no reason given'}${errorInfo(error?.codexErrorInfo)}` })
      }
      default:
        return this.end({ stopReason: 'error', diagnostic: `codex ended the turn with status ${JSON.stringify(turn.status)}` })
    }
  }

  private end(outcome: ProviderOutcome): void {
    if (this.state === 'ended') return
    this.state = 'ended'
    this.held.length = 0
    this.settle(outcome)
  }
}

function errorInfo(info: unknown): string {
  if (info === undefined || info === null || info === 'other') return ''
  return ` (${typeof info === 'string' ? info : JSON.stringify(info)})`
}
