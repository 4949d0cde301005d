/**
 * `pnpm bench:doc` — writes the generated parts of docs/performance.md: the targets (from
 * targets.ts) and the latest figures (from bench/results.json). A full `pnpm bench` run calls it
 * after writing results.json. Everything outside the marked blocks is left as it is.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Machine } from './harness.ts'
import { limitText, type Target, TARGETS } from './targets.ts'

const DOC = fileURLToPath(new URL('../docs/performance.md', import.meta.url))
const RESULTS = fileURLToPath(new URL('./results.json', import.meta.url))

function targetsBlock(): string[] {
  const rows = TARGETS.map((spec) => `| \`${spec.name ?? `${spec.bench}.${spec.figure}`}\` | ${limitText(spec)} | ${spec.baseline ? spec.baseline.map((path) => `\`${path}\``).join(' + ') : 'none'} |`)
  return ['| figure | target | same-run baseline |', '|---|---|---|', ...rows]
}

function figuresBlock(results: { machine: Machine; targets: Target[] }): string[] {
  const m = results.machine
  const commit = m.commit === undefined ? '' : ` at \`${m.commit}\`${m.packages_modified ? ' (with uncommitted changes)' : ''}`
  const rows = results.targets.map((t) => `| \`${t.figure}\` | ${t.value ?? ''} | ${t.limit} | ${t.met ? 'met' : `missed by ${t.missed_by ?? ''}`} |`)
  return [
    `The last full run${commit}, ${m.date.slice(0, 10)}: ${m.cpu_model}, ${m.cores} cores, node ${m.node}, load average at start ${m.load_average_start.join(' ')}, ${m.run_seconds} s.`,
    '',
    '| figure | value | limit | verdict |',
    '|---|---|---|---|',
    ...rows,
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

/** Rewrites both blocks of docs/performance.md; returns its path. */
export function writeDoc(): string {
  const results = JSON.parse(readFileSync(RESULTS, 'utf8')) as { machine: Machine; targets: Target[] }
  let text = readFileSync(DOC, 'utf8')
  text = replaceBlock(text, 'bench:doc targets', targetsBlock())
  text = replaceBlock(text, 'bench:doc figures', figuresBlock(results))
  writeFileSync(DOC, text)
  return DOC
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) console.log(`wrote ${writeDoc()}`)
