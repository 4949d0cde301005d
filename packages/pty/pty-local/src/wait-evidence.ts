/**
 * Whether a read found by the /proc probe proves the program waits for input: pure rules over
 * probe snapshots. A wait on the terminal alone is proof after one short check; one with other
 * wake sources is judged over a window (`judgeWindow`; README, "Readiness"). A counter the
 * kernel does not show makes the window ambiguous, never proof.
 */
import { NEAR_TIMEOUT_MS, type ReadProbe, type TaskObservation, type WakeCounters } from './inspect-linux.ts'

/** One probe of a window and when it finished, in ms of the caller's clock. */
export interface WindowSample {
  atMs: number
  probe: ReadProbe
}

export interface WindowRules {
  /** Quiet time the window needs at least, ms (from the first sample to the last). */
  quietMs: number
  /** Longest the window may run before it is decided anyway, ms (≥ quietMs). */
  capMs: number
  /** Time between two samples, ms. */
  stepMs: number
  /** Whether the read needs corroboration (the probe found other wake sources). */
  corroborating: boolean
}

export type WindowVerdict =
  /** Take another sample after `nextInMs`. */
  | { kind: 'pending'; nextInMs: number }
  /** The read is proof; `detail` says how the wake-ups were told apart (empty when the reader did not run). */
  | { kind: 'proven'; quietMs: number; detail: string }
  /** Something in the group acted: not waiting for input yet. */
  | { kind: 'refuted'; why: string }
  /** The counters cannot tell the program's own wake-ups from activity. */
  | { kind: 'ambiguous'; why: string }

/** A timed wake may come this early against the scheduler's clock (which leaves out interrupt and steal time): T / 10, at most 10 ms. */
export function timerToleranceMs(timeoutMs: number): number {
  return Math.min(10, timeoutMs / 10)
}

/**
 * Judges a window of samples of one read, `samples[0]` the probe that found it. Without
 * corroboration one step after `quietMs` decides: the same wait, the task not having run. With
 * it a read(2) reader may have run (JLine's VTIME polls in jshell), so the same read at both ends
 * decides; an event-loop reader is judged step by step.
 */
