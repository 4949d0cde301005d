/**
 * Cost of one termios query (termios.ts): the long-lived perl helper against spawning
 * `stty -F <slave> -g` per query, on the same PTY in the same run. Wall time per query (p50,
 * p95) and this process's CPU per query. Not a test: no threshold.
 *
 * Run: pnpm exec tsx packages/pty/pty-local/bench/termios.ts [queries]
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import pty from 'node-pty'
import { helperTermiosReader } from '../src/termios.ts'

const queries = Number(process.argv[2] ?? 2000)
const run = promisify(execFile)
const terminal = pty.spawn('/bin/cat', [], { cols: 80, rows: 24 })
const slave = (terminal as unknown as { ptsName: string }).ptsName

async function measure(label: string, count: number, query: () => Promise<unknown>): Promise<void> {
  const samples: number[] = []
  const cpu = process.cpuUsage()
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    await query()
    samples.push(performance.now() - start)
  }
  const used = process.cpuUsage(cpu)
  samples.sort((a, b) => a - b)
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!.toFixed(3)
  console.log(`${label}: ${count} queries, p50 ${at(0.5)} ms, p95 ${at(0.95)} ms, CPU ${((used.user + used.system) / 1000 / count).toFixed(3)} ms per query`)
}

const reader = helperTermiosReader()
const first = performance.now()
if ((await reader.read(slave)) === undefined) throw new Error(`the helper could not read ${slave}`)
console.log(`helper start and first query: ${(performance.now() - first).toFixed(1)} ms`)
await measure('perl helper', queries, () => reader.read(slave))
await measure('stty -F per query (baseline)', Math.max(20, Math.round(queries / 40)), () => run('stty', ['-F', slave, '-g']))
reader.close()
terminal.kill()
