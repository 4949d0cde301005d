/**
 * A real Cordis composition for running programs: sessions, tools, llm, agents, subprocess,
 * sandbox (+ the bubblewrap provider), sandbox-policy, ctx.ptc and the node runtime — and a
 * live agent whose workspace is a fresh temporary folder.
 */
import { randomBytes } from 'node:crypto'
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { afterAll } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtcService, { type PtcBinding, type PtcRequest, type PtcResult } from '@conch/ptc'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubprocessService from '@conch/subprocess'
import ToolsService from '@conch/tools'
import * as ptcNode from '../src/index.ts'
import { DEFAULT_BOOTSTRAP } from '../src/launch.ts'

export interface Harness {
  ctx: Context
  agent: Agent
  workspace: string
  run(request: PtcRequest | string, options?: { bindings?: PtcBinding[]; signal?: AbortSignal; agent?: Agent }): Promise<PtcResult>
  /** Disposes the agents and the plugins (reverse order), then removes the workspace. */
  dispose(): Promise<void>
}

export interface BootOptions {
  runtime?: Record<string, unknown>
  mode?: 'read-only' | 'workspace-write' | 'danger-full-access'
  sandboxLocal?: Record<string, unknown> | false
  /** sandbox-policy's `network` and `allow`. */
  network?: { network: 'none' | 'allow' | 'full'; allow?: string[] }
  /** The agents' egress proxy sandbox-local starts under network `allow` (its own, unless given). */
  egress?: Parameters<typeof sandboxLocal.apply>[2]
}

export async function boot(options: BootOptions = {}): Promise<Harness> {
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-ptc-')))
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({ graceMs: 1000 })))
  fibers.push(await ctx.plugin(SandboxService, {}))
  const local = options.egress === undefined ? sandboxLocal : { ...sandboxLocal, apply: (scope: Context, config: sandboxLocal.Config) => sandboxLocal.apply(scope, config, options.egress) }
  if (options.sandboxLocal !== false) fibers.push(await ctx.plugin(local, sandboxLocal.Config.parse(options.sandboxLocal ?? {})))
  fibers.push(await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: options.mode ?? 'workspace-write', workspaceRoot: workspace, ...options.network })))
  fibers.push(await ctx.plugin(PtcService, PtcService.Config.parse({})))
  fibers.push(await ctx.plugin(ptcNode, ptcNode.Config.parse({ graceMs: 1000, ...options.runtime })))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  const agent = await ctx.agents.create()
  return {
    ctx,
    agent,
    workspace,
    run(request, runOptions = {}) {
      const owner = runOptions.agent ?? agent
      const spec = ctx.ptc.resolve(typeof request === 'string' ? { code: request } : request, owner)
      return ctx.ptc.run(spec, { bindings: runOptions.bindings ?? [], ...(runOptions.signal && { signal: runOptions.signal }) })
    },
    async dispose() {
      for (const live of ctx.agents.list()) await ctx.agents.dispose(live)
      for (const fiber of fibers.reverse()) await fiber.dispose()
      rmSync(workspace, { recursive: true, force: true })
    },
  }
}

/** Whether a process with this pid exists (signal 0, kill(2)). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Pids of processes whose command line contains `token` (/proc/<pid>/cmdline, proc(5)),
 * zombies excluded. A unique token in an argv finds a process on the host whatever its pid
 * namespace.
 */
export function processesWith(token: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
      if (cmdline.includes(token) && state !== 'Z') found.push(Number(entry))
    } catch {
      // Gone while listing.
    }
  }
  return found
}

/** The folders `privateBootstrap` made in this test file, removed after its last test. */
const bootstrapFolders: string[] = []
afterAll(() => {
  for (const dir of bootstrapFolders.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A copy of the bootstrap at a unique path, so this file's program processes can be counted by their argv. */
export function privateBootstrap(): string {
  // Not under /tmp: the sandbox mounts a private /tmp, where the copy would not exist.
  const dir = mkdtempSync('/var/tmp/conch-ptc-bootstrap-')
  bootstrapFolders.push(dir)
  const path = join(dir, `bootstrap-${randomBytes(6).toString('hex')}.cjs`)
  copyFileSync(DEFAULT_BOOTSTRAP, path)
  return path
}

/** A unique token for a sleep argv: `sleep 1000.<digits>` is a valid GNU sleep duration. */
export function sleepToken(): string {
  return `1000.${Math.floor(Math.random() * 1e9)}`
}