export function judgeWindow(all: readonly WindowSample[], rules: WindowRules): WindowVerdict {
  const first = all[0]
  const reader = first?.probe.reader
  if (first === undefined || reader === undefined || first.probe.verdict !== 'reading') return { kind: 'refuted', why: 'no read to confirm' }
  // A sample catching an event loop's reader alone mid-wake-up is left out, up to MAX_RUNNING_SAMPLES.
  const eventLoop = reader.syscall !== 'read' && reader.syscall !== 'readv'
  const eventLoopReader = rules.corroborating && eventLoop
  let running = 0
  const samples: WindowSample[] = []
  for (const sample of all) {
    if (eventLoopReader && readerAloneRunning(sample.probe, reader.tid, first.probe.tpgid)) {
      if (++running > MAX_RUNNING_SAMPLES) return { kind: 'refuted', why: `${reader.name}[${reader.pid}] keeps running` }
      continue
    }
    running = 0
    samples.push(sample)
  }
  if (samples.at(-1) !== all.at(-1)) return { kind: 'pending', nextInMs: rules.stepMs }
  const last = samples.at(-1)!
  for (const sample of samples.slice(1)) {
    const probe = sample.probe
    if (probe.verdict !== 'reading' || probe.reader?.tid !== reader.tid || probe.tpgid !== first.probe.tpgid) return { kind: 'refuted', why: `${reader.name}[${reader.pid}] left its read` }
    if (probe.reader.syscall !== reader.syscall) return { kind: 'refuted', why: `${reader.name}[${reader.pid}] waits in ${probe.reader.syscall} now` }
  }
  const elapsed = last.atMs - first.atMs

  if (!rules.corroborating || !eventLoop) {
    if (samples.length < 2) return { kind: 'pending', nextInMs: rules.quietMs }
    if (rules.corroborating) return { kind: 'proven', quietMs: Math.round(elapsed), detail: '' }
    const before = taskOf(first.probe, reader.tid)?.switches
    const after = taskOf(last.probe, reader.tid)?.switches
    if (before !== undefined && before === after) return { kind: 'proven', quietMs: Math.round(elapsed), detail: '' }
    return { kind: 'refuted', why: `${reader.name}[${reader.pid}] ran` }
  }

  // An event loop: every step must show the group idle but for the reader's own timed wake-ups.
  const initial = taskOf(first.probe, reader.tid)?.timeoutMs
  let owedTimer = initial !== undefined && initial <= NEAR_TIMEOUT_MS ? initial : undefined
  const timeouts: number[] = []
  for (let i = 1; i < samples.length; i++) {
    const step = judgeStep(samples[i - 1]!, samples[i]!, reader.tid, rules.stepMs * 3)
    if (step.kind !== 'idle' && step.kind !== 'timer') return step
    if (step.kind === 'timer') {
      timeouts.push(Math.round(step.timeoutMs))
      // The timer owed at the start fired; a timer re-armed sooner than it is owed in turn.
      if (owedTimer !== undefined) owedTimer = step.rearmedMs !== undefined && step.rearmedMs < step.timeoutMs - timerToleranceMs(step.timeoutMs) ? step.rearmedMs : undefined
    }
  }
  const covered = owedTimer === undefined
  if (elapsed >= rules.quietMs && covered) {
    const detail = timeouts.length === 0 ? 'the reader did not run' : `the reader woke only at the end of its own timeout (${timeouts.join(', ')} ms) and read nothing`
    return { kind: 'proven', quietMs: Math.round(elapsed), detail: `${detail}; no other task ran` }
  }
  if (elapsed >= rules.capMs) {
    return { kind: 'ambiguous', why: `its timer of ${Math.round(owedTimer ?? 0)} ms was not seen to fire within ${Math.round(elapsed)} ms` }
  }
  return { kind: 'pending', nextInMs: rules.stepMs }
}

type Step =
  | { kind: 'idle' }
  | { kind: 'timer'; timeoutMs: number; rearmedMs: number | undefined }
  | { kind: 'refuted'; why: string }
  | { kind: 'ambiguous'; why: string }

/** What the group did between two samples; in a step up to `shortStepMs` several blocks may count (`timedWake`). */
export function judgeStep(first: WindowSample, second: WindowSample, readerTid: number, shortStepMs: number): Step {
  const before = first.probe
  const after = second.probe
  const was = new Map(before.tasks.map((task) => [task.tid, task]))
  const now = new Map(after.tasks.map((task) => [task.tid, task]))
  for (const tid of now.keys()) if (!was.has(tid)) return { kind: 'refuted', why: `task ${tid} started` }
  for (const [tid, task] of was) {
    const later = now.get(tid)
    if (later === undefined) return { kind: 'refuted', why: `task ${tid} ended` }
    if (tid === readerTid) continue
    if (task.switches === undefined || later.switches === undefined) return { kind: 'ambiguous', why: `the switch count of task ${tid} is unreadable` }
    if (task.switches !== later.switches) return { kind: 'refuted', why: `task ${tid} (${task.name}) ran` }
  }
  const a = was.get(readerTid)
  const b = now.get(readerTid)
  if (a === undefined || b === undefined) return { kind: 'refuted', why: `the reader ${readerTid} is gone` }
  if (a.switches !== undefined && a.switches === b.switches) return { kind: 'idle' }
  return timedWake(a, b, second.atMs - first.atMs <= shortStepMs)
}

/**
 * Whether the reader's run between `a` and `b` was a wake on its own timeout that read nothing.
 * One wake is judged exactly (its next wait began a timeout after this one); several (asyncio
 * re-waits a millisecond near its deadline) count only in a `short` step, where the timeout
 * ended inside it. A descriptor wake handled silently in that interval cannot be told apart.
 */
