/**
 * A real composition for run_code: the spine, subprocess, sandbox (+ bubblewrap), policy,
 * ctx.pty with the memory backend (or node-pty) and the terminal tools, ctx.ptc with the node
 * runtime, and tool-ptc — plus a live agent working in a fresh temporary folder.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtcService from '@conch/ptc'
import * as ptcNode from '@conch/ptc-node'
import PtyService from '@conch/pty'
import * as ptyLocal from '@conch/pty-local'
import * as memory from '@conch/pty-memory'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubprocessService from '@conch/subprocess'
import * as toolPty from '@conch/tool-pty'
import ToolsService, { type ToolResult } from '@conch/tools'
import * as toolPtc from '../src/index.ts'

export interface Harness {
  ctx: Context
  agent: Agent
  workspace: string
  call(name: string, input: unknown, options?: { signal?: AbortSignal; callId?: string }): Promise<ToolResult>
  text(name: string, input: unknown, options?: { signal?: AbortSignal; callId?: string }): Promise<string>
  dispose(): Promise<void>
}

export interface BootOptions {
  terminals?: 'memory' | 'local'
  toolPtc?: Record<string, unknown>
  runtime?: Record<string, unknown>
  /** sandbox-policy's `network` and `allow`. */
  network?: { network: 'none' | 'allow' | 'full'; allow?: string[] }
  /** The agents' egress proxy sandbox-local starts under network `allow` (its own, unless given). */
  egress?: Parameters<typeof sandboxLocal.apply>[2]
}

export async function boot(options: BootOptions = {}): Promise<Harness> {
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-tool-ptc-')))
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({ graceMs: 1000 })))
  fibers.push(await ctx.plugin(SandboxService, {}))
  const local = options.egress === undefined ? sandboxLocal : { ...sandboxLocal, apply: (scope: Context, config: sandboxLocal.Config) => sandboxLocal.apply(scope, config, options.egress) }
  fibers.push(await ctx.plugin(local, sandboxLocal.Config.parse({})))
  fibers.push(await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: 'workspace-write', workspaceRoot: workspace, ...options.network })))
  fibers.push(await ctx.plugin(PtyService, PtyService.Config.parse({})))
  if (options.terminals === 'local') fibers.push(await ctx.plugin(ptyLocal, ptyLocal.Config.parse({})))
  else fibers.push(await ctx.plugin(memory, memory.Config.parse({ motd: 'memory shell ready' })))
  fibers.push(await ctx.plugin(toolPty, toolPty.Config.parse({ enableRunInBackground: false })))
  fibers.push(await ctx.plugin(PtcService, PtcService.Config.parse({})))
  fibers.push(await ctx.plugin(ptcNode, ptcNode.Config.parse({ graceMs: 1000, ...options.runtime })))
  fibers.push(await ctx.plugin(toolPtc, toolPtc.Config.parse(options.toolPtc ?? {})))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  const agent = await ctx.agents.create()
  let calls = 0
  const call: Harness['call'] = (name, input, callOptions = {}) =>
    ctx.tools.execute(name, input, { agent, signal: callOptions.signal ?? new AbortController().signal, callId: callOptions.callId ?? `call-${++calls}` })
  return {
    ctx,
    agent,
    workspace,
    call,
    async text(name, input, callOptions) {
      return (await call(name, input, callOptions)).content.map((item) => item.text).join('\n')
    },
    async dispose() {
      for (const live of ctx.agents.list()) await ctx.agents.dispose(live)
      for (const fiber of fibers.reverse()) await fiber.dispose()
      rmSync(workspace, { recursive: true, force: true })
    },
  }
}
