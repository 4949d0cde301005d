import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { LlmError, type ChatMessage, type ModelChunk } from '@conch/llm'
import type { ToolDefinition } from '@conch/tools'
import { AgentError, renderNotification, type AgentRunEvent, type ToolResultData, type TurnEndData } from '../src/index.ts'
import { aborted, boot, deferred, type Harness } from './harness.ts'

let harness: Harness | undefined

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

function types(sessionEvents: readonly { type: string }[]): string[] {
  return sessionEvents.map((event) => event.type)
}

function recordTool(calls: string[], overrides: Partial<ToolDefinition<z.ZodObject<{ text: z.ZodString }>>> = {}) {
  return {
    name: 'note',
    description: 'Records a note.',
    input: z.object({ text: z.string() }),
    kind: 'think' as const,
    title: (input: { text: string }) => `note: ${input.text}`,
    async execute(input: { text: string }) {
      calls.push(input.text)
      return { content: [{ type: 'text' as const, text: `noted ${input.text}` }], meta: { length: input.text.length } }
    },
    ...overrides,
  }
}

describe('a turn', () => {
  it('completes with the text of a response without tool calls and logs the turn', async () => {
    harness = await boot()
    const { ctx } = harness
    harness.steps.push({ text: 'All done.' })
    const agent = await ctx.agents.create()
    const events: AgentRunEvent[] = []
    const result = await ctx.agents.run(agent, { prompt: 'say done', onEvent: (event) => void events.push(event) })
    expect(result).toEqual({ status: 'completed', text: 'All done.', steps: 1 })
    expect(types(agent.session.events())).toEqual(['session/start', 'turn/start', 'user/message', 'assistant/message', 'turn/end'])
    expect(agent.session.last('turn/start')?.data).toEqual({ prompt: 'say done' })
    expect(agent.session.last('turn/end')?.data).toEqual({ status: 'completed', text: 'All done.', steps: 1 })
    expect(agent.session.last('assistant/message')?.data).toEqual({ text: 'All done.', toolCalls: [] })
    expect(events).toEqual([
      { type: 'text-delta', text: 'All d' },
      { type: 'text-delta', text: 'one.' },
      { type: 'assistant', text: 'All done.' },
    ])
  })

  it('runs tool calls in order, logs call and result, and sends the results back to the model', async () => {
    harness = await boot()
    const { ctx } = harness
    const calls: string[] = []
    ctx.tools.register(recordTool(calls))
    harness.steps.push(
      { text: 'Noting.', calls: [
        { id: 'c1', name: 'note', arguments: '{"text":"first"}' },
        { id: 'c2', name: 'note', arguments: '{"text":"second"}' },
      ] },
      { text: 'Both noted.' },
    )
    const agent = await ctx.agents.create()
    const events: AgentRunEvent[] = []
    const result = await ctx.agents.run(agent, { prompt: 'note two things', onEvent: (event) => void events.push(event) })

    expect(result).toEqual({ status: 'completed', text: 'Both noted.', steps: 2 })
    expect(calls).toEqual(['first', 'second'])
    expect(types(agent.session.events())).toEqual([
      'session/start', 'turn/start', 'user/message', 'assistant/message',
      'tool/call', 'tool/result', 'tool/call', 'tool/result', 'assistant/message', 'turn/end',
    ])
    expect(agent.session.events()[4]?.data).toEqual({ callId: 'c1', name: 'note', arguments: { text: 'first' } })
    expect(agent.session.events()[5]?.data).toEqual({ callId: 'c1', name: 'note', isError: false, text: 'noted first', meta: { length: 5 } })
    expect(events.filter((event) => event.type === 'tool-call')).toEqual([
      { type: 'tool-call', callId: 'c1', name: 'note', arguments: { text: 'first' }, title: 'note: first', kind: 'think' },
      { type: 'tool-call', callId: 'c2', name: 'note', arguments: { text: 'second' }, title: 'note: second', kind: 'think' },
    ])
    expect(events.find((event) => event.type === 'tool-result')).toEqual({
      type: 'tool-result', callId: 'c1', name: 'note',
      result: { content: [{ type: 'text', text: 'noted first' }], meta: { length: 5 } },
    })

    const [first, second] = harness.requests
    expect(first!.tools).toEqual([{ name: 'note', description: 'Records a note.', parameters: expect.objectContaining({ type: 'object' }) }])
    expect(second!.messages.slice(1)).toEqual<ChatMessage[]>([
      { role: 'user', content: 'note two things' },
      { role: 'assistant', content: 'Noting.', toolCalls: [
        { id: 'c1', name: 'note', arguments: '{"text":"first"}' },
        { id: 'c2', name: 'note', arguments: '{"text":"second"}' },
      ] },
      { role: 'tool', toolCallId: 'c1', name: 'note', content: 'noted first' },
      { role: 'tool', toolCallId: 'c2', name: 'note', content: 'noted second' },
    ])
  })

  it('answers arguments that are not JSON with an error result, without calling the tool', async () => {
    harness = await boot()
    const { ctx } = harness
    const calls: string[] = []
    ctx.tools.register(recordTool(calls))
    harness.steps.push({ calls: [{ id: 'bad', name: 'note', arguments: '{"text": "unterminated' }] }, { text: 'ok' })
    const agent = await ctx.agents.create()
    const events: AgentRunEvent[] = []
    await ctx.agents.run(agent, { prompt: 'p', onEvent: (event) => void events.push(event) })
    expect(calls).toEqual([])
    const result = agent.session.last<ToolResultData>('tool/result')!.data
    expect(result.isError).toBe(true)
    expect(result.text).toMatch(/^the arguments of note are not valid JSON \(.+\); call note again with a JSON object/)
    expect(agent.session.last('tool/call')?.data).toEqual({ callId: 'bad', name: 'note', arguments: '{"text": "unterminated' })
    expect(events.find((event) => event.type === 'tool-call')).toMatchObject({ title: 'note', kind: 'think' })
  })

  it('treats empty arguments as an empty object and reports unknown tools through the registry', async () => {
    harness = await boot()
    const { ctx } = harness
    const calls: string[] = []
    ctx.tools.register(recordTool(calls))
    harness.steps.push({ calls: [{ id: 'x', name: 'missing_tool', arguments: '' }] }, { text: 'fine' })
    const agent = await ctx.agents.create()
    await ctx.agents.run(agent, { prompt: 'p' })
    expect(agent.session.last('tool/call')?.data).toMatchObject({ arguments: {} })
    expect(agent.session.last<ToolResultData>('tool/result')!.data).toMatchObject({
      isError: true,
      text: 'unknown tool "missing_tool"; available tools: note',
    })
  })

  it('forwards a tool’s progress reports as tool-progress events', async () => {
    harness = await boot()
    const { ctx } = harness
    ctx.tools.register({
      name: 'stream',
      description: 'Streams.',
      input: z.object({}),
      async execute(_input, { progress }) {
        progress?.({ type: 'output', text: 'line 1\n' })
        progress?.({ type: 'output', text: 'line 2\n' })
        return { content: [{ type: 'text', text: 'line 1\nline 2' }] }
      },
    })
    harness.steps.push({ calls: [{ id: 's', name: 'stream', arguments: '{}' }] }, { text: 'streamed' })
    const agent = await ctx.agents.create()
    const progress: AgentRunEvent[] = []
    await ctx.agents.run(agent, { prompt: 'p', onEvent: (event) => void (event.type === 'tool-progress' && progress.push(event)) })
    expect(progress).toEqual([
      { type: 'tool-progress', callId: 's', name: 'stream', text: 'line 1\n' },
      { type: 'tool-progress', callId: 's', name: 'stream', text: 'line 2\n' },
    ])
  })

  it('stops with max_steps after maxSteps model calls, with every call answered', async () => {
    harness = await boot({ maxSteps: 3 })
    const { ctx } = harness
    const calls: string[] = []
    ctx.tools.register(recordTool(calls))
    for (let step = 1; step <= 4; step++) harness.steps.push({ calls: [{ id: `c${step}`, name: 'note', arguments: `{"text":"${step}"}` }] })
    const agent = await ctx.agents.create()
    const result = await ctx.agents.run(agent, { prompt: 'loop forever' })
    expect(result.status).toBe('max_steps')
    expect(result.steps).toBe(3)
    expect(result.text).toMatch(/stopped after 3 model calls without a final answer \(maxSteps is 3\)/)
    expect(calls).toEqual(['1', '2', '3'])
    expect(harness.requests).toHaveLength(3)
    expect(agent.session.last<TurnEndData>('turn/end')?.data).toMatchObject({ status: 'max_steps', steps: 3 })
  })

  it('ends with error, and the message, when the model fails', async () => {
    harness = await boot()
    const { ctx } = harness
    harness.steps.push(() => ({
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.reject(new LlmError('MODEL_ERROR', { reason: 'script demo.jsonl has no line for model call 3 (it has 2 lines)' })),
      }),
    }))
    const agent = await ctx.agents.create()
    const result = await ctx.agents.run(agent, { prompt: 'p' })
    expect(result.status).toBe('error')
    expect(result.text).toBe('script demo.jsonl has no line for model call 3 (it has 2 lines)')
    expect(result.error).toBeInstanceOf(LlmError)
    expect(agent.session.last('turn/end')?.data).toMatchObject({ status: 'error', text: result.text })
    expect(agent.session.last('assistant/message')).toBeUndefined()
  })

  it('ends with error when no model adapter can be resolved', async () => {
    harness = await boot()
    const { ctx } = harness
    ctx.llm.register({ provider: 'second', stream: () => (async function* () {})() })
    const agent = await ctx.agents.create()
    const result = await ctx.agents.run(agent, { prompt: 'p' })
    expect(result).toMatchObject({ status: 'error', steps: 0 })
    expect(result.text).toMatch(/several model adapters are registered/)
  })

  it('sends the previous turns as history', async () => {
    harness = await boot()
    const { ctx } = harness
    harness.steps.push({ text: 'first answer' }, { text: 'second answer' })
    const agent = await ctx.agents.create()
    await ctx.agents.run(agent, { prompt: 'first question' })
    await ctx.agents.run(agent, { prompt: 'second question' })
    expect(harness.requests[1]!.messages.slice(1)).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
    ])
  })

  it('refuses a second turn while one is running', async () => {
    harness = await boot()
    const { ctx } = harness
    const started = deferred()
    const release = deferred()
    harness.steps.push(async function* () {
      started.resolve()
      await release.promise
      yield { type: 'text-delta', text: 'late' } satisfies ModelChunk
    }, { text: 'next turn' })
    const agent = await ctx.agents.create()
    const first = ctx.agents.run(agent, { prompt: 'one' })
    await started.promise
    const error = await ctx.agents.run(agent, { prompt: 'two' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AgentError)
    expect((error as AgentError).code).toBe('TURN_ACTIVE')
    release.resolve()
    expect((await first).status).toBe('completed')
    expect((await ctx.agents.run(agent, { prompt: 'three' })).text).toBe('next turn')
  })
})

