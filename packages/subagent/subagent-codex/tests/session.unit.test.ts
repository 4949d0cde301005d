/**
 * The session state machine against a scripted app-server: exact message orders that the
 * real binary produces only by chance (notifications before the turn/start answer, messages
 * naming other threads, unknown requests, protocol garbage).
 */
import { describe, expect, it } from 'vitest'
import type { SubagentUpdate } from '@conch/subagent'
import { JsonLinesConnection } from '../src/connection.ts'
import { CodexSession } from '../src/session.ts'

const THREAD = 'thread-1'
const TURN = 'turn-1'

/** A session wired to a fake server: `sent` holds what conch wrote, `serve(msg)` feeds a server line. */
function wire() {
  const sent: Record<string, unknown>[] = []
  const updates: SubagentUpdate[] = []
  let session!: CodexSession
  const connection = new JsonLinesConnection((line) => sent.push(JSON.parse(line) as Record<string, unknown>), {
    onNotification: (method, params) => session.onNotification(method, params),
    onRequest: (request) => session.onRequest(request),
    onViolation: (reason) => session.onViolation(reason),
  })
  session = new CodexSession({ connection, update: (update) => updates.push(update), detail: () => 'stderr tail' })
  const serve = (message: Record<string, unknown>) => connection.feed(`${JSON.stringify(message)}\n`)
  const lastRequest = (method: string) => sent.findLast((message) => message.method === method) as { id: number; method: string; params: Record<string, unknown> }
  return { sent, updates, session, connection, serve, lastRequest }
}

/** Runs the handshake and turn/start up to the point where the turn/start answer is pending. */
async function toTurnStart() {
  const w = wire()
  const handshake = w.session.handshake({ cwd: '/w', ephemeral: true, approvalPolicy: 'on-request', sandbox: 'read-only' })
  w.serve({ id: w.lastRequest('initialize').id, result: {} })
  await Promise.resolve()
  expect(w.sent.map((message) => message.method)).toEqual(['initialize', 'initialized', 'thread/start'])
  expect(w.sent[1]).toEqual({ method: 'initialized' })
  expect(w.sent.every((message) => !('jsonrpc' in message))).toBe(true)
  w.serve({ id: w.lastRequest('thread/start').id, result: { thread: { id: THREAD } } })
  await handshake
  w.session.startTurn('the task')
  expect(w.lastRequest('turn/start').params).toEqual({ threadId: THREAD, input: [{ type: 'text', text: 'the task', text_elements: [] }] })
  return w
}

const delta = (text: string, turnId = TURN, threadId = THREAD) => ({ method: 'item/agentMessage/delta', params: { threadId, turnId, itemId: 'm1', delta: text } })
const message = (text: string, phase: string | null = null, id = 'm1') => ({
  method: 'item/completed',
  params: { threadId: THREAD, turnId: TURN, item: { type: 'agentMessage', id, text, phase } },
})
const completed = (status: string, error: unknown = null) => ({ method: 'turn/completed', params: { threadId: THREAD, turn: { id: TURN, status, error } } })
const text = (updates: SubagentUpdate[]) => updates.map((update) => (update.type === 'text' ? update.text : '')).join('')

