/**
 * The conch provider against real `conch acp --script` children (and grandchildren), booted
 * from tests/fixtures/child.cordis.yml.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Context } from 'cordis'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import SessionService from '@conch/session'
import SubagentService, { type SubagentRun, type SubagentUpdate } from '@conch/subagent'
import SubprocessService from '@conch/subprocess'
import ToolsService from '@conch/tools'
import { markedProcesses } from '@conch/test-support/procs'
import * as plugin from '../src/index.ts'

// Each test starts one or two conch processes (and their shells); on a loaded machine that takes seconds.
vi.setConfig({ testTimeout: 60_000, hookTimeout: 30_000 })

const bin = fileURLToPath(new URL('../../../cli/bin/conch.js', import.meta.url))
const composition = fileURLToPath(new URL('./fixtures/child.cordis.yml', import.meta.url))
const workspace = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-conch-')))
afterAll(() => rmSync(workspace, { recursive: true, force: true }))
const MARK = 'SUBAGENT_TEST_MARK'

function script(name: string, lines: unknown[]): string {
  const path = join(workspace, `${name}.jsonl`)
  writeFileSync(path, lines.map((line) => JSON.stringify(line)).join('\n') + '\n')
  return path
}

const grandchild = script('grandchild', [{ text: 'grandchild says hi' }])
const delegating = script('delegating', [
  { text: 'asking my own sub-agent.', tool_calls: [{ name: 'subagent', arguments: { prompt: 'say hi' } }] },
  { text: 'child relayed' },
])
const answering = script('answering', [{ text: 'the answer is 42' }])
const waiting = script('waiting', [{ text: 'working on it. ', tool_calls: [{ name: 'wait_for_cancel', arguments: {} }] }, { text: 'unreachable' }])

let fibers: { dispose(): Promise<void> }[] = []
let mark = ''

afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  fibers = []
  expect(marked(mark)).toEqual([])
  delete process.env[plugin.DEPTH_VARIABLE]
  delete process.env[plugin.MAX_DEPTH_VARIABLE]
})

/** Live processes whose environment carries this test's mark (children, grandchildren, their shells). */
const marked = (value: string): number[] => markedProcesses(MARK, value)

async function boot(config: Record<string, unknown>): Promise<{ ctx: Context; agent: Agent }> {
  mark = randomBytes(8).toString('hex')
  process.env[MARK] = mark
  process.env.SUBAGENT_TEST_GRANDCHILD_SCRIPT = grandchild
  const ctx = new Context()
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  fibers.push(
    await ctx.plugin(
      plugin,
      plugin.Config.parse({
        command: [process.execPath, bin],
        config: composition,
        env: [MARK, 'SUBAGENT_TEST_GRANDCHILD_SCRIPT'],
        disposeEofGraceMs: 5000,
        disposeGraceMs: 1000,
        ...config,
      }),
    ),
  )
  return { ctx, agent: await ctx.agents.create({ workspaceRoot: workspace }) }
}

function start(
  ctx: Context,
  agent: Agent,
  options: { signal?: AbortSignal; onUpdate?: (update: SubagentUpdate) => void; maxDepth?: number } = {},
): Promise<SubagentRun> {
  return ctx.subagents.start('conch', { prompt: [{ type: 'text', text: 'do the task' }], parent: agent, ...options })
}

describe('a child conch', () => {
  it('answers from its own scripted model', async () => {
    const { ctx, agent } = await boot({ script: answering })
    const run = await start(ctx, agent)
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'the answer is 42' }], stopReason: 'completed' })
    await run.dispose()
    await run.dispose()
    expect(marked(mark)).toEqual([])
  })

  it('delegates to a grandchild conch; its tool calls stream back as progress, and its two messages reach the parent a blank line apart', async () => {
    const { ctx, agent } = await boot({ script: delegating })
    const updates: SubagentUpdate[] = []
    const run = await start(ctx, agent, { onUpdate: (update) => updates.push(update) })
    const result = await run.result
    expect(result).toEqual({ output: [{ type: 'text', text: 'asking my own sub-agent.\n\nchild relayed' }], stopReason: 'completed' })
    const tools = updates.filter((update) => update.type === 'tool')
    expect(tools.map((update) => [update.status, update.title])).toEqual([
      ['running', 'subagent (conch): say hi'],
      ['completed', 'subagent (conch): say hi'],
    ])
    await run.dispose()
  })

  it('refuses to delegate beyond maxDepth, and the parent sees why', async () => {
    const { ctx, agent } = await boot({ script: delegating, maxDepth: 1 })
    const updates: SubagentUpdate[] = []
    const run = await start(ctx, agent, { onUpdate: (update) => updates.push(update) })
    expect((await run.result).stopReason).toBe('completed')
    const failed = updates.find((update) => update.type === 'tool' && update.status === 'failed')
    expect(failed).toMatchObject({ title: 'subagent (conch): say hi' })
    expect(failed?.type === 'tool' ? failed.detail : '').toBe(
      'DEPTH_EXCEEDED: this conch is at delegation depth 1 of at most 1: it may not start another "conch" sub-agent; do the task yourself',
    )
    await run.dispose()
  })

  it('request.maxDepth 0 keeps the child from delegating at all', async () => {
    const { ctx, agent } = await boot({ script: delegating })
    const updates: SubagentUpdate[] = []
    const run = await start(ctx, agent, { maxDepth: 0, onUpdate: (update) => updates.push(update) })
    await run.result
    expect(updates.some((update) => update.type === 'tool' && update.status === 'failed' && update.detail?.includes('DEPTH_EXCEEDED'))).toBe(true)
    await run.dispose()
  })

  it('a conch already at the limit refuses before spawning anything', async () => {
    process.env[plugin.DEPTH_VARIABLE] = '3'
    process.env[plugin.MAX_DEPTH_VARIABLE] = '3'
    const { ctx, agent } = await boot({ script: answering, maxDepth: 10 })
    await expect(start(ctx, agent)).rejects.toMatchObject({
      code: 'DEPTH_EXCEEDED',
      message: 'this conch is at delegation depth 3 of at most 3: it may not start another "conch" sub-agent; do the task yourself',
    })
    expect(marked(mark)).toEqual([])
  })
})

