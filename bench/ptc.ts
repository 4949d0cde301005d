/**
 * The run_code figures: what a program run costs against a bare `node -e 0` spawn measured in
 * the same run, cold (a fresh process per run) and with the spare (a booted process waiting),
 * and 10 `terminal_send` calls made from one program against the same 10 made directly.
 *
 * Each figure goes through `ctx.tools.execute('run_code', …)` — validation, ctx.ptc, the node
 * runtime, rendering — as the agent loop calls it. Unconfined (`danger-full-access`) so the
 * baseline and the runs pay for the same thing; `cold_sandbox_p50_ms` adds bubblewrap.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import AgentService, { type Agent } from '../packages/core/agent/src/index.ts'
import LlmService from '../packages/core/llm/src/index.ts'
import SessionService from '../packages/core/session/src/index.ts'
import ToolsService, { type ToolResult } from '../packages/core/tools/src/index.ts'
import PtcService from '../packages/ptc/ptc/src/index.ts'
import * as ptcNode from '../packages/ptc/ptc-node/src/index.ts'
import * as toolPtc from '../packages/ptc/tool-ptc/src/index.ts'
import PtyService from '../packages/pty/pty/src/index.ts'
import * as ptyLocal from '../packages/pty/pty-local/src/index.ts'
import * as toolPty from '../packages/pty/tool-pty/src/index.ts'
import SandboxService from '../packages/sandbox/sandbox/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import SandboxPolicyService from '../packages/sandbox/sandbox-policy/src/index.ts'
import SubprocessService from '../packages/subprocess/subprocess/src/index.ts'
import { median, percentile, ratio, round } from './stats.ts'

export const PTC_PLAN = { spawns: 30, runs: 30, nestedRounds: 7, nestedSends: 10, warmup: 3 } as const

export interface PtcFigures {
  node_spawn_p50_ms: number
  cold_p50_ms: number
  cold_p95_ms: number
  spare_p50_ms: number
  spare_p95_ms: number
  cold_sandbox_p50_ms: number
  nested_p50_ms: number
  direct_p50_ms: number
  nested_ratio: number | undefined
  runs: number
  nested_sends: number
}

interface Stack {
  ctx: Context
  agent: Agent
  call(name: string, input: unknown): Promise<ToolResult>
  dispose(): Promise<void>
}

async function stack(options: { spare: boolean; mode: 'danger-full-access' | 'workspace-write' }): Promise<Stack> {
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-bench-ptc-')))
  const ctx = new Context()
  ctx.logger.exporter({
    export: (message) => {
      if (message.type === 'warn' || message.type === 'error') process.stderr.write(`[cordis ${message.type}] ${message.args.map(String).join(' ')}\n`)
    },
  })
  const fibers: { dispose(): Promise<void> }[] = []
  const load = async (plugin: Parameters<Context['plugin']>[0], config?: unknown) => void fibers.push(await ctx.plugin(plugin, config))
  await load(SessionService, SessionService.Config.parse({}))
  await load(ToolsService, ToolsService.Config.parse({}))
  await load(LlmService, LlmService.Config.parse({}))
  await load(SubprocessService, SubprocessService.Config.parse({}))
  await load(SandboxService, {})
  await load(sandboxLocal, sandboxLocal.Config.parse({}))
  await load(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: options.mode, workspaceRoot: workspace }))
  await load(PtyService, {})
  await load(ptyLocal, ptyLocal.Config.parse({}))
  await load(toolPty, toolPty.Config.parse({}))
  await load(PtcService, {})
  await load(ptcNode, ptcNode.Config.parse({ spare: options.spare }))
  await load(toolPtc, toolPtc.Config.parse({}))
  await load(AgentService, AgentService.Config.parse({}))
  const agent = await ctx.agents.create({ workspaceRoot: workspace })
  let calls = 0
  return {
    ctx,
    agent,
    call: (name, input) => ctx.tools.execute(name, input, { agent, signal: new AbortController().signal, callId: `bench-${++calls}` }),
    async dispose() {
      try {
        await ctx.agents.dispose(agent)
      } finally {
        for (const fiber of fibers.reverse()) await fiber.dispose()
        rmSync(workspace, { recursive: true, force: true })
      }
    },
  }
}

/** Wall time of `node -e 0` with piped stdio, from spawn to exit, ms. */
function nodeSpawn(): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    const child = spawn(process.execPath, ['-e', '0'], { stdio: ['pipe', 'pipe', 'pipe', 'pipe'], env: { PATH: process.env['PATH'] ?? '' } })
    child.on('error', reject)
    child.on('close', () => resolve(performance.now() - start))
  })
}

