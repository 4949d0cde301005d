/**
 * `ctx.agents`: creates and disposes agents (owner identity + scope + cleanups), holds the
 * system-prompt sections and runs turns of the agent loop.
 */
import { Service, type Context, type Logger } from 'cordis'
import { z } from 'zod'
import type { LlmServiceApi } from '@conch/llm'
import { messageOf, registerListed, type SessionLog, type SessionServiceApi } from '@conch/session'
import type { ToolsServiceApi } from '@conch/tools'
import { AgentHandle } from './agent.ts'
import { runTurn } from './loop.ts'
import { renderNotifications } from './notification.ts'
import { AgentError, type Agent, type AgentServiceApi, type PromptSection, type RunOptions, type RunResult } from './types.ts'

declare module 'cordis' {
  interface Context {
    agents: AgentService
  }
}

/** The base section of every system prompt: what conch is and how its terminals behave. */
export const DEFAULT_INSTRUCTIONS = [
  'You are conch, an agent that works through persistent, interactive terminals: a terminal keeps its directory, variables, programs and REPLs between calls, so build on earlier commands.',
  'Read each result before sending more; interrupt a stuck program with a signal rather than opening another terminal; close terminals you no longer need.',
  'Stay inside the workspace. When done, answer with a short summary of what you did and found.',
].join('\n')

/** Section id and order of the configured `instructions`; sections without an `order` use 0. */
export const INSTRUCTIONS_SECTION = { id: 'instructions', order: -100 } as const

class AgentService extends Service implements AgentServiceApi {
  static inject = ['sessions', 'tools', 'llm']

  static Config = z
    .strictObject({
      maxSteps: z.number().int().min(1).default(50).describe('Model calls per turn before it ends with max_steps.'),
      wakeWaitMs: z
        .number()
        .int()
        .min(0)
        .default(600_000)
        .describe('How long a run waits, after the model ended its turn, for a notification from work it asked to be woken by (notify); 0 never waits.'),
      instructions: z
        .string()
        .default(DEFAULT_INSTRUCTIONS)
        .describe('The base section of the system prompt (order -100); empty to leave it out.'),
    })
    .prefault({})

  private readonly agents = new Map<string, AgentHandle>()
  private readonly sections: PromptSection[] = []
  private counter = 0
  private readonly sessions: SessionServiceApi
  private readonly tools: ToolsServiceApi
  private readonly llm: LlmServiceApi
  private readonly logger: Logger

  constructor(ctx: Context, public config: AgentService.Config) {
    super(ctx, 'agents')
    // Held here because methods run with the caller's context, which need not inject them.
    this.sessions = ctx.sessions
    this.tools = ctx.tools
    this.llm = ctx.llm
    this.logger = ctx.logger('agents')
    this.sections.push({ ...INSTRUCTIONS_SECTION, render: () => this.config.instructions })
    ctx.effect(() => () => this.disposeAll(), 'agents.disposeAll')
  }

  async create(options: { session?: SessionLog; workspaceRoot?: string } = {}): Promise<Agent> {
    const session =
      options.session ?? this.sessions.create(options.workspaceRoot === undefined ? {} : { workspaceRoot: options.workspaceRoot })
    const agent = new AgentHandle(`agent-${++this.counter}`, session, options.session === undefined)
    this.agents.set(agent.id, agent)
    try {
      agent.scope = await this.ctx.plugin({
        name: `agent`,
        apply: (scope: Context) => {
          agent.ctx = scope
          return () => this.scopeDisposed(agent)
        },
      })
    } catch (error) {
      this.agents.delete(agent.id)
      if (agent.ownsSession) this.sessions.close(session.id)
      throw error
    }
    return agent
  }

  dispose(agent: Agent): Promise<void> {
    const handle = agent instanceof AgentHandle ? agent : undefined
    if (!handle || (this.agents.get(handle.id) !== handle && !handle.disposal)) {
      return Promise.reject(new AgentError('NO_AGENT', { agent: agent.id }))
    }
    handle.disposal ??= this.teardown(handle, true)
    return handle.disposal
  }

  get(id: string): Agent | undefined {
    return this.agents.get(id)
  }

  list(): Agent[] {
    return [...this.agents.values()]
  }

  section(section: PromptSection): () => void {
    return registerListed(this.ctx, this.sections, section, `agents.section(${section.id})`)
  }

