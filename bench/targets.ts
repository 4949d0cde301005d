/**
 * The targets, as data: docs/performance.md prints this table (`pnpm bench:doc`), and every run
 * checks the figures it measured against it. A missed target is reported, never a failure.
 */
import type { Key, Results } from './registry.ts'
import { round } from './stats.ts'

export interface TargetSpec {
  bench: Key
  /** The figure's path inside the bench's results (`p50_ms`, `run_built.p50_ms`). */
  figure: string
  /** How the figure must compare with the limit. */
  op: '≤' | '≥' | '<' | '='
  /** The limit, or with `baseline` the amount added to it. */
  target: number | string
  /** Same-run figures of the bench the limit is relative to: limit = times × (their sum) + target. */
  baseline?: readonly string[]
  times?: number
  /** How a relative limit reads (`raw_p50_ms + 3`); the report adds its value. */
  text?: string
  /** Decimals of a relative limit's value in the report. */
  digits?: number
  /** The whole limit as the report shows it, when `op target` is not how it reads. */
  label?: string
  /** The name in the report, when it is not `bench.figure`. */
  name?: string
}

export const TARGETS: readonly TargetSpec[] = [
  { bench: 'bash_true', figure: 'p50_ms', op: '≤', target: 0.5, baseline: ['raw_p50_ms'], text: 'raw_p50_ms + 0.5' },
  { bench: 'bash_true', figure: 'cpu_ms_per_send', op: '≤', target: 0.1, baseline: ['raw_cpu_ms_per_send'], times: 1.5, text: '1.5 × raw_cpu_ms_per_send + 0.1', digits: 3 },
  { bench: 'python_repl', figure: 'p50_ms', op: '≤', target: 5 },
  { bench: 'python_repl', figure: 'wait_reason', op: '=', target: 'stdin_read' },
  { bench: 'node_repl', figure: 'p50_ms', op: '≤', target: 10 },
  { bench: 'node_repl', figure: 'wait_reason', op: '=', target: 'stdin_read' },
  { bench: 'throughput', figure: 'mb_per_s', op: '≥', target: 0, baseline: ['raw_mb_per_s'], times: 0.5, text: 'raw_mb_per_s / 2', digits: 1 },
  { bench: 'throughput', figure: 'rss_growth_mb', op: '≤', target: 0, baseline: ['rss_limit_mb'], text: '2 × scrollbackMaxBytes in MiB + 16' },
  // On CPU time: the parser's cost, which a core shared with other work does not change.
  { bench: 'parser', figure: 'cpu_mb_per_s', op: '≥', target: 250 },
  { bench: 'parser', figure: 'cpu_ratio_to_decode', op: '≥', target: 0.4 },
  { bench: 'parser', figure: 'short_cpu_mb_per_s', op: '≥', target: 200 },
  { bench: 'parser', figure: 'screen_render_ms', op: '≤', target: 1 },
  { bench: 'idle', figure: 'cpu_percent', op: '<', target: 1 },
  { bench: 'scale', figure: 'p95_ms', op: '≤', target: 0, baseline: ['single_p95_ms'], times: 3, text: '3 × single_p95_ms' },
  { bench: 'scale', figure: 'p95_ms', name: 'scale.p95_ms (raw)', op: '≤', target: 0, baseline: ['raw_p95_ms'], times: 1.5, text: '1.5 × raw_p95_ms' },
  { bench: 'scale', figure: 'sends_per_s', op: '≥', target: 0, baseline: ['raw_sends_per_s'], times: 0.6, text: '0.6 × raw_sends_per_s', digits: 1 },
  { bench: 'lifecycle', figure: 'close_p50_ms', op: '≤', target: 10 },
  { bench: 'lifecycle', figure: 'close_sandbox_p50_ms', op: '≤', target: 10 },
  { bench: 'lifecycle', figure: 'raw_open_agent_p50_ms', op: '≤', target: 0, baseline: ['raw_open_sandbox_p50_ms'], times: 1.1, text: '1.1 × raw_open_sandbox_p50_ms' },
  // Paired: each later terminal against a terminal in a sandbox of its own opened beside it.
  { bench: 'lifecycle', figure: 'open_agent_later_minus_own_p50_ms', op: '≤', target: 0 },
  { bench: 'ptc', figure: 'cold_p50_ms', op: '≤', target: 15, baseline: ['node_spawn_p50_ms'], text: 'node_spawn_p50_ms + 15' },
  { bench: 'ptc', figure: 'spare_p50_ms', op: '≤', target: 10 },
  { bench: 'ptc', figure: 'nested_overhead_per_call_ms', op: '≤', target: 0.5 },
  { bench: 'submit', figure: 'bash.enter_gap_p50_ms', op: '≤', target: 1, label: '< 1' },
  { bench: 'submit', figure: 'python3.enter_gap_p50_ms', op: '≤', target: 1, label: '< 1' },
  { bench: 'submit', figure: 'node.enter_gap_p50_ms', op: '≤', target: 1, label: '< 1' },
  { bench: 'long_line', figure: 'long_ms', op: '≤', target: 0, baseline: ['short_ms'], times: 2, text: '2 × short_ms' },
  { bench: 'startup', figure: 'run_built.p50_ms', op: '≤', target: 300 },
  { bench: 'startup', figure: 'run_built.peak_rss_mib', op: '≤', target: 70 },
  { bench: 'startup', figure: 'acp_built.p50_ms', op: '≤', target: 300 },
  { bench: 'subagents', figure: 'codex.conch_p50_ms', op: '≤', target: 0, baseline: ['codex.raw_p50_ms', 'codex.allowed_ms'], text: 'raw + max(10 %, 30 ms)' },
  { bench: 'subagents', figure: 'claude_code.conch_p50_ms', op: '≤', target: 0, baseline: ['claude_code.raw_p50_ms', 'claude_code.allowed_ms'], text: 'raw + max(10 %, 30 ms)' },
  { bench: 'pool', figure: 'claude.warm_invoke_p50_ms', op: '≤', target: 0, baseline: ['claude.one_shot_p50_ms'], times: 0.2, text: '0.2 × one-shot p50' },
  // A warm Codex turn cannot be shorter than Codex's own work from Enter until its request leaves.
  { bench: 'pool', figure: 'codex.warm_invoke_p50_ms', op: '≤', target: 30, baseline: ['codex.enter_to_request_p50_ms'], text: 'Enter → request p50 + 30' },
  { bench: 'notify', figure: 'polling_calls', op: '=', target: 0 },
  { bench: 'notify', figure: 'latency_max_ms', op: '≤', target: 100 },
  { bench: 'docker', figure: 'container.bash_true_p50_ms', op: '≤', target: 1, baseline: ['host.bash_true_p50_ms'], text: 'host.bash_true_p50_ms + 1' },
  { bench: 'docker', figure: 'container.python3_p50_ms', op: '≤', target: 2, baseline: ['host.python3_p50_ms'], text: 'host.python3_p50_ms + 2' },
  { bench: 'workflows', figure: 'conch_bytes', op: '≤', target: 0, baseline: ['tmux_bytes'], times: 0.7, text: '0.7 × tmux_bytes', digits: 0 },
  { bench: 'workflows', figure: 'conch_wall_ms', op: '≤', target: 0, baseline: ['tmux_wall_ms'], times: 0.3, text: '0.3 × tmux_wall_ms', digits: 0 },
]