describe('ownership', () => {
  it('holds notifications that arrive before the turn/start answer and applies them once the turn id is known', async () => {
    const w = await toTurnStart()
    w.serve({ method: 'turn/started', params: { threadId: THREAD, turn: { id: TURN, status: 'inProgress', error: null } } })
    w.serve(delta('early '))
    w.serve(delta('stranger', 'turn-other'))
    expect(w.updates).toEqual([])
    w.serve({ id: w.lastRequest('turn/start').id, result: { turn: { id: TURN, status: 'inProgress', error: null } } })
    await Promise.resolve()
    expect(w.session.state).toBe('turn')
    expect(text(w.updates)).toBe('early ')
    expect(w.session.foreign).toBe(1)
    w.serve(delta('answer'))
    w.serve(message('early answer'))
    w.serve(completed('completed'))
    expect(await w.session.outcome).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: 'early answer' }] })
  })

  it('drops messages naming another thread, and refuses its approval requests', async () => {
    const w = await toTurnStart()
    w.serve({ id: w.lastRequest('turn/start').id, result: { turn: { id: TURN, status: 'inProgress', error: null } } })
    await Promise.resolve()
    w.serve(delta('not mine', TURN, 'thread-other'))
    w.serve({ id: 7, method: 'item/commandExecution/requestApproval', params: { threadId: 'thread-other', turnId: TURN, itemId: 'x' } })
    w.serve({ method: 'turn/completed', params: { threadId: 'thread-other', turn: { id: TURN, status: 'completed', error: null } } })
    expect(w.updates).toEqual([])
    expect(w.session.state).toBe('turn')
    expect(w.sent.at(-1)).toMatchObject({ id: 7, error: { code: -32602 } })
    expect(w.session.declined).toBe(0)
    expect(w.session.foreign).toBe(3)
  })

  it('holds an approval request that arrives before the turn id, then declines it', async () => {
    const w = await toTurnStart()
    w.serve({ id: 'a', method: 'item/fileChange/requestApproval', params: { threadId: THREAD, turnId: TURN, itemId: 'x' } })
    expect(w.sent.some((entry) => entry.id === 'a')).toBe(false)
    w.serve({ id: w.lastRequest('turn/start').id, result: { turn: { id: TURN, status: 'inProgress', error: null } } })
    await Promise.resolve()
    expect(w.sent.find((entry) => entry.id === 'a')).toEqual({ id: 'a', result: { decision: 'decline' } })
  })
})

describe('server requests', () => {
  async function running() {
    const w = await toTurnStart()
    w.serve({ id: w.lastRequest('turn/start').id, result: { turn: { id: TURN, status: 'inProgress', error: null } } })
    await Promise.resolve()
    return w
  }

  it('declines every kind of approval and never grants one', async () => {
    const w = await running()
    const methods = [
      'item/commandExecution/requestApproval',
      'item/fileChange/requestApproval',
      'item/permissions/requestApproval',
      'mcpServer/elicitation/request',
      'execCommandApproval',
      'applyPatchApproval',
    ]
    methods.forEach((method, index) => w.serve({ id: index + 100, method, params: { threadId: THREAD, turnId: TURN } }))
    const answers = w.sent.filter((entry) => typeof entry.id === 'number' && (entry.id as number) >= 100)
    expect(answers).toHaveLength(methods.length)
    expect(JSON.stringify(answers)).not.toMatch(/"accept|"approved|acceptForSession/)
    expect(answers[2]).toMatchObject({ result: { permissions: {}, scope: 'turn' } })
    expect(w.session.declined).toBe(methods.length)
    expect(w.session.state).toBe('turn')
  })

  it('answers a question for a person with an error and keeps the run going', async () => {
    const w = await running()
    w.serve({ id: 9, method: 'item/tool/requestUserInput', params: { threadId: THREAD, turnId: TURN, questions: [] } })
    expect(w.sent.at(-1)).toMatchObject({ id: 9, error: { code: -32000, message: expect.stringContaining('unattended') } })
    expect(w.session.state).toBe('turn')
  })

  it('fails the run on a request it does not know', async () => {
    const w = await running()
    w.serve(delta('partial '))
    w.serve({ id: 10, method: 'item/tool/call', params: { threadId: THREAD, turnId: TURN, tool: 'x' } })
    expect(w.sent.at(-1)).toMatchObject({ id: 10, error: { code: -32601 } })
    expect(await w.session.outcome).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('item/tool/call') })
    expect(text(w.updates)).toBe('partial ')
  })
})

