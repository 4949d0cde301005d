/**
 * `pnpm bench:startup` — how fast conch starts, against `node -e 0` measured in the same run:
 *
 * - `conch run` with a one-line script (`{"text":"done"}`) on the root cordis.yml: wall time
 *   from spawn to exit, and peak RSS (GNU time's %M, when /usr/bin/time exists);
 * - `conch acp`: wall time from spawn to the `initialize` response on stdout;
 * - each for the built bin (packages/cli/dist, `pnpm build`) and from the sources
 *   (CONCH_FROM_SOURCE=1, tsx).
 *
 * Targets: run ≤ 300 ms and ≤ 70 MB, acp initialize ≤ 300 ms. Runs alternate between the
 * variants so drift in the machine's load hits all alike. Not a test: a missed target is
 * reported, never a failure.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { median, percentile, ratio, round } from './stats.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(ROOT, 'packages', 'cli', 'bin', 'conch.js')
const RUNS = Number(process.env.STARTUP_RUNS ?? 9)
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined

const dir = mkdtempSync(join(tmpdir(), 'conch-startup-'))
const script = join(dir, 'one-line.jsonl')
writeFileSync(script, '{"text":"done"}\n')

interface Sample {
  ms: number
  rssMiB?: number
}

/** Runs argv to completion; wall ms and, with GNU time, the peak RSS. */
function timed(argv: string[], env: NodeJS.ProcessEnv = process.env): Sample {
  const command = TIME ? [TIME, '-f', '%M', ...argv] : argv
  const start = performance.now()
  const child = spawnSync(command[0]!, command.slice(1), { cwd: ROOT, env, encoding: 'utf8' })
  const ms = performance.now() - start
  if (child.status !== 0) throw new Error(`${argv.join(' ')} exited ${child.status}: ${child.stderr}`)
  const kib = TIME ? Number(child.stderr.trim().split('\n').at(-1)) : Number.NaN
  return Number.isFinite(kib) ? { ms, rssMiB: kib / 1024 } : { ms }
}

/** Spawns `conch acp`, sends initialize, resolves with the ms until its response arrived; then closes stdin. */
function acpInitialize(env: NodeJS.ProcessEnv): Promise<Sample> {
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

const built: NodeJS.ProcessEnv = { ...process.env, CONCH_FROM_SOURCE: '0' }
const source: NodeJS.ProcessEnv = { ...process.env, CONCH_FROM_SOURCE: '1' }
delete built['DEEPSEEK_API_KEY']
delete source['DEEPSEEK_API_KEY']

const buildCurrent = spawnSync(process.execPath, ['-e', `
  const { readFileSync, statSync } = require('node:fs')
  try {
    const { inputs } = JSON.parse(readFileSync(${JSON.stringify(join(ROOT, 'packages', 'cli', 'dist', 'manifest.json'))}, 'utf8'))
    process.exit(Object.entries(inputs).every(([p, t]) => statSync(p).mtimeMs === t) ? 0 : 1)
  } catch { process.exit(1) }
`]).status === 0
if (!buildCurrent) process.stderr.write('note: packages/cli/dist is missing or stale (run pnpm build); the "built" figures run from source\n')

const samples: Record<string, Sample[]> = { node: [], run_built: [], run_source: [], acp_built: [], acp_source: [] }
for (let i = 0; i < RUNS; i++) {
  samples.node!.push(timed([process.execPath, '-e', '0']))
  samples.run_built!.push(timed([process.execPath, BIN, 'run', '--script', script, 'start'], built))
  samples.acp_built!.push(await acpInitialize(built))
  samples.run_source!.push(timed([process.execPath, BIN, 'run', '--script', script, 'start'], source))
  samples.acp_source!.push(await acpInitialize(source))
  process.stderr.write(`[startup] ${i + 1}/${RUNS}\n`)
}

const summary = (list: Sample[]) => {
  const ms = list.map((sample) => sample.ms)
  const rss = list.map((sample) => sample.rssMiB).filter((value): value is number => value !== undefined)
  return {
    p50_ms: round(median(ms)),
    p95_ms: round(percentile(ms, 95)),
    ...(rss.length ? { peak_rss_mib: round(Math.max(...rss)) } : {}),
  }
}
const node = summary(samples.node!)
const figures = Object.fromEntries(
  Object.entries(samples).map(([key, list]) => {
    const figure = summary(list)
    return [key, key === 'node' ? figure : { ...figure, ratio_to_node_p50: ratio(figure.p50_ms, node.p50_ms) }]
  }),
)
const runBuilt = figures['run_built'] as { p50_ms: number; peak_rss_mib?: number }
const acpBuilt = figures['acp_built'] as { p50_ms: number }
const report = {
  runs: RUNS,
  build_current: buildCurrent,
  load_average: (await import('node:os')).loadavg().map((value) => round(value)),
  figures,
  targets: {
    run_wall_le_300_ms: runBuilt.p50_ms <= 300,
    run_rss_le_70_mib: runBuilt.peak_rss_mib === undefined ? 'not measured' : runBuilt.peak_rss_mib <= 70,
    acp_initialize_le_300_ms: acpBuilt.p50_ms <= 300,
  },
}
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
