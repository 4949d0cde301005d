/**
 * A real Cordis composition for driving the terminal tools: sessions, tools, llm, agents, the
 * PTY service with the memory backend (or a test backend), tasks and the task tools, and
 * tool-pty itself — plus two live agents to call the tools as.
 */
import { Context } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService, { type PtyBackend } from '@conch/pty'
import * as memory from '@conch/pty-memory'
import SessionService from '@conch/session'
import TasksService from '@conch/tasks'
import * as toolTasks from '@conch/tool-tasks'
import ToolsService, { type ToolProgress, type ToolResult } from '@conch/tools'
import * as toolPty from '../src/index.ts'

export interface Harness {
  ctx: Context
  agent: Agent
  other: Agent
  /** Errors and warnings the composition logged. */
  logged: string[]
  call(name: string, input: unknown, options?: { agent?: Agent; signal?: AbortSignal; progress?: (update: ToolProgress) => void }): Promise<ToolResult>
  /** The text the model sees for a call. */
  text(name: string, input: unknown, options?: { agent?: Agent; signal?: AbortSignal; progress?: (update: ToolProgress) => void }): Promise<string>
  dispose(): Promise<void>
}

export interface BootOptions {
  toolPty?: Record<string, unknown>
  /** Config of the PTY service (`@conch/pty`). */
  pty?: Record<string, unknown>
  memory?: Record<string, unknown>
  /** Load ctx.tasks and the task tools (default true). */
  tasks?: boolean
  /** Register this backend instead of the memory backend. */
  backend?: PtyBackend
}

export async function boot(options: BootOptions = {}): Promise<Harness> {
  const ctx = new Context()
  const logged: string[] = []
  ctx.logger.exporter({
    export: (message) => {
      if (message.type === 'warn' || message.type === 'error') logged.push(message.args.map(String).join(' '))
    },
  })
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(PtyService, PtyService.Config.parse(options.pty ?? {})))
  if (options.tasks !== false) {
    fibers.push(await ctx.plugin(TasksService, TasksService.Config.parse({})))
    fibers.push(await ctx.plugin(toolTasks, toolTasks.Config.parse({})))
  }
  const backend = options.backend
  if (backend) {
    fibers.push(await ctx.plugin({ name: 'test-backend', inject: ['pty'], apply: (inner: Context) => void inner.pty.registerBackend(backend) }))
  } else {
    fibers.push(await ctx.plugin(memory, memory.Config.parse(options.memory ?? {})))
  }
  fibers.push(await ctx.plugin(toolPty, toolPty.Config.parse(options.toolPty ?? {})))
  const agent = await ctx.agents.create()
  const other = await ctx.agents.create()
  let calls = 0
  const call: Harness['call'] = (name, input, callOptions = {}) =>
    ctx.tools.execute(name, input, {
      agent: callOptions.agent ?? agent,
      signal: callOptions.signal ?? new AbortController().signal,
      callId: `call-${++calls}`,
      ...(callOptions.progress && { progress: callOptions.progress }),
    })
  return {
    ctx,
    agent,
    other,
    logged,
    call,
    async text(name, input, callOptions) {
      const result = await call(name, input, callOptions)
      return result.content.map((item) => item.text).join('\n')
    },
    async dispose() {
      await ctx.agents.dispose(agent)
      await ctx.agents.dispose(other)
      for (const fiber of fibers.reverse()) await fiber.dispose()
    },
  }
}
