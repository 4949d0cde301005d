/**
 * What the tests of an out-of-process provider share (`@conch/test-support/harness`): a real
 * composition — the spine, ctx.subprocess, ctx.sandboxPolicy when a mode is given, ctx.subagents
 * and the provider under test; `procs.ts` holds the process-table check that nothing a test
 * started is left behind.
 */
import { randomBytes } from 'node:crypto'
import { Context, type Plugin } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubagentService, { type SubagentRun, type SubagentUpdate } from '@conch/subagent'
import SubprocessService from '@conch/subprocess'
import ToolsService from '@conch/tools'

export interface ProviderHarness {
  ctx: Context
  /** The parent agent, in `workspaceRoot`. */
  agent: Agent
  /** Disposes the agent, then every plugin in reverse order. */
  dispose(): Promise<void>
}

export interface ProviderHarnessOptions {
  workspaceRoot: string
  /** The parent's sandbox mode (`@conch/sandbox-policy`); without it the composition has no policy service. */
  mode?: 'read-only' | 'workspace-write' | 'danger-full-access'
}

/** Boots the composition with `providers`: each a plugin (e.g. a provider's module namespace) and its parsed config. */
export async function bootProvider(providers: readonly (readonly [provider: object, config: unknown])[], options: ProviderHarnessOptions): Promise<ProviderHarness> {
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  if (options.mode !== undefined) {
    fibers.push(await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: options.mode, workspaceRoot: options.workspaceRoot })))
  }
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  for (const [provider, config] of providers) fibers.push(await ctx.plugin(provider as Plugin, config as never))
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

/**
 * Starts a run of `provider` with a one-block text prompt from the harness's agent and collects
 * its updates; `streamed(text)` resolves once the streamed text contains `text`.
 */
export async function startRun(h: ProviderHarness, provider: string, text: string, signal?: AbortSignal) {
  const updates: SubagentUpdate[] = []
  const waiters = new Set<() => void>()
  const streamedText = () => updates.map((update) => (update.type === 'text' ? update.text : '')).join('')
  const onUpdate = (update: SubagentUpdate) => {
    updates.push(update)
    for (const waiter of [...waiters]) waiter()
  }
  const streamed = (needle: string) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (!streamedText().includes(needle)) return
        waiters.delete(check)
        resolve()
      }
      waiters.add(check)
      check()
    })
  const run: SubagentRun = await h.ctx.subagents.start(provider, { prompt: [{ type: 'text', text }], parent: h.agent, onUpdate, ...(signal ? { signal } : {}) })
  return { run, updates, streamed }
}

/**
 * A fresh value of the environment variable `variable`, set in this process's environment so a
 * provider configured with `env: [variable]` passes it on to every child it starts.
 */
export function freshMark(variable: string): string {
  const value = randomBytes(8).toString('hex')
  process.env[variable] = value
  return value
}

/**
 * A product binary for the real-product tests, as the provider resolved it. Missing: in CI
 * (CI set) a failure naming the product and `hint`; elsewhere undefined, and the tests skip
 * with the reason — run ./scripts/install-products.sh.
 */
export function productBinary(product: string, resolved: string | undefined, hint: string): string | undefined {
  if (resolved === undefined && process.env.CI) throw new Error(`the ${product} binary is missing and CI is set: ${hint}`)
  return resolved
}