describe('cancellation', () => {
  it('cancels during a model stream, without logging a partial assistant message', async () => {
    harness = await boot()
    const { ctx } = harness
    const streaming = deferred()
    harness.steps.push(async function* (request) {
      yield { type: 'text-delta', text: 'thinking' } satisfies ModelChunk
      streaming.resolve()
      throw await aborted(request.signal!)
    })
    const agent = await ctx.agents.create()
    const controller = new AbortController()
    const run = ctx.agents.run(agent, { prompt: 'p', signal: controller.signal })
    await streaming.promise
    controller.abort(new Error('user pressed stop'))
    const result = await run
    expect(result).toMatchObject({ status: 'cancelled', text: 'user pressed stop', steps: 1 })
    expect(agent.session.last('assistant/message')).toBeUndefined()
    expect(agent.session.last('turn/end')?.data).toEqual({ status: 'cancelled', text: 'user pressed stop', steps: 1 })
  })

  it('cancels promptly even when the model adapter ignores the signal', async () => {
    harness = await boot()
    const { ctx } = harness
    const streaming = deferred()
    const never = deferred()
    harness.steps.push(async function* () {
      streaming.resolve()
      await never.promise
      yield { type: 'text-delta', text: 'too late' } satisfies ModelChunk
    })
    const agent = await ctx.agents.create()
    const controller = new AbortController()
    const run = ctx.agents.run(agent, { prompt: 'p', signal: controller.signal })
    await streaming.promise
    controller.abort(new Error('stop'))
    expect((await run).status).toBe('cancelled')
    never.resolve()
  })

  it('cancels during a tool: that call keeps its result, later calls are answered without running', async () => {
    harness = await boot()
    const { ctx } = harness
    const running = deferred()
    const calls: string[] = []
    ctx.tools.register({
      name: 'wait',
      description: 'Waits until cancelled.',
      input: z.object({}),
      async execute(_input, { signal }) {
        running.resolve()
        await aborted(signal)
        return { content: [{ type: 'text', text: 'interrupted after 1 line of output' }], isError: true }
      },
    })
    ctx.tools.register(recordTool(calls))
    harness.steps.push({ calls: [
      { id: 'w', name: 'wait', arguments: '{}' },
      { id: 'n', name: 'note', arguments: '{"text":"never"}' },
    ] })
    const agent = await ctx.agents.create()
    const controller = new AbortController()
    const events: AgentRunEvent[] = []
    const run = ctx.agents.run(agent, { prompt: 'p', signal: controller.signal, onEvent: (event) => void events.push(event) })
    await running.promise
    controller.abort(new Error('stop'))
    const result = await run
    expect(result).toMatchObject({ status: 'cancelled', steps: 1 })
    expect(calls).toEqual([])
    expect(harness.requests).toHaveLength(1)
    const results = agent.session.events().filter((event) => event.type === 'tool/result').map((event) => event.data)
    expect(results).toEqual([
      { callId: 'w', name: 'wait', isError: true, text: 'interrupted after 1 line of output' },
      { callId: 'n', name: 'note', isError: true, text: 'note was not run: the turn was cancelled' },
    ])
    expect(events.filter((event) => event.type === 'tool-result').map((event) => event.type === 'tool-result' && event.callId)).toEqual(['w', 'n'])
    expect(agent.session.events().at(-1)?.type).toBe('turn/end')
  })
})

