/**
 * `python_repl` and `node_repl`: `1+1` in a running REPL, settled by proof, against a bare node-pty
 * REPL loop and against the same sends settled by silence alone.
 */
import { SILENCE_TYPE, type Composition } from './compose.ts'
import { expectReady, latency, PLAN, progress, showsAnswer } from './harness.ts'
import { RawTerminal } from './raw.ts'
import type { Bench } from './registry.ts'
import { median, mostCommon, percentile, ratio, round, tally } from './stats.ts'
import { ms, x } from './table.ts'

interface Repl {
  key: 'python_repl' | 'node_repl'
  /** What starts it in a session. */
  command: string
  /** Its primary prompt as bytes end it, for the raw loop. */
  prompt: string
  /** What the raw loop's output must contain besides the prompt: the answer `2` as the REPL prints it. */
  answer: string
  argv: [string, ...string[]]
}

const REPLS: Repl[] = [
  { key: 'python_repl', command: 'python3', prompt: '>>> ', answer: '\r\n2\r\n', argv: ['python3'] },
  // The Node REPL ends its prompt with a cursor move (CHA, column 3) and colours results.
  { key: 'node_repl', command: 'node', prompt: '> \x1b[3G', answer: '\x1b[33m2\x1b[39m\r\n', argv: ['node'] },
]

async function benchRepl(c: Composition, repl: Repl) {
  const { sessionId } = await c.ctx.pty.spawn(c.agent, { type: 'shell' })
  const raw = new RawTerminal({ argv: repl.argv, prompt: repl.prompt, cwd: c.workspace })
  await raw.ready
  const conch: number[] = []
  const rawMs: number[] = []
  const reasons: string[] = []
  const tiers: string[] = []
  const elapsed: number[] = []
  let wrong = 0
  try {
    const { result: start } = await c.send(c.agent, sessionId, repl.command)
    expectReady(`${repl.key} start`, start, ['stdin_read', 'inferred_idle'])
    for (let i = -PLAN.warmup; i < PLAN.replSends; i++) {
      const { ms, result } = await c.send(c.agent, sessionId, '1+1')
      if (result.waitReason === 'timeout' || result.waitReason === 'session_exit') expectReady(repl.key, result, ['stdin_read', 'inferred_idle'])
      const rawSend = await raw.send('1+1', { expect: repl.answer })
      if (i < 0) continue
      if (!showsAnswer(result.viewport)) wrong++
      conch.push(ms)
      elapsed.push(result.elapsedMs)
      reasons.push(result.waitReason)
      tiers.push(result.evidence.tier)
      rawMs.push(rawSend.ms)
      if ((i + 1) % 25 === 0) progress(`${repl.key}: ${i + 1}/${PLAN.replSends}`)
    }
  } finally {
    await c.ctx.pty.close(c.agent, sessionId)
    await raw.destroy()
  }
  if (wrong > 0) throw new Error(`${repl.key}: ${wrong} of ${conch.length} viewports lack the answer 2`)
  const figures = latency(conch)
  return {
    ...figures,
    wait_reason: mostCommon(reasons),
    wait_reasons: tally(reasons),
    tiers: tally(tiers),
    /** The backend's own elapsedMs (write → settle), without the service and the caller's await. */
    backend_p50_ms: round(median(elapsed)),
    raw_p50_ms: round(median(rawMs)),
    raw_p95_ms: round(percentile(rawMs, 95)),
    sends: conch.length,
  }
}

/**
 * The same REPL sends with the exact tiers disabled, spread over `silenceSessions` sessions
 * per REPL at once (every send costs `idleSilenceMs`, so one session would take minutes).
 */
