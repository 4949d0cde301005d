/**
 * A real composition for provider tests: the spine, ctx.subprocess, ctx.subagents and a
 * provider plugin; and the process-table check that nothing a test started is left.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
import { Context } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import SessionService from '@conch/session'
import SubagentService from '@conch/subagent'
import SubprocessService from '@conch/subprocess'
import ToolsService from '@conch/tools'

/** Every child of these tests gets `MARK_VARIABLE=<value>` passed through, so leftovers can be found. */
export const MARK_VARIABLE = 'SUBAGENT_TEST_MARK'

export interface Harness {
  ctx: Context
  agent: Agent
  dispose(): Promise<void>
}

/** Boots the composition with `plugin` (a provider's module namespace) mounted with `config`. */
export async function boot(plugin: object, config: Record<string, unknown>, workspaceRoot: string): Promise<Harness> {
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  fibers.push(await ctx.plugin(plugin as never, config as never))
  const agent = await ctx.agents.create({ workspaceRoot })
  return {
    ctx,
    agent,
    async dispose() {
      for (const fiber of fibers.reverse()) await fiber.dispose()
    },
  }
}

/** A fresh mark, set in this process's environment so `env: [MARK_VARIABLE]` passes it on. */
export function freshMark(): string {
  const value = randomBytes(8).toString('hex')
  process.env[MARK_VARIABLE] = value
  return value
}

/** Live (non-zombie) processes whose initial environment carries `MARK_VARIABLE=value`, from /proc. */
export function marked(value: string): number[] {
  const needle = `${MARK_VARIABLE}=${value}`
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue
      if (readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').includes(needle)) found.push(Number(name))
    } catch {
      // gone while listing, or not ours to read
    }
  }
  return found
}
