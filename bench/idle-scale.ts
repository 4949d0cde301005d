/**
 * `idle` and `scale`: 32 sessions open at their prompt doing nothing, then the same sessions sending
 * `true` all at once, against one session alone and against 32 bare bash loops.
 */
import { execFileSync } from 'node:child_process'
import type { Composition } from './compose.ts'
import { delay, expectReady, latency, PLAN, progress, timed } from './harness.ts'
import { descendantsOf, rawBash, statFields } from './raw.ts'
import type { Bench } from './registry.ts'
import { collectGarbage, median, percentile, ratio, round, tally } from './stats.ts'
import { ms, x } from './table.ts'

/** CPU this process used over `seconds`, as percent of one core. */
async function cpuPercent(seconds: number): Promise<number> {
  const { ms, cpuMs } = await timed(() => delay(seconds * 1000))
  return (cpuMs / ms) * 100
}

export type IdleFigures = Awaited<ReturnType<typeof benchIdleAndScale>>['idle']
export type ScaleFigures = Awaited<ReturnType<typeof benchIdleAndScale>>['scale']

/** Clock ticks per second of /proc/<pid>/stat times (sysconf(_SC_CLK_TCK)); 100 on Linux unless `getconf` says otherwise. */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()) || 100
  } catch {
    return 100
  }
})()

/** CPU time (user + system, ms) used so far by `pids` and their descendants (proc(5) stat fields 14 and 15). */
function treeCpuMs(pids: readonly number[]): number {
  let ticks = 0
  for (const pid of pids.flatMap((root) => [root, ...descendantsOf(root)])) {
    const fields = statFields(pid)
    if (fields !== undefined) ticks += Number(fields[11]) + Number(fields[12])
  }
  return (ticks * 1000) / CLOCK_TICKS
}

/**
 * `PLAN.scaleSingleSends` sends in the first loop alone, then `PLAN.scaleSends` in every loop at
 * once; with the wall time and this process's CPU (percent of one core) of the concurrent part.
 */
async function sendLoops(
  loops: readonly (() => Promise<number>)[],
  shells: readonly number[],
): Promise<{ single: number[]; together: number[]; wallMs: number; cpuPercent: number; shellCpuMs: number }> {
  const single: number[] = []
  for (let i = 0; i < PLAN.scaleSingleSends; i++) single.push(await loops[0]!())
  const together: number[] = []
  const shellsBefore = treeCpuMs(shells)
  const { ms: wallMs, cpuMs } = await timed(() =>
    Promise.all(
      loops.map(async (send) => {
        for (let i = 0; i < PLAN.scaleSends; i++) together.push(await send())
      }),
    ),
  )
  return { single, together, wallMs, cpuPercent: (cpuMs / wallMs) * 100, shellCpuMs: treeCpuMs(shells) - shellsBefore }
}