async function timed(run: () => Promise<ToolResult>, expect: string): Promise<number> {
  const start = performance.now()
  const result = await run()
  const ms = performance.now() - start
  const text = result.content.map((item) => item.text).join('\n')
  if (result.isError || !text.includes(expect)) throw new Error(`unexpected result: ${text}`)
  return ms
}

/**
 * A run takes the spare and refills it in the background; back to back, the next run would wait
 * for that refill. The spare figure is what a run costs when its spare is booted, so spare runs
 * are spaced by a few bare-spawn times (the bench, not a test: pacing is what it measures).
 */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export async function benchPtc(progress: (message: string) => void): Promise<PtcFigures> {
  progress(`ptc: ${PTC_PLAN.spawns} bare node -e 0 spawns`)
  const spawns: number[] = []
  for (let i = 0; i < PTC_PLAN.warmup; i++) await nodeSpawn()
  for (let i = 0; i < PTC_PLAN.spawns; i++) spawns.push(await nodeSpawn())

  const runCode = (s: Stack) => timed(() => s.call('run_code', { code: 'return 1+1' }), '2\n[run_code: ok')
  const cold = await stack({ spare: false, mode: 'danger-full-access' })
  const warm = await stack({ spare: true, mode: 'danger-full-access' })
  const boxed = await stack({ spare: false, mode: 'workspace-write' })
  try {
    progress(`ptc: run_code return 1+1, ${PTC_PLAN.runs} cold, ${PTC_PLAN.runs} with the spare, ${PTC_PLAN.runs} cold under bubblewrap`)
    const coldMs: number[] = []
    const spareMs: number[] = []
    const boxedMs: number[] = []
    for (let i = 0; i < PTC_PLAN.warmup; i++) {
      await runCode(cold)
      await runCode(warm)
      await runCode(boxed)
    }
    const spawnP50 = median(spawns)
    for (let i = 0; i < PTC_PLAN.runs; i++) {
      coldMs.push(await runCode(cold))
      await pause(Math.max(50, spawnP50 * 3))
      spareMs.push(await runCode(warm))
      boxedMs.push(await runCode(boxed))
    }

    progress(`ptc: ${PTC_PLAN.nestedRounds} rounds of ${PTC_PLAN.nestedSends} terminal_send from one program against ${PTC_PLAN.nestedSends} direct`)
    const opened = await warm.call('terminal_open', { type: 'shell' })
    const sessionId = String(opened.meta?.['sessionId'])
    const nestedCode = `for (let i = 0; i < ${PTC_PLAN.nestedSends}; i++) { const r = await tools.terminal_send({ sessionId: ${JSON.stringify(sessionId)}, text: "true" }); if (r.isError) throw new Error(r.text) }\nreturn "sent"`
    const nested: number[] = []
    const direct: number[] = []
    const directRound = async () => {
      const start = performance.now()
      for (let i = 0; i < PTC_PLAN.nestedSends; i++) {
        const result = await warm.call('terminal_send', { sessionId, text: 'true' })
        if (result.isError) throw new Error(result.content[0]?.text)
      }
      return performance.now() - start
    }
    await directRound()
    for (let i = 0; i < PTC_PLAN.nestedRounds; i++) {
      await pause(Math.max(50, spawnP50 * 3))
      nested.push(await timed(() => warm.call('run_code', { code: nestedCode }), '"sent"'))
      // The run's spare refill starts right after its result and blocks this process while it
      // forks (several ms): the direct round waits for it too, so neither figure includes it.
      await pause(Math.max(50, spawnP50 * 3))
      direct.push(await directRound())
    }
    await warm.call('terminal_close', { sessionId })
    return {
      node_spawn_p50_ms: round(spawnP50),
      cold_p50_ms: round(median(coldMs)),
      cold_p95_ms: round(percentile(coldMs, 95)),
      spare_p50_ms: round(median(spareMs)),
      spare_p95_ms: round(percentile(spareMs, 95)),
      cold_sandbox_p50_ms: round(median(boxedMs)),
      nested_p50_ms: round(median(nested)),
      direct_p50_ms: round(median(direct)),
      nested_ratio: ratio(median(nested), median(direct)),
      runs: PTC_PLAN.runs,
      nested_sends: PTC_PLAN.nestedSends,
    }
  } finally {
    await cold.dispose()
    await warm.dispose()
    await boxed.dispose()
  }
}
