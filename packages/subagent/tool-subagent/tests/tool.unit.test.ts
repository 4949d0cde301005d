import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService, { type ModelChunk } from '@conch/llm'
import SessionService from '@conch/session'
import SubagentService, { NO_CAPABILITIES, SubagentError, type ProviderOutcome, type ProviderRequest } from '@conch/subagent'
import TasksService, { TaskError } from '@conch/tasks'
import * as toolTasks from '@conch/tool-tasks'
import ToolsService, { type ToolProgress } from '@conch/tools'
import * as plugin from '../src/index.ts'

/**
 * A provider driven by the test, so every interleaving (text before a kill, a crash after
 * partial output) happens in an exact order. The real providers have their own process tests.
 */
interface Scripted {
  requests: ProviderRequest[]
  finish: Array<(outcome: ProviderOutcome) => void>
  fail: Array<(error: Error) => void>
  disposed: number
  startError?: Error
  /** Resolves when the first run was published. */
  started: Promise<void>
}

let fibers: { dispose(): Promise<void> }[] = []

afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  fibers = []
})

async function boot(config: Record<string, unknown> = {}, { tasks = true } = {}): Promise<{ ctx: Context; agent: Agent; child: Scripted }> {
  const ctx = new Context()
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  if (tasks) {
    fibers.push(await ctx.plugin(TasksService, TasksService.Config.parse({})))
    fibers.push(await ctx.plugin(toolTasks, toolTasks.Config.parse({})))
  }
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  let markStarted!: () => void
  const child: Scripted = { requests: [], finish: [], fail: [], disposed: 0, started: new Promise((resolve) => (markStarted = resolve)) }
  ctx.subagents.registerProvider({
    name: 'codex',
    capabilities: NO_CAPABILITIES,
    async start(request) {
      if (child.startError) throw child.startError
      child.requests.push(request)
      const outcome = new Promise<ProviderOutcome>((resolve, reject) => {
        child.finish.push(resolve)
        child.fail.push(reject)
      })
      return { childId: 'thread-1', outcome, dispose: async () => void child.disposed++ }
    },
  })
  // Published: the service has logged the start (so a cancel now is a run's cancel, not a start's).
  ctx.sessions.subscribe((event) => {
    if (event.type === 'subagent/start') markStarted()
  })
  fibers.push(await ctx.plugin(plugin, plugin.Config.parse({ provider: 'codex', ...config })))
  const agent = await ctx.agents.create({ workspaceRoot: '/tmp' })
  return { ctx, agent, child }
}

const call = (ctx: Context, agent: Agent, input: unknown, extra: { signal?: AbortSignal; progress?: (p: ToolProgress) => void } = {}) =>
  ctx.tools.execute('subagent', input, { agent, signal: extra.signal ?? new AbortController().signal, callId: 'c1', ...(extra.progress ? { progress: extra.progress } : {}) })

const STATUS = /\[subagent: codex, stop: (\w[\w-]*), \d+\.\d s\]/