describe('notifications', () => {
  const done = { source: 'task-1', event: 'exited 0', label: 'pty-1: make', evidence: 'controlled prompt', tail: 'built', wake: false }

  it('does not repeat evidence that is a line of the output it shows', () => {
    const matched = { source: 'task-3', event: 'matched "Listening on \\S+"', label: 'pty-3: bash serve.sh', evidence: 'Listening on 127.0.0.1:8080', wake: true }
    expect(renderNotification({ ...matched, tail: 'booting\nListening on 127.0.0.1:8080\n' })).toBe('[notification: task-3 matched "Listening on \\S+"]\nbooting\nListening on 127.0.0.1:8080')
    expect(renderNotification({ ...matched, tail: 'Listening on 127.0.0.1:8080 (ready)' })).toBe('[notification: task-3 matched "Listening on \\S+"; evidence: Listening on 127.0.0.1:8080]\nListening on 127.0.0.1:8080 (ready)')
  })

  it('does not repeat a last line of output that the event quotes', () => {
    const waiting = { source: 'task-2', event: 'waiting for input: Password:', label: "pty-2: read -r -s -p 'Password: ' pw", evidence: 'bash read fd0', wake: false }
    expect(renderNotification({ ...waiting, tail: 'Password: ' })).toBe('[notification: task-2 waiting for input: Password:; evidence: bash read fd0]')
    expect(renderNotification({ ...waiting, tail: 'login ok\nPassword: ' })).toBe('[notification: task-2 waiting for input: Password:; evidence: bash read fd0]\nlogin ok')
    expect(renderNotification({ ...waiting, event: 'waiting for input: Name?', tail: 'Password: ' })).toMatch(/\nPassword: $/)
  })

  it('attaches queued notifications to the next tool result, whichever tool it is, and emits them', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const calls: string[] = []
    ctx.tools.register(recordTool(calls, { execute: async (input: { text: string }) => {
      agent.notify(done)
      return { content: [{ type: 'text' as const, text: `noted ${input.text}` }] }
    } }))
    harness.steps.push({ calls: [{ name: 'note', arguments: '{"text":"a"}' }] }, { text: 'ok' })
    const events: AgentRunEvent[] = []
    await ctx.agents.run(agent, { prompt: 'go', onEvent: (event) => void events.push(event) })
    // The label, which names work the model started, is for clients: the text leaves it out.
    const text = '[notification: task-1 exited 0; evidence: controlled prompt]\nbuilt'
    expect(agent.session.last<ToolResultData>('tool/result')?.data.text).toBe(`noted a\n\n${text}`)
    expect(events.filter((event) => event.type === 'notification')).toEqual([{ type: 'notification', notification: done, text }])
  })

  it('drops a notification withdrawn before delivery, and does not wake for it', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const calls: string[] = []
    ctx.tools.register(recordTool(calls, { execute: async (input: { text: string }) => {
      agent.notify({ ...done, withdrawn: () => true })
      return { content: [{ type: 'text' as const, text: `noted ${input.text}` }] }
    } }))
    harness.steps.push({ calls: [{ name: 'note', arguments: '{"text":"a"}' }] }, { text: 'ok' })
    const release = agent.holdWake()
    agent.notify({ ...done, wake: true, withdrawn: () => true })
    release()
    expect(await ctx.agents.run(agent, { prompt: 'go' })).toMatchObject({ status: 'completed', steps: 2 })
    expect(agent.session.last<ToolResultData>('tool/result')?.data.text).toBe('noted a')
  })

  it('tells the producer of each notification it delivers, and not of a withdrawn one', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const calls: string[] = []
    const delivered: string[] = []
    ctx.tools.register(recordTool(calls, { execute: async (input: { text: string }) => {
      agent.notify({ ...done, delivered: () => void delivered.push('exited') })
      agent.notify({ ...done, event: 'matched "READY"', withdrawn: () => true, delivered: () => void delivered.push('matched') })
      return { content: [{ type: 'text' as const, text: `noted ${input.text}` }] }
    } }))
    harness.steps.push({ calls: [{ name: 'note', arguments: '{"text":"a"}' }] }, { text: 'ok' })
    await ctx.agents.run(agent, { prompt: 'go' })
    expect(delivered).toEqual(['exited'])
    expect(agent.session.last<ToolResultData>('tool/result')?.data.text).toBe('noted a\n\n[notification: task-1 exited 0; evidence: controlled prompt]\nbuilt')
  })

  it('wakes a run whose model ended its turn when a waking notification arrives, as a new turn', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    const release = agent.holdWake()
    harness.steps.push({ text: 'waiting for the build' }, (request) => {
      expect(request.messages.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining('[notification: task-1 exited 0') })
      return (async function* () {
        yield { type: 'text-delta', text: 'build done' } as ModelChunk
        yield { type: 'finish', reason: 'stop' } as ModelChunk
      })()
    })
    const run = ctx.agents.run(agent, { prompt: 'build in the background' })
    // The first turn ends; the run stays alive until the notification.
    await new Promise<void>((resolve) => ctx.sessions.subscribe((event) => void (event.type === 'turn/end' && resolve())))
    agent.notify({ ...done, wake: true })
    release()
    expect(await run).toEqual({ status: 'completed', text: 'build done', steps: 2 })
    expect(types(agent.session.events()).filter((type) => type === 'turn/start')).toHaveLength(2)
  })

  it('does not keep a run alive without a hold, and stops waiting when the hold is released', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    harness.steps.push({ text: 'done' }, { text: 'done again' })
    expect(await ctx.agents.run(agent, { prompt: 'go' })).toMatchObject({ status: 'completed', steps: 1 })
    agent.notify(done)
    const release = agent.holdWake()
    const run = ctx.agents.run(agent, { prompt: 'again' })
    await new Promise<void>((resolve) => ctx.sessions.subscribe((event) => void (event.type === 'turn/end' && resolve())))
    release()
    expect(await run).toMatchObject({ status: 'completed', text: 'done again', steps: 1 })
  })

  it('says it waits to be woken, and a run cancelled while it waits ends cancelled', async () => {
    harness = await boot()
    const { ctx } = harness
    const agent = await ctx.agents.create()
    agent.holdWake()
    harness.steps.push({ text: 'waiting for the server' })
    const controller = new AbortController()
    const events: AgentRunEvent[] = []
    const run = ctx.agents.run(agent, {
      prompt: 'serve in the background',
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event)
        if (event.type === 'waiting') controller.abort()
      },
    })
    expect(await run).toMatchObject({ status: 'cancelled', text: 'waiting for the server', steps: 1 })
    expect(events.filter((event) => event.type === 'waiting')).toEqual([{ type: 'waiting', tasks: 1, timeoutMs: 600_000 }])
  })

  it('stops waiting after wakeWaitMs', async () => {
    harness = await boot({ wakeWaitMs: 1 })
    const { ctx } = harness
    const agent = await ctx.agents.create()
    agent.holdWake()
    harness.steps.push({ text: 'done' })
    expect(await ctx.agents.run(agent, { prompt: 'go' })).toMatchObject({ status: 'completed', steps: 1 })
  })
})
