/**
 * The conch terminal stack a pooled CLI runs in, composed for a test: sessions, tools, the LLM
 * seam, agents, subprocesses, the sandbox seam with bubblewrap (sandbox-local) under the given
 * policy, ctx.pty and pty-local. `load` adds one more plugin the same way (the pool itself).
 * Every fiber is pushed to `fibers`, for the test to dispose in reverse.
 */
import { Context } from 'cordis'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import path from 'node:path'
import { afterAll, afterEach, beforeAll } from 'vitest'
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
import { policyTerminals, type TerminalFactory } from '../src/index.ts'

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

/**
 * `terminal: unconfined`'s terminals as the plugin wires them in-process: ctx.pty over pty-local,
 * each CLI under `danger-full-access` through `policyTerminals`. The stack is built in this
 * file's `beforeAll` and disposed in its `afterAll`.
 */
export function unconfinedTerminals(): TerminalFactory {
  const fibers: { dispose(): Promise<void> }[] = []
  let terminals: TerminalFactory | undefined
  beforeAll(async () => {
    const { root } = await terminalStack(fibers, {}, { subprocess: false })
    terminals = policyTerminals({ pty: root.pty, sessions: root.sessions, sandboxPolicy: root.sandboxPolicy }).terminals
  })
  afterAll(async () => {
    for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
  })
  return (options) => {
    if (terminals === undefined) throw new Error('unconfinedTerminals() is used before its beforeAll ran')
    return terminals(options)
  }
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

/**
 * A test file's scratch for compositions with a pool state home of their own: after each test the
 * fibers pushed to `fibers` are disposed (newest first), the folders made by `folder()` or pushed
 * to `made` removed, and `XDG_STATE_HOME` put back as it was before `stateHome` changed it.
 */
export function poolScratch(): { fibers: { dispose(): Promise<void> }[]; made: string[]; folder(prefix: string): string; stateHome(dir: string): void } {
  const fibers: { dispose(): Promise<void> }[] = []
  const made: string[] = []
  let saved: { value: string | undefined } | undefined
  afterEach(async () => {
    for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
    if (saved !== undefined) {
      if (saved.value === undefined) delete process.env.XDG_STATE_HOME
      else process.env.XDG_STATE_HOME = saved.value
      saved = undefined
    }
  })
  return {
    fibers,
    made,
    // Outside /tmp, which each sandbox replaces with a private one.
    folder: (prefix) => {
      const dir = realpathSync(mkdtempSync(path.join('/var/tmp', prefix)))
      made.push(dir)
      return dir
    },
    stateHome: (dir) => {
      saved ??= { value: process.env.XDG_STATE_HOME }
      process.env.XDG_STATE_HOME = dir
    },
  }
}
