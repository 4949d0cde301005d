import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { AgentError, buildMessages, DEFAULT_INSTRUCTIONS, MISSING_RESULT, type Agent } from '../src/index.ts'
import type { SessionEvent } from '@conch/session'
import { aborted, boot, deferred, type Harness } from './harness.ts'

let harness: Harness | undefined

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

async function agentError(promise: Promise<unknown>): Promise<AgentError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(AgentError)
  return error as AgentError
}

describe('creating agents', () => {
  it('numbers agents in creation order and gives each a session and its own scope', async () => {
    harness = await boot()
    const { ctx } = harness
    const first = await ctx.agents.create({ workspaceRoot: '/srv/project' })
    const second = await ctx.agents.create()
    expect([first.id, second.id]).toEqual(['agent-1', 'agent-2'])
    expect(first.state).toBe('live')
    expect(first.session.start).toEqual({ workspaceRoot: '/srv/project' })
    expect(first.session).not.toBe(second.session)
    expect(ctx.sessions.get(first.session.id)).toBe(first.session)
    expect(first.ctx).toBeInstanceOf(Context)
    expect(first.ctx).not.toBe(second.ctx)
    expect(ctx.agents.get('agent-2')).toBe(second)
    expect(ctx.agents.list()).toEqual([first, second])
  })

  it('uses a given session instead of creating one', async () => {
    harness = await boot()
    const { ctx } = harness
    const session = ctx.sessions.create({ id: 'resumed' })
    const agent = await ctx.agents.create({ session })
    expect(agent.session).toBe(session)
  })
})

