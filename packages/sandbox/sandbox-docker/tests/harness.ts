/**
 * Terminals and run_code in containers against the real daemon: a composition of the sandbox seam
 * with the Docker provider, sandbox-policy, ctx.pty and pty-local, driven through ctx.pty as tools
 * do; with `runCode`, also ctx.subprocess, the terminal tools, ctx.ptc, ptc-node (config `ptc`) and
 * run_code.
 * Where the daemon or the test image cannot be had, `dockerSkip` (@conch/test-support/docker)
 * says why and the tests skip.
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
import SandboxService from '@conch/sandbox'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubprocessService from '@conch/subprocess'
import { docker, dockerSkip, TEST_IMAGE } from '@conch/test-support/docker'
import * as toolPtc from '@conch/tool-ptc'
import * as toolPty from '@conch/tool-pty'
import ToolsService from '@conch/tools'
import * as sandboxDocker from '../src/index.ts'

export { docker, dockerSkip }
export const IMAGE = TEST_IMAGE

/** The containers conch labelled for `agent` (any state). */
export async function containersOf(agentKey: string) {
  return docker.listContainers({ all: true, filters: { label: [`${sandboxDocker.LABEL.agent}=${agentKey}`] } })
}

export async function compose(
  options: { mode?: 'read-only' | 'workspace-write'; runCode?: boolean; ptc?: Record<string, unknown>; docker?: Record<string, unknown>; policy?: Record<string, unknown>; workspace?: string; egress?: sandboxDocker.DockerProviderOptions['startEgressProxy'] } = {},
) {
  const workspace = options.workspace ?? realpathSync(mkdtempSync(join(tmpdir(), 'conch-docker-ws-')))
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  const load = async (plugin: unknown, config: unknown) => void fibers.push(await ctx.plugin(plugin as never, config as never))
  await load(SessionService, {})
  await load(ToolsService, {})
  await load(LlmService, {})
  await load(AgentService, {})
  await load(SandboxService, {})
  const egress = options.egress === undefined ? {} : { startEgressProxy: options.egress }
  await load({ name: 'sandbox-docker', inject: ['sandbox'], apply: (inner: Context) => sandboxDocker.apply(inner, sandboxDocker.Config.parse({ image: IMAGE, ...options.docker }), egress) }, {})
  await load(SandboxPolicyService, { mode: options.mode ?? 'workspace-write', workspaceRoot: workspace, ...options.policy })
  await load(PtyService, {})
  await load(ptyLocal, ptyLocal.Config.parse({}))
  if (options.runCode === true) {
    await load(SubprocessService, SubprocessService.Config.parse({ graceMs: 1000 }))
    await load(toolPty, toolPty.Config.parse({ enableRunInBackground: false }))
    await load(PtcService, PtcService.Config.parse({}))
    await load(ptcNode, ptcNode.Config.parse({ graceMs: 1000, ...options.ptc }))
    await load(toolPtc, toolPtc.Config.parse({}))
  }
  let calls = 0
  return {
    ctx,
    pty: ctx.pty,
    agents: ctx.agents,
    workspace,
    agent: () => ctx.agents.create(),
    send: (agent: Agent, id: string, text: string, submit = true) => ctx.pty.startSend(agent, id, { text, submit }).done,
    /** A tool call of `agent` (with `runCode`: run_code and the terminal tools). */
    call: (agent: Agent, name: string, input: unknown) => ctx.tools.execute(name, input, { agent, signal: new AbortController().signal, callId: `call-${++calls}` }),
    async dispose() {
      for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
      if (options.workspace === undefined) rmSync(workspace, { recursive: true, force: true })
    },
  }
}
