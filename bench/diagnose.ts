/**
 * Where the time of a send, an open and a close goes — the evidence behind the diagnoses in
 * docs/performance.md. Not part of `pnpm bench`; run it by hand, all parts or those named:
 *
 *   pnpm exec tsx bench/diagnose.ts [phases] [proc] [close] [profile]
 *
 * 0. Phases of a bash `true` send (`phases`): each send's events stamped from its `startSend` —
 *    the baseline read, the text's write, its echo, Enter's write, the chunk with the prompt, the
 *    foreground look and the shell's read check, the settle — on a session through ctx.pty and
 *    one on the backend directly, interleaved send by send with a raw node-pty bash (write, first
 *    output, prompt); the median of each phase.
 * 1. /proc cost: how many files the harness reads under /proc (the synchronous and promise
 *    calls of node:fs, counted by name) per bash `true` send, per REPL `1+1`
 *    send, per open and per close of a session with 10 running descendants, next to how many
 *    processes the machine runs (a probe walks all of them).
 * 2. Probe timeline of REPL sends: when output arrived and when each /proc probe ran and what
 *    it saw, relative to the send's start, up to the settle — to see which rule held a send back.
 * 3. Close: when the last process of the session's tree was gone (polled every ms from outside)
 *    against when `close()` resolved.
 * 4. Harness CPU of concurrent sends: 32 sessions × 50 `true` sends at once with the V8
 *    profiler on (node:inspector) only for that part; the functions with the most self time.
 * The output pipeline without a terminal (the parser with and without the scrollback and the
 * send buffer) is `pnpm bench --only parser`.
 *
 * Sessions are started on the backend directly (`LocalBackend`, default config, the /proc
 * inspector wrapped to record its probes), owned by a stand-in owner, unconfined.
 */
import fs, { readdirSync } from 'node:fs'
import { loadavg } from 'node:os'
import fsPromises from 'node:fs/promises'
import { Session } from 'node:inspector/promises'
import { syncBuiltinESMExports } from 'node:module'
import type { Agent } from '../packages/core/agent/src/index.ts'
import type { SandboxPolicyServiceApi } from '../packages/sandbox/sandbox-policy/src/index.ts'
import type { SandboxServiceApi } from '../packages/sandbox/sandbox/src/index.ts'
import {
  Config,
  LocalBackend,
  linuxInspector,
  type LocalSession,
  type TerminalInspector,
} from '../packages/pty/pty-local/src/index.ts'
import { procFiles } from '../packages/pty/pty-local/src/proc-files.ts'
import { compose } from './compose.ts'
import { timed } from './harness.ts'
import { descendantsOf, isGone, rawBash } from './raw.ts'
import { median, round, tally } from './stats.ts'

// ─── counting /proc reads ───────────────────────────────────────────────────────────

const counted = ['readFileSync', 'readdirSync', 'readlinkSync', 'statSync', 'readFile', 'readdir', 'readlink', 'openSync', 'readSync', 'read'] as const
type Counted = (typeof counted)[number]
let totalReads = 0
const counts = Object.fromEntries(counted.map((name) => [name, 0])) as Record<Counted, number>

/** Replaces `target[name]` by a wrapper that counts calls whose first argument is a /proc path (`any`: every call). */
function count(target: object, name: Counted, any = false): void {
  const functions = target as Record<string, (...args: unknown[]) => unknown>
  const original = functions[name]!
  functions[name] = (...args: unknown[]) => {
    if (any || String(args[0]).startsWith('/proc')) {
      counts[name]++
      totalReads++
    }
    return original(...args)
  }
}
for (const name of ['readFileSync', 'readdirSync', 'readlinkSync', 'statSync', 'openSync'] as const) count(fs, name)
// Reads of the /proc descriptors the inspector keeps open (src/proc-files.ts) take a descriptor,
// not a path: every one is counted (nothing else in this process reads by descriptor).
for (const name of ['readSync', 'read'] as const) count(fs, name, true)
// The promise API (the process table of @conch/subprocess reads /proc through it).
for (const name of ['readFile', 'readdir', 'readlink'] as const) count(fsPromises, name)
// Named imports of node:fs and node:fs/promises in other modules follow the wrappers from here on.
syncBuiltinESMExports()

