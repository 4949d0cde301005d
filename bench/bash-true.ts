/**
 * `bash_true`: `true` sent to bash and settled, through ctx.pty, through the backend alone, and in a
 * bare node-pty bash loop, interleaved send by send.
 */
import type { Composition } from './compose.ts'
import { expectReady, latency, PLAN, progress, timed } from './harness.ts'
import { rawBash } from './raw.ts'
import type { Bench } from './registry.ts'
import { median, percentile, ratio, round, tally } from './stats.ts'
import { ms, x } from './table.ts'

export type BashTrueFigures = Awaited<ReturnType<typeof benchBashTrue>>

async function benchBashTrue(c: Composition) {
  const { sessionId } = await c.ctx.pty.spawn(c.agent, { type: 'shell' })
  const direct = await c.direct()
  const raw = rawBash({ cwd: c.workspace })
  await raw.ready
  const conch: number[] = []
  const directMs: number[] = []
  const rawMs: number[] = []
  const reasons: string[] = []
  const tiers: string[] = []
  // CPU time of this process during each kind of send (ms), to tell per-send work from waiting.
  const cpu = { conch: 0, raw: 0 }
  try {
    for (let i = -PLAN.warmup; i < PLAN.bashSends; i++) {
      // One of each per iteration, so drift in the machine's load hits all three alike.
      const conchSend = await timed(() => c.send(c.agent, sessionId, 'true'))
      const { ms, result } = conchSend.value
      expectReady('bash_true', result, ['stdin_read', 'inferred_idle'])
      const directSend = await timed(() => direct.startSend({ text: 'true', submit: true }).done)
      expectReady('bash_true (direct)', directSend.value, ['stdin_read', 'inferred_idle'])
      const rawSend = await timed(() => raw.send('true'))
      if (i < 0) continue
      cpu.conch += conchSend.cpuMs
      cpu.raw += rawSend.cpuMs
      conch.push(ms)
      reasons.push(result.waitReason)
      tiers.push(result.evidence.tier)
      directMs.push(directSend.ms)
      rawMs.push(rawSend.value.ms)
      if ((i + 1) % 50 === 0) progress(`bash_true: ${i + 1}/${PLAN.bashSends}`)
    }
  } finally {
    await c.ctx.pty.close(c.agent, sessionId)
    await direct.close()
    await raw.hangup()
  }
  const figures = latency(conch)
  const rawFigures = latency(rawMs)
  return {
    ...figures,
    raw_p50_ms: rawFigures.p50_ms,
    raw_p95_ms: rawFigures.p95_ms,
    ratio_p50: ratio(figures.p50_ms, rawFigures.p50_ms),
    over_raw_p50_ms: round(figures.p50_ms - rawFigures.p50_ms),
    direct_p50_ms: round(median(directMs)),
    direct_p95_ms: round(percentile(directMs, 95)),
    cpu_ms_per_send: round(cpu.conch / conch.length, 3),
    raw_cpu_ms_per_send: round(cpu.raw / rawMs.length, 3),
    sends: conch.length,
    wait_reasons: tally(reasons),
    tiers: tally(tiers),
    path: 'ctx.pty (PtyService + pty-local); direct_* = LocalBackend session without ctx.pty',
  }
}

export const bashTrueBench: Bench = {
  keys: ['bash_true'],
  async run(c) {
    progress(`bash_true: ${PLAN.bashSends} sends of 'true' (conch, direct backend and raw interleaved)`)
    return { bash_true: await benchBashTrue(c!) }
  },
  rows(r, verdict) {
    const b = r.bash_true
    if (!b) return []
    return [
      ['bash_true p50', ms(b.p50_ms), `raw ${ms(b.raw_p50_ms)}`, x(ratio(b.p50_ms, b.raw_p50_ms)), verdict('bash_true.p50_ms')],
      ['bash_true p95', ms(b.p95_ms), `raw ${ms(b.raw_p95_ms)}`, x(ratio(b.p95_ms, b.raw_p95_ms)), ''],
    ]
  },
}
