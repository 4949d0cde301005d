/**
 * The conch terminal stack a pooled CLI runs in, composed for a test: sessions, tools, the LLM
 * seam, agents, subprocesses, the sandbox seam with bubblewrap (sandbox-local) under the given
 * policy, ctx.pty and pty-local. `load` adds one more plugin the same way (the pool itself).
 * Every fiber is pushed to `fibers`, for the test to dispose in reverse.
 */
import { Context } from 'cordis'
import { afterAll, beforeAll } from 'vitest'
import AgentService from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService from '@conch/pty'
import * as ptyLocal from '@conch/pty-local'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubprocessService, { type SubprocessServiceApi } from '@conch/subprocess'
import ToolsService from '@conch/tools'

export interface Stack {
  root: Context
  load(plugin: unknown, config: unknown): Promise<void>
}

/** `policy`: the sandbox-policy config (`mode`, `workspaceRoot`, …). `subprocess: false` leaves ctx.subprocess out. */
export async function terminalStack(fibers: { dispose(): Promise<void> }[], policy: Record<string, unknown>, options: { subprocess?: boolean } = {}): Promise<Stack> {
  const root = new Context()
  const load = async (plugin: unknown, config: unknown): Promise<void> => {
    fibers.push(await root.plugin(plugin as never, config as never))
  }
  await load(SessionService, {})
  await load(ToolsService, {})
  await load(LlmService, {})
  await load(AgentService, {})
  if (options.subprocess !== false) await load(SubprocessService, {})
  await load(SandboxService, {})
  await load(sandboxLocal, {})
  await load(SandboxPolicyService, policy)
  await load(PtyService, {})
  await load(ptyLocal, {})
  return { root, load }
}

/** A file's own Context with ctx.subprocess: loaded in `beforeAll`, disposed in `afterAll`. */
export function subprocessContext(): { readonly ctx: Context; readonly subprocess: SubprocessServiceApi } {
  let ctx: Context | undefined
  let fiber: { dispose(): Promise<void> } | undefined
  beforeAll(async () => {
    ctx = new Context()
    fiber = await ctx.plugin(SubprocessService, SubprocessService.Config.parse({}))
  })
  afterAll(async () => {
    await fiber?.dispose()
  })
  const loaded = (): Context => {
    if (ctx === undefined) throw new Error('subprocessContext() is read before its beforeAll ran')
    return ctx
  }
  return {
    get ctx() {
      return loaded()
    },
    get subprocess() {
      return loaded().subprocess
    },
  }
}
