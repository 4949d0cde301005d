import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import SubagentService, {
  NO_CAPABILITIES,
  SubagentError,
  type ProviderOutcome,
  type ProviderRequest,
  type ProviderRun,
  type SubagentProvider,
} from '../src/index.ts'

let fibers: { dispose(): Promise<void> }[] = []

async function boot(config: Record<string, unknown> = {}): Promise<{ ctx: Context; agent: Agent }> {
  const ctx = new Context()
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse(config)))
  const agent = await ctx.agents.create({ workspaceRoot: '/tmp' })
  return { ctx, agent }
}

afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  fibers = []
})

/** A provider whose runs the test drives by hand (exact ordering of races). */
function manual(name = 'manual', capabilities = NO_CAPABILITIES) {
  const runs: Array<{
    request: ProviderRequest
    finish(outcome: ProviderOutcome): void
    fail(error: Error): void
    disposed: number
  }> = []
  let startFailure: Error | undefined
  const provider: SubagentProvider = {
    name,
    capabilities,
    async start(request) {
      if (startFailure) throw startFailure
      let finish!: (outcome: ProviderOutcome) => void
      let fail!: (error: Error) => void
      const outcome = new Promise<ProviderOutcome>((resolve, reject) => {
        finish = resolve
        fail = reject
      })
      const entry = { request, finish, fail, disposed: 0 }
      runs.push(entry)
      const run: ProviderRun = {
        childId: `child-${runs.length}`,
        outcome,
        async dispose() {
          entry.disposed++
        },
      }
      return run
    },
  }
  return { provider, runs, failStartWith: (error: Error) => (startFailure = error) }
}

const prompt = [{ type: 'text' as const, text: 'do it' }]

async function rejection(promise: Promise<unknown>): Promise<SubagentError> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(SubagentError)
    return error as SubagentError
  }
  throw new Error('expected a rejection')
}

describe('the provider registry', () => {
  it('registers providers by name, lists them sorted and refuses a duplicate name', async () => {
    const { ctx } = await boot()
    ctx.subagents.registerProvider(manual('zeta').provider)
    const first = manual('acp').provider
    ctx.subagents.registerProvider(first)
    expect(() => ctx.subagents.registerProvider(manual('acp').provider)).toThrow(
      expect.objectContaining({ code: 'DUPLICATE_PROVIDER' }),
    )
    expect(ctx.subagents.getProvider('acp')).toBe(first)
    expect(ctx.subagents.list().map((provider) => provider.name)).toEqual(['acp', 'zeta'])
  })

  it('unregisters a provider when its plugin is disposed, and refuses a bad name', async () => {
    const { ctx } = await boot()
    const fiber = await ctx.plugin({
      name: 'p',
      inject: ['subagents'],
      apply: (inner: Context) => void inner.subagents.registerProvider(manual('gone').provider),
    })
    expect(ctx.subagents.getProvider('gone')).toBeDefined()
    await fiber.dispose()
    expect(ctx.subagents.getProvider('gone')).toBeUndefined()
    expect(() => ctx.subagents.registerProvider(manual('Bad Name').provider)).toThrow(
      expect.objectContaining({ code: 'INVALID_PROVIDER' }),
    )
  })

  it('refuses an unknown provider naming the registered ones', async () => {
    const { ctx, agent } = await boot()
    ctx.subagents.registerProvider(manual('acp').provider)
    const error = await rejection(ctx.subagents.start('codex', { prompt, parent: agent }))
    expect(error.code).toBe('NO_PROVIDER')
    expect(error.message).toBe('no sub-agent provider named "codex"; registered: acp')
  })
})

describe('capability flags', () => {
  for (const [field, value] of [
    ['outputSchema', { type: 'object' }],
    ['maxDepth', 2],
    ['toolFilter', ['terminal_send']],
    ['persona', 'You are terse.'],
  ] as const) {
    it(`refuses ${field} before the provider runs when the provider cannot enforce it`, async () => {
      const { ctx, agent } = await boot()
      const fake = manual()
      ctx.subagents.registerProvider(fake.provider)
      const error = await rejection(ctx.subagents.start('manual', { prompt, parent: agent, [field]: value }))
      expect(error.code).toBe('UNSUPPORTED_CAPABILITY')
      expect(error.message).toMatch(/"manual" cannot enforce/)
      expect(fake.runs).toHaveLength(0)
    })
  }

  it('passes a capability through to a provider that declares it', async () => {
    const { ctx, agent } = await boot()
    const fake = manual('deep', { ...NO_CAPABILITIES, depthLimit: true })
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('deep', { prompt, parent: agent, maxDepth: 2 })
    expect(fake.runs[0]!.request.maxDepth).toBe(2)
    fake.runs[0]!.finish({ stopReason: 'completed' })
    await run.dispose()
  })
})