function since(before: Record<Counted, number>, divisor = 1): Record<Counted | 'total', number> {
  const out = {} as Record<Counted | 'total', number>
  let total = 0
  for (const name of counted) {
    out[name] = round((counts[name] - before[name]) / divisor, 1)
    total += counts[name] - before[name]
  }
  out.total = round(total / divisor, 1)
  return out
}

// ─── a backend with a recording inspector ───────────────────────────────────────────

interface ProbeEvent {
  at: number
  ms: number
  /** /proc files read during the probe. */
  reads: number
  verdict: string
  detail: string
}

let clockStart = 0
const probeLog: ProbeEvent[] = []

function recording(inner: TerminalInspector): TerminalInspector {
  return {
    ...inner,
    exact: inner.exact,
    async probe() {
      const start = performance.now()
      const before = totalReads
      const result = await inner.probe()
      const reads = totalReads - before
      probeLog.push({ at: round(start - clockStart, 1), ms: round(performance.now() - start, 2), reads, verdict: result.verdict, detail: result.detail })
      return result
    },
  }
}

const owner = { id: 'agent-diagnose', session: { id: 'session-diagnose' } } as unknown as Agent
const backend = new LocalBackend({
  config: Config.parse({}),
  sandbox: { confine: () => Promise.reject(new Error('unconfined diagnosis')) } as unknown as SandboxServiceApi,
  sandboxPolicy: { resolve: () => ({ mode: 'danger-full-access', workspaceRoot: process.cwd(), sessionId: owner.session.id }) } as unknown as SandboxPolicyServiceApi,
  inspect: (terminal) => recording(linuxInspector({ pid: terminal.pid, ...terminal.slave, path: terminal.slavePath })),
})

let opened = 0
const open = () => backend.spawn({ owner, sessionId: `diagnose-${++opened}`, signal: new AbortController().signal })

async function send(session: LocalSession, text: string): Promise<{ ms: number; outputs: number[]; tier: string; detail: string }> {
  clockStart = performance.now()
  const outputs: number[] = []
  const operation = session.startSend({ text, submit: true })
  operation.onOutput(() => outputs.push(round(performance.now() - clockStart, 1)))
  const result = await operation.done
  return { ms: round(performance.now() - clockStart, 1), outputs, tier: result.evidence.tier, detail: result.evidence.detail }
}

// ─── main ───────────────────────────────────────────────────────────────────────────

async function perSend(label: string, session: LocalSession, text: string, n: number) {
  const before = { ...counts }
  const times: number[] = []
  for (let i = 0; i < n; i++) times.push((await send(session, text)).ms)
  console.log(`${label}: p50 ${round(median(times))} ms; /proc reads per send ${JSON.stringify(since(before, n))}`)
}

// ─── phases of a bash `true` send ───────────────────────────────────────────────────

/** One stamped event of a send, ms from its `startSend`; a /proc call also has its end. */
interface Stamp {
  what: 'baseline' | 'write' | 'data' | 'foreground' | 'read check' | 'memory' | 'settled'
  at: number
  end?: number
  text?: string
}

/** The stamps of the send being traced, and when it started. */
let tracing: { stamps: Stamp[]; origin: number } | undefined

/** An async call of `target[name]` stamped as `what` into the send being traced. */
function stampCalls(target: object, name: string, what: Stamp['what']): void {
  const functions = target as Record<string, (...args: unknown[]) => Promise<unknown>>
  const call = functions[name]!.bind(target)
  functions[name] = async (...args) => {
    const trace = tracing
    const stamp: Stamp = { what, at: trace === undefined ? 0 : performance.now() - trace.origin }
    trace?.stamps.push(stamp)
    const value = await call(...args)
    if (trace !== undefined) stamp.end = performance.now() - trace.origin
    stamp.text = String(value)
    return value
  }
}

// Process memory (the fd set of the shell's pselect6) is read on the thread pool through the
// cache every inspector shares.
stampCalls(procFiles, 'readMemory', 'memory')