describe('failures', () => {
  it('cancel mid-run settles aborted with the partial output and stops the child tree', async () => {
    const { ctx, agent } = await boot({ script: waiting })
    const controller = new AbortController()
    let busy!: () => void
    const isBusy = new Promise<void>((resolve) => (busy = resolve))
    const run = await start(ctx, agent, {
      signal: controller.signal,
      onUpdate: (update) => {
        if (update.type === 'tool' && update.status === 'running') busy()
      },
    })
    await isBusy
    controller.abort()
    expect(await run.result).toEqual({
      output: [{ type: 'text', text: 'working on it. ' }],
      stopReason: 'aborted',
      diagnostic: 'cancelled by the caller',
    })
    await run.dispose()
    expect(marked(mark)).toEqual([])
  })

  it('a child killed mid-run gives error with the partial output; the result does not reject', async () => {
    const { ctx, agent } = await boot({ script: waiting })
    let busy!: () => void
    const isBusy = new Promise<void>((resolve) => (busy = resolve))
    const run = await start(ctx, agent, {
      onUpdate: (update) => {
        if (update.type === 'tool' && update.status === 'running') busy()
      },
    })
    await isBusy
    for (const pid of marked(mark)) process.kill(pid, 'SIGKILL')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([{ type: 'text', text: 'working on it. ' }])
    expect(result.diagnostic).toMatch(/^the "conch" sub-agent was killed by SIGKILL before it answered/)
    await run.dispose()
  })

  it('a child whose tool call carries a 40 MB argument ends as protocol, naming the line, and leaves the parent serving', async () => {
    const huge = script('huge', [{ text: 'calling. ', tool_calls: [{ name: 'wait_for_cancel', arguments: { blob: 'z'.repeat(40 * 1024 * 1024) } }] }])
    const { ctx, agent } = await boot({ script: huge })
    const run = await start(ctx, agent)
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'protocol', output: [{ type: 'text', text: 'calling. ' }] })
    expect(result.diagnostic).toMatch(/^the "conch" sub-agent sent a protocol line of more than 16777216 bytes \(maxFrameBytes\), starting "\{/)
    await run.dispose()
    // The parent process is still here and its log records the end.
    expect(agent.session.last('subagent/end')?.data).toMatchObject({ stopReason: 'protocol' })
  })

  it('a composition that does not boot fails the start with the child exit and stderr', async () => {
    const broken = join(workspace, 'broken.cordis.yml')
    writeFileSync(broken, "- id: nope\n  name: '@conch/no-such-package'\n")
    const { ctx, agent } = await boot({ config: broken, script: answering })
    const error = await start(ctx, agent).then(
      () => undefined,
      (reason: unknown) => reason as { code: string; message: string },
    )
    expect(error?.code).toBe('START_FAILED')
    expect(error?.message).toMatch(/^the "conch" sub-agent exited with code 1 before it was ready; its stderr ends with: .*no-such-package/s)
    expect(marked(mark)).toEqual([])
  })

  it('a missing composition fails the start naming it', async () => {
    const { ctx, agent } = await boot({ config: join(workspace, 'missing.yml') })
    await expect(start(ctx, agent)).rejects.toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('missing.yml does not exist') })
  })
})

describe('config and depth', () => {
  it('reads its depth from the environment the parent set', () => {
    expect(plugin.depthFromEnv({})).toEqual({ depth: 0 })
    expect(plugin.depthFromEnv({ CONCH_SUBAGENT_DEPTH: '2', CONCH_SUBAGENT_MAX_DEPTH: '3' })).toEqual({ depth: 2, inheritedMax: 3 })
    expect(plugin.depthFromEnv({ CONCH_SUBAGENT_DEPTH: '-1', CONCH_SUBAGENT_MAX_DEPTH: 'lots' })).toEqual({ depth: 0 })
  })

  it('starts this conch again the way it was started', () => {
    expect(plugin.defaultCommand(['/usr/bin/node', '/opt/conch/bin/conch.js'], '/usr/bin/node')).toEqual(['/usr/bin/node', '/opt/conch/bin/conch.js'])
    expect(plugin.defaultCommand(['/usr/bin/node', '/x/vitest.mjs'], '/usr/bin/node')).toEqual(['conch'])
  })
})
