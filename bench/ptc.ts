/**
 * The run_code figures: what a program run costs against a bare `node -e 0` spawn measured in
 * the same run, cold (a fresh process per run) and with the spare (a booted process waiting),
 * and 10 `terminal_send` calls made from one program against the same 10 made directly.
 *
 * The nested figure is one `run_code` whose program makes the 10 calls, so it includes one run's
 * own cost (the run frame, the program's round trip, the teardown the result waits for). Each
 * round therefore also times the same program making no call (`nested_fixed_p50_ms`), and the
 * per-call figures compare like with like: what a nested call adds over a direct one,
 * (nested − no-call program − direct) / calls (`nested_overhead_per_call_ms`, the target), the
 * nested run less that fixed run against the direct calls (`nested_per_call_ratio`), and this
 * process's CPU per call on each side, with the program's own CPU per call beside it.
 *
 * Each figure goes through `ctx.tools.execute('run_code', …)` — validation, ctx.ptc, the node
 * runtime, rendering — as the agent loop calls it. Unconfined (`danger-full-access`) so the
 * baseline and the runs pay for the same thing; `cold_sandbox_p50_ms` adds bubblewrap.
 */
import { spawn } from 'node:child_process'
import AgentService from '../packages/core/agent/src/index.ts'
import type { ToolResult } from '../packages/core/tools/src/index.ts'
import PtcService from '../packages/ptc/ptc/src/index.ts'
import * as ptcNode from '../packages/ptc/ptc-node/src/index.ts'
import * as toolPtc from '../packages/ptc/tool-ptc/src/index.ts'
import * as ptyLocal from '../packages/pty/pty-local/src/index.ts'
import * as toolPty from '../packages/pty/tool-pty/src/index.ts'
import { terminalStack } from './compose.ts'
import { median, percentile, ratio, round } from './stats.ts'
import { delay, progress, timed } from './harness.ts'
import type { Bench } from './registry.ts'
import { ms, x } from './table.ts'

export const PTC_PLAN = { spawns: 30, runs: 30, nestedRounds: 7, nestedSends: 10, warmup: 3 } as const

export type PtcFigures = Awaited<ReturnType<typeof benchPtc>>

type Stack = Awaited<ReturnType<typeof stack>>

