import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import type { SubagentRun, SubagentUpdate } from '@conch/subagent'
import * as toolSubagent from '@conch/tool-subagent'
import { ACP_AGENT } from '@conch/test-support/products'
import * as plugin from '../src/index.ts'
import { MARK_VARIABLE, boot, freshMark, marked, type Harness } from './harness.ts'

// Each test starts one to three real node processes; on a loaded machine that takes seconds.
vi.setConfig({ testTimeout: 30_000, hookTimeout: 30_000 })

const workspace = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-acp-')))
afterAll(() => rmSync(workspace, { recursive: true, force: true }))

let harness: Harness | undefined
let mark = ''

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  // Nothing a test started may outlive it.
  expect(marked(mark)).toEqual([])
})

async function setup(config: Record<string, unknown> = {}, mode?: string): Promise<Harness> {
  mark = freshMark()
  harness = await boot(
    plugin,
    {
      command: process.execPath,
      args: mode === undefined ? [ACP_AGENT] : [ACP_AGENT, mode],
      env: [MARK_VARIABLE],
      disposeEofGraceMs: 2000,
      disposeGraceMs: 500,
      ...config,
    },
    workspace,
  )
  return harness
}

async function run(prompt: string, options: { signal?: AbortSignal; onUpdate?: (update: SubagentUpdate) => void } = {}): Promise<SubagentRun> {
  const { ctx, agent } = harness!
  return ctx.subagents.start('acp', { prompt: [{ type: 'text', text: prompt }], parent: agent, label: prompt, ...options })
}

describe('a completed answer', () => {
  it("collects the child's text, its messages a blank line apart, reports its tool calls, and leaves no process", async () => {
    await setup()
    const updates: SubagentUpdate[] = []
    const subagent = await run('text', { onUpdate: (update) => updates.push(update) })
    expect(subagent.childId).toBe(`fixture-${workspace}`)
    expect(await subagent.result).toEqual({ output: [{ type: 'text', text: 'hello\n\nworld' }], stopReason: 'completed' })
    expect(updates).toEqual([
      { type: 'text', text: 'hello ' },
      { type: 'tool', callId: 'call-1', title: 'looking around', status: 'running' },
      { type: 'tool', callId: 'call-1', title: 'looking around', status: 'completed' },
      // The break between the child's messages reaches listeners too, as the result holds it.
      { type: 'text', text: '\n\nworld' },
    ])
    await subagent.dispose()
    await subagent.dispose()
    expect(marked(mark)).toEqual([])
    const types = harness!.agent.session.events().map((event) => event.type)
    expect(types.filter((type) => type.startsWith('subagent/'))).toEqual(['subagent/start', 'subagent/end'])
  })

  it("runs in the parent's workspace and gets only the scrubbed environment plus the pass-through list", async () => {
    process.env.PASSED_THROUGH = 'yes'
    process.env.OTHER_API_KEY = 'sk-secret'
    try {
      await setup({ env: [MARK_VARIABLE, 'PASSED_THROUGH'] })
      const where = await run('cwd')
      expect((await where.result).output).toEqual([{ type: 'text', text: workspace }])
      const env = await run('env')
      expect((await env.result).output).toEqual([{ type: 'text', text: 'PASSED_THROUGH=yes OTHER_API_KEY=(unset) PATH=(set)' }])
    } finally {
      delete process.env.PASSED_THROUGH
      delete process.env.OTHER_API_KEY
    }
  })

  it('ignores updates the child sends for another session', async () => {
    await setup()
    expect((await (await run('foreign')).result).output).toEqual([{ type: 'text', text: 'mine' }])
  })
})

describe('a hostile child', () => {
  it('cannot make the parent keep more than maxOutputBytes of its answer', async () => {
    await setup()
    const result = await (await run('flood')).result
    expect(result.stopReason).toBe('completed')
    expect(result.truncated).toBe(true)
    const text = result.output[0]!.text
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(1_048_576)
    expect(text.endsWith('xTAIL')).toBe(true)
  })

  it('cannot break the run with lines that are not JSON-RPC', async () => {
    await setup()
    expect(await (await run('garbage')).result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'still here' }] })
  })

  it('cannot take the parent down with a line over maxFrameBytes: its run ends protocol, naming what arrived, and other runs go on', async () => {
    await setup()
    const other = await run('slow')
    const updates: SubagentUpdate[] = []
    const result = await (await run('huge-line', { onUpdate: (update) => updates.push(update) })).result
    expect(result).toMatchObject({ stopReason: 'protocol', output: [{ type: 'text', text: 'before the flood' }] })
    expect(result.diagnostic).toMatch(
      /^the "acp" sub-agent sent a protocol line of more than 16777216 bytes \(maxFrameBytes\), starting "\{\\"jsonrpc\\":\\"2\.0\\",\\"method\\":\\"session\/update\\"/,
    )
    expect(updates).toEqual([{ type: 'text', text: 'before the flood' }])
    // The parent still serves: a run that was going and a new one both answer.
    expect(await (await run('text')).result).toMatchObject({ stopReason: 'completed' })
    await other.dispose()
    expect(await other.result).toMatchObject({ stopReason: 'aborted', output: [{ type: 'text', text: 'partial answer' }] })
  })

  it('gets no permission for a session that is not its own, even under permission: allow', async () => {
    await setup({ permission: 'allow' })
    expect((await (await run('foreign-permission')).result).output).toEqual([{ type: 'text', text: 'foreign: cancelled' }])
  })
})

