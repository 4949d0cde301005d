/**
 * An in-process conch composition served over ACP, and an ACP client (the SDK's `client()`)
 * connected to it through a pair of in-memory pipes: sessions, tools, llm with the scripted
 * model, agents, tasks, ctx.pty with the memory backend and the terminal tools.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { client, methods, ndJsonStream, type ClientContext, type SessionNotification, type SessionUpdate } from '@agentclientprotocol/sdk'
import { Context } from 'cordis'
import AgentService from '@conch/agent'
import LlmService from '@conch/llm'
import * as replay from '@conch/llm-replay'
import PtyService from '@conch/pty'
import * as memory from '@conch/pty-memory'
import SessionService from '@conch/session'
import TasksService from '@conch/tasks'
import * as toolPty from '@conch/tool-pty'
import * as toolTasks from '@conch/tool-tasks'
import ToolsService from '@conch/tools'
import { readableFrom, runAcp, writableTo, type ConfigInput } from '../src/index.ts'

export type ScriptLine = { text?: string; tool_calls?: { name: string; arguments: Record<string, unknown> }[] }

export interface Harness {
  ctx: Context
  /** The client side, connected and not yet initialized. */
  agent: ClientContext
  /** Every `session/update` the client received, in order. */
  notifications: SessionNotification[]
  /** Updates of one session, in order. */
  updates(sessionId: string): SessionUpdate[]
  /** Resolves once an update matching `match` has arrived (already or later). */
  waitForUpdate(match: (notification: SessionNotification) => boolean): Promise<SessionNotification>
  /** Every line written to the agent's output, parsed. */
  frames: unknown[]
  /** Errors and warnings the composition logged. */
  logged: string[]
  /** A folder for session cwds. */
  workspace: string
  /** Resolves when `runAcp` returned. */
  served: Promise<void>
  /** Ends the agent's input (the client went away). */
  endInput(): void
  /** Aborts `runAcp`'s signal (SIGTERM). */
  stop(): void
  dispose(): Promise<void>
}

export interface BootOptions {
  script: ScriptLine[]
  acp?: ConfigInput
  /** `runAcp`'s `workspaceProblem`. */
  workspaceProblem?: (cwd: string) => string | undefined
  agents?: Record<string, unknown>
  memory?: Record<string, unknown>
}

/** The composition alone, not served: its context, a workspace folder, and its disposal. */
export interface Composed {
  ctx: Context
  logged: string[]
  workspace: string
  dispose(): Promise<void>
}

export async function compose(options: Omit<BootOptions, 'acp'>): Promise<Composed> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-acp-'))
  const workspace = join(dir, 'workspace')
  writeFileSync(join(dir, 'script.jsonl'), options.script.map((line) => JSON.stringify(line)).join('\n') + '\n')
  mkdirSync(workspace)

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
  fibers.push(await ctx.plugin(LlmService, { provider: 'replay' }))
  fibers.push(await ctx.plugin(replay, replay.Config.parse({ script: join(dir, 'script.jsonl') })))
  fibers.push(await ctx.plugin(TasksService, TasksService.Config.parse({})))
  fibers.push(await ctx.plugin(toolTasks, toolTasks.Config.parse({})))
  fibers.push(await ctx.plugin(PtyService, PtyService.Config.parse({})))
  fibers.push(await ctx.plugin(memory, memory.Config.parse(options.memory ?? {})))
  fibers.push(await ctx.plugin(toolPty, toolPty.Config.parse({})))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse(options.agents ?? {})))
  return {
    ctx,
    logged,
    workspace,
    async dispose() {
      for (const fiber of fibers.reverse()) await fiber.dispose()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

export async function boot(options: BootOptions): Promise<Harness> {
  const composed = await compose(options)
  const { ctx, logged, workspace } = composed
  const toAgent = new PassThrough()
  const fromAgent = new PassThrough()
  const frames: unknown[] = []
  let buffered = ''
  fromAgent.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8')
    let newline: number
    while ((newline = buffered.indexOf('\n')) !== -1) {
      frames.push(JSON.parse(buffered.slice(0, newline)))
      buffered = buffered.slice(newline + 1)
    }
  })
  const controller = new AbortController()
  const served = runAcp({
    ctx,
    input: toAgent,
    output: fromAgent,
    signal: controller.signal,
    ...(options.acp && { config: options.acp }),
    ...(options.workspaceProblem && { workspaceProblem: options.workspaceProblem }),
  })

  const notifications: SessionNotification[] = []
  const waiters: { match: (n: SessionNotification) => boolean; resolve: (n: SessionNotification) => void }[] = []
  const app = client({ name: 'conch-test' }).onNotification(methods.client.session.update, ({ params }) => {
    notifications.push(params)
    for (const waiter of [...waiters]) {
      if (waiter.match(params)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(params)
      }
    }
  })
  // The client reads what the agent writes and writes what the agent reads.
  const connection = app.connect(ndJsonStream(writableTo(toAgent), readableFrom(fromAgent)))

  return {
    ctx,
    agent: connection.agent,
    notifications,
    updates: (sessionId) => notifications.filter((n) => n.sessionId === sessionId).map((n) => n.update),
    waitForUpdate(match) {
      const found = notifications.find(match)
      if (found) return Promise.resolve(found)
      return new Promise((resolve) => waiters.push({ match, resolve }))
    },
    frames,
    logged,
    workspace,
    served,
    endInput: () => toAgent.end(),
    stop: () => controller.abort(new Error('stopped')),
    async dispose() {
      controller.abort(new Error('test over'))
      await served.catch(() => undefined)
      connection.close()
      await composed.dispose()
    },
  }
}

/** `initialize` as a minimal client sends it. */
export function initialize(agent: ClientContext) {
  return agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: 'conch-test', version: '0' } })
}

/** The rejection of `promise` (fails the test when it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<{ code: number; message: string; data?: unknown }> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  )
  if (!('error' in outcome)) throw new Error(`expected a rejection, got ${JSON.stringify(outcome.value)}`)
  return outcome.error as { code: number; message: string; data?: unknown }
}