/**
 * Stamps what `session` does during a traced send: its writes (the terminal's), each chunk of
 * output before the session parses it, and the inspector calls of the controlled prompt's path —
 * wrapped in place on the live objects (bench-only instrumentation, as bench/submit.ts does).
 */
function stamp(session: LocalSession): void {
  const inner = session as unknown as { terminal: { write(data: string): Promise<void> }; onData(chunk: Buffer): void; inspector: TerminalInspector }
  const note = (what: Stamp['what'], text: string) => tracing?.stamps.push({ what, at: performance.now() - tracing.origin, text })
  const write = inner.terminal.write.bind(inner.terminal)
  inner.terminal.write = (data) => {
    note('write', data)
    return write(data)
  }
  const onData = inner.onData.bind(session)
  inner.onData = (chunk) => {
    note('data', chunk.toString('latin1'))
    onData(chunk)
  }
  stampCalls(inner.inspector, 'taskSwitches', 'baseline')
  stampCalls(inner.inspector, 'foregroundGroup', 'foreground')
  stampCalls(inner.inspector, 'blockedInRead', 'read check')
}

/** The phases of one send from its stamps (ms), or the reason its shape is not the usual one. */
function phasesOf(stamps: readonly Stamp[]): Map<string, number> | string {
  const [baseline] = stamps.filter((stamp) => stamp.what === 'baseline')
  const writes = stamps.filter((stamp) => stamp.what === 'write')
  // The text and Enter apart, or in one write (at the shell's own prompt).
  const apart = writes.length === 2 && writes[1]!.text === '\r'
  if (baseline === undefined || !(apart || (writes.length === 1 && writes[0]!.text!.endsWith('\r')))) return `writes ${JSON.stringify(writes.map((w) => w.text))}`
  const text = writes[0]!
  const enter = writes.at(-1)!
  const echo = apart ? stamps.find((stamp) => stamp.what === 'data' && stamp.at >= text.at) : undefined
  if (apart && (echo === undefined || echo.at > enter.at)) return 'Enter before any echo'
  const look = stamps.find((stamp) => stamp.what === 'foreground' && stamp.at >= enter.at)
  const checks = stamps.filter((stamp) => stamp.what === 'read check' && stamp.at >= enter.at)
  const settled = stamps.find((stamp) => stamp.what === 'settled')!
  if (look === undefined || checks.length === 0) return 'no foreground look'
  if (checks.length > 1) return `${checks.length} read checks (the shell was not yet blocked in its read)`
  const check = checks[0]!
  // The foreground group and the read check may run one after the other or at once.
  const lookAt = Math.min(look.at, check.at)
  const lookEnd = Math.max(look.end!, check.end!)
  const prompt = stamps.filter((stamp) => stamp.what === 'data' && stamp.at <= lookAt).at(-1)!
  const memory = stamps.find((stamp) => stamp.what === 'memory' && stamp.at >= check.at)
  if (memory === undefined || memory.end! > check.end!) return 'a read check without a memory read'
  return new Map([
    ['start → baseline read', baseline.at],
    ['baseline read (task status)', baseline.end! - baseline.at],
    ['→ text written', text.at - baseline.end!],
    ...(echo !== undefined
      ? ([
          ['text → its echo (bash)', echo.at - text.at],
          ['echo → Enter written', enter.at - echo.at],
        ] as const)
      : []),
    ['Enter → prompt chunk (bash)', prompt.at - enter.at],
    ['prompt chunk → look', lookAt - prompt.at],
    ['look: foreground group + read check', lookEnd - lookAt],
    ['  of which: to the fd set read', memory.at - lookAt],
    ['  of which: fd set read (thread pool)', memory.end! - memory.at],
    ['look → settled', settled.at - lookEnd],
    ['total', settled.at],
  ])
}

/**
 * `n` bash `true` sends through ctx.pty, on a backend session directly and on a raw node-pty
 * bash, interleaved send by send; prints the median of each phase and of the CPU per send.
 */