describe('the publish boundary', () => {
  it('wraps a provider start failure as START_FAILED and records nothing', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    fake.failStartWith(new Error('spawn went wrong'))
    ctx.subagents.registerProvider(fake.provider)
    const error = await rejection(ctx.subagents.start('manual', { prompt, parent: agent }))
    expect(error.code).toBe('START_FAILED')
    expect(error.message).toBe('the "manual" sub-agent did not start: spawn went wrong')
    expect(agent.session.events().filter((event) => event.type.startsWith('subagent/'))).toEqual([])
  })

  it('keeps a provider SubagentError code (DEPTH_EXCEEDED) as it is', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    fake.failStartWith(new SubagentError('DEPTH_EXCEEDED', { provider: 'manual', depth: 1, max: 1 }))
    ctx.subagents.registerProvider(fake.provider)
    expect((await rejection(ctx.subagents.start('manual', { prompt, parent: agent }))).code).toBe('DEPTH_EXCEEDED')
  })

  it('resolves a completed run with the streamed text and logs start and end', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const updates: unknown[] = []
    const run = await ctx.subagents.start('manual', { prompt, parent: agent, label: 'probe', onUpdate: (u) => updates.push(u) })
    expect(run.id).toBe('subagent-1')
    fake.runs[0]!.request.update({ type: 'text', text: 'hel' })
    fake.runs[0]!.request.update({ type: 'text', text: 'lo' })
    fake.runs[0]!.finish({ stopReason: 'completed' })
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'hello' }], stopReason: 'completed' })
    expect(updates).toEqual([
      { type: 'text', text: 'hel' },
      { type: 'text', text: 'lo' },
    ])
    await run.dispose()
    const events = agent.session.events().filter((event) => event.type.startsWith('subagent/'))
    expect(events.map((event) => event.type)).toEqual(['subagent/start', 'subagent/end'])
    expect(events[0]!.data).toEqual({ runId: 'subagent-1', provider: 'manual', label: 'probe', childId: 'child-1' })
    expect(events[1]!.data).toMatchObject({ runId: 'subagent-1', stopReason: 'completed', childId: 'child-1' })
    expect(typeof (events[1]!.data as { durationMs: number }).durationMs).toBe('number')
  })

  it('joins the messages of the child, separated by its tool calls, with a blank line; chunks of one message run on', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent })
    const child = fake.runs[0]!.request
    child.update({ type: 'tool', callId: 'c0', title: 'look first', status: 'running' })
    child.update({ type: 'text', text: 'child ' })
    child.update({ type: 'text', text: 'here' })
    child.update({ type: 'tool', callId: 'c1', title: 'compute', status: 'running' })
    child.update({ type: 'tool', callId: 'c1', title: 'compute', status: 'completed' })
    child.update({ type: 'text', text: 'child computed 42' })
    fake.runs[0]!.finish({ stopReason: 'completed' })
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'child here\n\nchild computed 42' }], stopReason: 'completed' })
    await run.dispose()
  })

  it('turns a provider outcome rejection into error with the partial output; result never rejects', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent })
    fake.runs[0]!.request.update({ type: 'text', text: 'half an ans' })
    fake.runs[0]!.fail(new Error('the child exited with code 1'))
    expect(await run.result).toEqual({
      output: [{ type: 'text', text: 'half an ans' }],
      stopReason: 'error',
      diagnostic: 'the child exited with code 1',
    })
  })

  it('settles aborted at once when the caller cancels, without waiting for the child', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const controller = new AbortController()
    const run = await ctx.subagents.start('manual', { prompt, parent: agent, signal: controller.signal })
    fake.runs[0]!.request.update({ type: 'text', text: 'partial' })
    controller.abort()
    expect(await run.result).toEqual({
      output: [{ type: 'text', text: 'partial' }],
      stopReason: 'aborted',
      diagnostic: 'cancelled by the caller',
    })
    expect(fake.runs[0]!.request.signal.aborted).toBe(true)
    // A late outcome and late text change nothing.
    fake.runs[0]!.request.update({ type: 'text', text: ' more' })
    fake.runs[0]!.finish({ stopReason: 'completed', output: [{ type: 'text', text: 'late' }] })
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('refuses to start with an already aborted signal and never calls the provider', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const error = await rejection(ctx.subagents.start('manual', { prompt, parent: agent, signal: AbortSignal.abort() }))
    expect(error.code).toBe('START_FAILED')
    expect(fake.runs).toHaveLength(0)
  })

  it('disposes the child once, however often dispose is called', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent })
    await Promise.all([run.dispose(), run.dispose()])
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
    expect(fake.runs[0]!.disposed).toBe(1)
  })

  it('disposes the child after its result settles, without being asked', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent })
    fake.runs[0]!.finish({ stopReason: 'max-tokens' })
    expect(await run.result).toEqual({ output: [], stopReason: 'max-tokens', diagnostic: 'the child stopped: max-tokens' })
    await run.dispose()
    expect(fake.runs[0]!.disposed).toBe(1)
  })

  it('cancels and disposes the runs of a parent agent that is disposed', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent })
    await ctx.agents.dispose(agent)
    expect((await run.result).stopReason).toBe('aborted')
    expect(fake.runs[0]!.disposed).toBe(1)
  })

  it('a failed teardown can be retried', async () => {
    const { ctx, agent } = await boot()
    let attempts = 0
    ctx.subagents.registerProvider({
      name: 'stubborn',
      capabilities: NO_CAPABILITIES,
      async start() {
        return {
          childId: 'c',
          outcome: new Promise<never>(() => {}),
          async dispose() {
            attempts++
            if (attempts === 1) throw new SubagentError('TEARDOWN_FAILED', { provider: 'manual', survivors: ['sleep (pid 1)'] })
          },
        }
      },
    })
    const run = await ctx.subagents.start('stubborn', { prompt, parent: agent })
    await expect(run.dispose()).rejects.toMatchObject({ code: 'TEARDOWN_FAILED' })
    await run.dispose()
    expect(attempts).toBe(2)
  })
})

