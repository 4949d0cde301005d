import { Context, Service } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Agent, PromptSection } from '@conch/agent'
import TasksService from '@conch/tasks'
import ToolsService from '@conch/tools'
import * as ToolTasks from '../src/index.ts'

/** An owner identity with the contract's `onDispose`; the tools only pass it through to ctx.tasks. */
function owner(id: string): Agent {
  return {
    id,
    session: { redact: (text: string) => text } as never,
    ctx: undefined as never,
    state: 'live',
    signal: new AbortController().signal,
    onDispose: () => () => {},
    notify: () => {},
    holdWake: () => () => {},
  }
}

/** Records prompt sections, standing in for ctx.agents. */
class SectionRecorder extends Service {
  readonly sections: PromptSection[] = []
  constructor(ctx: Context) {
    super(ctx, 'agents')
  }
  section(section: PromptSection): () => void {
    return this.ctx.effect(() => {
      this.sections.push(section)
      return () => void this.sections.splice(this.sections.indexOf(section), 1)
    })
  }
}

function deferred() {
  let resolve!: () => void
  const promise = new Promise<void>((res) => (resolve = res))
  return { promise, resolve }
}

let ctx: Context
let tasks: TasksService
let tools: ToolsService
let plugin: { dispose(): Promise<void> }
let services: { dispose(): Promise<void> }[]
const agent = owner('agent-1')

async function call(name: string, input: unknown, as: Agent = agent) {
  const result = await tools.execute(name, input, { agent: as, signal: new AbortController().signal, callId: 'call-1' })
  return { text: result.content.map((item) => item.text).join('\n'), isError: result.isError ?? false, meta: result.meta }
}

beforeEach(async () => {
  ctx = new Context()
  services = [
    await ctx.plugin(ToolsService, ToolsService.Config.parse({})),
    await ctx.plugin(TasksService, TasksService.Config.parse({})),
  ]
  plugin = await ctx.plugin(ToolTasks, ToolTasks.Config.parse({}))
  tasks = ctx.tasks
  tools = ctx.tools
})

afterEach(async () => {
  await plugin.dispose()
  for (const fiber of services.reverse()) await fiber.dispose()
})

describe('the tools as the model sees them', () => {
  it('registers task_output, task_kill and task_list with their JSON schemas', () => {
    const specs = tools.specs().filter((spec) => spec.name.startsWith('task_'))
    expect(specs.map((spec) => spec.name)).toEqual(['task_kill', 'task_list', 'task_output'])
    const output = specs.find((spec) => spec.name === 'task_output')!
    expect(output.parameters).toMatchObject({
      type: 'object',
      properties: {
        taskId: { type: 'string' },
        wait: { type: 'boolean', default: false },
        timeoutMs: { type: 'integer', default: 30000, maximum: 600000 },
      },
      required: ['taskId'],
    })
    expect(output.kind).toBe('read')
    for (const spec of specs) expect(spec.description.length).toBeGreaterThan(40)
  })

  it('unloading the plugin removes its tools', async () => {
    await plugin.dispose()
    expect(tools.specs().filter((spec) => spec.name.startsWith('task_'))).toEqual([])
  })

  it('rejects a config whose default wait exceeds the maximum, naming the field', async () => {
    await expect(ctx.plugin(ToolTasks, { waitTimeoutMs: 10, maxWaitTimeoutMs: 5 } as ToolTasks.Config)).rejects.toThrow(
      /waitTimeoutMs/,
    )
  })
})

