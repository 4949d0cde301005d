/**
 * Where the time of a send, an open and a close goes — the evidence behind the diagnoses in
 * docs/performance.md. Not part of `pnpm bench`; run it by hand:
 *
 *   pnpm exec tsx bench/diagnose.ts
 *
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
import { descendantsOf, isGone } from './raw.ts'
import { median, round } from './stats.ts'

// ─── counting /proc reads ───────────────────────────────────────────────────────────

const counted = ['readFileSync', 'readdirSync', 'readlinkSync', 'statSync', 'readFile', 'readdir', 'readlink', 'openSync', 'readSync', 'read'] as const
type Counted = (typeof counted)[number]
let totalReads = 0
const counts = Object.fromEntries(counted.map((name) => [name, 0])) as Record<Counted, number>

/** Replaces `target[name]` by a wrapper that counts calls whose first argument is a /proc path. */
function count(target: object, name: string, as: Counted): void {
  const functions = target as Record<string, (...args: unknown[]) => unknown>
  const original = functions[name]!
  functions[name] = (...args: unknown[]) => {
    if (String(args[0]).startsWith('/proc')) {
      counts[as]++
      totalReads++
    }
    return original(...args)
  }
}
for (const name of ['readFileSync', 'readdirSync', 'readlinkSync', 'statSync', 'openSync'] as const) count(fs, name, name)
// Reads of the /proc descriptors the inspector keeps open (src/proc-files.ts) take a descriptor,
// not a path: every one is counted (nothing else in this process reads by descriptor).
for (const name of ['readSync', 'read'] as const) {
  const functions = fs as unknown as Record<string, (...args: unknown[]) => unknown>
  const original = functions[name]!
  functions[name] = (...args: unknown[]) => {
    counts[name]++
    totalReads++
    return original(...args)
  }
}
// The promise API (the process table of @conch/subprocess reads /proc through it).
for (const name of ['readFile', 'readdir', 'readlink'] as const) count(fsPromises, name, name)
// Named imports of node:fs and node:fs/promises in other modules follow the wrappers from here on.
syncBuiltinESMExports()

function snapshot(): Record<Counted, number> {
  return { ...counts }
}

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
  const before = snapshot()
  const times: number[] = []
  for (let i = 0; i < n; i++) times.push((await send(session, text)).ms)
  console.log(`${label}: p50 ${round(median(times))} ms; /proc reads per send ${JSON.stringify(since(before, n))}`)
}

async function main(): Promise<void> {
  const processes = readdirSync('/proc').filter((name) => /^\d+$/.test(name)).length
  console.log(`processes on this machine: ${processes}\n`)

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

  const opens: number[] = []
  const closes: number[] = []
  const openReads = snapshot()
  const sessions: LocalSession[] = []
  for (let i = 0; i < 5; i++) {
    const start = performance.now()
    sessions.push(await open())
    opens.push(performance.now() - start)
  }
  console.log(`\nopen: p50 ${round(median(opens))} ms; /proc reads per open ${JSON.stringify(since(openReads, 5))}`)
  for (const session of sessions) await send(session, 'for i in $(seq 10); do sleep 1000 & done')
  const closeReads = snapshot()
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

  await profileConcurrentSends()
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
  const cpu = process.cpuUsage()
  const start = performance.now()
  await Promise.all(
    sessions.map(async (session) => {
      for (let i = 0; i < 50; i++) await session.startSend({ text: 'true', submit: true }).done
    }),
  )
  const wallMs = performance.now() - start
  const used = process.cpuUsage(cpu)
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
  console.log(`\n32 sessions × 50 'true' sends at once: ${round(1600 / (wallMs / 1000))} sends/s, harness CPU ${round(((used.user + used.system) / 1000 / wallMs) * 100)} % of one core, ${round((used.user + used.system) / 1000 / 1600, 3)} ms per send`)
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