async function benchSilence(c: Composition, repls: readonly Repl[]) {
  const perSession = Math.ceil(PLAN.replSends / PLAN.silenceSessions)
  const run = async (repl: Repl) => {
    const samples: number[] = []
    const reasons: string[] = []
    // Sends that settled before the answer was printed (it lands in a later send's output).
    let early = 0
    await Promise.all(
      Array.from({ length: PLAN.silenceSessions }, async () => {
        const { sessionId } = await c.ctx.pty.spawn(c.agent, { type: SILENCE_TYPE })
        try {
          const { result: start } = await c.send(c.agent, sessionId, repl.command)
          expectReady(`${repl.key} silence start`, start, ['stdin_read', 'inferred_idle'])
          // On a busy machine the REPL may take longer to start than the silence lasts: one
          // unmeasured send gives it time, as a user would after a wrong guess.
          await c.send(c.agent, sessionId, '1+1')
          for (let i = 0; i < perSession; i++) {
            const { ms, result } = await c.send(c.agent, sessionId, '1+1')
            expectReady(`${repl.key} silence`, result, ['stdin_read', 'inferred_idle'])
            // A guess can be wrong: that is part of what silence costs, so it is counted, not fatal.
            if (!showsAnswer(result.viewport)) early++
            samples.push(ms)
            reasons.push(result.waitReason)
          }
        } finally {
          await c.ctx.pty.close(c.agent, sessionId)
        }
      }),
    )
    return { p50: round(median(samples)), p95: round(percentile(samples, 95)), reasons: tally(reasons), sends: samples.length, early }
  }
  progress(
    `silence-only: ${repls.map((repl) => repl.key).join(' and ')} in ${PLAN.silenceSessions} sessions each, ${perSession} sends per session ` +
      `(about ${Math.round(((perSession + 2) * c.config.idleSilenceMs) / 1000)} s)`,
  )
  const figures = await Promise.all(repls.map(run))
  return new Map(repls.map((repl, index) => [repl.key, figures[index]!]))
}

/** Both REPL figures: exact sends, the raw loop and the silence-only sends. */
async function benchRepls(c: Composition, repls: readonly Repl[]) {
  const silence = await benchSilence(c, repls)
  const out = []
  for (const repl of repls) {
    progress(`${repl.key}: ${PLAN.replSends} sends of '1+1' (conch and raw interleaved)`)
    const figures = await benchRepl(c, repl)
    const quiet = silence.get(repl.key)!
    out.push([repl.key, {
      ...figures,
      silence_p50_ms: quiet.p50,
      silence_p95_ms: quiet.p95,
      silence_wait_reasons: quiet.reasons,
      silence_sends: quiet.sends,
      silence_early: quiet.early,
      ratio_to_silence_p50: ratio(figures.p50_ms, quiet.p50),
      idle_silence_ms: c.config.idleSilenceMs,
    }] as const)
  }
  return out
}

export type ReplFigures = Awaited<ReturnType<typeof benchRepls>>[number][1]

export const replBench: Bench = {
  keys: ['python_repl', 'node_repl'],
  needs: [
    { keys: ['python_repl'], program: 'python3', args: ['-c', 'pass'] },
    { keys: ['node_repl'], program: 'node', args: ['-e', ''] },
  ],
  async run(c, only) {
    const figures = await benchRepls(c!, REPLS.filter((repl) => only.has(repl.key)))
    return Object.fromEntries(figures)
  },
  rows(r, verdict) {
    return (['python_repl', 'node_repl'] as const).flatMap((key) => {
      const repl = r[key]
      if (!repl) return []
      return [
        [`${key} p50`, ms(repl.p50_ms), `silence ${ms(repl.silence_p50_ms)}`, x(repl.ratio_to_silence_p50), verdict(`${key}.p50_ms`)],
        [`${key} p50 vs raw`, ms(repl.p50_ms), `raw ${ms(repl.raw_p50_ms)}`, x(ratio(repl.p50_ms, repl.raw_p50_ms)), ''],
        [`${key} p95`, ms(repl.p95_ms), `silence ${ms(repl.silence_p95_ms)}`, x(ratio(repl.p95_ms, repl.silence_p95_ms)), ''],
        [`${key} wait_reason`, String(repl.wait_reason), JSON.stringify(repl.tiers), '', verdict(`${key}.wait_reason`)],
      ]
    })
  },
}