  systemPrompt(agent: Agent): string {
    const ordered = [...this.sections].sort((a, b) => (a.order ?? 0) - (b.order ?? 0) || compare(a.id, b.id))
    const texts: string[] = []
    for (const section of ordered) {
      let text: string | undefined
      try {
        text = section.render(agent)
      } catch (error) {
        this.logger.warn('system-prompt section %s failed and was left out: %s', section.id, error)
        continue
      }
      if (text !== undefined && text.trim() !== '') texts.push(text.trim())
    }
    return texts.join('\n\n')
  }

  run(agent: Agent, options: RunOptions): Promise<RunResult> {
    const handle = agent instanceof AgentHandle ? agent : undefined
    if (handle && handle.state !== 'live') {
      return Promise.reject(new AgentError('AGENT_NOT_LIVE', { agent: agent.id, state: handle.state, next: 'create a new agent' }))
    }
    if (!handle || this.agents.get(handle.id) !== handle) {
      return Promise.reject(new AgentError('NO_AGENT', { agent: agent.id }))
    }
    if (handle.turn) {
      return Promise.reject(new AgentError('TURN_ACTIVE', { agent: agent.id }))
    }
    const turn = this.turns(handle, options)
    handle.turn = turn
    const release = () => {
      if (handle.turn === turn) handle.turn = undefined
    }
    turn.then(release, release)
    return turn
  }

  /**
   * Runs a turn, then, while work the model asked to be woken by holds the run open, waits (up to
   * `wakeWaitMs`) for its notification and runs another turn with it as the prompt.
   */
  private async turns(handle: AgentHandle, options: RunOptions): Promise<RunResult> {
    const deps = {
      tools: this.tools,
      llm: this.llm,
      maxSteps: this.config.maxSteps,
      systemPrompt: (owner: AgentHandle) => this.systemPrompt(owner),
      logger: this.logger,
    }
    const signal = options.signal ? AbortSignal.any([handle.signal, options.signal]) : handle.signal
    let result = await runTurn(deps, handle, options)
    let steps = result.steps
    const waiting = (tasks: number) => options.onEvent?.({ type: 'waiting', tasks, timeoutMs: this.config.wakeWaitMs })
    while (result.status === 'completed' && (await handle.wake(this.config.wakeWaitMs, signal, waiting))) {
      const woken = handle.deliver()
      result = await runTurn(deps, handle, { ...options, prompt: renderNotifications(woken) }, woken)
      steps += result.steps
    }
    // Cancelled while it waited to be woken: the run did not complete.
    if (result.status === 'completed' && options.signal?.aborted === true) return { ...result, status: 'cancelled', steps }
    return { ...result, steps }
  }

  /** Called by Cordis when the agent's scope unloads: by `teardown`, or because its parent plugin unloaded. */
  private scopeDisposed(agent: AgentHandle): Promise<void> | undefined {
    if (agent.disposal) return undefined
    agent.disposal = this.teardown(agent, false)
    return agent.disposal
  }

  private async teardown(agent: AgentHandle, disposeScope: boolean): Promise<void> {
    agent.state = 'disposing'
    agent.controller.abort(new AgentError('AGENT_DISPOSED', { agent: agent.id }))
    const failures: unknown[] = []
    try {
      if (agent.turn) await agent.turn.catch(() => {})
      for (const cleanup of agent.cleanups.splice(0).reverse()) {
        try {
          await cleanup.run()
        } catch (error) {
          failures.push(error)
        }
      }
      if (disposeScope && agent.scope) {
        try {
          await agent.scope.dispose()
        } catch (error) {
          failures.push(error)
        }
      }
      if (agent.ownsSession) this.sessions.close(agent.session.id)
    } finally {
      agent.state = 'disposed'
      if (this.agents.get(agent.id) === agent) this.agents.delete(agent.id)
    }
    if (failures.length > 0) {
      throw new AggregateError(failures, `${failures.length} cleanup(s) of agent ${agent.id} failed: ${failures.map(messageOf).join('; ')}`)
    }
  }

  private async disposeAll(): Promise<void> {
    const results = await Promise.allSettled(this.list().map((agent) => this.dispose(agent)))
    for (const result of results) {
      if (result.status === 'rejected') this.logger.warn('disposing an agent failed: %s', messageOf(result.reason))
    }
  }
}

namespace AgentService {
  export type Config = z.output<typeof AgentService.Config>
}

export default AgentService

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

