/**
 * When the next /proc probe of a send may run: after `PROBE_DUTY_GAP` × the last one's CPU cost,
 * and at least `floorMs` — or `EAGER_PROBE_GAP_MS` while the open line is prompt-shaped (`eager`).
 */

/** A probe is followed by at least this many times its own duration without one (≈ 10 % duty). */
export const PROBE_DUTY_GAP = 9
/** The shortest gap, ms, after a prompt-shaped line (`promptShaped`): looked at as soon as the duty cycle allows. */
export const EAGER_PROBE_GAP_MS = 1
/** Node's timers fire on whole milliseconds of the loop's clock, up to this much early. */
const TIMER_GRANULARITY_MS = 1

/** Times in ms of the event clock. */
export interface ProbePacer {
  /** When the last probe ran. */
  readonly lastAt: number
  /** CPU cost of the last probe for the floor's gap: 0 below a millisecond (not paced by cost). */
  readonly costMs: number
  /** CPU cost of the last probe as measured (paces the eager gap). */
  readonly cpuMs: number
  /** The output count whose open line was prompt-shaped: probes at that count follow at the eager gap. */
  readonly eagerAt: number
  /** When the armed gap ends; `Infinity` when none is armed. */
  readonly gapAt: number
}

export const IDLE_PACER: ProbePacer = { lastAt: -Infinity, costMs: 0, cpuMs: 0, eagerAt: -1, gapAt: Infinity }

/** A probe ran at `now` and cost `costMs` of CPU (under a millisecond is not paced by cost). */
export function probeRan(pacer: ProbePacer, now: number, costMs: number): ProbePacer {
  return { ...pacer, lastAt: now, costMs: costMs >= 1 ? costMs : 0, cpuMs: costMs }
}

/** The armed gap ended (its timer fired). */
export function endGap(pacer: ProbePacer): ProbePacer {
  return { ...pacer, gapAt: Infinity }
}

/** The open line at output count `outputCount` is prompt-shaped. */
export function eager(pacer: ProbePacer, outputCount: number): ProbePacer {
  return { ...pacer, eagerAt: outputCount }
}

/**
 * Whether a probe wanted at `now` is due, else the gap timer to arm (`armMs`; undefined: the armed
 * one ends in time). A timer that just ended (`gapEnded`) may fire `TIMER_GRANULARITY_MS` early.
 */
export function pace(pacer: ProbePacer, asked: { now: number; outputCount: number; floorMs: number; gapEnded: boolean }): { pacer: ProbePacer; due: boolean; armMs?: number } {
  const gap =
    pacer.eagerAt === asked.outputCount
      ? Math.max(EAGER_PROBE_GAP_MS, pacer.cpuMs * PROBE_DUTY_GAP)
      : Math.max(asked.floorMs, pacer.costMs * PROBE_DUTY_GAP)
  const wait = pacer.lastAt + gap - asked.now
  if (wait <= (asked.gapEnded ? TIMER_GRANULARITY_MS : 0)) return { pacer, due: true }
  if (pacer.gapAt <= asked.now + wait) return { pacer, due: false }
  return { pacer: { ...pacer, gapAt: asked.now + wait }, due: false, armMs: wait }
}