describe('the foreground call', () => {
  it('renders the answer and the status line, and streams the text as progress', async () => {
    const { ctx, agent, child } = await boot()
    const progress: string[] = []
    const pending = call(ctx, agent, { prompt: 'list the files\nin detail' }, { progress: (p) => progress.push(p.text) })
    await child.started
    expect(child.requests[0]!.prompt).toEqual([{ type: 'text', text: 'list the files\nin detail' }])
    expect(child.requests[0]!.label).toBe('list the files')
    child.requests[0]!.update({ type: 'text', text: 'a.txt ' })
    child.requests[0]!.update({ type: 'tool', callId: 't1', title: 'ls -la', status: 'running' })
    child.requests[0]!.update({ type: 'text', text: 'b.txt\n' })
    child.finish[0]!({ stopReason: 'completed' })
    const result = await pending
    expect(result.isError).toBeUndefined()
    const text = result.content[0]!.text
    // The child's messages before and after its tool call, a blank line apart.
    expect(text).toMatch(/^a\.txt\n\nb\.txt\n\[subagent: codex, stop: completed, \d+\.\d s\]$/)
    // The next message's text arrives with the blank line that separates it (as task_output shows it).
    expect(progress).toEqual(['a.txt ', '\n[tool: ls -la]\n', '\n\nb.txt\n'])
    expect(result.meta?.subagent).toMatchObject({ provider: 'codex', childId: 'thread-1', stopReason: 'completed' })
    expect(child.disposed).toBe(1)
  })

  it('shows a non-completed stop as an error with the partial answer and the diagnostic', async () => {
    const { ctx, agent, child } = await boot()
    const pending = call(ctx, agent, { prompt: 'go' })
    await child.started
    child.requests[0]!.update({ type: 'text', text: 'I got halfway' })
    child.fail[0]!(new Error('the "codex" sub-agent exited with code 3 before it answered'))
    const result = await pending
    expect(result.isError).toBe(true)
    const lines = result.content[0]!.text.split('\n')
    expect(lines[0]).toBe('I got halfway')
    expect(lines[1]).toMatch(STATUS)
    expect(lines[1]!.match(STATUS)![1]).toBe('error')
    expect(lines[2]).toBe('[diagnostic: the "codex" sub-agent exited with code 3 before it answered]')
  })

  it('says (no output) when the child answered nothing', async () => {
    const { ctx, agent, child } = await boot()
    const pending = call(ctx, agent, { prompt: 'go' })
    await child.started
    child.finish[0]!({ stopReason: 'refusal', diagnostic: 'the model refused' })
    const result = await pending
    expect(result.content[0]!.text.split('\n').slice(0, 1)).toEqual(['(no output)'])
    expect(result.isError).toBe(true)
  })

  it('a cancelled turn stops the child and reports aborted with what it had', async () => {
    const { ctx, agent, child } = await boot()
    const controller = new AbortController()
    const pending = call(ctx, agent, { prompt: 'go' }, { signal: controller.signal })
    await child.started
    child.requests[0]!.update({ type: 'text', text: 'partial' })
    controller.abort()
    const result = await pending
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toMatch(/^partial\n\[subagent: codex, stop: aborted, \d+\.\d s\]\n\[diagnostic: cancelled by the caller\]$/)
    expect(child.requests[0]!.signal.aborted).toBe(true)
  })

  it('a start failure is an error result naming the provider', async () => {
    const { ctx, agent, child } = await boot()
    child.startError = new SubagentError('START_FAILED', { reason: 'the "codex" sub-agent exited with code 0 before it was ready' })
    const result = await call(ctx, agent, { prompt: 'go' })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toBe('START_FAILED: the "codex" sub-agent exited with code 0 before it was ready')
  })

  it('bounds a long answer, keeping its head and the status line', async () => {
    const { ctx, agent, child } = await boot({ maxResultBytes: 2048 })
    const pending = call(ctx, agent, { prompt: 'go' })
    await child.started
    child.requests[0]!.update({ type: 'text', text: 'é'.repeat(3000) })
    child.finish[0]!({ stopReason: 'completed' })
    const text = (await pending).content[0]!.text
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(2048)
    const lines = text.split('\n')
    expect(lines[0]!.startsWith('éé')).toBe(true)
    expect(lines[1]).toMatch(STATUS)
    expect(lines[2]).toMatch(/^\[output truncated: \d+ bytes omitted\]$/)
  })
})

