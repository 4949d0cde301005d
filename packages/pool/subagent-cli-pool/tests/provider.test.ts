/**
 * The provider in a real composition: ctx.subagents, ctx.ptyPool with the real Codex TUI — by
 * default a conch terminal of the parent agent (ctx.pty + pty-local, under its read-only policy
 * through bubblewrap) — and the real Codex one-shot provider (`codex app-server`) as the
 * fresh-spawn path, all against the fake model server.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { Context } from 'cordis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService from '@conch/pty'
import * as ptyLocal from '@conch/pty-local'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubagentService from '@conch/subagent'
import * as codex from '@conch/subagent-codex'
import SubprocessService from '@conch/subprocess'
import ToolsService from '@conch/tools'
import * as ptyPool from '@conch/pty-pool'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { CODEX_BIN, codexKind, startModel, tempDir } from '@conch/test-support/products'
import * as cliPool from '../src/index.ts'

let model: FakeModelServer
let ctx: Context
let parent: Agent
let other: Agent
const fibers: { dispose(): Promise<void> }[] = []
const dir = tempDir('cli-pool-')
// Codex refuses to install its sandbox helper under the child's temp dir: its homes live elsewhere.
const codexHomes = mkdtempSync('/var/tmp/conch-cli-pool-')
// The pool's state folder stays out of the workspace (`dir`), or the pool refuses it at load.
const poolState = tempDir('cli-pool-state-')

beforeAll(async () => {
  model = await startModel()
  process.env.FAKE_API_KEY = 'dummy'
  ctx = new Context()
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  fibers.push(await ctx.plugin(SandboxService, {}))
  fibers.push(await ctx.plugin(sandboxLocal, sandboxLocal.Config.parse({})))
  fibers.push(await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: 'read-only', workspaceRoot: dir })))
  fibers.push(await ctx.plugin(PtyService, PtyService.Config.parse({})))
  fibers.push(await ctx.plugin(ptyLocal, ptyLocal.Config.parse({})))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  fibers.push(await ctx.plugin(codex, codex.Config.parse({
    executable: CODEX_BIN,
    homeRoot: codexHomes,
    env: ['FAKE_API_KEY'],
    config: {
      model: 'gpt-5.5',
      model_provider: 'fake',
      model_providers: { fake: { name: 'fake', base_url: model.openaiBaseUrl, wire_api: 'responses', env_key: 'FAKE_API_KEY', request_max_retries: 0, stream_max_retries: 0 } },
    },
  })))
  fibers.push(await ctx.plugin(ptyPool, { kinds: { codex: codexKind(model) }, stateDir: `${poolState}/state`, cwd: dir, stallMs: 2000 }))
  fibers.push(await ctx.plugin(cliPool, cliPool.Config.parse({ kind: 'codex' })))
  parent = await ctx.agents.create({ workspaceRoot: dir })
  other = await ctx.agents.create({ workspaceRoot: dir })
}, 60_000)

afterAll(async () => {
  await ctx.agents.dispose(parent)
  await ctx.agents.dispose(other)
  for (const fiber of fibers.reverse()) await fiber.dispose()
  await model.close()
  for (const folder of [codexHomes, poolState, dir]) rmSync(folder, { recursive: true, force: true })
}, 60_000)

async function ask(agent: Agent, text: string) {
  const run = await ctx.subagents.start('cli-pool', { parent: agent, prompt: [{ type: 'text', text }] })
  const result = await run.result
  await run.dispose()
  return { ...result, text: result.output.map((block) => block.text).join('') }
}

describe('subagent-cli-pool', { timeout: 60_000 }, () => {
  it('answers through a warm session per conversation, and says so', async () => {
    const first = await ask(parent, 'Q1: through the provider')
    expect(first).toMatchObject({ stopReason: 'completed', text: 'answer 1: through the provider\n\n[pool: new warm session]' })
    const second = await ask(parent, 'Q2: again')
    expect(second.text).toBe('answer 2: again\n\n[pool: warm session reused]')
    const elsewhere = await ask(other, 'Q3: another conversation')
    expect(elsewhere.text).toBe('answer 3: another conversation\n\n[pool: new warm session]')
    expect(ctx.ptyPool.pool.sessionStates()).toHaveLength(2)
    // Each CLI runs for the parent that asked, and is none of the parent's own terminals.
    expect(ctx.ptyPool.pool.sessionStates().map((session) => session.key.owner).sort()).toEqual([parent.id, other.id].sort())
    expect(ctx.pty.list(parent)).toEqual([])
    expect(ctx.pty.list(other)).toEqual([])
  })

  it('falls back to the real one-shot Codex provider on a stall, with the note and a failure line', async () => {
    const result = await ask(parent, 'STALL then fall back')
    expect(result.diagnostic).toBeUndefined()
    expect(result.stopReason).toBe('completed')
    expect(result.text).toBe('fresh answer\n\n[pool: fell back to a fresh spawn — stall after 2 s]')
    model.release()
    expect(ctx.ptyPool.pool.readFailures()).toMatchObject([{ reason: 'stall', midTask: true, fallback: 'ok', key: { kind: 'codex', owner: parent.id, conversation: parent.session.id } }])
  })

  it('a cancelled run settles aborted and its CLI is gone', async () => {
    await ask(parent, 'Q4: warm first')
    const controller = new AbortController()
    const run = await ctx.subagents.start('cli-pool', { parent, prompt: [{ type: 'text', text: 'SLOW to cancel' }], signal: controller.signal })
    await model.waitFor((requests) => requests.some((request) => request.userText.includes('SLOW to cancel') && request.chunksSent >= 1))
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
    expect(ctx.ptyPool.pool.sessionStates().filter((session) => session.key.conversation === parent.session.id)).toEqual([])
  })

  it('refuses an unknown kind at load', () => {
    expect(() => cliPool.cliPoolProvider(ctx.ptyPool.pool, ctx.subagents, cliPool.Config.parse({ kind: 'nope' }))).toThrow(/unknown pool kind "nope"/)
  })
})
