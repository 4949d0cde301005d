import type { SessionUpdate } from '@agentclientprotocol/sdk'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { acpToolKind, TurnReporter } from '../src/index.ts'

function reporter(options: { streamBytes?: number; streamIntervalMs?: number } = {}) {
  const sent: SessionUpdate[] = []
  const turn = new TurnReporter({
    send: (update) => sent.push(update),
    streamBytes: options.streamBytes ?? 1024,
    streamIntervalMs: options.streamIntervalMs ?? 100,
  })
  return { sent, turn }
}

const live = (text: string) => [{ type: 'content', content: { type: 'text', text } }]

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

describe('TurnReporter', () => {
  it('streams assistant deltas and does not repeat the complete message', () => {
    const { sent, turn } = reporter()
    turn.onEvent({ type: 'text-delta', text: 'Hel' })
    turn.onEvent({ type: 'text-delta', text: 'lo' })
    turn.onEvent({ type: 'assistant', text: 'Hello' })
    expect(sent).toEqual([
      { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hel' } },
      { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'lo' } },
    ])
  })

  it('shows a delivered notification as a user message chunk carrying its fields in _meta', () => {
    const { sent, turn } = reporter()
    const notification = { source: 'task-1', event: 'exited 0', label: 'pty-1: make', evidence: 'controlled prompt', wake: true }
    turn.onEvent({ type: 'notification', notification, text: '[notification: task-1 exited 0; evidence: controlled prompt]' })
    expect(sent).toEqual([
      {
        sessionUpdate: 'user_message_chunk',
        content: { type: 'text', text: '[notification: task-1 exited 0; evidence: controlled prompt]' },
        _meta: { conch: { notification } },
      },
    ])
  })

  it('sends a complete message that came without deltas', () => {
    const { sent, turn } = reporter()
    turn.onEvent({ type: 'assistant', text: 'Whole' })
    expect(sent).toEqual([{ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Whole' } }])
  })

  it('sends the first live output at once and merges output arriving within the interval into one later update', () => {
    const { sent, turn } = reporter({ streamIntervalMs: 100 })
    turn.onEvent({ type: 'tool-call', callId: 'c1', name: 'terminal_send', arguments: { text: 'make' }, title: 'pty-1: make', kind: 'execute' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'a\n' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'b\n' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'c\n' })
    expect(sent.slice(2)).toEqual([{ sessionUpdate: 'tool_call_update', toolCallId: 'c1', content: live('a\n') }])
    vi.advanceTimersByTime(100)
    expect(sent.slice(3)).toEqual([{ sessionUpdate: 'tool_call_update', toolCallId: 'c1', content: live('a\nb\nc\n') }])
  })

  it('sends pending live output before the result and never after it', () => {
    const { sent, turn } = reporter({ streamIntervalMs: 100 })
    turn.onEvent({ type: 'tool-call', callId: 'c1', name: 'terminal_send', arguments: {}, title: 't', kind: 'execute' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'one\n' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'two\n' })
    turn.onEvent({ type: 'tool-result', callId: 'c1', name: 'terminal_send', result: { content: [{ type: 'text', text: 'one\ntwo\n[wait: stdin_read]' }], meta: { waitReason: 'stdin_read' } } })
    vi.advanceTimersByTime(1000)
    expect(sent.slice(2)).toEqual([
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', content: live('one\n') },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', content: live('one\ntwo\n') },
      {
        sessionUpdate: 'tool_call_update',
        toolCallId: 'c1',
        status: 'completed',
        content: live('one\ntwo\n[wait: stdin_read]'),
        rawOutput: { waitReason: 'stdin_read' },
      },
    ])
  })

  it('keeps the newest streamBytes of live output, cut on a code point', () => {
    const { sent, turn } = reporter({ streamBytes: 6, streamIntervalMs: 0 })
    turn.onEvent({ type: 'tool-call', callId: 'c1', name: 'terminal_send', arguments: {}, title: 't', kind: 'execute' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'abc' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'd😀' })
    expect(sent.at(-1)).toEqual({ sessionUpdate: 'tool_call_update', toolCallId: 'c1', content: live('cd😀') })
  })

  it('announces a result whose call was never reported, as failed when it is an error', () => {
    const { sent, turn } = reporter()
    turn.onEvent({ type: 'tool-result', callId: 'c9', name: 'terminal_send', result: { content: [{ type: 'text', text: 'terminal_send was not run: the turn was cancelled' }], isError: true } })
    expect(sent).toEqual([
      { sessionUpdate: 'tool_call', toolCallId: 'c9', title: 'terminal_send', kind: 'other', status: 'pending' },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c9', status: 'in_progress' },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c9', status: 'failed', content: live('terminal_send was not run: the turn was cancelled') },
    ])
  })

  it('stops its timers when the turn finishes', () => {
    const { sent, turn } = reporter({ streamIntervalMs: 100 })
    turn.onEvent({ type: 'tool-call', callId: 'c1', name: 'terminal_send', arguments: {}, title: 't', kind: 'execute' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'a' })
    turn.onEvent({ type: 'tool-progress', callId: 'c1', name: 'terminal_send', text: 'b' })
    const count = sent.length
    turn.finish()
    vi.advanceTimersByTime(1000)
    expect(sent).toHaveLength(count)
  })
})

describe('acpToolKind', () => {
  it('keeps ACP kinds and maps anything else to other', () => {
    expect(['execute', 'read', 'delete', 'switch_mode', 'shell'].map(acpToolKind)).toEqual(['execute', 'read', 'delete', 'switch_mode', 'other'])
  })
})