describe('the background call', () => {
  it('returns a task id at once; task_output streams the text and ends with the stop', async () => {
    const { ctx, agent, child } = await boot()
    const started = await call(ctx, agent, { prompt: 'go', run_in_background: true })
    expect(started.content[0]!.text).toBe('[task: task-1 started]')
    child.requests[0]!.update({ type: 'text', text: 'first ' })
    const early = await ctx.tools.execute('task_output', { taskId: 'task-1' }, { agent, signal: new AbortController().signal, callId: 'c2' })
    expect(early.content[0]!.text).toBe('first \n[status: running]')
    child.requests[0]!.update({ type: 'text', text: 'second' })
    child.finish[0]!({ stopReason: 'completed' })
    const done = await ctx.tools.execute('task_output', { taskId: 'task-1', wait: true }, { agent, signal: new AbortController().signal, callId: 'c3' })
    expect(done.content[0]!.text).toMatch(/^second\n\[status: completed, stop: completed, duration: \d+\.\d s\]$/)
  })

  it('with notify, keeps the run alive and wakes the agent with the answer when the child ends', async () => {
    const { ctx, agent, child } = await boot()
    const requests: string[] = []
    const replies: ModelChunk[][] = [
      [{ type: 'tool-call-delta', index: 0, id: 'c1', name: 'subagent', argumentsDelta: '{"prompt":"go","run_in_background":true,"notify":true}' }, { type: 'finish', reason: 'tool_calls' }],
      [{ type: 'text-delta', text: 'waiting' }, { type: 'finish', reason: 'stop' }],
      [{ type: 'text-delta', text: 'got it' }, { type: 'finish', reason: 'stop' }],
    ]
    ctx.llm.register({
      provider: 'script',
      stream: (request) => {
        const last = request.messages.at(-1)!
        requests.push(last.role === 'user' ? last.content : '')
        if (replies.length === 2) queueMicrotask(() => {
          child.requests[0]!.update({ type: 'text', text: 'the answer' })
          child.finish[0]!({ stopReason: 'completed' })
        })
        return (async function* () {
          yield* replies.shift()!
        })()
      },
    })
    expect(await ctx.agents.run(agent, { prompt: 'delegate' })).toMatchObject({ status: 'completed', text: 'got it', steps: 3 })
    expect(requests[2]).toBe('[notification: task-1 answered (stop: completed)]\nthe answer')
  })

  it('task_kill cancels the child: the run ends aborted', async () => {
    const { ctx, agent, child } = await boot()
    await call(ctx, agent, { prompt: 'go', run_in_background: true })
    child.requests[0]!.update({ type: 'text', text: 'working' })
    const killed = await ctx.tools.execute('task_kill', { taskId: 'task-1' }, { agent, signal: new AbortController().signal, callId: 'c2' })
    expect(killed.content[0]!.text).toMatch(/^working\n\[status: killed/)
    expect(child.requests[0]!.signal.aborted).toBe(true)
    const events = agent.session.events().filter((event) => event.type === 'subagent/end')
    expect((events[0]!.data as { stopReason: string }).stopReason).toBe('aborted')
  })

  it('a failed child makes a failed task with the diagnostic', async () => {
    const { ctx, agent, child } = await boot()
    await call(ctx, agent, { prompt: 'go', run_in_background: true })
    child.fail[0]!(new Error('boom'))
    const done = await ctx.tools.execute('task_output', { taskId: 'task-1', wait: true }, { agent, signal: new AbortController().signal, callId: 'c3' })
    expect(done.content[0]!.text).toMatch(/^\(no new output\)\n\[status: failed, stop: error, duration: \d+\.\d s, diagnostic: boom\]$/)
  })

  it('fails with NO_SERVICE, as terminal_send does, when ctx.tasks is not loaded, starting nothing', async () => {
    const { ctx, agent, child } = await boot({}, { tasks: false })
    const result = await call(ctx, agent, { prompt: 'go', run_in_background: true })
    expect(result).toMatchObject({ isError: true, meta: { errorCode: 'NO_SERVICE' } })
    expect(result.content[0]!.text).toBe(`NO_SERVICE: ${TaskError.message('NO_SERVICE', { tool: 'subagent' })}`)
    expect(child.requests).toEqual([])
  })

  it('is not offered when enableRunInBackground is false', async () => {
    const { ctx } = await boot({ enableRunInBackground: false, toolName: 'ask_codex' })
    const spec = ctx.tools.specs().find((candidate) => candidate.name === 'ask_codex')!
    expect(Object.keys((spec.parameters as { properties: object }).properties)).toEqual(['prompt', 'timeoutMs'])
    expect(spec.description).not.toContain('run_in_background')
  })
})
