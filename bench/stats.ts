/**
 * Small numeric helpers of the benchmark: percentiles of latency samples, rounding for the
 * report, the most common value of a list, and a garbage collection before memory readings.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

/**
 * The `p`-th percentile (0–100) of `samples` by the nearest-rank method: the smallest sample
 * such that at least p % of the samples are at most it.
 * @throws Error when `samples` is empty (a phase that measured nothing is a broken bench).
 */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) throw new Error(`percentile p${p} of no samples`)
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1]!
}

/** The median of `samples` (nearest rank). */
export function median(samples: readonly number[]): number {
  return percentile(samples, 50)
}

/** `value` rounded to `digits` decimals (for the report; the samples keep full precision). */
export function round(value: number, digits = 2): number {
  const scale = 10 ** digits
  return Math.round(value * scale) / scale
}

/**
 * `numerator / denominator` rounded to two decimals (four below 0.1, so a small ratio does not
 * read as 0); undefined when the denominator is not positive.
 */
export function ratio(numerator: number, denominator: number): number | undefined {
  if (denominator <= 0) return undefined
  const value = numerator / denominator
  return round(value, Math.abs(value) < 0.1 ? 4 : 2)
}

/** How often each value occurs, most common first (ties keep first-seen order). */
export function tally(values: readonly string[]): Record<string, number> {
  const counts = new Map<string, number>()
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1)
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]))
}

/** The most common value, or undefined for an empty list. */
export function mostCommon(values: readonly string[]): string | undefined {
  return Object.keys(tally(values))[0]
}

let collect: (() => void) | undefined

/**
 * Runs a full garbage collection so a memory reading is not dominated by garbage from an
 * earlier phase. `--expose-gc` is switched on at run time (v8 flags), so `pnpm bench` needs no
 * node option.
 */
export function collectGarbage(): void {
  if (collect === undefined) {
    setFlagsFromString('--expose-gc')
    collect = runInNewContext('gc') as () => void
  }
  collect()
}

/** Resident set size of this process, in MiB (2^20 bytes). */
export function rssMiB(): number {
  return process.memoryUsage.rss() / 2 ** 20
}