async function phases(n: number): Promise<void> {
  const c = await compose()
  const { sessionId } = await c.ctx.pty.spawn(c.agent, { type: 'shell' })
  // The backend session behind the ctx.pty one (bench-only: the service keeps it private).
  const seam = (c.ctx.pty as unknown as { entry(owner: Agent, id: string): { backend: LocalSession } }).entry(c.agent, sessionId).backend
  const direct = (await c.direct()) as LocalSession
  const raw = rawBash({ cwd: c.workspace })
  await raw.ready
  stamp(seam)
  stamp(direct)
  const kinds = [
    { label: 'ctx.pty', send: async () => (await c.send(c.agent, sessionId, 'true')).result },
    { label: 'direct', send: () => direct.startSend({ text: 'true', submit: true }).done },
  ]
  const samples = kinds.map(() => new Map<string, number[]>())
  const odd = kinds.map(() => [] as string[])
  const cpu = kinds.map(() => 0)
  const rawFirst: number[] = []
  const rawTotal: number[] = []
  let rawCpu = 0
  try {
    for (let i = -20; i < n; i++) {
      for (const [k, kind] of kinds.entries()) {
        const trace = { stamps: [] as Stamp[], origin: performance.now() }
        tracing = trace
        const { value: result, cpuMs } = await timed(kind.send)
        trace.stamps.push({ what: 'settled', at: performance.now() - trace.origin })
        tracing = undefined
        if (result.evidence.tier !== 'prompt') throw new Error(`${kind.label}: settled by ${result.evidence.tier} (${result.evidence.detail})`)
        if (i < 0) continue
        cpu[k]! += cpuMs
        const found = phasesOf(trace.stamps)
        if (typeof found === 'string') odd[k]!.push(found)
        else for (const [phase, ms] of found) samples[k]!.set(phase, [...(samples[k]!.get(phase) ?? []), ms])
      }
      const { value: sent, cpuMs } = await timed(() => raw.send('true'))
      if (i < 0) continue
      rawCpu += cpuMs
      rawFirst.push(sent.firstOutputMs)
      rawTotal.push(sent.ms)
    }
  } finally {
    await c.ctx.pty.close(c.agent, sessionId)
    await direct.close()
    await raw.hangup()
    await c.dispose()
  }
  const cell = (k: number, phase: string) => {
    const values = samples[k]!.get(phase)
    return (values === undefined ? '-' : round(median(values), 3).toFixed(3)).padStart(8)
  }
  console.log(`bash 'true', ${n} sends of each kind interleaved: median of each phase, ms from startSend (${kinds.map((kind) => kind.label).join(' | ')})`)
  for (const phase of new Set(samples.flatMap((kind) => [...kind.keys()]))) console.log(`  ${phase.padEnd(40)}${kinds.map((_, k) => cell(k, phase)).join(' |')}`)
  console.log(`  ${'CPU of this process per send'.padEnd(40)}${cpu.map((ms) => round(ms / n, 3).toFixed(3).padStart(8)).join(' |')}`)
  for (const [k, kind] of kinds.entries()) {
    if (odd[k]!.length) console.log(`  ${kind.label}: ${odd[k]!.length} sends of another shape: ${JSON.stringify(tally(odd[k]!))}`)
  }
  console.log(`raw node-pty bash ('true\\r' in one write): write → first output ${round(median(rawFirst), 3)}, → prompt ${round(median(rawTotal), 3)} ms; CPU per send ${round(rawCpu / n, 3)} ms\n`)
}

const PARTS = ['phases', 'proc', 'close', 'profile'] as const
type Part = (typeof PARTS)[number]

async function main(): Promise<void> {
  const named = process.argv.slice(2).filter((arg) => arg !== '--')
  const unknown = named.filter((arg) => !(PARTS as readonly string[]).includes(arg))
  if (unknown.length) throw new Error(`unknown part ${unknown.join(', ')}; known: ${PARTS.join(', ')}`)
  const parts = new Set<Part>(named.length ? (named as Part[]) : PARTS)
  const processes = readdirSync('/proc').filter((name) => /^\d+$/.test(name)).length
  console.log(`processes on this machine: ${processes}, load average ${loadavg().map((load) => round(load)).join(' ')}\n`)
  if (parts.has('phases')) await phases(200)
  if (parts.has('proc')) await procCost()
  if (parts.has('close')) await closeTimes()
  if (parts.has('profile')) await profileConcurrentSends()
}

