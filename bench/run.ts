/**
 * `pnpm bench` — conch's benchmarks. Measures conch's terminals side by side with bare node-pty
 * baselines, conch's startup against `node -e 0` (startup.ts) and its sub-agent runs against
 * the raw products (subagents.ts), each baseline in the same run; prints a table to stdout,
 * progress to stderr, and writes bench/results.json. docs/performance.md explains every figure.
 *
 * Not a test: a missed target is reported, never a failure. The exit code is non-zero only
 * when the benchmark itself fails (a phase throws, a send times out, wrong output).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import type { Agent } from '../packages/core/agent/src/index.ts'
import type { SendResult } from '../packages/pty/pty/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import { compose, SILENCE_TYPE, type Composition } from './compose.ts'
import { measureParser, type ParserFigures } from './parser.ts'
import { benchPtc, type PtcFigures } from './ptc.ts'
import { benchLongLine, type LongLineFigures } from './long-line.ts'
import { benchStartup, type StartupFigures } from './startup.ts'
import { benchSubagents, type SubagentFigures } from './subagents.ts'
import { benchSubmit, type SubmitFigures } from './submit.ts'
import { descendantsOf, destroyAllRaw, RawTerminal, rawBash, waitGone } from './raw.ts'
import { collectGarbage, median, mostCommon, percentile, ratio, round, rssMiB, tally } from './stats.ts'

/** Sizes of every phase. */
const PLAN = {
  bashSends: 200,
  replSends: 100,
  /** Silence-only REPL sends run in this many sessions at once (each settles after idleSilenceMs). */
  silenceSessions: 10,
  throughputLines: 3_000_000,
  throughputRuns: 3,
  parserMegabytes: 50,
  longLineMegabytes: 50,
  longLineRuns: 2,
  idleSessions: 32,
  idleSeconds: 10,
  idleBaselineSeconds: 5,
  scaleSends: 50,
  scaleSingleSends: 100,
  lifecycleRuns: 15,
  descendants: 10,
  warmup: 5,
  submitSends: 100,
} as const

const startedAt = performance.now()