describe('how a turn ends', () => {
  async function running() {
    const w = await toTurnStart()
    w.serve({ id: w.lastRequest('turn/start').id, result: { turn: { id: TURN, status: 'inProgress', error: null } } })
    await Promise.resolve()
    return w
  }

  it('prefers the final_answer phase over a later message', async () => {
    const w = await running()
    w.serve(message('the answer', 'final_answer', 'm1'))
    w.serve(message('a closing remark', 'commentary', 'm2'))
    w.serve(completed('completed'))
    expect(await w.session.outcome).toMatchObject({ output: [{ type: 'text', text: 'the answer' }] })
  })

  it('streams a message that arrived whole (without deltas) into the partial output', async () => {
    const w = await running()
    w.serve(message('whole message'))
    expect(text(w.updates)).toBe('whole message')
  })

  it('a completed turn without a message is an error, not an empty success', async () => {
    const w = await running()
    w.serve(completed('completed'))
    expect(await w.session.outcome).toMatchObject({ stopReason: 'error', diagnostic: 'codex completed the turn without an answer' })
  })

  it('maps contextWindowExceeded to max-tokens and other failures to error', async () => {
    const w = await running()
    w.serve(completed('failed', { message: 'ran out of room', codexErrorInfo: 'contextWindowExceeded', additionalDetails: null }))
    expect(await w.session.outcome).toMatchObject({ stopReason: 'max-tokens' })
    const v = await running()
    v.serve({ method: 'error', params: { threadId: THREAD, turnId: TURN, willRetry: false, error: { message: 'unauthorized', codexErrorInfo: 'unauthorized', additionalDetails: null } } })
    v.serve(completed('failed'))
    expect(await v.session.outcome).toEqual({ stopReason: 'error', diagnostic: 'codex failed the turn: unauthorized (unauthorized)' })
  })

  it('an interruption is aborted only when conch asked for it', async () => {
    const w = await running()
    const interrupt = w.session.interrupt()
    expect(w.lastRequest('turn/interrupt').params).toEqual({ threadId: THREAD, turnId: TURN })
    w.serve({ id: w.lastRequest('turn/interrupt').id, result: {} })
    await interrupt
    w.serve(completed('interrupted'))
    expect(await w.session.outcome).toMatchObject({ stopReason: 'aborted' })
    const v = await running()
    v.serve(completed('interrupted'))
    expect(await v.session.outcome).toMatchObject({ stopReason: 'error', diagnostic: 'codex interrupted the turn by itself' })
  })

  it('a child that goes away mid-turn ends as error naming it, with its stderr', async () => {
    const w = await running()
    w.serve(delta('half '))
    w.session.onGone('was killed by SIGKILL')
    expect(await w.session.outcome).toEqual({ stopReason: 'error', diagnostic: 'codex was killed by SIGKILL before the turn completed; its stderr ends with: stderr tail' })
  })

  it('a line that is not JSON breaks the protocol: protocol, pending requests rejected', async () => {
    const w = await running()
    const interrupt = w.session.interrupt()
    w.connection.feed('this is not json\n')
    await interrupt
    expect(await w.session.outcome).toMatchObject({ stopReason: 'protocol', diagnostic: expect.stringContaining('a line that is not JSON') })
  })

  it('an endless line is cut off at the limit', () => {
    const w = wire()
    const small = new JsonLinesConnection(() => {}, { onNotification: () => {}, onRequest: () => {}, onViolation: (reason) => w.session.onViolation(reason) }, 64)
    small.feed('x'.repeat(100))
    expect(small.closed).toBe(true)
  })

  it('a response to a request never sent is a violation', async () => {
    const w = await running()
    w.serve({ id: 999, result: {} })
    expect(await w.session.outcome).toMatchObject({ stopReason: 'protocol', diagnostic: expect.stringContaining('never sent') })
  })

  it('handles lines split across chunks', async () => {
    const w = await running()
    const line = JSON.stringify(delta('split'))
    w.connection.feed(line.slice(0, 10))
    w.connection.feed(`${line.slice(10)}\n`)
    expect(text(w.updates)).toBe('split')
  })
})