async function procCost(): Promise<void> {
  const bash = await open()
  await perSend("bash 'true'", bash, 'true', 50)
  for (const [label, command] of [
    ['python3', 'python3'],
    ['node', 'node'],
  ] as const) {
    const repl = await open()
    await send(repl, command)
    for (let i = 0; i < 3; i++) await send(repl, '1+1')
    await perSend(`${label} '1+1'`, repl, '1+1', 20)
    console.log(`${label} '1+1' timelines (ms from startSend; out = output chunk, probe = start+duration verdict):`)
    for (let i = 0; i < 4; i++) {
      probeLog.length = 0
      const result = await send(repl, '1+1')
      const probes = probeLog.map((p) => `${p.at}+${p.ms} ${p.verdict} [${p.reads} reads]${p.verdict === 'reading' ? '' : ` (${p.detail})`}`)
      console.log(`  settled ${result.ms} by ${result.tier}; out at ${result.outputs.join(', ')}; probes: ${probes.join(' | ')}`)
    }
    await repl.close()
  }
  await bash.close()
}

async function closeTimes(): Promise<void> {
  const opens: number[] = []
  const closes: number[] = []
  const openReads = { ...counts }
  const sessions: LocalSession[] = []
  for (let i = 0; i < 5; i++) {
    const start = performance.now()
    sessions.push(await open())
    opens.push(performance.now() - start)
  }
  console.log(`\nopen: p50 ${round(median(opens))} ms; /proc reads per open ${JSON.stringify(since(openReads, 5))}`)
  for (const session of sessions) await send(session, 'for i in $(seq 10); do sleep 1000 & done')
  const closeReads = { ...counts }
  const gone: number[] = []
  for (const session of sessions) {
    const tree = descendantsOf(session.pid)
    const start = performance.now()
    let allGone: number | undefined
    const watcher = setInterval(() => {
      if (allGone === undefined && tree.every(isGone)) allGone = performance.now() - start
    }, 1)
    await session.close()
    closes.push(performance.now() - start)
    clearInterval(watcher)
    gone.push(allGone ?? closes.at(-1)!)
  }
  console.log(`close with 10 descendants: p50 ${round(median(closes))} ms (${closes.map((ms) => round(ms)).join(', ')}); /proc reads per close ${JSON.stringify(since(closeReads, 5))}`)
  console.log(`  the tree was gone after p50 ${round(median(gone))} ms (${gone.map((ms) => round(ms)).join(', ')})`)
}

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
}

async function profileConcurrentSends(): Promise<void> {
  const sessions = await Promise.all(Array.from({ length: 32 }, () => open()))
  const inspector = new Session()
  inspector.connect()
  await inspector.post('Profiler.enable')
  await inspector.post('Profiler.start')
  const { ms: wallMs, cpuMs } = await timed(() =>
    Promise.all(
      sessions.map(async (session) => {
        for (let i = 0; i < 50; i++) await session.startSend({ text: 'true', submit: true }).done
      }),
    ),
  )
  const { profile } = (await inspector.post('Profiler.stop')) as { profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] } }
  inspector.disconnect()
  await Promise.all(sessions.map((session) => session.close()))
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<string, number>()
  let total = 0
  profile.samples.forEach((id, index) => {
    const frame = byId.get(id)!.callFrame
    const key = `${frame.functionName || '(anonymous)'} ${frame.url.split('/').at(-1) ?? ''}`.trim()
    const us = profile.timeDeltas[index] ?? 0
    self.set(key, (self.get(key) ?? 0) + us)
    total += us
  })
  const busy = [...self].filter(([key]) => key !== '(idle)').sort((a, b) => b[1] - a[1])
  console.log(`\n32 sessions × 50 'true' sends at once: ${round(1600 / (wallMs / 1000))} sends/s, harness CPU ${round((cpuMs / wallMs) * 100)} % of one core, ${round(cpuMs / 1600, 3)} ms per send`)
  console.log(`  self time of the busiest functions (of ${round(total / 1000)} ms sampled):`)
  for (const [key, us] of busy.slice(0, 15)) console.log(`    ${round(us / 1000).toString().padStart(8)} ms  ${round((us / total) * 100, 1)} %  ${key}`)
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`diagnose failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
