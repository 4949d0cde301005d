/**
 * Terminals in containers against the real daemon: a composition of the sandbox seam with the
 * Docker provider, sandbox-policy, ctx.pty and pty-local, driven through ctx.pty as tools do.
 * The daemon is started (scripts/start-dockerd.sh) and the image built
 * (scripts/build-test-image.sh) when they are not there; where neither can be, `dockerSkip`
 * says why and the tests skip.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService from '@conch/pty'
import * as ptyLocal from '@conch/pty-local'
import SandboxService from '@conch/sandbox'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import Docker from 'dockerode'
import * as sandboxDocker from '../src/index.ts'

export const IMAGE = process.env.CONCH_TEST_IMAGE ?? 'conch-test:bookworm'
const scripts = new URL('../../../../scripts/', import.meta.url).pathname

/** Why the container tests cannot run here, or undefined when they can (the daemon answers and the image is built). */
export const dockerSkip: string | undefined = (() => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'the container tests run as root on Linux (dockerd needs root)'
  for (const script of ['start-dockerd.sh', 'build-test-image.sh']) {
    const run = spawnSync(join(scripts, script), { encoding: 'utf8', timeout: 240_000 })
    if (run.status !== 0) return `${script} failed: ${(run.stderr || run.error?.message || '').trim()}`
  }
  return undefined
})()

export const docker = new Docker()

/** The containers conch labelled for `agent` (any state). */
export async function containersOf(agentKey: string) {
  return docker.listContainers({ all: true, filters: { label: [`${sandboxDocker.LABEL.agent}=${agentKey}`] } })
}

export interface Box {
  ctx: Context
  pty: PtyService
  agents: Context['agents']
  workspace: string
  agent(): Promise<Agent>
  send(agent: Agent, id: string, text: string, options?: { submit?: boolean }): ReturnType<ReturnType<PtyService['startSend']>['done']['then']>
  dispose(): Promise<void>
}

export async function compose(options: { mode?: 'read-only' | 'workspace-write'; docker?: Record<string, unknown>; policy?: Record<string, unknown>; workspace?: string } = {}) {
  const workspace = options.workspace ?? realpathSync(mkdtempSync(join(tmpdir(), 'conch-docker-ws-')))
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  const load = async (plugin: unknown, config: unknown) => void fibers.push(await ctx.plugin(plugin as never, config as never))
  await load(SessionService, {})
  await load(ToolsService, {})
  await load(LlmService, {})
  await load(AgentService, {})
  await load(SandboxService, {})
  await load(sandboxDocker, sandboxDocker.Config.parse({ image: IMAGE, ...options.docker }))
  await load(SandboxPolicyService, { mode: options.mode ?? 'workspace-write', workspaceRoot: workspace, ...options.policy })
  await load(PtyService, {})
  await load(ptyLocal, ptyLocal.Config.parse({}))
  return {
    ctx,
    pty: ctx.pty,
    agents: ctx.agents,
    workspace,
    agent: () => ctx.agents.create(),
    send: (agent: Agent, id: string, text: string, submit = true) => ctx.pty.startSend(agent, id, { text, submit }).done,
    async dispose() {
      for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
      if (options.workspace === undefined) rmSync(workspace, { recursive: true, force: true })
    },
  }
}
