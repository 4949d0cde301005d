/**
 * What the tests of an out-of-process provider share (`@conch/test-support/harness`): a real
 * composition — the spine, ctx.subprocess, ctx.sandboxPolicy when a mode is given, ctx.subagents
 * and the provider under test — and the process-table check that nothing a test started is
 * left behind.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
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

/** Boots the composition with `provider` (a plugin, e.g. a provider's module namespace) and its parsed `config`. */
export async function bootProvider(provider: object, config: unknown, options: ProviderHarnessOptions): Promise<ProviderHarness> {
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
  fibers.push(await ctx.plugin(provider as Plugin, config as never))
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
 * `/proc/<pid>/environ` (NUL-separated `NAME=value`; throws when the process is gone or not
 * readable). Mid-execve the file reads empty until the new image has laid its environment out
 * (stat field 51, `env_end`, still 0 in a user task: proc(5)); it is read again then, 1 ms apart,
 * for at most 20 ms. `stat` is the process's stat line when the caller has read it already.
 */
export function environOf(pid: number | string, stat = readFileSync(`/proc/${pid}/stat`, 'utf8')): string {
  let text = readFileSync(`/proc/${pid}/environ`, 'latin1')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const kernelThread = (Number(fields[9 - 3]) & 0x00200000) !== 0
  for (let attempt = 0; text === '' && !kernelThread && attempt < 20; attempt++) {
    const now = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const midExec = now.slice(now.lastIndexOf(')') + 2).split(' ')[51 - 3] === '0'
    if (midExec) Atomics.wait(PAUSE, 0, 0, 1)
    text = readFileSync(`/proc/${pid}/environ`, 'utf8')
    if (!midExec) break
  }
  return text
}
const PAUSE = new Int32Array(new SharedArrayBuffer(4))

/** Live (non-zombie) processes whose initial environment carries `variable=value`, from /proc (proc(5): stat, environ). */
export function markedProcesses(variable: string, value: string): number[] {
  const needle = `${variable}=${value}`
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue
      if (environOf(name, stat).split('\0').includes(needle)) found.push(Number(name))
    } catch {
      // gone while listing, or not ours to read
    }
  }
  return found
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