describe('through the subagent tool', () => {
  async function withTool(): Promise<Harness> {
    const h = await setup()
    await h.ctx.plugin(toolSubagent, toolSubagent.Config.parse({ provider: 'acp', enableRunInBackground: false }))
    return h
  }
  const call = (h: Harness, input: object, signal = new AbortController().signal) =>
    h.ctx.tools.execute('subagent', input, { agent: h.agent, signal, callId: `call-${Math.random()}` })
  const started = (h: Harness, count: number) =>
    new Promise<void>((resolve) => {
      const check = () => h.agent.session.events().filter((event) => event.type === 'subagent/start').length >= count && resolve()
      h.ctx.sessions.subscribe(check)
      check()
    })

  it('refuses a fifth concurrent sub-agent of one agent, naming maxRunsPerParent, and takes one again once a run ended', async () => {
    const h = await withTool()
    const controllers = [1, 2, 3, 4].map(() => new AbortController())
    const running = controllers.map((controller) => call(h, { prompt: 'slow' }, controller.signal))
    await started(h, 4)
    const refused = await call(h, { prompt: 'text' })
    expect(refused.isError).toBe(true)
    expect(refused.content[0]!.text).toBe(
      `TOO_MANY_RUNS: ${h.agent.id} already has 4 sub-agents running (subagents.maxRunsPerParent: 4); wait for one to end first`,
    )
    controllers[0]!.abort()
    expect((await running[0]!).content[0]!.text).toMatch(/\[subagent: acp, stop: aborted,/)
    expect((await call(h, { prompt: 'text' })).content[0]!.text).toMatch(/^hello\n\nworld\n\[subagent: acp, stop: completed,/)
    for (const controller of controllers) controller.abort()
    await Promise.all(running)
  })

  it("stops a child that never answers at the call's timeoutMs, with its partial output, and tears it down", async () => {
    const h = await withTool()
    const result = await call(h, { prompt: 'silent', timeoutMs: 1500 })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toMatch(
      /^thinking\n\[subagent: acp, stop: timeout, \d+\.\d s\]\n\[diagnostic: the "acp" sub-agent did not finish within 1500 ms \(its deadline\) and was stopped\]$/,
    )
    // The foreground call returns after the teardown: nothing of the child is left.
    expect(marked(mark)).toEqual([])
  })
})

describe('stop reasons', () => {
  it('maps max_tokens, refusal and max_turn_requests', async () => {
    await setup()
    expect(await (await run('max')).result).toEqual({
      output: [{ type: 'text', text: 'cut' }],
      stopReason: 'max-tokens',
      diagnostic: 'the child stopped: max-tokens',
    })
    expect((await (await run('refusal')).result).stopReason).toBe('refusal')
    expect(await (await run('turns')).result).toEqual({
      output: [],
      stopReason: 'error',
      diagnostic: 'the "acp" sub-agent stopped with max_turn_requests',
    })
  })
})

describe('permission requests', () => {
  it('are rejected by default and never reach a person', async () => {
    await setup()
    expect((await (await run('permission')).result).output).toEqual([{ type: 'text', text: 'chosen: no' }])
  })

  it('are allowed under permission: allow', async () => {
    await setup({ permission: 'allow' })
    expect((await (await run('permission')).result).output).toEqual([{ type: 'text', text: 'chosen: yes' }])
  })
})

describe('cancellation', () => {
  it('settles aborted with the partial output at once, sends session/cancel, and tears the child down', async () => {
    await setup()
    const controller = new AbortController()
    const texts: string[] = []
    let sawPartial!: () => void
    const partial = new Promise<void>((resolve) => (sawPartial = resolve))
    const subagent = await run('slow', {
      signal: controller.signal,
      onUpdate: (update) => {
        if (update.type === 'text') {
          texts.push(update.text)
          sawPartial()
        }
      },
    })
    await partial
    controller.abort()
    expect(await subagent.result).toEqual({
      output: [{ type: 'text', text: 'partial answer' }],
      stopReason: 'aborted',
      diagnostic: 'cancelled by the caller',
    })
    await subagent.dispose()
    expect(marked(mark)).toEqual([])
  })
})

describe('a child that crashes mid-answer', () => {
  it('resolves error with the partial output and its exit, never rejects', async () => {
    await setup()
    const subagent = await run('crash')
    const result = await subagent.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([{ type: 'text', text: 'half of it' }])
    expect(result.diagnostic).toBe('the "acp" sub-agent exited with code 3 before it answered; its stderr ends with: segmentation fault (pretend)')
    await subagent.dispose()
  })
})

describe('start failures', () => {
  it('a child that exits cleanly before initialize fails the start', async () => {
    await setup({}, 'exit-at-once')
    await expect(run('text')).rejects.toMatchObject({
      code: 'START_FAILED',
      message: 'the "acp" sub-agent exited with code 0 before it was ready; its stderr ends with: nothing to do here',
    })
    expect(harness!.agent.session.events().some((event) => event.type.startsWith('subagent/'))).toBe(false)
  })

  it('a child that never answers initialize fails the start after startTimeoutMs and is killed', async () => {
    await setup({ startTimeoutMs: 1500 }, 'never-initialize')
    await expect(run('text')).rejects.toMatchObject({
      code: 'START_FAILED',
      message: expect.stringMatching(/^the "acp" sub-agent was not ready within 1500 ms/),
    })
    expect(marked(mark)).toEqual([])
  })

  it('a missing program fails the start naming it', async () => {
    await setup({ command: '/no/such/acp-agent', args: [] })
    await expect(run('text')).rejects.toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('/no/such/acp-agent') })
  })

  it("a command named without a path is never taken from the parent's workspace, where a confined agent could have put it", async () => {
    // `pnpm exec` and `npx` put <workspace>/node_modules/.bin first on PATH; the agent can write there.
    const bin = join(workspace, 'node_modules', '.bin')
    const elsewhere = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-acp-bin-')))
    const ran = join(elsewhere, 'planted-ran')
    mkdirSync(bin, { recursive: true })
    writeFileSync(join(bin, 'acp-agent'), `#!/bin/sh\ntouch ${ran}\n`, { mode: 0o755 })
    const saved = process.env.PATH
    try {
      process.env.PATH = `${bin}:${saved}`
      await setup({ command: 'acp-agent', args: [] })
      await expect(run('text')).rejects.toMatchObject({
        code: 'START_FAILED',
        message: `cannot start the "acp" sub-agent: cannot spawn acp-agent: acp-agent was found only in ${bin} (inside ${workspace}), which an agent may write; a program conch starts is never taken from there: give its absolute path`,
      })
      // The next folder on PATH has one: that is the one started.
      writeFileSync(join(elsewhere, 'acp-agent'), `#!/bin/sh\nexec ${process.execPath} ${ACP_AGENT} "$@"\n`, { mode: 0o755 })
      process.env.PATH = `${bin}:${elsewhere}:${saved}`
      expect(await (await run('text')).result).toMatchObject({ stopReason: 'completed' })
      expect(existsSync(ran)).toBe(false)
    } finally {
      process.env.PATH = saved
      rmSync(join(workspace, 'node_modules'), { recursive: true, force: true })
      rmSync(elsewhere, { recursive: true, force: true })
    }
  })

  it('a cancel during the start rejects it and leaves nothing running', async () => {
    await setup({}, 'never-initialize')
    const controller = new AbortController()
    const started = run('text', { signal: controller.signal })
    setImmediate(() => controller.abort())
    await expect(started).rejects.toMatchObject({ code: 'START_FAILED', message: 'the "acp" sub-agent was cancelled while it started' })
    expect(marked(mark)).toEqual([])
  })
})

