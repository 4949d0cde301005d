/**
 * `pnpm bench:doc` — writes the generated parts of docs/performance.md: the targets (from
 * targets.ts) with the last full run's values, and the workflow table (from bench/results.json).
 * A full `pnpm bench` run calls it after writing results.json. Everything outside the marked
 * blocks is left as it is.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Machine } from './harness.ts'
import { limitText, type Target, TARGETS } from './targets.ts'
import { HARNESSES, type WorkflowCost, type WorkflowFigures } from './workflows.ts'

const DOC = fileURLToPath(new URL('../docs/performance.md', import.meta.url))
const RESULTS = fileURLToPath(new URL('./results.json', import.meta.url))

type Results = { machine: Machine; targets: Target[]; workflows?: WorkflowFigures }

/**
 * Every target with the last full run's value beside it: figure, target, same-run baseline,
 * value, verdict (with the limit a relative target came to). A target the run did not measure
 * has empty cells.
 */
export function targetsBlock(results: Results | undefined): string[] {
  const m = results?.machine
  const commit = m?.commit === undefined ? '' : ` at \`${m.commit}\`${m.packages_modified ? ' (with uncommitted changes)' : ''}`
  const run = m === undefined ? 'No full run yet.' : `The last full run${commit}, ${m.date.slice(0, 10)}: ${m.cpu_model}, ${m.cores} cores, node ${m.node}, load average at start ${m.load_average_start.join(' ')}, ${m.run_seconds} s.`
  const rows = TARGETS.map((spec) => {
    const figure = spec.name ?? `${spec.bench}.${spec.figure}`
    const t = results?.targets.find((candidate) => candidate.figure === figure)
    const limit = t !== undefined && spec.baseline !== undefined ? ` (limit ${t.limit.split(' = ').at(-1)})` : ''
    const verdict = t === undefined ? '' : `${t.met ? 'met' : `missed by ${t.missed_by ?? ''}`}${limit}`
    return `| \`${figure}\` | ${limitText(spec)} | ${spec.baseline ? spec.baseline.map((path) => `\`${path}\``).join(' + ') : 'none'} | ${t?.value ?? ''} | ${verdict} |`
  })
  return [run, '', '| figure | target | same-run baseline | last run | verdict |', '|---|---|---|---|---|', ...rows]
}

/** Per workflow and in total: bytes read, tool calls and wall time of each way. */
export function workflowsBlock(w: WorkflowFigures | undefined): string[] {
  if (w === undefined) return ['No full run has measured the workflows yet.']
  const cell = (c: WorkflowCost) => `${c.bytes} B, ${c.calls}, ${Math.round(c.wall_ms)} ms`
  const total = Object.fromEntries(HARNESSES.map((h) => [h, { bytes: w[`${h}_bytes`], harness_bytes: w[`${h}_harness_bytes`], calls: w[`${h}_calls`], wall_ms: w[`${h}_wall_ms`] }]))
  return [
    '| workflow | conch | tmux (Terminus-shaped) | pipe (one-shot bash) |',
    '|---|---|---|---|',
    ...w.workflows.map((row) => `| ${row.name} | ${HARNESSES.map((h) => cell(row[h])).join(' | ')} |`),
    `| **total** | ${HARNESSES.map((h) => `**${cell(total[h]!)}**`).join(' | ')} |`,
    `| of which the harness's own lines | ${HARNESSES.map((h) => `${total[h]!.harness_bytes} B`).join(' | ')} |`,
    '',
    `conch / tmux: bytes ×${w.bytes_ratio ?? ''}, wall time ×${w.wall_ratio ?? ''}; the median of ${w.rounds} rounds (cells: bytes the model read, tool calls, wall time).`,
  ]
}

/** Replaces the lines between `<!-- name -->` and `<!-- /name -->`. */
function replaceBlock(text: string, name: string, lines: readonly string[]): string {
  const open = `<!-- ${name} -->`
  const close = `<!-- /${name} -->`
  const start = text.indexOf(open)
  const end = text.indexOf(close)
  if (start < 0 || end < start) throw new Error(`docs/performance.md lacks the ${open} … ${close} block; put both markers back where the section belongs`)
  return `${text.slice(0, start + open.length)}\n${lines.join('\n')}\n${text.slice(end)}`
}

/** Rewrites the generated blocks of docs/performance.md; returns its path. */
export function writeDoc(): string {
  const results = existsSync(RESULTS) ? (JSON.parse(readFileSync(RESULTS, 'utf8')) as Results) : undefined
  let text = readFileSync(DOC, 'utf8')
  text = replaceBlock(text, 'bench:doc targets', targetsBlock(results))
  text = replaceBlock(text, 'bench:doc workflows', workflowsBlock(results?.workflows))
  writeFileSync(DOC, text)
  return DOC
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) console.log(`wrote ${writeDoc()}`)