function progress(message: string): void {
  process.stderr.write(`[bench ${((performance.now() - startedAt) / 1000).toFixed(1).padStart(6)} s] ${message}\n`)
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Summary of latency samples in ms. */
function latency(samples: readonly number[]): { p50_ms: number; p95_ms: number } {
  return { p50_ms: round(percentile(samples, 50)), p95_ms: round(percentile(samples, 95)) }
}

/** Throws when a send did not settle the way a correct terminal must. */
function expectReady(what: string, result: SendResult, reasons: readonly string[] = ['stdin_read']): void {
  if (!reasons.includes(result.waitReason)) {
    throw new Error(`${what}: settled ${result.waitReason} (${result.evidence.detail}), expected ${reasons.join(' or ')}; viewport: ${JSON.stringify(result.viewport.slice(-300))}`)
  }
}

/** Whether a REPL's viewport shows the line `2` (the answer to `1+1`, not the echoed input). */
function showsAnswer(viewport: string): boolean {
  return viewport.split('\n').some((line) => line.trim() === '2')
}

// ─── bash_true ──────────────────────────────────────────────────────────────────────

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
  // CPU time of this process during each kind of send (µs), to tell per-send work from waiting.
  const cpu = { conch: 0, raw: 0 }
  const cpuOf = async <T>(kind: keyof typeof cpu, counted: boolean, run: () => Promise<T>): Promise<T> => {
    const before = process.cpuUsage()
    const value = await run()
    const used = process.cpuUsage(before)
    if (counted) cpu[kind] += used.user + used.system
    return value
  }
  try {
    for (let i = -PLAN.warmup; i < PLAN.bashSends; i++) {
      // One of each per iteration, so drift in the machine's load hits all three alike.
      const { ms, result } = await cpuOf('conch', i >= 0, () => c.send(c.agent, sessionId, 'true'))
      expectReady('bash_true', result, ['stdin_read', 'inferred_idle'])
      const directStart = performance.now()
      const directResult = await direct.startSend({ text: 'true', submit: true }).done
      const directEnd = performance.now()
      expectReady('bash_true (direct)', directResult, ['stdin_read', 'inferred_idle'])
      const rawSend = await cpuOf('raw', i >= 0, () => raw.send('true'))
      if (i < 0) continue
      conch.push(ms)
      reasons.push(result.waitReason)
      tiers.push(result.evidence.tier)
      directMs.push(directEnd - directStart)
      rawMs.push(rawSend.ms)
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
    cpu_ms_per_send: round(cpu.conch / 1000 / conch.length, 3),
    raw_cpu_ms_per_send: round(cpu.raw / 1000 / rawMs.length, 3),
    sends: conch.length,
    wait_reasons: tally(reasons),
    tiers: tally(tiers),
    path: 'ctx.pty (PtyService + pty-local); direct_* = LocalBackend session without ctx.pty',
  }
}

// ─── python_repl / node_repl ────────────────────────────────────────────────────────

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

interface SilenceFigures {
  p50: number
  p95: number
  reasons: Record<string, number>
  sends: number
  /** Sends that settled before the answer was printed (it lands in a later send's output). */
  early: number
}

/**
 * The same REPL sends with the exact tiers disabled, spread over `silenceSessions` sessions
 * per REPL at once (every send costs `idleSilenceMs`, so one session would take minutes).
 */
async function benchSilence(c: Composition, repls: readonly Repl[]): Promise<Map<Repl['key'], SilenceFigures>> {
  const perSession = Math.ceil(PLAN.replSends / PLAN.silenceSessions)
  const run = async (repl: Repl): Promise<SilenceFigures> => {
    const samples: number[] = []
    const reasons: string[] = []
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
async function benchRepls(c: Composition, repls: readonly Repl[]): Promise<Map<Repl['key'], ReplFigures>> {
  const silence = await benchSilence(c, repls)
  const out = new Map<Repl['key'], ReplFigures>()
  for (const repl of repls) {
    progress(`${repl.key}: ${PLAN.replSends} sends of '1+1' (conch and raw interleaved)`)
    const figures = await benchRepl(c, repl)
    const quiet = silence.get(repl.key)!
    out.set(repl.key, {
      ...figures,
      silence_p50_ms: quiet.p50,
      silence_p95_ms: quiet.p95,
      silence_wait_reasons: quiet.reasons,
      silence_sends: quiet.sends,
      silence_early: quiet.early,
      ratio_to_silence_p50: ratio(figures.p50_ms, quiet.p50),
      idle_silence_ms: c.config.idleSilenceMs,
    })
  }
  return out
}

type ReplFigures = Awaited<ReturnType<typeof benchRepl>> & {
  silence_p50_ms: number
  silence_p95_ms: number
  silence_wait_reasons: Record<string, number>
  silence_sends: number
  silence_early: number
  ratio_to_silence_p50: number | undefined
  idle_silence_ms: number
}

// ─── throughput ─────────────────────────────────────────────────────────────────────

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

// ─── idle and scale ─────────────────────────────────────────────────────────────────

/** CPU this process used over `seconds`, as percent of one core (process.cpuUsage). */
async function cpuPercent(seconds: number): Promise<number> {
  const before = process.cpuUsage()
  const start = performance.now()
  await delay(seconds * 1000)
  const used = process.cpuUsage(before)
  const wallUs = (performance.now() - start) * 1000
  return ((used.user + used.system) / wallUs) * 100
}

interface IdleFigures {
  cpu_percent: number
  baseline_cpu_percent: number
  sessions: number
  seconds: number
}

interface ScaleFigures {
  p50_ms: number
  p95_ms: number
  single_p50_ms: number
  single_p95_ms: number
  ratio_p95: number | undefined
  sends_per_s: number
  wait_reasons: Record<string, number>
  /** This process's CPU during the concurrent sends, percent of one core (it runs on one). */
  harness_cpu_percent: number
  /** CPU of the session processes (wrapper, shell and children) per concurrent send, ms. */
  shell_cpu_ms_per_send: number
  raw_p50_ms: number
  raw_p95_ms: number
  raw_single_p95_ms: number
  raw_ratio_p95: number | undefined
  raw_sends_per_s: number
  raw_harness_cpu_percent: number
  raw_shell_cpu_ms_per_send: number
  sessions: number
  sends_each: number
}

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
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone
    }
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
  const cpuBefore = process.cpuUsage()
  const wallStart = performance.now()
  await Promise.all(
    loops.map(async (send) => {
      for (let i = 0; i < PLAN.scaleSends; i++) together.push(await send())
    }),
  )
  const wallMs = performance.now() - wallStart
  const cpu = process.cpuUsage(cpuBefore)
  return { single, together, wallMs, cpuPercent: ((cpu.user + cpu.system) / 1000 / wallMs) * 100, shellCpuMs: treeCpuMs(shells) - shellsBefore }
}

async function benchIdleAndScale(c: Composition): Promise<{ idle: IdleFigures; scale: ScaleFigures }> {
  progress(`idle: baseline, no sessions, ${PLAN.idleBaselineSeconds} s`)
  collectGarbage()
  const baseline = await cpuPercent(PLAN.idleBaselineSeconds)
  const ids = (await Promise.all(Array.from({ length: PLAN.idleSessions }, () => c.ctx.pty.spawn(c.agent, { type: 'shell' })))).map((s) => s.sessionId)
  let idle: IdleFigures
  let conch: Awaited<ReturnType<typeof sendLoops>>
  const reasons: string[] = []
  try {
    progress(`idle: ${PLAN.idleSessions} sessions open, ${PLAN.idleSeconds} s`)
    collectGarbage()
    const cpu = await cpuPercent(PLAN.idleSeconds)
    idle = { cpu_percent: round(cpu, 3), baseline_cpu_percent: round(baseline, 3), sessions: PLAN.idleSessions, seconds: PLAN.idleSeconds }
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
    idle,
    scale: {
      ...figures,
      single_p50_ms: round(median(conch.single)),
      single_p95_ms: round(singleP95),
      ratio_p95: ratio(figures.p95_ms, singleP95),
      sends_per_s: round(conch.together.length / (conch.wallMs / 1000), 1),
      // The first sends ran alone; the tally is of the concurrent ones.
      wait_reasons: tally(reasons.slice(PLAN.scaleSingleSends)),
      harness_cpu_percent: round(conch.cpuPercent, 1),
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

// ─── lifecycle ──────────────────────────────────────────────────────────────────────

const SPAWN_DESCENDANTS = `for i in $(seq ${PLAN.descendants}); do sleep 1000 & done`

/** SIGKILL to `pid`, ignoring a process that is already gone. */
function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

async function benchLifecycle(c: Composition) {
  const conch = async (owner: Agent, label: string) => {
    const open: number[] = []
    const close: number[] = []
    const stopped: number[] = []
    for (let i = 0; i < PLAN.lifecycleRuns; i++) {
      const openStart = performance.now()
      const { sessionId } = await c.ctx.pty.spawn(owner, { type: 'shell' })
      open.push(performance.now() - openStart)
      let closed = false
      try {
        const { result } = await c.send(owner, sessionId, SPAWN_DESCENDANTS)
        expectReady(`lifecycle ${label}`, result, ['stdin_read', 'inferred_idle'])
        const closeStart = performance.now()
        const report = await c.ctx.pty.close(owner, sessionId)
        close.push(performance.now() - closeStart)
        closed = true
        stopped.push(report.stopped.length)
        // The jobs were forked before the prompt came back; some may not have exec'd sleep yet.
        if (report.stopped.length < PLAN.descendants) {
          throw new Error(`lifecycle ${label}: the close stopped ${JSON.stringify(report.stopped)}, expected at least ${PLAN.descendants} processes`)
        }
      } finally {
        if (!closed) await c.ctx.pty.close(owner, sessionId).catch(() => {})
      }
    }
    progress(`lifecycle ${label}: open p50 ${round(median(open))} ms, close p50 ${round(median(close))} ms`)
    return { open, close, stopped }
  }
  const raw = async (wrap: ((argv: [string, ...string[]]) => [string, ...string[]]) | undefined, label: string) => {
    const open: number[] = []
    const close: number[] = []
    for (let i = 0; i < PLAN.lifecycleRuns; i++) {
      const terminal = rawBash({ cwd: c.workspace, ...(wrap ? { wrap } : {}) })
      try {
        open.push(await terminal.ready)
        await terminal.send(SPAWN_DESCENDANTS)
        const tree = [terminal.pid, ...descendantsOf(terminal.pid)]
        if (tree.length < PLAN.descendants + 1) throw new Error(`lifecycle ${label}: found ${tree.length - 1} descendants, expected at least ${PLAN.descendants}`)
        // The floor of a close: every process of the tree is already known; KILL them all and
        // wait until none runs. No discovery, no grace, no identity checks.
        const closeStart = performance.now()
        for (const pid of tree) killQuietly(pid)
        await waitGone(tree)
        close.push(performance.now() - closeStart)
      } finally {
        await terminal.destroy()
      }
    }
    progress(`lifecycle ${label}: open p50 ${round(median(open))} ms, close p50 ${round(median(close))} ms`)
    return { open, close }
  }
  const policy = { mode: 'workspace-write' as const, workspaceRoot: c.workspace }
  const bwrap = sandboxLocal.bubblewrapProvider(sandboxLocal.Config.parse({}))
  const confine = (argv: [string, ...string[]]) => bwrap.confine(argv, { ...policy, protectedPaths: [] }).argv

  const plain = await conch(c.agent, 'unconfined')
  const plainRaw = await raw(undefined, 'raw')
  const boxed = await conch(c.sandboxed, 'bubblewrap')
  const boxedRaw = await raw(confine, 'raw bubblewrap')
  return {
    open_p50_ms: round(median(plain.open)),
    close_p50_ms: round(median(plain.close)),
    open_sandbox_p50_ms: round(median(boxed.open)),
    close_sandbox_p50_ms: round(median(boxed.close)),
    open_p95_ms: round(percentile(plain.open, 95)),
    close_p95_ms: round(percentile(plain.close, 95)),
    open_sandbox_p95_ms: round(percentile(boxed.open, 95)),
    close_sandbox_p95_ms: round(percentile(boxed.close, 95)),
    raw_open_p50_ms: round(median(plainRaw.open)),
    raw_close_p50_ms: round(median(plainRaw.close)),
    raw_open_sandbox_p50_ms: round(median(boxedRaw.open)),
    raw_close_sandbox_p50_ms: round(median(boxedRaw.close)),
    stopped_p50: median(plain.stopped),
    stopped_sandbox_p50: median(boxed.stopped),
    runs: PLAN.lifecycleRuns,
    descendants: PLAN.descendants,
    raw_close_means: 'SIGKILL to every process of the bare tree (known in advance) until none runs (gone or a zombie)',
  }
}

// ─── machine, targets, report ───────────────────────────────────────────────────────

function machine() {
  const cpus = os.cpus()
  const git = (...args: string[]): string | undefined => {
    try {
      return execFileSync('git', args, { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    } catch {
      return undefined
    }
  }
  const commit = git('rev-parse', '--short', 'HEAD')
  // Whether the measured packages differ from that commit (uncommitted changes under packages/).
  const changed = git('status', '--porcelain', '--', 'packages')
  return {
    node: process.version,
    cpu_model: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memory_gib: round(os.totalmem() / 2 ** 30, 1),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    date: new Date().toISOString(),
    load_average_start: os.loadavg().map((load) => round(load)),
    ...(commit !== undefined ? { commit, packages_modified: changed !== undefined && changed !== '' } : {}),
    run_seconds: 0,
  }
}

interface Results {
  bash_true?: Awaited<ReturnType<typeof benchBashTrue>>
  python_repl?: ReplFigures
  node_repl?: ReplFigures
  throughput?: Awaited<ReturnType<typeof benchThroughput>>
  parser?: ParserFigures
  idle?: IdleFigures
  scale?: ScaleFigures
  lifecycle?: Awaited<ReturnType<typeof benchLifecycle>>
  ptc?: PtcFigures
  long_line?: LongLineFigures
  startup?: StartupFigures
  subagents?: SubagentFigures
  submit?: SubmitFigures
  machine: ReturnType<typeof machine>
}

/** The keys of results.json, in the order docs/performance.md lists them. */
const KEYS = ['bash_true', 'python_repl', 'node_repl', 'throughput', 'parser', 'idle', 'scale', 'lifecycle', 'ptc', 'long_line', 'startup', 'subagents', 'submit'] as const
type Key = (typeof KEYS)[number]

interface Target {
  figure: string
  value: number | string | undefined
  limit: string
  met: boolean
  /** How far beyond the limit a missed figure is, in the figure's unit. */
  missed_by?: number
}

/** The targets (docs/performance.md, "The figures"), for the figures that were measured. */
function targets(r: Results): Target[] {
  const out: Target[] = []
  const atMost = (figure: string, value: number, limit: number, label: string) =>
    out.push({ figure, value, limit: label, met: value <= limit, ...(value > limit ? { missed_by: round(value - limit, 3) } : {}) })
  const atLeast = (figure: string, value: number, limit: number, label: string) =>
    out.push({ figure, value, limit: label, met: value >= limit, ...(value < limit ? { missed_by: round(limit - value, 3) } : {}) })
  if (r.bash_true) {
    const b = r.bash_true
    atMost('bash_true.p50_ms', b.p50_ms, b.raw_p50_ms + 3, `≤ raw_p50_ms + 3 = ${round(b.raw_p50_ms + 3)}`)
    const cpuLimit = 1.5 * b.raw_cpu_ms_per_send + 0.1
    atMost('bash_true.cpu_ms_per_send', b.cpu_ms_per_send, cpuLimit, `≤ 1.5 × raw_cpu_ms_per_send + 0.1 = ${round(cpuLimit, 3)}`)
  }
  for (const [key, limit] of [['python_repl', 5], ['node_repl', 10]] as const) {
    const repl = r[key]
    if (!repl) continue
    atMost(`${key}.p50_ms`, repl.p50_ms, limit, `≤ ${limit}`)
    out.push({ figure: `${key}.wait_reason`, value: repl.wait_reason, limit: 'stdin_read', met: repl.wait_reason === 'stdin_read' })
  }
  if (r.throughput) {
    const t = r.throughput
    atLeast('throughput.mb_per_s', t.mb_per_s, t.raw_mb_per_s / 2, `≥ raw_mb_per_s / 2 = ${round(t.raw_mb_per_s / 2, 1)}`)
    atMost('throughput.rss_growth_mb', t.rss_growth_mb, t.rss_limit_mb, `≤ 2 × scrollbackMaxBytes in MiB + 16 = ${t.rss_limit_mb}`)
  }
  if (r.parser) {
    // On CPU time: the parser's cost, which a core shared with other work does not change.
    atLeast('parser.cpu_mb_per_s', r.parser.cpu_mb_per_s, 250, '≥ 250')
    atLeast('parser.cpu_ratio_to_decode', r.parser.cpu_ratio_to_decode, 0.4, '≥ 0.4')
    atLeast('parser.short_cpu_mb_per_s', r.parser.short_cpu_mb_per_s, 200, '≥ 200')
    atMost('parser.screen_render_ms', r.parser.screen_render_ms, 1, '≤ 1')
  }
  if (r.idle) {
    const cpu = r.idle.cpu_percent
    out.push({ figure: 'idle.cpu_percent', value: cpu, limit: '< 1', met: cpu < 1, ...(cpu >= 1 ? { missed_by: round(cpu - 1, 3) } : {}) })
  }
  if (r.scale) {
    const sc = r.scale
    atMost('scale.p95_ms', sc.p95_ms, 3 * sc.single_p95_ms, `≤ 3 × single_p95_ms = ${round(3 * sc.single_p95_ms)}`)
    atMost('scale.p95_ms (raw)', sc.p95_ms, 1.5 * sc.raw_p95_ms, `≤ 1.5 × raw_p95_ms = ${round(1.5 * sc.raw_p95_ms)}`)
    atLeast('scale.sends_per_s', sc.sends_per_s, 0.6 * sc.raw_sends_per_s, `≥ 0.6 × raw_sends_per_s = ${round(0.6 * sc.raw_sends_per_s, 1)}`)
  }
  if (r.lifecycle) {
    atMost('lifecycle.close_p50_ms', r.lifecycle.close_p50_ms, 10, '≤ 10')
    atMost('lifecycle.close_sandbox_p50_ms', r.lifecycle.close_sandbox_p50_ms, 10, '≤ 10')
  }
  if (r.ptc) {
    const p = r.ptc
    atMost('ptc.cold_p50_ms', p.cold_p50_ms, p.node_spawn_p50_ms + 15, `≤ node_spawn_p50_ms + 15 = ${round(p.node_spawn_p50_ms + 15)}`)
    atMost('ptc.spare_p50_ms', p.spare_p50_ms, 10, '≤ 10')
    if (p.nested_ratio !== undefined) atMost('ptc.nested_ratio', p.nested_ratio, 1.2, '≤ 1.2 × direct')
  }
  if (r.submit) for (const [program, figures] of Object.entries(r.submit)) atMost(`submit.${program}.enter_gap_p50_ms`, figures.enter_gap_p50_ms, 1, '< 1')
  if (r.long_line) atMost('long_line.long_ms', r.long_line.long_ms, 2 * r.long_line.short_ms, `≤ 2 × short_ms = ${round(2 * r.long_line.short_ms)}`)
  if (r.startup) {
    const st = r.startup
    atMost('startup.run_built.p50_ms', st.run_built.p50_ms, 300, '≤ 300')
    if (st.run_built.peak_rss_mib !== undefined) atMost('startup.run_built.peak_rss_mib', st.run_built.peak_rss_mib, 70, '≤ 70')
    atMost('startup.acp_built.p50_ms', st.acp_built.p50_ms, 300, '≤ 300')
  }
  for (const key of ['codex', 'claude_code'] as const) {
    const v = r.subagents?.[key]
    if (v) atMost(`subagents.${key}.conch_p50_ms`, v.conch_p50_ms, v.raw_p50_ms + v.allowed_ms, `≤ raw + max(10 %, 30 ms) = ${round(v.raw_p50_ms + v.allowed_ms)}`)
  }
  return out
}

function printTable(r: Results, checks: readonly Target[]): void {
  const verdict = (figure: string) => {
    const check = checks.find((t) => t.figure === figure)
    if (check === undefined) return ''
    return check.met ? `met (${check.limit})` : `MISSED by ${check.missed_by ?? ''} (${check.limit})`
  }
  const ms = (value: number | undefined) => (value === undefined ? '' : `${value} ms`)
  const x = (value: number | undefined) => (value === undefined ? '' : `×${value}`)
  const rows: string[][] = [['figure', 'conch', 'baseline', 'ratio', 'target']]
  if (r.bash_true) {
    const b = r.bash_true
    rows.push(['bash_true p50', ms(b.p50_ms), `raw ${ms(b.raw_p50_ms)}`, x(ratio(b.p50_ms, b.raw_p50_ms)), verdict('bash_true.p50_ms')])
    rows.push(['bash_true p95', ms(b.p95_ms), `raw ${ms(b.raw_p95_ms)}`, x(ratio(b.p95_ms, b.raw_p95_ms)), ''])
  }
  for (const key of ['python_repl', 'node_repl'] as const) {
    const repl = r[key]
    if (!repl) continue
    rows.push([`${key} p50`, ms(repl.p50_ms), `silence ${ms(repl.silence_p50_ms)}`, x(repl.ratio_to_silence_p50), verdict(`${key}.p50_ms`)])
    rows.push([`${key} p50 vs raw`, ms(repl.p50_ms), `raw ${ms(repl.raw_p50_ms)}`, x(ratio(repl.p50_ms, repl.raw_p50_ms)), ''])
    rows.push([`${key} p95`, ms(repl.p95_ms), `silence ${ms(repl.silence_p95_ms)}`, x(ratio(repl.p95_ms, repl.silence_p95_ms)), ''])
    rows.push([`${key} wait_reason`, String(repl.wait_reason), JSON.stringify(repl.tiers), '', verdict(`${key}.wait_reason`)])
  }
  if (r.throughput) {
    const t = r.throughput
    rows.push(['throughput', `${t.mb_per_s} MB/s`, `raw ${t.raw_mb_per_s} MB/s`, x(t.ratio), verdict('throughput.mb_per_s')])
    rows.push(['throughput RSS growth', `${t.rss_growth_mb} MiB`, `raw ${t.raw_rss_growth_mb} MiB`, '', verdict('throughput.rss_growth_mb')])
  }
  if (r.parser) {
    const p = r.parser
    rows.push(['parser, CPU time', `${p.cpu_mb_per_s} MB/s`, `decode ${p.decode_cpu_mb_per_s} MB/s`, x(p.cpu_ratio_to_decode), `${verdict('parser.cpu_mb_per_s')}; ${verdict('parser.cpu_ratio_to_decode')}`])
    rows.push(['parser, short lines, CPU time', `${p.short_cpu_mb_per_s} MB/s`, `decode ${p.short_decode_cpu_mb_per_s} MB/s`, x(p.short_cpu_ratio_to_decode), verdict('parser.short_cpu_mb_per_s')])
    rows.push(['parser, wall clock', `${p.mb_per_s} MB/s`, `decode ${p.decode_mb_per_s} MB/s`, x(p.ratio_to_decode), 'no target'])
    rows.push(['parser, short lines, wall clock', `${p.short_mb_per_s} MB/s`, `decode ${p.short_decode_mb_per_s} MB/s`, x(p.short_ratio_to_decode), 'no target'])
    // Figures without a baseline: the mixed stream's and the short lines' side by side.
    rows.push(['parser + scrollback + buffer (mixed; short)', `${p.pipeline_mb_per_s}; ${p.short_pipeline_mb_per_s} MB/s`, '', '', 'no target'])
    rows.push(['parser after consumers, CPU (mixed; short)', `${p.after_consumers_cpu_mb_per_s}; ${p.short_after_consumers_cpu_mb_per_s} MB/s`, '', '', 'no target'])
    rows.push(['screen render 160x40', ms(p.screen_render_ms), '', '', verdict('parser.screen_render_ms')])
  }
  if (r.idle) rows.push(['idle CPU', `${r.idle.cpu_percent} %`, `no sessions ${r.idle.baseline_cpu_percent} %`, '', verdict('idle.cpu_percent')])
  if (r.scale) {
    const sc = r.scale
    rows.push(['scale p95', ms(sc.p95_ms), `single ${ms(sc.single_p95_ms)}`, x(sc.ratio_p95), verdict('scale.p95_ms')])
    rows.push(['scale p95, raw', ms(sc.raw_p95_ms), `single ${ms(sc.raw_single_p95_ms)}`, x(sc.raw_ratio_p95), ''])
    rows.push(['scale p95 vs raw', ms(sc.p95_ms), `raw ${ms(sc.raw_p95_ms)}`, x(ratio(sc.p95_ms, sc.raw_p95_ms)), ''])
  }
  if (r.lifecycle) {
    const l = r.lifecycle
    rows.push(['open p50', ms(l.open_p50_ms), `raw ${ms(l.raw_open_p50_ms)}`, x(ratio(l.open_p50_ms, l.raw_open_p50_ms)), ''])
    rows.push([`close p50 (${l.descendants} descendants)`, ms(l.close_p50_ms), `raw ${ms(l.raw_close_p50_ms)}`, x(ratio(l.close_p50_ms, l.raw_close_p50_ms)), ''])
    rows.push(['open p50, bubblewrap', ms(l.open_sandbox_p50_ms), `raw ${ms(l.raw_open_sandbox_p50_ms)}`, x(ratio(l.open_sandbox_p50_ms, l.raw_open_sandbox_p50_ms)), ''])
    rows.push(['close p50, bubblewrap', ms(l.close_sandbox_p50_ms), `raw ${ms(l.raw_close_sandbox_p50_ms)}`, x(ratio(l.close_sandbox_p50_ms, l.raw_close_sandbox_p50_ms)), ''])
  }
  if (r.ptc) {
    const p = r.ptc
    rows.push(['run_code return 1+1 p50, cold', ms(p.cold_p50_ms), `node -e 0 ${ms(p.node_spawn_p50_ms)}`, x(ratio(p.cold_p50_ms, p.node_spawn_p50_ms)), verdict('ptc.cold_p50_ms')])
    rows.push(['run_code return 1+1 p50, spare', ms(p.spare_p50_ms), `node -e 0 ${ms(p.node_spawn_p50_ms)}`, x(ratio(p.spare_p50_ms, p.node_spawn_p50_ms)), verdict('ptc.spare_p50_ms')])
    rows.push(['run_code p50, cold, bubblewrap', ms(p.cold_sandbox_p50_ms), `cold ${ms(p.cold_p50_ms)}`, x(ratio(p.cold_sandbox_p50_ms, p.cold_p50_ms)), ''])
    rows.push([`${p.nested_sends} terminal_send from run_code p50`, ms(p.nested_p50_ms), `direct ${ms(p.direct_p50_ms)}`, x(p.nested_ratio), verdict('ptc.nested_ratio')])
    rows.push(['  the same program making no call p50', ms(p.nested_fixed_p50_ms), '', '', ''])
    rows.push(['  one call: (nested − no call) / direct', '', '', x(p.nested_per_call_ratio), ''])
    rows.push(['  this process CPU per call', ms(p.nested_host_cpu_per_call_ms), `direct ${ms(p.direct_host_cpu_per_call_ms)}`, x(ratio(p.nested_host_cpu_per_call_ms, p.direct_host_cpu_per_call_ms)), ''])
    rows.push(['  the program CPU per call', ms(p.nested_program_cpu_per_call_ms), '', '', ''])
  }
  if (r.long_line) {
    const l = r.long_line
    rows.push([`long line ${l.megabytes} MB`, ms(l.long_ms), `short lines ${ms(l.short_ms)}`, x(l.ratio), verdict('long_line.long_ms')])
  }
  if (r.startup) {
    const st = r.startup
    const built = st.build_current ? (st.code_cache ? 'built' : 'built, no code cache') : 'built (stale: ran from source)'
    const rss = st.run_built.peak_rss_mib === undefined ? '' : `, ${st.run_built.peak_rss_mib} MiB`
    rows.push([`conch run p50 (${built})`, `${ms(st.run_built.p50_ms)}${rss}`, `node -e 0 ${ms(st.node.p50_ms)}, ${st.node.peak_rss_mib ?? ''} MiB`, x(st.run_built.ratio_to_node_p50), `${verdict('startup.run_built.p50_ms')}; ${verdict('startup.run_built.peak_rss_mib')}`])
    rows.push([`conch acp initialize p50 (${built})`, ms(st.acp_built.p50_ms), `node -e 0 ${ms(st.node.p50_ms)}`, x(st.acp_built.ratio_to_node_p50), verdict('startup.acp_built.p50_ms')])
    if (Number.isFinite(st.run_source.p50_ms)) {
      rows.push(['conch run p50, from source', ms(st.run_source.p50_ms), `node -e 0 ${ms(st.node.p50_ms)}`, x(st.run_source.ratio_to_node_p50), ''])
      rows.push(['conch acp initialize p50, from source', ms(st.acp_source.p50_ms), `node -e 0 ${ms(st.node.p50_ms)}`, x(st.acp_source.ratio_to_node_p50), ''])
    }
  }
  for (const [key, label] of [['codex', 'codex'], ['claude_code', 'claude-code']] as const) {
    const v = r.subagents?.[key]
    if (v) rows.push([`sub-agent ${label} spawn→answer p50`, ms(v.conch_p50_ms), `raw ${ms(v.raw_p50_ms)}`, x(ratio(v.conch_p50_ms, v.raw_p50_ms)), verdict(`subagents.${key}.conch_p50_ms`)])
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)))
  const line = (row: readonly string[]) => row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd()
  console.log(line(rows[0]!))
  console.log(widths.map((width) => '─'.repeat(width)).join('  '))
  for (const row of rows.slice(1)) console.log(line(row))
  const m = r.machine
  console.log(`\n${m.cpu_model}, ${m.cores} cores, node ${m.node}, load average at start ${m.load_average_start.join(' ')}, ${m.run_seconds} s`)
  for (const note of r.subagents?.skipped ?? []) console.log(`skipped sub-agent row: ${note}`)
  const missed = checks.filter((t) => !t.met)
  console.log(missed.length === 0 ? 'every target met' : `missed targets: ${missed.map((t) => t.figure).join(', ')}`)
}

// ─── main ───────────────────────────────────────────────────────────────────────────

const USAGE = `usage: pnpm bench [--only KEY[,KEY…]]

Runs every benchmark, prints a table and writes bench/results.json. With --only, runs just
the named figures (${KEYS.join(', ')}; idle and scale run together) and writes nothing.`

/** The figures to run: all, or those named by `--only a,b`. */
function selection(argv: readonly string[]): Set<Key> {
  const args = argv[0] === '--' ? argv.slice(1) : argv
  if (args.length === 0) return new Set(KEYS)
  if (args[0] === '--help' || args[0] === '-h') {
    console.log(USAGE)
    process.exit(0)
  }
  if (args[0] !== '--only' || args.length !== 2) throw new Error(`unknown arguments ${args.join(' ')}\n${USAGE}`)
  const chosen = args[1]!.split(',').map((key) => key.trim())
  const unknown = chosen.filter((key) => !(KEYS as readonly string[]).includes(key))
  if (unknown.length) throw new Error(`unknown figure ${unknown.join(', ')}; known: ${KEYS.join(', ')}`)
  return new Set(chosen as Key[])
}

/** Programs the selected figures start; a missing one fails the run at once, naming it. */
function preflight(only: ReadonlySet<Key>): void {
  const needs: [string, string[], boolean][] = [
    ['bash', ['-c', 'true'], true],
    ['python3', ['-c', 'pass'], only.has('python_repl')],
    ['node', ['-e', ''], only.has('node_repl') || only.has('submit')],
    ['bwrap', ['--ro-bind', '/', '/', 'true'], only.has('lifecycle')],
  ]
  for (const [program, args, needed] of needs) {
    if (needed && spawnSync(program, args, { stdio: 'ignore' }).status !== 0) {
      throw new Error(`${program} is needed for the selected figures and does not run here (\`${program} ${args.join(' ')}\` failed); install it or leave those figures out with --only`)
    }
  }
}

async function main(): Promise<void> {
  const only = selection(process.argv.slice(2))
  preflight(only)
  const complete = only.size === KEYS.length
  const results: Results = { machine: machine() }
  progress(`machine: ${results.machine.cpu_model}, ${results.machine.cores} cores, load average ${results.machine.load_average_start.join(' ')}`)

  if (only.has('parser')) {
    progress(`parser: ${PLAN.parserMegabytes} MB synthetic stream`)
    results.parser = measureParser(PLAN.parserMegabytes)
    progress(`parser: ${results.parser.cpu_mb_per_s} MB/s of CPU time (short lines ${results.parser.short_cpu_mb_per_s})`)
  }

  const c = await compose()
  let interrupted = false
  const onSignal = () => {
    interrupted = true
    progress('interrupted: closing terminals')
    void Promise.allSettled([c.dispose(), destroyAllRaw()]).then(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    if (only.has('bash_true')) {
      progress(`bash_true: ${PLAN.bashSends} sends of 'true' (conch, direct backend and raw interleaved)`)
      results.bash_true = await benchBashTrue(c)
    }
    const repls = REPLS.filter((repl) => only.has(repl.key))
    if (repls.length) {
      const figures = await benchRepls(c, repls)
      for (const [key, value] of figures) results[key] = value
    }
    if (only.has('throughput')) {
      progress(`throughput: seq 1 ${PLAN.throughputLines}, ${PLAN.throughputRuns} runs (conch and raw interleaved)`)
      results.throughput = await benchThroughput(c)
    }
    if (only.has('idle') || only.has('scale')) Object.assign(results, await benchIdleAndScale(c))
    if (only.has('lifecycle')) {
      progress(`lifecycle: ${PLAN.lifecycleRuns} opens and closes each, unconfined and under bubblewrap, conch and raw`)
      results.lifecycle = await benchLifecycle(c)
    }
    if (only.has('ptc')) results.ptc = await benchPtc(progress)
    if (only.has('startup')) {
      progress('startup: conch run and conch acp initialize, built and from source, against node -e 0, 9 runs each')
      results.startup = await benchStartup(progress)
    }
    if (only.has('subagents')) {
      progress('subagents: codex and claude-code spawn → answer through conch and raw, with the fake model server, 7 rounds')
      results.subagents = await benchSubagents(progress)
    }
    if (only.has('long_line')) {
      progress(`long_line: one ${PLAN.longLineMegabytes} MB line against ${PLAN.longLineMegabytes} MB of 80-byte lines, ${PLAN.longLineRuns} runs`)
      results.long_line = await benchLongLine(c.ctx.pty, c.agent, PLAN.longLineMegabytes, PLAN.longLineRuns)
      progress(`long_line: ${results.long_line.long_ms} ms against ${results.long_line.short_ms} ms`)
    }
    if (only.has('submit')) {
      progress(`submit: ${PLAN.submitSends} sends each at bash, python3 and node, Enter apart and glued, interleaved`)
      results.submit = await benchSubmit(c, PLAN.submitSends, progress)
    }
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    if (!interrupted) {
      await destroyAllRaw()
      await c.dispose()
    }
  }
  results.machine.run_seconds = round((performance.now() - startedAt) / 1000, 1)
  const checks = targets(results)
  if (complete) {
    const ordered = { ...Object.fromEntries(KEYS.map((key) => [key, results[key]])), machine: results.machine, targets: checks }
    const file = fileURLToPath(new URL('./results.json', import.meta.url))
    writeFileSync(file, `${JSON.stringify(ordered, null, 2)}\n`)
    progress(`wrote ${file}`)
  } else {
    console.log(JSON.stringify({ ...results, targets: checks }, null, 2))
  }
  printTable(results, checks)
}

main().then(
  () => process.exit(0),
  async (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    await destroyAllRaw().catch(() => {})
    process.exit(1)
  },
)