describe('limits', () => {
  it('counts starts still in flight against maxRunsPerParent, per parent, and gives the hold back once a run is gone', async () => {
    const { ctx, agent } = await boot({ maxRunsPerParent: 2 })
    const other = await ctx.agents.create({ workspaceRoot: '/tmp' })
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const fake = manual()
    ctx.subagents.registerProvider({ ...fake.provider, start: async (request) => (await gate, fake.provider.start(request)) })
    const starting = [ctx.subagents.start('manual', { prompt, parent: agent }), ctx.subagents.start('manual', { prompt, parent: agent })]
    const refused = await rejection(ctx.subagents.start('manual', { prompt, parent: agent }))
    expect(refused.code).toBe('TOO_MANY_RUNS')
    expect(refused.message).toBe(`${agent.id} already has 2 sub-agents running (subagents.maxRunsPerParent: 2); wait for one to end first`)
    const elsewhere = ctx.subagents.start('manual', { prompt, parent: other })
    release()
    const [first] = await Promise.all([...starting, elsewhere])
    await first!.dispose()
    const third = await ctx.subagents.start('manual', { prompt, parent: agent })
    expect(third.id).toBe('subagent-4')
  })

  it('settles timeout at the deadline with the partial output, capping a request at maxTimeoutMs, and tears the child down', async () => {
    const { ctx, agent } = await boot({ maxTimeoutMs: 50 })
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent, timeoutMs: 3_600_000 })
    fake.runs[0]!.request.update({ type: 'text', text: 'so far' })
    expect(await run.result).toEqual({
      output: [{ type: 'text', text: 'so far' }],
      stopReason: 'timeout',
      diagnostic: 'the "manual" sub-agent did not finish within 50 ms (its deadline) and was stopped',
    })
    await run.dispose()
    expect(fake.runs[0]!.disposed).toBe(1)
    expect(agent.session.last('subagent/end')?.data).toMatchObject({ stopReason: 'timeout' })
  })

  it('refuses a timeoutMs that is not a positive integer before the provider runs', async () => {
    const { ctx, agent } = await boot()
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    for (const timeoutMs of [0, -5, 1.5, Number.NaN]) {
      expect((await rejection(ctx.subagents.start('manual', { prompt, parent: agent, timeoutMs }))).code).toBe('INVALID_REQUEST')
    }
    expect(fake.runs).toHaveLength(0)
  })
})

describe('bounded output', () => {
  it('keeps the newest maxOutputBytes of streamed text, on a code point, and says so', async () => {
    const ctx = new Context()
    fibers.push(await ctx.plugin(SessionService, {}))
    fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
    fibers.push(await ctx.plugin(LlmService, {}))
    fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
    fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({ maxOutputBytes: 1024 })))
    const agent = await ctx.agents.create({ workspaceRoot: '/tmp' })
    const fake = manual()
    ctx.subagents.registerProvider(fake.provider)
    const run = await ctx.subagents.start('manual', { prompt, parent: agent })
    fake.runs[0]!.request.update({ type: 'text', text: 'x'.repeat(1000) })
    fake.runs[0]!.request.update({ type: 'text', text: 'é'.repeat(20) + 'END' })
    fake.runs[0]!.finish({ stopReason: 'completed' })
    const result = await run.result
    const text = result.output[0]!.text
    expect(result.truncated).toBe(true)
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(1024)
    expect(text.endsWith('é'.repeat(20) + 'END')).toBe(true)
    expect(text).not.toContain('\uFFFD')
  })
})
