/** `throughput`: `seq 1 3000000` through a session against the same command drained from a bare bash, with memory. */
import type { Composition } from './compose.ts'
import { expectReady, PLAN, progress } from './harness.ts'
import { rawBash } from './raw.ts'
import type { Bench } from './registry.ts'
import { collectGarbage, median, ratio, round, rssMiB } from './stats.ts'
import { x } from './table.ts'

export type ThroughputFigures = Awaited<ReturnType<typeof benchThroughput>>

/** Bytes `seq 1 n` prints (each number and a newline). */
function seqBytes(n: number): number {
  let total = 0
  for (let digits = 1, low = 1; low <= n; digits++, low *= 10) total += (Math.min(n, low * 10 - 1) - low + 1) * (digits + 1)
  return total
}

/** V8 heap in use, MiB. */
function heapMiB(): number {
  return process.memoryUsage().heapUsed / 2 ** 20
}

/** Samples RSS and the V8 heap every 25 ms until stopped; returns the peaks in MiB. */
function memorySampler(): { stop(): { rss: number; heap: number } } {
  const peak = { rss: rssMiB(), heap: heapMiB() }
  const sample = () => {
    peak.rss = Math.max(peak.rss, rssMiB())
    peak.heap = Math.max(peak.heap, heapMiB())
  }
  const timer = setInterval(sample, 25)
  return {
    stop() {
      clearInterval(timer)
      sample()
      return peak
    },
  }
}

async function benchThroughput(c: Composition) {
  const command = `seq 1 ${PLAN.throughputLines}`
  const payload = seqBytes(PLAN.throughputLines)
  const { sessionId } = await c.ctx.pty.spawn(c.agent, { type: 'shell' })
  const raw = rawBash({ cwd: c.workspace })
  await raw.ready
  const rates: number[] = []
  const rawRates: number[] = []
  const growth: number[] = []
  const retained: number[] = []
  const heapGrowth: number[] = []
  const heapRetained: number[] = []
  const rawGrowth: number[] = []
  try {
    await c.send(c.agent, sessionId, 'seq 1 100000')
    await raw.send('seq 1 100000')
    for (let run = 0; run < PLAN.throughputRuns; run++) {
      collectGarbage()
      const before = rssMiB()
      const heapBefore = heapMiB()
      const sampler = memorySampler()
      const { ms, result } = await c.send(c.agent, sessionId, command)
      const peak = sampler.stop()
      expectReady('throughput', result)
      if (!result.viewport.endsWith(String(PLAN.throughputLines)) && !result.viewport.includes(`\n${PLAN.throughputLines}\n`)) {
        throw new Error(`throughput: the viewport does not end with ${PLAN.throughputLines}: ${JSON.stringify(result.viewport.slice(-200))}`)
      }
      collectGarbage()
      retained.push(rssMiB() - before)
      heapRetained.push(heapMiB() - heapBefore)
      growth.push(peak.rss - before)
      heapGrowth.push(peak.heap - heapBefore)
      rates.push(payload / 1e6 / (ms / 1000))

      collectGarbage()
      const rawBefore = rssMiB()
      const rawSampler = memorySampler()
      const rawSend = await raw.send(command)
      rawGrowth.push(rawSampler.stop().rss - rawBefore)
      if (rawSend.bytes < payload) throw new Error(`throughput: the raw drain read ${rawSend.bytes} bytes, fewer than seq prints (${payload})`)
      rawRates.push(payload / 1e6 / (rawSend.ms / 1000))
      progress(`throughput: run ${run + 1}/${PLAN.throughputRuns}: conch ${round(rates.at(-1)!, 1)} MB/s, raw ${round(rawRates.at(-1)!, 1)} MB/s`)
    }
  } finally {
    await c.ctx.pty.close(c.agent, sessionId)
    await raw.hangup()
  }
  const mb = median(rates)
  const rawMb = median(rawRates)
  return {
    mb_per_s: round(mb, 1),
    raw_mb_per_s: round(rawMb, 1),
    ratio: ratio(mb, rawMb),
    rss_growth_mb: round(Math.max(...growth), 1),
    rss_retained_mb: round(Math.max(...retained), 1),
    heap_growth_mb: round(Math.max(...heapGrowth), 1),
    heap_retained_mb: round(Math.max(...heapRetained), 1),
    raw_rss_growth_mb: round(Math.max(...rawGrowth), 1),
    rss_limit_mb: round((2 * c.config.scrollbackMaxBytes) / 2 ** 20 + 16, 1),
    payload_bytes: payload,
    runs: PLAN.throughputRuns,
    units: 'MB = 10^6 bytes of seq output; rss_* and heap_* in MiB: growth = peak during the send over the level before it, retained = after a full GC',
  }
}

export const throughputBench: Bench = {
  keys: ['throughput'],
  async run(c) {
    progress(`throughput: seq 1 ${PLAN.throughputLines}, ${PLAN.throughputRuns} runs (conch and raw interleaved)`)
    return { throughput: await benchThroughput(c!) }
  },
  rows(r, verdict) {
    const t = r.throughput
    if (!t) return []
    return [
      ['throughput', `${t.mb_per_s} MB/s`, `raw ${t.raw_mb_per_s} MB/s`, x(t.ratio), verdict('throughput.mb_per_s')],
      ['throughput RSS growth', `${t.rss_growth_mb} MiB`, `raw ${t.raw_rss_growth_mb} MiB`, '', verdict('throughput.rss_growth_mb')],
    ]
  },
}