async function benchIdleAndScale(c: Composition) {
  progress(`idle: baseline, no sessions, ${PLAN.idleBaselineSeconds} s`)
  collectGarbage()
  const baseline = await cpuPercent(PLAN.idleBaselineSeconds)
  const ids = (await Promise.all(Array.from({ length: PLAN.idleSessions }, () => c.ctx.pty.spawn(c.agent, { type: 'shell' })))).map((s) => s.sessionId)
  let idleCpu: number
  let conch: Awaited<ReturnType<typeof sendLoops>>
  const reasons: string[] = []
  try {
    progress(`idle: ${PLAN.idleSessions} sessions open, ${PLAN.idleSeconds} s`)
    collectGarbage()
    idleCpu = await cpuPercent(PLAN.idleSeconds)
    progress(`scale: one session alone (${PLAN.scaleSingleSends} sends), then ${PLAN.idleSessions} sessions × ${PLAN.scaleSends} sends at once`)
    const shells = c.ctx.pty.list(c.agent).flatMap((info) => (info.pid === undefined ? [] : [info.pid]))
    conch = await sendLoops(
      ids.map((id) => async () => {
        const { ms, result } = await c.send(c.agent, id, 'true')
        expectReady('scale', result, ['stdin_read', 'inferred_idle'])
        reasons.push(result.waitReason)
        return ms
      }),
      shells,
    )
  } finally {
    await Promise.all(ids.map((id) => c.ctx.pty.close(c.agent, id)))
  }

  progress(`scale: the same with ${PLAN.idleSessions} bare bash loops`)
  const raws = Array.from({ length: PLAN.idleSessions }, () => rawBash({ cwd: c.workspace }))
  let raw: Awaited<ReturnType<typeof sendLoops>>
  try {
    await Promise.all(raws.map((terminal) => terminal.ready))
    raw = await sendLoops(
      raws.map((terminal) => async () => (await terminal.send('true')).ms),
      raws.map((terminal) => terminal.pid),
    )
  } finally {
    await Promise.all(raws.map((terminal) => terminal.hangup()))
  }
  const figures = latency(conch.together)
  const rawFigures = latency(raw.together)
  const singleP95 = percentile(conch.single, 95)
  const rawSingleP95 = percentile(raw.single, 95)
  return {
    idle: { cpu_percent: round(idleCpu, 3), baseline_cpu_percent: round(baseline, 3), sessions: PLAN.idleSessions, seconds: PLAN.idleSeconds },
    scale: {
      ...figures,
      single_p50_ms: round(median(conch.single)),
      single_p95_ms: round(singleP95),
      ratio_p95: ratio(figures.p95_ms, singleP95),
      sends_per_s: round(conch.together.length / (conch.wallMs / 1000), 1),
      // The first sends ran alone; the tally is of the concurrent ones.
      wait_reasons: tally(reasons.slice(PLAN.scaleSingleSends)),
      /** This process's CPU during the concurrent sends, percent of one core (it runs on one). */
      harness_cpu_percent: round(conch.cpuPercent, 1),
      /** CPU of the session processes (wrapper, shell and children) per concurrent send, ms. */
      shell_cpu_ms_per_send: round(conch.shellCpuMs / conch.together.length, 3),
      raw_p50_ms: rawFigures.p50_ms,
      raw_p95_ms: rawFigures.p95_ms,
      raw_single_p95_ms: round(rawSingleP95),
      raw_ratio_p95: ratio(rawFigures.p95_ms, rawSingleP95),
      raw_sends_per_s: round(raw.together.length / (raw.wallMs / 1000), 1),
      raw_harness_cpu_percent: round(raw.cpuPercent, 1),
      raw_shell_cpu_ms_per_send: round(raw.shellCpuMs / raw.together.length, 3),
      sessions: PLAN.idleSessions,
      sends_each: PLAN.scaleSends,
    },
  }
}

export const idleScaleBench: Bench = {
  keys: ['idle', 'scale'],
  async run(c) {
    return benchIdleAndScale(c!)
  },
  rows(r, verdict) {
    const rows: string[][] = []
    if (r.idle) rows.push(['idle CPU', `${r.idle.cpu_percent} %`, `no sessions ${r.idle.baseline_cpu_percent} %`, '', verdict('idle.cpu_percent')])
    if (r.scale) {
      const sc = r.scale
      rows.push(['scale p95', ms(sc.p95_ms), `single ${ms(sc.single_p95_ms)}`, x(sc.ratio_p95), verdict('scale.p95_ms')])
      rows.push(['scale p95, raw', ms(sc.raw_p95_ms), `single ${ms(sc.raw_single_p95_ms)}`, x(sc.raw_ratio_p95), ''])
      rows.push(['scale p95 vs raw', ms(sc.p95_ms), `raw ${ms(sc.raw_p95_ms)}`, x(ratio(sc.p95_ms, sc.raw_p95_ms)), ''])
    }
    return rows
  },
}