describe('teardown', () => {
  it('kills a child that ignores stdin EOF and SIGTERM', async () => {
    await setup({ disposeEofGraceMs: 100, disposeGraceMs: 100 }, 'stubborn')
    const subagent = await run('text')
    expect((await subagent.result).stopReason).toBe('completed')
    await subagent.dispose()
    expect(marked(mark)).toEqual([])
  })

  it('sweeps a daemon the child left behind', async () => {
    await setup({}, 'daemon')
    const subagent = await run('text')
    await subagent.result
    await subagent.dispose()
    expect(marked(mark)).toEqual([])
  })

  it('disposing the parent agent cancels its running sub-agent', async () => {
    await setup()
    const subagent = await run('slow')
    await harness!.ctx.agents.dispose(harness!.agent)
    expect((await subagent.result).stopReason).toBe('aborted')
    await subagent.dispose()
    expect(marked(mark)).toEqual([])
  })
})

describe('config', () => {
  it('refuses a relative cwd at load, naming the field', () => {
    const parsed = plugin.Config.safeParse({ command: 'x', cwd: 'relative' })
    expect(parsed.success).toBe(false)
    expect(parsed.error?.issues[0]).toMatchObject({ path: ['cwd'], message: 'must be an absolute path' })
    expect(plugin.Config.safeParse({}).error?.issues[0]?.path).toEqual(['command'])
  })
})
