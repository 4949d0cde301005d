/**
 * Startup — how fast conch starts, against `node -e 0` in the same run (`pnpm bench:startup`
 * runs it alone and prints JSON): `conch run` with a one-line script on the root cordis.yml
 * (wall time, and peak RSS and CPU through GNU time when /usr/bin/time exists) and `conch acp`
 * to its `initialize` response, each for the built bin and from the sources
 * (CONCH_FROM_SOURCE=1). Variants alternate so drift in the machine's load hits all alike.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os, { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { median, ratio, round } from './stats.ts'
import { latency, progress } from './harness.ts'
import type { Bench } from './registry.ts'
import { ms, x } from './table.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(ROOT, 'packages', 'cli', 'bin', 'conch.js')
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined

interface Sample {
  ms: number
  rssMiB?: number
  /** User + system CPU of the process, in ms (GNU time's %U + %S: 10 ms steps). */
  cpuMs?: number
}

export interface StartupFigure {
  p50_ms: number
  p95_ms: number
  peak_rss_mib?: number
  /** p50 of the process's CPU time (user + system), ms; steadier than wall time on a loaded machine. */
  cpu_p50_ms?: number
  ratio_to_node_p50?: number | undefined
}

export type StartupFigures = Awaited<ReturnType<typeof benchStartup>>

/** Runs argv to completion; wall ms and, with GNU time, the peak RSS and the CPU time. */
function timed(argv: string[], env: NodeJS.ProcessEnv = process.env): Sample {
  const command = TIME ? [TIME, '-f', '%M %U %S', ...argv] : argv
  const start = performance.now()
  const child = spawnSync(command[0]!, command.slice(1), { cwd: ROOT, env, encoding: 'utf8' })
  const ms = performance.now() - start
  if (child.status !== 0) throw new Error(`${argv.join(' ')} exited ${child.status}: ${child.stderr}`)
  const [kib, user, system] = TIME ? (child.stderr.trim().split('\n').at(-1) ?? '').split(' ').map(Number) : []
  if (kib === undefined || !Number.isFinite(kib)) return { ms }
  const cpuMs = (user ?? Number.NaN) * 1000 + (system ?? Number.NaN) * 1000
  return Number.isFinite(cpuMs) ? { ms, rssMiB: kib / 1024, cpuMs } : { ms, rssMiB: kib / 1024 }
}

/** Spawns `conch acp`, sends initialize, resolves with the ms until its response arrived; then closes stdin. */
function acpInitialize(script: string, env: NodeJS.ProcessEnv): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    const child = spawn(process.execPath, [BIN, 'acp', '--script', script], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'inherit'] })
    let out = ''
    let answeredAt: number | undefined
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
      if (answeredAt === undefined && out.includes('"id":1')) {
        answeredAt = performance.now()
        child.stdin.end()
      }
    })
    child.on('error', reject)
    child.on('close', (code) => {
      if (answeredAt === undefined) reject(new Error(`conch acp exited ${code} without answering initialize: ${out}`))
      else resolve({ ms: answeredAt - start })
    })
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1 } })}\n`)
  })
}

/** The manifest check of bin/build-current.js, in a child (the bench itself runs from source). */
function buildState(): { current: boolean; cache: boolean } {
  const probe = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `import { currentBuild } from ${JSON.stringify(pathToFileURL(join(ROOT, 'packages', 'cli', 'bin', 'build-current.js')).href)}
