/** The table `pnpm bench` prints: a row per figure with its same-run baseline, their ratio and the target's verdict. */
import type { Bench, Results } from './registry.ts'
import type { Target } from './targets.ts'

export const ms = (value: number | undefined) => (value === undefined ? '' : `${value} ms`)
export const x = (value: number | undefined) => (value === undefined ? '' : `×${value}`)

export function printTable(benches: readonly Bench[], r: Results, checks: readonly Target[]): void {
  const verdict = (figure: string) => {
    const check = checks.find((t) => t.figure === figure)
    if (check === undefined) return ''
    return check.met ? `met (${check.limit})` : `MISSED by ${check.missed_by ?? ''} (${check.limit})`
  }
  const rows: string[][] = [['figure', 'conch', 'baseline', 'ratio', 'target'], ...benches.flatMap((bench) => bench.rows(r, verdict))]
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
