/**
 * A real composition for the provider tests — the spine, ctx.subprocess, ctx.sandboxPolicy,
 * ctx.subagents and the Codex provider — and the process-table check that nothing a test
 * started is left.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
import { Context } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubagentService from '@conch/subagent'
import SubprocessService from '@conch/subprocess'
import ToolsService from '@conch/tools'
import * as codex from '../src/index.ts'

/** Every child gets `MARK_VARIABLE=<value>` passed through, so leftovers can be found in /proc. */
export const MARK_VARIABLE = 'CODEX_TEST_MARK'

export interface Harness {
  ctx: Context
  agent: Agent
  dispose(): Promise<void>
}

/** Boots the composition; the parent agent's session runs under `mode` in `workspaceRoot`. */
export async function boot(config: Record<string, unknown>, options: { workspaceRoot: string; mode: 'read-only' | 'workspace-write' | 'danger-full-access' }): Promise<Harness> {
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  fibers.push(await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: options.mode, workspaceRoot: options.workspaceRoot })))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  fibers.push(await ctx.plugin(codex, codex.Config.parse(config)))
  const agent = await ctx.agents.create({ workspaceRoot: options.workspaceRoot })
  return {
    ctx,
    agent,
    async dispose() {
      await ctx.agents.dispose(agent)
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

/**
 * The native codex binary for the real-product tests. Missing: in CI (CI=true) a failure,
 * elsewhere the tests are skipped with the reason printed — run ./scripts/install-products.sh.
 */
export function codexBinary(): string | undefined {
  const binary = codex.resolveCodexExecutable(undefined)
  if (binary === undefined && process.env.CI) {
    throw new Error(`the codex binary is missing and CI is set: ${codex.NOT_FOUND_HINT}`)
  }
  return binary
}