/** One checked target in results.json. */
export interface Target {
  figure: string
  value: number | string | undefined
  limit: string
  met: boolean
  /** How far beyond the limit a missed figure is, in the figure's unit. */
  missed_by?: number
}

function at(figures: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((value, key) => (value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined), figures)
}

/** How the limit of `spec` reads, with its value for this run when it is relative. */
export function limitText(spec: TargetSpec, limit?: number): string {
  if (spec.label !== undefined) return spec.label
  if (spec.op === '=') return String(spec.target)
  if (spec.baseline === undefined) return `${spec.op} ${spec.target}`
  return limit === undefined ? `${spec.op} ${spec.text}` : `${spec.op} ${spec.text} = ${round(limit, spec.digits)}`
}

/** The targets of the figures `r` holds; a target whose figure or baseline was not measured is left out. */
export function checkTargets(r: Results): Target[] {
  const out: Target[] = []
  for (const spec of TARGETS) {
    const figures = r[spec.bench]
    const value = at(figures, spec.figure)
    const figure = spec.name ?? `${spec.bench}.${spec.figure}`
    if (value === undefined) continue
    if (spec.op === '=') {
      out.push({ figure, value: value as string, limit: limitText(spec), met: value === spec.target })
      continue
    }
    const base = (spec.baseline ?? []).map((path) => at(figures, path))
    if (base.some((part) => typeof part !== 'number')) continue
    const limit = (spec.times ?? 1) * (base as number[]).reduce((sum, part) => sum + part, 0) + Number(spec.target)
    const n = value as number
    const met = spec.op === '≥' ? n >= limit : spec.op === '<' ? n < limit : n <= limit
    const missedBy = spec.op === '≥' ? limit - n : n - limit
    out.push({ figure, value: n, limit: limitText(spec, limit), met, ...(met ? {} : { missed_by: round(missedBy, 3) }) })
  }
  return out
}
