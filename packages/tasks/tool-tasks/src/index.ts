/**
 * `@conch/tool-tasks`: the model-facing tools over `ctx.tasks` — `task_output`, `task_kill` and
 * `task_list` — and a short system-prompt section that tells the model how background tasks
 * work.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import type { Agent, AgentServiceApi } from '@conch/agent'
import type { TasksServiceApi, TaskSnapshot } from '@conch/tasks'
import type { ToolResult, ToolsServiceApi } from '@conch/tools'
import { renderList, renderSnapshot } from './render.ts'

export { NO_OUTPUT, renderList, renderSnapshot, statusLine } from './render.ts'

export const name = 'tool-tasks'
export const inject = ['tasks', 'tools']

export const Config = z
  .strictObject({
    waitTimeoutMs: z
      .number()
      .int()
      .min(0)
      .default(30_000)
      .describe('Default `timeoutMs` of task_output when the model waits, in ms.'),
    maxWaitTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(600_000)
      .describe('Largest `timeoutMs` the model may ask task_output to wait, in ms.'),
    maxResultBytes: z
      .number()
      .int()
      .min(1024)
      .default(30_000)
      .describe('Budget of each tool result in UTF-8 bytes; longer task output keeps its head and its tail around a marker saying what was dropped.'),
    promptSection: z.boolean().default(true).describe('Add the background-task section to the system prompt.'),
  })
  .refine((config) => config.waitTimeoutMs <= config.maxWaitTimeoutMs, {
    message: 'waitTimeoutMs must not exceed maxWaitTimeoutMs',
    path: ['waitTimeoutMs'],
  })
  .prefault({})

export type Config = z.output<typeof Config>

/** The system-prompt section registered on `ctx.agents` (when an agent service is loaded). */
export const PROMPT_SECTION = 'Background tasks (task-1, …) are killed when the session ends.'

export const apply = (ctx: Context, config: Config) => {
  const tasks: TasksServiceApi = ctx.tasks
  const tools: ToolsServiceApi = ctx.tools
  const limits = { maxResultBytes: config.maxResultBytes }

  const taskId = z.string().min(1)

  tools.register({
    name: 'task_output',
    description:
      "Read a background task's new output, then its status line (e.g. [status: completed, exit: 0]). " +
      'No need to poll: a task that ends or matches notifyOn notifies you with a later result; wait: true returns then, or at timeoutMs.',
    kind: 'read',
    ...limits,
    input: z.object({
      taskId,
      wait: z.boolean().default(false),
      timeoutMs: z
        .number()
        .int()
        .min(0)
        .max(config.maxWaitTimeoutMs)
        .default(config.waitTimeoutMs),
    }),
    title: (input) => `task_output ${input.taskId}${input.wait ? ' (wait)' : ''}`,
    async execute(input, { agent, signal }) {
      if (!input.wait) return result(tasks.read(agent, input.taskId), config, agent)
      const snapshot = await tasks.wait(agent, input.taskId, { timeoutMs: input.timeoutMs, signal })
      return result(snapshot, config, agent, snapshot.timedOut ? input.timeoutMs : undefined)
    },
  })

  tools.register({
    name: 'task_kill',
    description:
      'Stop a background task; returns its last output and final status ([status: killed], or how it had ended).',
    kind: 'other',
    ...limits,
    input: z.object({ taskId }),
    title: (input) => `task_kill ${input.taskId}`,
    async execute(input, { agent }) {
      return result(await tasks.kill(agent, input.taskId), config, agent)
    },
  })

  tools.register({
    name: 'task_list',
    description:
      'List your tasks: id, status (running, completed, stopped, failed, killed), kind, label.',
    kind: 'read',
    ...limits,
    input: z.object({}),
    title: () => 'task_list',
    async execute(_input, { agent }) {
      const infos = tasks.list(agent)
      return { content: [{ type: 'text', text: renderList(infos) }], meta: { tasks: infos } }
    },
  })

  if (config.promptSection) {
    ctx.inject(['agents'], (inner) => {
      const agents = inner.get('agents') as AgentServiceApi
      agents.section({ id: 'tasks', order: 60, render: () => PROMPT_SECTION })
    })
  }
}

function result(snapshot: TaskSnapshot, config: Config, agent: Agent, waitedMs?: number): ToolResult {
  const { output: _output, ...task } = snapshot
  const text = renderSnapshot(snapshot, {
    maxBytes: config.maxResultBytes,
    redact: (output) => agent.session.redact(output),
    ...(waitedMs === undefined ? {} : { waitedMs }),
  })
  return {
    content: [{ type: 'text', text }],
    meta: { task, ...(waitedMs === undefined ? {} : { timedOut: true }) },
  }
}