describe('task_output', () => {
  it('returns only the output produced since the previous read, then the status line', async () => {
    let write!: (text: string) => void
    const finish = deferred()
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner: agent,
      run: (c) => {
        write = c.write
        return finish.promise
      },
    })
    write('building\n')
    expect(await call('task_output', { taskId: id })).toMatchObject({ text: 'building\n[status: running]', isError: false })
    expect((await call('task_output', { taskId: id })).text).toBe('(no new output)\n[status: running]')
    finish.resolve()
  })

  it('with wait: true returns as soon as the task ends, with the outcome fields', async () => {
    const finish = deferred()
    const { id } = tasks.start({
      kind: 'pty-send',
      label: 'pty-1: make',
      owner: agent,
      async run(c) {
        await finish.promise
        c.write('done\n')
        return { fields: { wait: 'stdin_read' } }
      },
    })
    const pending = call('task_output', { taskId: id, wait: true, timeoutMs: 600000 })
    finish.resolve()
    const result = await pending
    expect(result.text).toBe('done\n[status: completed, wait: stdin_read]')
    expect(result.meta).toMatchObject({ task: { id, status: 'completed', kind: 'pty-send' } })
  })

  it('with wait: true says the task is still running when the timeout passes', async () => {
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner: agent,
      run: (c) => new Promise<void>((resolve) => c.signal.addEventListener('abort', () => resolve())),
    })
    const result = await call('task_output', { taskId: id, wait: true, timeoutMs: 20 })
    expect(result.text).toBe('(no new output)\n[status: running, waited 20 ms]')
    expect(result.meta).toMatchObject({ timedOut: true })
  })

  it('refuses a timeoutMs above the configured maximum', async () => {
    const result = await call('task_output', { taskId: 'task-1', wait: true, timeoutMs: 600001 })
    expect(result.isError).toBe(true)
    expect(result.text).toContain('timeoutMs')
  })

  it('reports another agent’s task as an error naming the task', async () => {
    const { id } = tasks.start({ kind: 'test', label: 'x', owner: owner('agent-2'), run: async () => {} })
    const result = await call('task_output', { taskId: id })
    expect(result.isError).toBe(true)
    expect(result.text).toBe(`FOREIGN_TASK: task ${id} belongs to another agent; an agent can only read, wait for or kill its own tasks`)
  })

  it('renders a failed task with its error', async () => {
    const { id } = tasks.start({
      kind: 'test',
      label: 'x',
      owner: agent,
      run: async () => {
        throw new Error('exit status 2')
      },
    })
    expect((await call('task_output', { taskId: id, wait: true })).text).toBe(
      '(no new output)\n[status: failed]\n[error: exit status 2]',
    )
  })
})

describe('task_kill and task_list', () => {
  it('task_kill stops a running task and shows its last output and [status: killed]', async () => {
    const { id } = tasks.start({
      kind: 'pty-send',
      label: 'pty-1: sleep 100',
      owner: agent,
      run: (c) =>
        new Promise<void>((resolve) =>
          c.signal.addEventListener('abort', () => {
            c.write('^C\n')
            resolve()
          }),
        ),
    })
    expect((await call('task_kill', { taskId: id })).text).toBe('^C\n[status: killed]')
    expect((await call('task_list', {})).text).toBe(`${id} killed pty-send "pty-1: sleep 100"`)
  })

  it('task_list shows only the calling agent’s tasks, one line each', async () => {
    const finish = deferred()
    tasks.start({ kind: 'pty-send', label: 'pty-1: sleep 100', owner: agent, run: () => finish.promise })
    tasks.start({ kind: 'pty-send', label: 'other', owner: owner('agent-2'), run: () => finish.promise })
    const { id } = tasks.start({
      kind: 'pty-send',
      label: 'pty-2: make',
      owner: agent,
      run: async () => ({ fields: { wait: 'stdin_read' } }),
    })
    await tasks.wait(agent, id, { timeoutMs: 60000 })
    expect((await call('task_list', {})).text).toBe(
      'task-1 running pty-send "pty-1: sleep 100"\ntask-3 completed pty-send "pty-2: make" [wait: stdin_read]',
    )
    expect((await call('task_list', {}, owner('agent-3'))).text).toBe('(no tasks)')
    finish.resolve()
  })
})

describe('the system prompt section', () => {
  it('is registered on ctx.agents when an agent service is loaded, and removed with the plugin', async () => {
    const recorder = await ctx.plugin(SectionRecorder)
    const agents = ctx.get('agents') as unknown as SectionRecorder
    expect(agents.sections.map((section) => section.id)).toEqual(['tasks'])
    expect(agents.sections[0]?.render(agent)).toContain('killed when the session ends')
    await plugin.dispose()
    expect(agents.sections).toEqual([])
    await recorder.dispose()
  })
})
