/**
 * `pnpm bench` — conch's benchmarks. Measures conch's terminals side by side with bare node-pty
 * baselines, conch's startup against `node -e 0` and its sub-agent runs against the raw products,
 * each baseline in the same run; prints a table to stdout, progress to stderr, and writes
 * bench/results.json and the generated blocks of docs/performance.md. Each bench is its own file
 * (registry.ts lists them); the targets are data (targets.ts).
 *
 * Not a test: a missed target is reported, never a failure. The exit code is non-zero only
 * when the benchmark itself fails (a phase throws, a send times out, wrong output).
 */
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { compose, type Composition } from './compose.ts'
import { writeDoc } from './doc.ts'
import { machine, progress, startedAt } from './harness.ts'
import { destroyAllRaw } from './raw.ts'
import { BENCHES, KEYS, type Key, type Results } from './registry.ts'
import { round } from './stats.ts'
import { printTable } from './table.ts'
import { checkTargets } from './targets.ts'

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
  const needs = [{ program: 'bash', args: ['-c', 'true'], keys: KEYS }, ...BENCHES.flatMap((bench) => bench.needs ?? [])]
  for (const { program, args, keys } of needs) {
    if (keys.some((key) => only.has(key)) && spawnSync(program, args, { stdio: 'ignore' }).status !== 0) {
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
  const chosen = BENCHES.filter((bench) => bench.keys.some((key) => only.has(key)))

  for (const bench of chosen.filter((candidate) => candidate.composed === false)) Object.assign(results, await bench.run(undefined, only))

  const c: Composition = await compose()
  let interrupted = false
  const onSignal = () => {
    interrupted = true
    progress('interrupted: closing terminals')
    void Promise.allSettled([c.dispose(), destroyAllRaw()]).then(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    for (const bench of chosen.filter((candidate) => candidate.composed !== false)) Object.assign(results, await bench.run(c, only))
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    if (!interrupted) {
      await destroyAllRaw()
      await c.dispose()
    }
  }
  results.machine.run_seconds = round((performance.now() - startedAt) / 1000, 1)
  const checks = checkTargets(results)
  if (complete) {
    const ordered = { ...Object.fromEntries(KEYS.map((key) => [key, results[key]])), machine: results.machine, targets: checks }
    const file = fileURLToPath(new URL('./results.json', import.meta.url))
    writeFileSync(file, `${JSON.stringify(ordered, null, 2)}\n`)
    progress(`wrote ${file}`)
    progress(`wrote ${writeDoc()}`)
  } else {
    console.log(JSON.stringify({ ...results, targets: checks }, null, 2))
  }
  const inTableOrder = [...BENCHES].sort((a, b) => KEYS.indexOf(a.keys[0]!) - KEYS.indexOf(b.keys[0]!))
  printTable(inTableOrder, results, checks)
}

main().then(
  () => process.exit(0),
  async (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    await destroyAllRaw().catch(() => {})
    process.exit(1)
  },
)