/** The run_code composition (the terminal tools too) with one agent, unconfined or under bubblewrap. */
export async function stack(options: { spare: boolean; mode: 'danger-full-access' | 'workspace-write' }) {
  const base = await terminalStack('ptc-', options.mode, ptyLocal.Config.parse({}))
  const { ctx, load } = base
  await load(toolPty, toolPty.Config.parse({}))
  await load(PtcService, {})
  await load(ptcNode, ptcNode.Config.parse({ spare: options.spare }))
  await load(toolPtc, toolPtc.Config.parse({}))
  await load(AgentService, AgentService.Config.parse({}))
  const agent = await ctx.agents.create({ workspaceRoot: base.workspace })
  let calls = 0
  return {
    ctx,
    agent,
    call: (name: string, input: unknown): Promise<ToolResult> => ctx.tools.execute(name, input, { agent, signal: new AbortController().signal, callId: `bench-${++calls}` }),
    dispose: () => base.dispose(agent),
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

/** Wall time of `run`, ms; its result must contain `expect`. */
async function timedRun(run: () => Promise<ToolResult>, expect: string): Promise<number> {
  const { value: result, ms } = await timed(run)
  const text = result.content.map((item) => item.text).join('\n')
  if (result.isError || !text.includes(expect)) throw new Error(`unexpected result: ${text}`)
  return ms
}

export async function benchPtc(progress: (message: string) => void) {
  progress(`ptc: ${PTC_PLAN.spawns} bare node -e 0 spawns`)
  const spawns: number[] = []
  for (let i = 0; i < PTC_PLAN.warmup; i++) await nodeSpawn()
  for (let i = 0; i < PTC_PLAN.spawns; i++) spawns.push(await nodeSpawn())

  const runCode = (s: Stack) => timedRun(() => s.call('run_code', { code: 'return 1+1' }), '2\n[run_code: ok')
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
    // A run refills the spare in the background: spare runs are spaced by a few bare-spawn times
    // so none waits for that refill (pacing is what the bench measures, not a synchronisation).
    const pause = () => delay(Math.max(50, spawnP50 * 3))
    for (let i = 0; i < PTC_PLAN.runs; i++) {
      coldMs.push(await runCode(cold))
      await pause()
      spareMs.push(await runCode(warm))
      boxedMs.push(await runCode(boxed))
    }

    progress(`ptc: ${PTC_PLAN.nestedRounds} rounds of ${PTC_PLAN.nestedSends} terminal_send from one program against ${PTC_PLAN.nestedSends} direct`)
    const opened = await warm.call('terminal_open', { type: 'shell' })
    const sessionId = String(opened.meta?.['sessionId'])
    // The program reports its own CPU for the loop (process.cpuUsage, µs) with its answer.
    const program = (sends: number) =>
      `const u = process.cpuUsage()\nfor (let i = 0; i < ${sends}; i++) { const r = await tools.terminal_send({ sessionId: ${JSON.stringify(sessionId)}, text: "true" }); if (r.isError) throw new Error(r.text) }\nconst c = process.cpuUsage(u)\nreturn { sent: ${sends}, cpu: c.user + c.system }`
    const runRound = async (sends: number) => {
      const { value: result, ms, cpuMs: host } = await timed(() => warm.call('run_code', { code: program(sends) }))
      const text = result.content.map((item) => item.text).join('\n')
      const answer = /"sent":\s*(\d+),\s*"cpu":\s*(\d+(?:\.\d+)?)/.exec(text)
      if (result.isError || answer === null || Number(answer[1]) !== sends) throw new Error(`unexpected result: ${text}`)
      return { ms, host, programMs: Number(answer[2]) / 1000 }
    }
    const directRound = () =>
      timed(async () => {
        for (let i = 0; i < PTC_PLAN.nestedSends; i++) {
          const result = await warm.call('terminal_send', { sessionId, text: 'true' })
          if (result.isError) throw new Error(result.content[0]?.text)
        }
      })
    const nested: number[] = []
    const direct: number[] = []
    const fixed: number[] = []
    const perCall: number[] = []
    const overhead: number[] = []
    const nestedCpu: number[] = []
    const directCpu: number[] = []
    const programCpu: number[] = []
    // One unmeasured round of each side first, so that neither pays first-call costs (the
    // binding path, the tools pipeline, the terminal) in a measured round.
    await pause()
    await runRound(0)
    await pause()
    await runRound(PTC_PLAN.nestedSends)
    await pause()
    await directRound()
    for (let i = 0; i < PTC_PLAN.nestedRounds; i++) {
      // Each run's spare refill starts right after its result and blocks this process while it
      // forks (several ms): every figure waits it out first, so none includes it.
      await pause()
      const none = await runRound(0)
      await pause()
      const sends = await runRound(PTC_PLAN.nestedSends)
      await pause()
      const plain = await directRound()
      nested.push(sends.ms)
      fixed.push(none.ms)
      direct.push(plain.ms)
      perCall.push((sends.ms - none.ms) / plain.ms)
      overhead.push((sends.ms - none.ms - plain.ms) / PTC_PLAN.nestedSends)
      nestedCpu.push((sends.host - none.host) / PTC_PLAN.nestedSends)
      directCpu.push(plain.cpuMs / PTC_PLAN.nestedSends)
      programCpu.push(sends.programMs / PTC_PLAN.nestedSends)
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
      /** The same program with no call: one run's own cost, inside `nested_p50_ms`. */
      nested_fixed_p50_ms: round(median(fixed)),
      /** Median over rounds of (nested − fixed) / direct: one nested call against one direct call. */
      nested_per_call_ratio: round(median(perCall)),
      /** Median over rounds of (nested − fixed − direct) / calls: what one nested call adds, ms. */
      nested_overhead_per_call_ms: round(median(overhead), 3),
      /** This process's CPU per nested call (nested run less the fixed run, over the calls), ms. */
      nested_host_cpu_per_call_ms: round(median(nestedCpu)),
      /** This process's CPU per direct call, ms. */
      direct_host_cpu_per_call_ms: round(median(directCpu)),
      /** The program's own CPU per call (its process.cpuUsage around the loop), ms. */
      nested_program_cpu_per_call_ms: round(median(programCpu)),
      runs: PTC_PLAN.runs,
      nested_sends: PTC_PLAN.nestedSends,
    }
  } finally {
    await cold.dispose()
    await warm.dispose()
    await boxed.dispose()
  }
}

export const ptcBench: Bench = {
  keys: ['ptc'],
  async run() {
    return { ptc: await benchPtc(progress) }
  },
  rows(r, verdict) {
    const p = r.ptc
    if (!p) return []
    return [
      ['run_code return 1+1 p50, cold', ms(p.cold_p50_ms), `node -e 0 ${ms(p.node_spawn_p50_ms)}`, x(ratio(p.cold_p50_ms, p.node_spawn_p50_ms)), verdict('ptc.cold_p50_ms')],
      ['run_code return 1+1 p50, spare', ms(p.spare_p50_ms), `node -e 0 ${ms(p.node_spawn_p50_ms)}`, x(ratio(p.spare_p50_ms, p.node_spawn_p50_ms)), verdict('ptc.spare_p50_ms')],
      ['run_code p50, cold, bubblewrap', ms(p.cold_sandbox_p50_ms), `cold ${ms(p.cold_p50_ms)}`, x(ratio(p.cold_sandbox_p50_ms, p.cold_p50_ms)), ''],
      [`${p.nested_sends} terminal_send from run_code p50`, ms(p.nested_p50_ms), `direct ${ms(p.direct_p50_ms)}`, x(p.nested_ratio), ''],
      ['  the same program making no call p50', ms(p.nested_fixed_p50_ms), '', '', ''],
      ['  one call: (nested − no call) / direct', '', '', x(p.nested_per_call_ratio), ''],
      ['  added per call: (nested − no call − direct) / calls', ms(p.nested_overhead_per_call_ms), '', '', verdict('ptc.nested_overhead_per_call_ms')],
      ['  this process CPU per call', ms(p.nested_host_cpu_per_call_ms), `direct ${ms(p.direct_host_cpu_per_call_ms)}`, x(ratio(p.nested_host_cpu_per_call_ms, p.direct_host_cpu_per_call_ms)), ''],
      ['  the program CPU per call', ms(p.nested_program_cpu_per_call_ms), '', '', ''],
    ]
  },
}