describe('disposing agents', () => {
  it('aborts the signal, runs cleanups in reverse order awaiting async ones, then disposes the scope', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const order: string[] = []
    const slow = deferred()
    agent.ctx.effect(() => () => void order.push('scope effect'))
    agent.onDispose(() => void order.push(`first (signal aborted: ${agent.signal.aborted}, state: ${agent.state})`))
    agent.onDispose(async () => {
      order.push('second started')
      await slow.promise
      order.push('second finished')
    })
    agent.onDispose(() => void order.push('third'))
    const removed = agent.onDispose(() => void order.push('unregistered'))
    removed()

    const disposal = ctx.agents.dispose(agent)
    expect(agent.state).toBe('disposing')
    expect(agent.signal.aborted).toBe(true)
    expect((agent.signal.reason as AgentError).code).toBe('AGENT_DISPOSED')
    await Promise.resolve()
    slow.resolve()
    await disposal
    expect(order).toEqual([
      'third',
      'second started',
      'second finished',
      'first (signal aborted: true, state: disposing)',
      'scope effect',
    ])
    expect(agent.state).toBe('disposed')
    expect(ctx.agents.list()).toEqual([])
    expect(ctx.agents.dispose(agent)).toBe(disposal)
  })

  it('runs every cleanup even when some fail, then reports the failures together', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const ran: string[] = []
    agent.onDispose(() => void ran.push('a'))
    agent.onDispose(() => {
      ran.push('b')
      throw new Error('terminal pty-1 would not close')
    })
    agent.onDispose(async () => {
      ran.push('c')
      throw new Error('task task-2 is stuck')
    })
    const error = await ctx.agents.dispose(agent).catch((e: unknown) => e)
    expect(ran).toEqual(['c', 'b', 'a'])
    expect(error).toBeInstanceOf(AggregateError)
    expect((error as AggregateError).errors.map((e: Error) => e.message)).toEqual(['task task-2 is stuck', 'terminal pty-1 would not close'])
    expect((error as AggregateError).message).toMatch(/2 cleanup\(s\) of agent agent-1 failed/)
    expect(agent.state).toBe('disposed')
  })

  it('closes the session it created but not a session it was given', async () => {
    harness = await boot()
    const { ctx } = harness
    const own = await ctx.agents.create()
    const given = ctx.sessions.create({ id: 'given' })
    const borrowing = await ctx.agents.create({ session: given })
    await ctx.agents.dispose(own)
    await ctx.agents.dispose(borrowing)
    expect(ctx.sessions.get(own.session.id)).toBeUndefined()
    expect(ctx.sessions.get('given')).toBe(given)
  })

  it('refuses new cleanups and turns once disposal started, and agents of another service', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const disposal = ctx.agents.dispose(agent)
    expect(() => agent.onDispose(() => {})).toThrow(AgentError)
    expect((await agentError(ctx.agents.run(agent, { prompt: 'p' }))).code).toBe('AGENT_NOT_LIVE')
    await disposal
    const stranger = { ...agent, id: 'agent-99', state: 'live' } as Agent
    expect((await agentError(ctx.agents.run(stranger, { prompt: 'p' }))).code).toBe('NO_AGENT')
    expect((await agentError(ctx.agents.dispose(stranger))).code).toBe('NO_AGENT')
  })

  it('aborts a running turn and waits for it to end before cleaning up', async () => {
    harness = await boot()
    const { ctx } = harness
    const running = deferred()
    const order: string[] = []
    ctx.tools.register({
      name: 'wait',
      description: 'Waits until cancelled.',
      input: z.object({}),
      async execute(_input, { signal }) {
        running.resolve()
        const reason = await aborted(signal)
        order.push('tool saw abort')
        throw reason
      },
    })
    harness.steps.push({ calls: [{ id: 'w', name: 'wait', arguments: '{}' }] })
    const agent = await ctx.agents.create()
    agent.onDispose(() => void order.push('cleanup'))
    const run = ctx.agents.run(agent, { prompt: 'p' })
    await running.promise
    await ctx.agents.dispose(agent)
    order.push('disposed')
    const result = await run
    expect(result.status).toBe('cancelled')
    expect(result.text).toBe('agent agent-1 was disposed')
    expect(order).toEqual(['tool saw abort', 'cleanup', 'disposed'])
    const types = agent.session.events().map((event) => event.type)
    expect(types.slice(-3)).toEqual(['tool/call', 'tool/result', 'turn/end'])
    expect(agent.session.last('tool/result')?.data).toMatchObject({ isError: true, text: 'AGENT_DISPOSED: agent agent-1 was disposed' })
  })

  it('disposes an agent when the plugin that created it is unloaded', async () => {
    harness = await boot()
    const { ctx } = harness
    let agent: Agent | undefined
    const cleaned = deferred()
    const creator = await ctx.plugin({
      name: 'creator',
      inject: ['agents'],
      apply: async (pctx: Context) => {
        agent = await pctx.agents.create()
        agent.onDispose(() => cleaned.resolve())
      },
    })
    expect(agent?.state).toBe('live')
    await creator.dispose()
    await cleaned.promise
    expect(agent?.state).toBe('disposed')
    expect(ctx.agents.list()).toEqual([])
  })

  it('disposes every agent when the service is disposed', async () => {
    harness = await boot()
    const { ctx } = harness
    const agents = [await ctx.agents.create(), await ctx.agents.create()]
    const cleaned: string[] = []
    for (const agent of agents) agent.onDispose(() => void cleaned.push(agent.id))
    await harness.dispose()
    harness = undefined
    expect(cleaned.sort()).toEqual(['agent-1', 'agent-2'])
    expect(agents.map((agent) => agent.state)).toEqual(['disposed', 'disposed'])
  })
})

