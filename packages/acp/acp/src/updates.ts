/**
 * What a client sees of a turn: the agent loop's `AgentRunEvent`s as ACP `session/update`s
 * (ACP prompt-turn §3 "Agent Reports Output", tool-calls "Creating" / "Updating"), one mapping
 * per event type below; the README's "What the client sees" gives each update's fields. Live
 * output replaces the call's `content` with all the output so far (ACP: `content` replaces the
 * collection), bounded and rate-limited by `streamBytes` and `streamIntervalMs`.
 */
import type { SessionUpdate, ToolKind } from '@agentclientprotocol/sdk'
import type { AgentRunEvent } from '@conch/agent'
import { boundUtf8, toolResultText } from '@conch/tools'
import { unreachable } from '@conch/session'

/** ACP `ToolKind` values (tool-calls, "Creating"); anything else a tool reports is `other`. */
const ACP_KINDS: ReadonlySet<string> = new Set<ToolKind>(['read', 'edit', 'delete', 'move', 'search', 'execute', 'think', 'fetch', 'switch_mode', 'other'])

export function acpToolKind(kind: string): ToolKind {
  return ACP_KINDS.has(kind) ? (kind as ToolKind) : 'other'
}

export interface TurnReporterOptions {
  /** Called with each update, in order. */
  send(update: SessionUpdate): void
  /** Bound of the live output of one call, in UTF-8 bytes (newest kept). */
  streamBytes: number
  /** Least time between two live-output updates of one call, in ms (0: one per chunk). */
  streamIntervalMs: number
  /** Clock, in ms. Default `Date.now`. */
  now?: () => number
}

interface CallState {
  output: string
  /** When live output was last sent (ms), or undefined before the first. */
  sentAt: number | undefined
  /** Output arrived that has not been sent yet. */
  pending: boolean
  timer: ReturnType<typeof setTimeout> | undefined
}

/** Maps one turn's events to session updates. Call `finish()` when the turn ends. */
export class TurnReporter {
  private readonly now: () => number
  private readonly calls = new Map<string, CallState>()
  /** Assistant text streamed as deltas since the last complete assistant message. */
  private streamedText = ''

  constructor(private readonly options: TurnReporterOptions) {
    this.now = options.now ?? Date.now
  }

  onEvent(event: AgentRunEvent): void {
    switch (event.type) {
      case 'text-delta':
        if (event.text === '') return
        this.streamedText += event.text
        this.options.send({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: event.text } })
        return
      case 'assistant':
        // The complete text of a model call: already streamed, unless the adapter sent no deltas.
        if (this.streamedText === '' && event.text !== '') {
          this.options.send({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: event.text } })
        }
        this.streamedText = ''
        return
      case 'tool-call':
        this.streamedText = ''
        this.start(event.callId, event.title, acpToolKind(event.kind), event.arguments)
        return
      case 'tool-progress':
        this.progress(event.callId, event.text)
        return
      case 'tool-result': {
        if (!this.calls.has(event.callId)) this.start(event.callId, event.name, 'other', undefined)
        this.flush(event.callId)
        this.drop(event.callId)
        const { result } = event
        this.options.send({
          sessionUpdate: 'tool_call_update',
          toolCallId: event.callId,
          status: result.isError === true ? 'failed' : 'completed',
          content: [{ type: 'content', content: { type: 'text', text: toolResultText(result) } }],
          ...(result.meta === undefined ? {} : { rawOutput: result.meta }),
        })
        return
      }
      case 'waiting':
        // The prompt stays open; the client sees the notification when it comes.
        return
      case 'notification':
        this.options.send({
          sessionUpdate: 'user_message_chunk',
          content: { type: 'text', text: event.text },
          _meta: { conch: { notification: event.notification } },
        })
        return
      default:
        return unreachable(event, 'run event')
    }
  }

  /** Stops every pending live-output timer (the turn is over; nothing more is sent). */
  finish(): void {
    for (const callId of [...this.calls.keys()]) this.drop(callId)
  }

  private start(callId: string, title: string, kind: ToolKind, rawInput: unknown): void {
    this.calls.set(callId, { output: '', sentAt: undefined, pending: false, timer: undefined })
    this.options.send({
      sessionUpdate: 'tool_call',
      toolCallId: callId,
      title,
      kind,
      status: 'pending',
      ...(rawInput === undefined ? {} : { rawInput }),
    })
    this.options.send({ sessionUpdate: 'tool_call_update', toolCallId: callId, status: 'in_progress' })
  }

  private progress(callId: string, text: string): void {
    const call = this.calls.get(callId)
    if (call === undefined || text === '') return
    call.output = boundUtf8(call.output + text, this.options.streamBytes, { keep: 'tail' }).text
    call.pending = true
    const interval = this.options.streamIntervalMs
    const wait = call.sentAt === undefined || interval === 0 ? 0 : call.sentAt + interval - this.now()
    if (wait <= 0) {
      this.flush(callId)
    } else if (call.timer === undefined) {
      call.timer = setTimeout(() => {
        call.timer = undefined
        this.flush(callId)
      }, wait)
    }
  }

  /** Sends the call's live output if some arrived since the last update. */
  private flush(callId: string): void {
    const call = this.calls.get(callId)
    if (call === undefined || !call.pending) return
    if (call.timer !== undefined) clearTimeout(call.timer)
    call.timer = undefined
    call.pending = false
    call.sentAt = this.now()
    this.options.send({
      sessionUpdate: 'tool_call_update',
      toolCallId: callId,
      content: [{ type: 'content', content: { type: 'text', text: call.output } }],
    })
  }

  private drop(callId: string): void {
    const call = this.calls.get(callId)
    if (call?.timer !== undefined) clearTimeout(call.timer)
    this.calls.delete(callId)
  }
}