function timedWake(a: TaskObservation, b: TaskObservation, short: boolean): Step {
  const wa = a.wake
  const wb = b.wake
  if (wa?.voluntary === undefined || wb?.voluntary === undefined) return { kind: 'ambiguous', why: `the reader ${a.tid} ran, and its switch counts are unreadable` }
  const wakes = wb.voluntary - wa.voluntary
  if (wakes === 0) return { kind: 'refuted', why: `the reader ${a.tid} was preempted while running` }
  if (wakes !== 1 && !short) return { kind: 'ambiguous', why: `the reader ${a.tid} blocked ${wakes} times in one long step` }
  if (wakes > MAX_WAKES_PER_TICK) return { kind: 'refuted', why: `the reader ${a.tid} woke ${wakes} times` }
  if (a.timeoutMs === undefined) return { kind: 'refuted', why: `the reader ${a.tid} woke from a wait without a timeout` }
  if (wa.execStartMs === undefined || wb.execStartMs === undefined) return { kind: 'ambiguous', why: `the reader ${a.tid} woke once, and when it waited is unreadable (no /proc/<pid>/task/<tid>/sched)` }
  const slept = sleptMs(wa, wb)
  if (slept === undefined) return { kind: 'ambiguous', why: `the reader ${a.tid} woke once on another CPU, whose clock offset is unknown` }
  if (slept < a.timeoutMs - timerToleranceMs(a.timeoutMs)) return { kind: 'refuted', why: `the reader ${a.tid} woke after ${Math.round(slept)} ms, before its ${a.timeoutMs} ms timeout` }
  if (wa.rchar === undefined || wb.rchar === undefined || wa.syscr === undefined || wb.syscr === undefined) return { kind: 'ambiguous', why: `the reader ${a.tid} woke on its timeout, and its I/O counters are unreadable` }
  if (wa.rchar !== wb.rchar || wa.syscr !== wb.syscr) return { kind: 'refuted', why: `the reader ${a.tid} read ${wb.rchar - wa.rchar} bytes when it woke` }
  return { kind: 'timer', timeoutMs: a.timeoutMs, rearmedMs: b.timeoutMs }
}

/** Ms from entering wait `a` to entering wait `b`: one CPU's clock, or both via monotonic offsets. */
function sleptMs(a: WakeCounters, b: WakeCounters): number | undefined {
  if (a.cpu !== undefined && a.cpu === b.cpu && a.execStartMs !== undefined && b.execStartMs !== undefined) return b.execStartMs - a.execStartMs
  if (a.execStartMonotonicMs !== undefined && b.execStartMonotonicMs !== undefined) return b.execStartMonotonicMs - a.execStartMonotonicMs
  return undefined
}

/** Most samples in a row that may catch the reader running in a window. */
const MAX_RUNNING_SAMPLES = 2

/** Whether `probe` saw the reader running and no other task of the group (`tpgid`) running. */
function readerAloneRunning(probe: ReadProbe, readerTid: number, tpgid: number | undefined): boolean {
  if (probe.verdict !== 'not_reading' || probe.tpgid !== tpgid) return false
  const running = probe.tasks.filter((task) => task.state === 'R' || task.syscall === 'running')
  return running.length === 1 && running[0]?.tid === readerTid
}

/** Most times a reader may block in one short step and still be judged a timed wake (a tick with its re-waits). */
const MAX_WAKES_PER_TICK = 3

function taskOf(probe: ReadProbe, tid: number): TaskObservation | undefined {
  return probe.tasks.find((task) => task.tid === tid)
}

/** The longest corroboration window, ms: `quietMs` past any near timer (`timer in N ms`), at most `idleMs`. */
export function corroborationCapMs(sources: readonly string[], quietMs: number, idleMs: number): number {
  const timers = sources.map((source) => /^timer in (\d+) ms$/.exec(source)?.[1]).filter((ms) => ms !== undefined).map(Number)
  return Math.min(Math.max(quietMs, ...timers.map((ms) => ms + quietMs)), idleMs)
}