const build = currentBuild(new URL(${JSON.stringify(pathToFileURL(join(ROOT, 'packages', 'cli', 'dist')).href + '/')}), {})
process.stdout.write(JSON.stringify({ current: build !== undefined, cache: build?.cachedData !== undefined }))`],
    { encoding: 'utf8' },
  )
  try {
    return JSON.parse(probe.stdout) as { current: boolean; cache: boolean }
  } catch {
    return { current: false, cache: false }
  }
}

/**
 * Spawns each variant `runs` times, interleaved. `sources: false` leaves out the from-source
 * rows (about a second each).
 */
export async function benchStartup(progress: (message: string) => void, options: { runs?: number; sources?: boolean } = {}) {
  const runs = options.runs ?? 9
  const sources = options.sources ?? true
  const dir = mkdtempSync(join(tmpdir(), 'conch-startup-'))
  const script = join(dir, 'one-line.jsonl')
  writeFileSync(script, '{"text":"done"}\n')
  // Session logs of the runs go to the scratch folder, not the user's state.
  const base: NodeJS.ProcessEnv = { ...process.env, XDG_STATE_HOME: join(dir, 'state') }
  delete base['DEEPSEEK_API_KEY']
  const built: NodeJS.ProcessEnv = { ...base, CONCH_FROM_SOURCE: '0' }
  const source: NodeJS.ProcessEnv = { ...base, CONCH_FROM_SOURCE: '1' }
  const state = buildState()
  if (!state.current) progress('startup: packages/cli/dist is missing or stale (run pnpm build); the "built" figures run from source')
  else if (!state.cache) progress('startup: the build has no code cache (see scripts/build-bin.mjs); the "built" figures compile it afresh')

  const samples: Record<'node' | 'run_built' | 'acp_built' | 'run_source' | 'acp_source', Sample[]> = { node: [], run_built: [], acp_built: [], run_source: [], acp_source: [] }
  try {
    for (let i = 0; i < runs; i++) {
      samples.node.push(timed([process.execPath, '-e', '0']))
      samples.run_built.push(timed([process.execPath, BIN, 'run', '--script', script, 'start'], built))
      samples.acp_built.push(await acpInitialize(script, built))
      if (sources) {
        samples.run_source.push(timed([process.execPath, BIN, 'run', '--script', script, 'start'], source))
        samples.acp_source.push(await acpInitialize(script, source))
      }
      progress(`startup: ${i + 1}/${runs}`)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const summary = (list: Sample[]): StartupFigure => {
    const ms = list.map((sample) => sample.ms)
    const rss = list.map((sample) => sample.rssMiB).filter((value): value is number => value !== undefined)
    const cpu = list.map((sample) => sample.cpuMs).filter((value): value is number => value !== undefined)
    return {
      ...latency(ms),
      ...(rss.length ? { peak_rss_mib: round(Math.max(...rss)) } : {}),
      ...(cpu.length ? { cpu_p50_ms: round(median(cpu)) } : {}),
    }
  }
  const node = summary(samples.node)
  const relative = (list: Sample[]): StartupFigure => {
    if (list.length === 0) return { p50_ms: Number.NaN, p95_ms: Number.NaN }
    const figure = summary(list)
    return { ...figure, ratio_to_node_p50: ratio(figure.p50_ms, node.p50_ms) }
  }
  return {
    runs,
    /** Whether packages/cli/dist was current (otherwise the "built" rows ran from source). */
    build_current: state.current,
    /** Whether the build had its V8 code cache. */
    code_cache: state.cache,
    node,
    run_built: relative(samples.run_built),
    acp_built: relative(samples.acp_built),
    run_source: relative(samples.run_source),
    acp_source: relative(samples.acp_source),
    load_average: os.loadavg().map((value) => round(value)),
  }
}

export const startupBench: Bench = {
  keys: ['startup'],
  async run() {
    progress('startup: conch run and conch acp initialize, built and from source, against node -e 0, 9 runs each')
    return { startup: await benchStartup(progress) }
  },
  rows(r, verdict) {
    const st = r.startup
    if (!st) return []
    const built = st.build_current ? (st.code_cache ? 'built' : 'built, no code cache') : 'built (stale: ran from source)'
    const rss = st.run_built.peak_rss_mib === undefined ? '' : `, ${st.run_built.peak_rss_mib} MiB`
    const rows = [
      [`conch run p50 (${built})`, `${ms(st.run_built.p50_ms)}${rss}`, `node -e 0 ${ms(st.node.p50_ms)}, ${st.node.peak_rss_mib ?? ''} MiB`, x(st.run_built.ratio_to_node_p50), `${verdict('startup.run_built.p50_ms')}; ${verdict('startup.run_built.peak_rss_mib')}`],
      [`conch acp initialize p50 (${built})`, ms(st.acp_built.p50_ms), `node -e 0 ${ms(st.node.p50_ms)}`, x(st.acp_built.ratio_to_node_p50), verdict('startup.acp_built.p50_ms')],
    ]
    if (Number.isFinite(st.run_source.p50_ms)) {
      rows.push(['conch run p50, from source', ms(st.run_source.p50_ms), `node -e 0 ${ms(st.node.p50_ms)}`, x(st.run_source.ratio_to_node_p50), ''])
      rows.push(['conch acp initialize p50, from source', ms(st.acp_source.p50_ms), `node -e 0 ${ms(st.node.p50_ms)}`, x(st.acp_source.ratio_to_node_p50), ''])
    }
    return rows
  },
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const figures = await benchStartup((message) => process.stderr.write(`[startup] ${message}\n`), { runs: Number(process.env.STARTUP_RUNS ?? 9) })
  const targets = {
    run_wall_le_300_ms: figures.run_built.p50_ms <= 300,
    run_rss_le_70_mib: figures.run_built.peak_rss_mib === undefined ? 'not measured' : figures.run_built.peak_rss_mib <= 70,
    acp_initialize_le_300_ms: figures.acp_built.p50_ms <= 300,
  }
  process.stdout.write(`${JSON.stringify({ ...figures, targets }, null, 2)}\n`)
}