describe('the system prompt', () => {
  it('starts with the configured instructions and orders sections by order, then id', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    ctx.agents.section({ id: 'b-terminals', render: () => 'Terminals section.' })
    ctx.agents.section({ id: 'a-tasks', render: () => 'Tasks section.' })
    ctx.agents.section({ id: 'z-first', order: -200, render: () => 'Before everything.' })
    ctx.agents.section({ id: 'late', order: 10, render: (owner) => `Agent ${owner.id}.` })
    ctx.agents.section({ id: 'omitted', render: () => undefined })
    ctx.agents.section({ id: 'broken', render: () => { throw new Error('boom') } })
    expect(ctx.agents.systemPrompt(agent)).toBe(
      ['Before everything.', DEFAULT_INSTRUCTIONS, 'Tasks section.', 'Terminals section.', 'Agent agent-1.'].join('\n\n'),
    )
    expect(harness.warnings.join('\n')).toMatch(/section %s failed and was left out: %s broken Error: boom/)
  })

  it('sends the system prompt as the first message', async () => {
    harness = await boot({ instructions: 'Base.' })
    const { ctx } = harness
    ctx.agents.section({ id: 'extra', render: () => 'Extra.' })
    harness.steps.push({ text: 'ok' })
    const agent = await ctx.agents.create()
    await ctx.agents.run(agent, { prompt: 'p' })
    expect(harness.requests[0]!.messages[0]).toEqual({ role: 'system', content: 'Base.\n\nExtra.' })
  })

  it('drops a plugin’s section when that plugin is unloaded', async () => {
    harness = await boot({ instructions: '' })
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const plugin = await ctx.plugin({
      name: 'prompt-plugin',
      inject: ['agents'],
      apply: (pctx: Context) => void pctx.agents.section({ id: 'p', render: () => 'From the plugin.' }),
    })
    expect(ctx.agents.systemPrompt(agent)).toBe('From the plugin.')
    await plugin.dispose()
    expect(ctx.agents.systemPrompt(agent)).toBe('')
  })
})

describe('buildMessages', () => {
  function event(seq: number, type: string, data: unknown): SessionEvent {
    return { seq, ts: '2026-01-01T00:00:00.000Z', sessionId: 's', type, data }
  }

  it('answers a tool call whose result never reached the log, so a replayed crash stays a valid request', () => {
    const messages = buildMessages('', [
      event(1, 'session/start', {}),
      event(2, 'user/message', { text: 'go' }),
      event(3, 'assistant/message', { text: '', toolCalls: [{ id: 'a', name: 't', arguments: '{}' }, { id: 'b', name: 't', arguments: '{}' }] }),
      event(4, 'tool/call', { callId: 'a', name: 't', arguments: {} }),
      event(5, 'tool/result', { callId: 'a', name: 't', isError: false, text: 'done' }),
      event(6, 'turn/start', { prompt: 'again' }),
      event(7, 'user/message', { text: 'again' }),
    ])
    expect(messages).toEqual([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 't', arguments: '{}' }, { id: 'b', name: 't', arguments: '{}' }] },
      { role: 'tool', toolCallId: 'a', name: 't', content: 'done' },
      { role: 'tool', toolCallId: 'b', name: 't', content: MISSING_RESULT },
      { role: 'user', content: 'again' },
    ])
  })

  it('leaves nested calls (with a parentCallId) out of the conversation, even when their id matches an open call', () => {
    const messages = buildMessages('', [
      event(1, 'user/message', { text: 'go' }),
      event(2, 'assistant/message', { text: '', toolCalls: [{ id: 'a', name: 'run_code', arguments: '{}' }] }),
      event(3, 'tool/call', { callId: 'a', name: 'run_code', arguments: {} }),
      event(4, 'tool/call', { callId: 'a.1', name: 't', arguments: {}, parentCallId: 'a' }),
      event(5, 'tool/result', { callId: 'a', name: 't', isError: false, text: 'forged nested', parentCallId: 'a' }),
      event(6, 'tool/result', { callId: 'a', name: 'run_code', isError: false, text: 'outer' }),
    ])
    expect(messages).toEqual([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 'run_code', arguments: '{}' }] },
      { role: 'tool', toolCallId: 'a', name: 'run_code', content: 'outer' },
    ])
  })
})
