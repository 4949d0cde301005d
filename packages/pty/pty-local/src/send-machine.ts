/**
 * The send lifecycle as one pure state machine, `transition(state, event) → [state, effects]`;
 * send.ts runs the effects and feeds their results back. Each request carries a generation, so a
 * stale result is dropped. Phases and transitions: README, "Send lifecycle".
 */
import { PtyError, type InputState, type PtySignal, type ReadinessEvidence, type SessionStatus, type SignalResult, type WaitReason } from '@conch/pty'
import { describeExit, messageOf, unreachable } from '@conch/session'
import { isContinuation } from './continuation.ts'
import type { Baseline, ReadProbe } from './inspector.ts'
import { endsInEscape, endsInSignal, type WriteStep } from './input-steps.ts'
import type { Key } from './keys.ts'
import { NEAR_TIMEOUT_MS } from './inspect-linux.ts'
import { eager, endGap, IDLE_PACER, pace, probeRan, type ProbePacer } from './probe-pacer.ts'
import { isReadEvidence, promptShaped, timedReadMs } from './read-evidence.ts'
import { corroborationCapMs, judgeWindow, type WindowRules, type WindowSample, type WindowVerdict } from './wait-evidence.ts'

/**
 * `startup` waits for the shell's first ready point (zero output never counts); `send` writes its
 * steps, then waits; `signal` signals the foreground group, then waits up to `handoffGraceMs`, so
 * a program resetting its input after it (readline after SIGINT) does not swallow the next send.
 */
export type SendKind = 'startup' | 'send' | 'signal'

/** README, "Send lifecycle": `checking` asks whether the input may be written, `submitting` waits for a step's consumption. */
export type SendPhase = 'pending' | 'baseline' | 'checking' | 'writing' | 'submitting' | 'signalling' | 'waiting' | 'settled'

/** Timers a send owns; each is armed and cleared by effects, and all are cleared when it settles. */
export type SendTimer = 'deadline' | 'silence' | 'poll' | 'probeGap' | 'promptRecheck' | 'confirm' | 'consume' | 'consumeRetry' | 'handoff'

/** The session's parsed output, read when an event is processed (no I/O: in-memory state only). */
export interface OutputView {
  /** Prompt markers parsed so far. */
  markers(): number
  /** Whether the printable text after the latest marker, which is newer than the first `since` markers, is exactly the controlled PS1. */
  promptShown(since: number): boolean
  /** The unfinished line a prompt would be on (the cursor row of a screen, else the partial line). */
  promptLine(): string
  /** The last non-blank line of this send's output. */
  lastNonBlankLine(): string
  /** The newest committed line of this send's output ('' when none). */
  lastLine(): string
  /** Replies to the program's terminal queries parsed and not yet written or dropped. */
  repliesOwed(): number
  /** Replies written to the program so far. */
  repliesWritten(): number
}

/** Everything a send is, fixed at creation. Durations in ms. */
export interface SendSpec {
  kind: SendKind
  /** The input, in order (input-steps.ts). Empty for startup and signal. */
  steps: readonly WriteStep[]
  /** The text as given, for the prompt-shape rule (the echo of its last line is not a prompt). */
  inputText: string
  /** For `signal`: what to send. */
  signal?: PtySignal
  timeoutMs: number
  idleMs: number
  handoffGraceMs: number
  pollIntervalMs: number
  exactProbeAfterMs: number
  /** Bound of the wait between a step and the next `afterConsumed` one. */
  submitWaitMs: number
  /** Ask the session before the first write whether the input may be written (`checkInput` effect): a line over the canonical limit. */
  checkInput: boolean
  /** The session can read the terminal's termios: a reader in read(2) is asked whether it reads with echo off (`hidden`). */
  readsTermios: boolean
  /** The session can read the terminal's input queue (send.ts, `inputQueue`): a step's consumption shows at once. */
  drainsInput: boolean
  /** The input ends in ESC: silence waits while the program may wait for the rest of a sequence (`escapePending`). */
  endsInEscape: boolean
  /** Whether the /proc tier exists (Linux). */
  exact: boolean
  /** Whether this host sees the terminal's processes (`TerminalInspector.observable`); false: a prompt marker settles unchecked. */
  observable: boolean
  /** Whether input reaches the reader through a relay (`TerminalInspector.relayed`): a read counts once the reader read what was written. */
  relayed: boolean
  /** pid of the wrapper (the node-pty child), whose own read is never evidence. */
  wrapperPid: number
  /** The shell's process group, when known (after startup): a read by it at `> ` is bash's PS2. */
  shellPgid: number | undefined
  view: OutputView
}

/** What a handoff look found (see `handoffLook`). */
export interface HandoffLook {
  /** The foreground group; undefined when there is none. */
  pgid: number | undefined
  /** When `pgid` is the group that was reading at the write: whether a probe shows it not reading. */
  waitingBusy?: boolean
  /** When `pgid` is neither that group nor the shell: whether its leader runs another program than the shell. */
  otherProgram?: boolean
}

export type SendEvent =
  /** `aborted`/`reason`: the caller's signal; `exited`: the shell exited; `knownAtPrompt`: the shell sits at its controlled prompt. */
  | { type: 'begin'; now: number; aborted: boolean; reason?: unknown; exited: boolean; knownAtPrompt: boolean }
  | { type: 'baseline'; gen: number; now: number; baseline: Baseline; aborted: boolean; reason?: unknown; exited: boolean; knownAtPrompt: boolean }
  | { type: 'written'; gen: number; now: number }
  | { type: 'consumed'; gen: number; now: number; consumed: boolean }
  | { type: 'signalled'; gen: number; now: number; result: SignalResult }
  | { type: 'failed'; gen: number; now: number; error: unknown }
  | { type: 'output'; now: number }
  | { type: 'probed'; gen: number; now: number; probe: ReadProbe | undefined; costMs: number }
  /** `inputTaken`: asked with `proveInput`, whether the input was read from the terminal before the look (undefined: unknown). */
  | { type: 'foreground'; gen: number; now: number; pgid: number | undefined; inFront: boolean; reading: boolean | undefined; inputTaken?: boolean }
  | { type: 'drained'; gen: number; now: number }
  /** The session's answer to `checkInput`: a refusal (nothing may be written), or undefined. */
  | { type: 'inputChecked'; gen: number; now: number; refusal: unknown }
  /** The session's answer to `termios`: whether the terminal is set for hidden input. */
  | { type: 'termios'; gen: number; now: number; hidden: boolean }
  | { type: 'timer'; timer: SendTimer; now: number }
  | { type: 'exit'; now: number; status: SessionStatus }
  | { type: 'cancel'; now: number }
  | { type: 'abort'; now: number; reason: unknown }
  | { type: 'handoff'; now: number }
  | { type: 'handoffLook'; gen: number; now: number; look: HandoffLook }

export type SendEffect =
  | { type: 'baseline'; gen: number }
  /** `key`: a named key, written as its encoding for the modes at that moment (else `data`). */
  | { type: 'write'; gen: number; data: string; key?: Key }
  /** Whether the input may be written at all (answered by `inputChecked`). */
  | { type: 'checkInput'; gen: number }
  /** Whether the terminal is set for hidden input now (answered by `termios`). */
  | { type: 'termios'; gen: number }
  /** Whether the foreground program consumed the input so far (kernel evidence against the baseline); `inputBytes` on a relayed terminal: the bytes written so far. */
  | { type: 'consume'; gen: number; baseline: Baseline; inputBytes?: number }
  | { type: 'signal'; gen: number; signal: PtySignal }
  /** A /proc probe; a `look` may be skipped (undefined) while the shell itself is busy in front, a `confirm` is always taken. */
  | { type: 'probe'; gen: number; purpose: 'look' | 'confirm' }
  /**
   * Foreground group, and whether the shell's (at startup the front group's) main task is blocked
   * reading. `proveInput`: first, whether the input written was read (the input queue empty).
   */
  | { type: 'foreground'; gen: number; shell: 'front' | 'shell'; proveInput?: true }
  /** Read what the terminal holds and let the event loop poll the PTY, until a round brings no more output. */
  | { type: 'drain'; gen: number }
  | { type: 'handoffLook'; gen: number; waiting: number | undefined }
  | { type: 'arm'; timer: SendTimer; ms: number }
  | { type: 'clear'; timer: SendTimer }
  | { type: 'written' }
  | { type: 'handedOff' }
  | { type: 'cancelled' }
  | { type: 'learnShell'; pgid: number | undefined }
  /**
   * `earlier`: the input was typed ahead of `program`; its prompt is the first after
   * `markersAtWrite`. `running`: what the latest probe found in front, not reading. `job`, at
   * the prompt, for a stop status: the latest group other than the shell's seen in front, and
   * when the write began (a job started since is the send's).
   */
  | { type: 'settle'; waitReason: WaitReason; evidence: ReadinessEvidence; inputState: InputState | undefined; writtenAt: number; atPrompt: boolean; earlier?: { program: string; markersAtWrite: number }; running?: string; job?: { since: number; pgid?: number } }
  /** Rejects `done`. `handOn`: the send's buffer opens the next send (nothing was shown); `keepAtPrompt`: the shell is still where it was. */
  | { type: 'reject'; error: unknown; handOn: boolean; keepAtPrompt: boolean }

type Pending = 'prompt' | 'proc'

/** What every phase carries. */
interface Shared {
  readonly spec: SendSpec
  /** Generation counter: every request takes the next number. */
  gen: number
  /** The generation each kind of in-flight request waits for (undefined: none in flight). */
  awaiting: Partial<Record<'baseline' | 'check' | 'write' | 'consume' | 'signal' | 'probe' | 'confirm' | 'foreground' | 'drain' | 'handoff' | 'termios', number | undefined>>
  /** Armed timers. */
  timers: SendTimer[]
  /** Output events so far (in every phase). */
  outputCount: number
  /** Cancellation, its own small machine (`cancelling`). */
  cancel: Cancellation
  /** A handoff wait: requested (also while writing), and its progress. */
  handoff: { requested: boolean; deadline: number; busy: number }
  /** The latest foreground group other than the shell's that an answer showed (`frontOf`). */
  job: number | undefined
}

/**
 * A cancel once something was written: `handoff` waits for the command to take the input,
 * `signalling` sends it SIGINT (request `gen`), `grace` waits for it to come back.
 */
type Cancellation = { state: 'none' } | { state: 'handoff' } | { state: 'signalling'; gen: number } | { state: 'grace' }

/** What the write is measured against, from the baseline on. */
export interface WriteRecord {
  baseline: Baseline
  /** When the baseline came: the first write began after it. */
  begunAt: number
  /** When the input was written whole (until then, when the baseline came). */
  writtenAt: number
  /** The input is written whole (a send's `written` effect went out). */
  written: boolean
  /** Bytes written so far that any reader reads (`readerBytes`). */
  bytes: number
  markersAtWrite: number
  /** `view.markers()` at the last step: a prompt owed from before the send is printed before it. */
  markersAtLastWrite: number
  /** The shell was not known at its prompt at the write: a prompt it owed could be stale. */
  promptMayBeStale: boolean
  /** The baseline showed nobody reading: the input is typed ahead of these processes (`busyProgram`). */
  typedAheadOf: string | undefined
  outputAtWrite: number
}

/** The step on its way (`writing`) or waiting to be consumed (`submitting`). */
export interface StepProgress {
  step: number
  /** Output count when the step was written (for its echo). */
  outputAtStep: number
  /** `view.markers()` when the step was written (a prompt after a signal character, `awaitsPrompt`). */
  markersAtStep: number
  /** Consumption checks that found the step not consumed yet (paces the next). */
  consumeChecks: number
  /** The step before ended in ESC and was consumed: the wait for the program to take it as the Escape key (`escapeDelay`). */
  escape?: EscapeWait
}

/** Whether a program took an ESC as the Escape key yet, from the probes since the write (`escapeDelay`). */
export interface EscapeWait {
  /** The latest probe's reader read since the write. */
  read: boolean
  /** The latest probe's reader waits with its own timeout within `NEAR_TIMEOUT_MS`. */
  timed: { tid: number; switches: number | undefined; timeoutMs: number } | undefined
  /** The timed wait the last deferral waited out. */
  deferredFor: { tid: number; switches: number | undefined } | undefined
  deferrals: number
}

/** The readiness tiers at work (`waiting`). */
export interface WaitState {
  markerSeen: boolean
  probeAgain: boolean
  /** When the next probe may run (probe-pacer.ts). */
  pacer: ProbePacer
  promptRechecks: number
  /** For `escapePending`: the wait after a send ending in ESC. */
  escape: EscapeWait
  /** A read under confirmation. */
  confirming: { samples: WindowSample[]; rules: WindowRules; sources: string[]; outputBefore: number; repliesBefore: number } | undefined
  /** The foreground processes the latest probe found not reading (`busyProgram`). */
  running: string | undefined
  /** Why the last read found could not be told from activity (named by a later `inferred_idle`). */
  ambiguousRead: string | undefined
  /** The silence timer fired with a probe to run first: settle `inferred_idle` once it is decided. */
  silenceDue: boolean
  /** What a drain in flight settles on. */
  afterDrain: { kind: Pending; probe?: ReadProbe; sources?: string[]; quietMs?: number; how?: string; repliesBefore?: number; markersAtLook?: number } | undefined
  /** `view.repliesWritten()` when the latest look was asked for: a read it finds is proved only if no reply went in since. */
  repliesAtLook: number
  /** `view.markers()` when the latest foreground look was asked: a marker after it is not confirmed by its answer. */
  markersAtLook: number
  /** A proved read waiting for the termios answer before it settles (and the output count then). */
  afterTermios: { probe: ReadProbe; sources: string[]; quietMs: number; how: string; outputBefore: number } | undefined
}

/** Each phase with only its own data (see `SendPhase`). */
type PhaseState =
  | { phase: 'pending' }
  | { phase: 'baseline' }
  | { phase: 'checking'; write: WriteRecord }
  | { phase: 'writing'; write: WriteRecord; steps: StepProgress }
  | { phase: 'submitting'; write: WriteRecord; steps: StepProgress }
  | { phase: 'signalling'; write: WriteRecord }
  | { phase: 'waiting'; write: WriteRecord; wait: WaitState }
  | { phase: 'settled' }

export type SendState = Shared & PhaseState
/** The state in phase `P`. */
type In<P extends SendPhase> = SendState & { phase: P }

/**
 * Retries of a missed controlled-prompt check, the first gap in ms doubling up to
 * `pollIntervalMs / 5`: a loaded shell can take tens of ms from its prompt to its read.
 */
const PROMPT_RECHECKS = 40
const PROMPT_RECHECK_MS = 1
/**
 * Pace of the consumption check, ms, doubling, so many waiting sessions do not crowd the event
 * loop with /proc reads. Retries start at 2 ms unless the input queue is readable (`drainsInput`).
 */
const CONSUME_RETRY_MS = 1
const CONSUME_RETRY_MAX_MS = 8

export function initialState(spec: SendSpec): SendState {
  return { spec, phase: 'pending', gen: 0, awaiting: {}, timers: [], outputCount: 0, cancel: { state: 'none' }, handoff: { requested: false, deadline: 0, busy: 0 }, job: undefined }
}

/** Moves `s` to another phase, with that phase's data (and none of the one it leaves). */
function become<P extends PhaseState>(s: SendState, next: P): Shared & P {
  const data = s as Partial<Record<'write' | 'steps' | 'wait', unknown>>
  for (const key of ['steps', 'wait', 'write'] as const) if (!(key in next)) delete data[key]
  return Object.assign(s, next)
}

function waitState(): WaitState {
  return {
    markerSeen: false,
    probeAgain: false,
    pacer: IDLE_PACER,
    promptRechecks: 0,
    escape: ESCAPE_WAIT,
    confirming: undefined,
    running: undefined,
    ambiguousRead: undefined,
    silenceDue: false,
    afterDrain: undefined,
    repliesAtLook: 0,
    markersAtLook: 0,
    afterTermios: undefined,
  }
}

/** The next state and the effects to run, in order; `state` is not modified. Stale events change nothing. */
export function transition(state: SendState, event: SendEvent): [SendState, SendEffect[]] {
  if (state.phase === 'settled') return [state, []]
  const s: SendState = { ...state, awaiting: { ...state.awaiting }, timers: [...state.timers], handoff: { ...state.handoff } }
  if ('write' in s) s.write = { ...s.write }
  if ('steps' in s) s.steps = { ...s.steps }
  if ('wait' in s) s.wait = { ...s.wait }
  const out: SendEffect[] = []
  step(s, event, out)
  return [s, out]
}

// ─── The transitions: by phase, then by event ───────────────────────────────────────

function step(s: SendState, event: SendEvent, out: SendEffect[]): void {
  if (event.type === 'output') s.outputCount++
  else if (event.type === 'timer') s.timers = s.timers.filter((name) => name !== event.timer)
  const front = frontOf(event)
  if (front !== undefined && front > 0 && front !== s.spec.shellPgid && front !== s.spec.wrapperPid) s.job = front
  switch (s.phase) {
    case 'pending':
      if (event.type === 'begin') return begin(s, event, out)
      return anyPhase(s, event, out)
    case 'baseline':
      if (event.type !== 'baseline') return anyPhase(s, event, out)
      if (!answers(s, 'baseline', event.gen)) return
      return afterBaseline(s, event, out)
    case 'checking':
      if (event.type !== 'inputChecked') return anyPhase(s, event, out)
      if (!answers(s, 'check', event.gen)) return
      // Refused: nothing was written, and the output it would have shown waits for the next send.
      if (event.refusal !== undefined) return reject(s, out, event.refusal, true, true)
      return writeStep(s, s.write, 0, out)
    case 'writing':
      if (event.type !== 'written') return anyPhase(s, event, out)
      if (!answers(s, 'write', event.gen)) return
      return afterStep(s, event.now, out)
    case 'submitting':
      return submitting(s, event, out)
    case 'signalling':
      if (event.type !== 'signalled' || s.awaiting.signal !== event.gen) return anyPhase(s, event, out)
      s.awaiting.signal = undefined
      return enterWaiting(s, s.write, event.now, out)
    case 'waiting':
      return waiting(s, event, out)
    case 'settled':
      return
    default:
      return unreachable(s, 'send phase')
  }
}

/** The foreground group an answer shows, if any: a probe's, a look's, the signalled one. */
function frontOf(event: SendEvent): number | undefined {
  switch (event.type) {
    case 'baseline':
      return event.baseline.kind === 'probe' ? event.baseline.probe.tpgid : undefined
    case 'probed':
      return event.probe?.tpgid
    case 'foreground':
      return event.pgid
    case 'handoffLook':
      return event.look.pgid
    case 'signalled':
      return event.result.targetPgid
    default:
      return undefined
  }
}

/** Events every phase answers alike: the end of the session, cancellation and handoff, a failed request. */
function anyPhase(s: SendState, event: SendEvent, out: SendEffect[]): void {
  const spec = s.spec
  switch (event.type) {
    case 'exit':
      return settle(s, out, 'session_exit', { tier: 'exit', detail: `the shell ${describeExit(event.status)}` })
    case 'abort':
      if (spec.kind === 'send') return cancelling(s, event, out)
      return reject(s, out, event.reason, false, false)
    case 'cancel':
      return cancelling(s, event, out)
    case 'failed': {
      if (s.cancel.state === 'signalling' && s.cancel.gen === event.gen) return cancelling(s, event, out)
      // A baseline, write or signal watch that failed: the send cannot go on.
      const failed = [s.awaiting.baseline, s.awaiting.check, s.awaiting.write, s.awaiting.signal].includes(event.gen)
      if (!failed) return
      const error = event.error instanceof PtyError ? event.error : new PtyError('SPAWN_FAILED', { reason: `the send failed: ${messageOf(event.error)}` }, { cause: event.error })
      return reject(s, out, error, spec.kind !== 'startup', false)
    }
    case 'signalled':
      return cancelling(s, event, out)
    case 'handoff':
      if (spec.kind !== 'send') {
        out.push({ type: 'handedOff' })
        return
      }
      if (s.handoff.requested) return
      s.handoff = { requested: true, deadline: 0, busy: 0 }
      if (s.phase === 'waiting') return startHandoff(s, event.now, out)
      // Wait for the input to be written, at most timeoutMs (a paste the program never reads).
      arm(s, out, 'handoff', spec.timeoutMs)
      return
    case 'handoffLook':
      if (!answers(s, 'handoff', event.gen)) return
      return onHandoffLook(s, event.look, event.now, out)
    case 'timer':
      if (event.timer !== 'handoff' || !s.handoff.requested) return
      // The input is still not written after timeoutMs: give up waiting for the handoff.
      if (s.phase !== 'waiting') return handoffDone(s, out)
      return look(s, out)
    default:
      return
  }
}

function begin(s: In<'pending'>, event: Extract<SendEvent, { type: 'begin' }>, out: SendEffect[]): void {
  if (event.aborted) return abortBeforeWrite(s, out, event.reason)
  if (s.spec.kind !== 'startup' && s.spec.exact) {
    become(s, { phase: 'baseline' })
    out.push({ type: 'baseline', gen: ask(s, 'baseline') })
    return
  }
  // No baseline to take (a startup, or no /proc).
  return afterBaseline(s, { ...event, type: 'baseline', gen: 0, baseline: { kind: 'none' } }, out)
}

/** A send without input: earlier evidence (a prompt shown, a reader blocked) counts at once. */
function keepsWaiting(spec: SendSpec): boolean {
  return spec.kind === 'send' && spec.steps.length === 0
}

/** Starts a request of `kind`: its generation, now awaited. */
function ask(s: SendState, kind: keyof Shared['awaiting']): number {
  s.awaiting[kind] = ++s.gen
  return s.gen
}

/** Whether `gen` answers the request of `kind` in flight, which it then ends. */
function answers(s: SendState, kind: keyof Shared['awaiting'], gen: number): boolean {
  if (s.awaiting[kind] !== gen) return false
  s.awaiting[kind] = undefined
  return true
}

function afterBaseline(s: In<'pending' | 'baseline'>, event: Extract<SendEvent, { type: 'baseline' }>, out: SendEffect[]): void {
  const spec = s.spec
  if (event.aborted) return abortBeforeWrite(s, out, event.reason)
  if (event.exited) return settle(s, out, 'session_exit', { tier: 'exit', detail: 'the shell exited before the input was written' })
  // A send without input keeps waiting: a prompt shown before it is the current one.
  const markersAtWrite = keepsWaiting(spec) ? 0 : spec.view.markers()
  const write: WriteRecord = {
    baseline: event.baseline,
    begunAt: event.now,
    writtenAt: event.now,
    written: false,
    bytes: 0,
    markersAtWrite,
    markersAtLastWrite: markersAtWrite,
    promptMayBeStale: spec.kind === 'send' && !event.knownAtPrompt && !keepsWaiting(spec),
    typedAheadOf: undefined,
    outputAtWrite: 0,
  }
  if (spec.kind === 'send') {
    if (spec.steps.length === 0) return finishWrite(s, write, event.now, out)
    if (spec.checkInput) {
      become(s, { phase: 'checking', write })
      out.push({ type: 'checkInput', gen: ask(s, 'check') })
      return
    }
    return writeStep(s, write, 0, out)
  }
  if (spec.kind === 'signal' && spec.signal !== undefined) {
    become(s, { phase: 'signalling', write })
    out.push({ type: 'signal', gen: ask(s, 'signal'), signal: spec.signal })
    return
  }
  return enterWaiting(s, write, event.now, out)
}

/** Writes step `index`. */
function writeStep(s: SendState, write: WriteRecord, index: number, out: SendEffect[]): void {
  become(s, { phase: 'writing', write, steps: { step: index, outputAtStep: s.outputCount, markersAtStep: s.spec.view.markers(), consumeChecks: 0 } })
  // Output counts from when the last write begins: a fast reply can precede the write's completion.
  if (index === s.spec.steps.length - 1) {
    write.outputAtWrite = s.outputCount
    write.markersAtLastWrite = s.spec.view.markers()
  }
  const step = s.spec.steps[index]!
  write.bytes += readerBytes(step.data)
  out.push({ type: 'write', gen: ask(s, 'write'), data: step.data, ...(step.key !== undefined && { key: step.key }) })
}

/** A step is in the kernel: the next one (after consumption when it asks), or the wait. */
function afterStep(s: In<'writing'>, now: number, out: SendEffect[]): void {
  const steps = s.spec.steps
  const next = s.steps.step + 1
  // Once begun, input is written whole even if cancelled: its command must run before the SIGINT.
  if (next >= steps.length) return finishWrite(s, s.write, now, out)
  if (!steps[next]!.afterConsumed) return writeStep(s, s.write, next, out)
  const submitting = become(s, { phase: 'submitting', write: s.write, steps: { ...s.steps, step: next } })
  if (echoed(submitting) || promptAgain(submitting)) return writeNext(submitting, out)
  // The shell's new prompt after a signal comes once bash handled the SIGINT, which under load takes
  // longer than an echo: it is given the wait of a signal's readiness (`handoffGraceMs`).
  if (awaitsPrompt(submitting)) return arm(s, out, 'consume', s.spec.handoffGraceMs)
  arm(s, out, 'consume', s.spec.submitWaitMs)
  // The echo usually comes first: ask the kernel only after a moment (docs/performance.md).
  if (s.spec.exact && s.write.baseline.kind !== 'none') arm(s, out, 'consumeRetry', CONSUME_RETRY_MS)
}

/** A step waits until the program consumed the one before: its echo, the kernel's evidence, or the `consume` bound. */
function submitting(s: In<'submitting'>, event: SendEvent, out: SendEffect[]): void {
  switch (event.type) {
    case 'consumed': {
      if (!answers(s, 'consume', event.gen)) return
      if (event.consumed) return writeNext(s, out)
      s.steps.consumeChecks++
      const doublings = drainsFirst(s) ? s.steps.consumeChecks - 1 : s.steps.consumeChecks
      arm(s, out, 'consumeRetry', Math.min(CONSUME_RETRY_MS * 2 ** Math.min(doublings, 8), CONSUME_RETRY_MAX_MS))
      return
    }
    case 'probed': {
      if (!answers(s, 'probe', event.gen) || s.steps.escape === undefined) return
      const delay = escapeDelay(escapeSeen(s, s.steps.escape, event.probe), s.spec.pollIntervalMs)
      if (delay === undefined) return writeStep(s, s.write, s.steps.step, out)
      s.steps.escape = delay.escape
      return arm(s, out, 'consumeRetry', delay.ms)
    }
    case 'output':
      if (s.steps.escape !== undefined) return
      if (echoed(s) || promptAgain(s)) return writeNext(s, out)
      if (awaitsPrompt(s)) return
      // The step's first output, not its whole echo: the reader runs; look at its queue now.
      // Later chunks wait for the retry timer, so a stream does not drive a look per chunk.
      if (drainsFirst(s) && s.outputCount === s.steps.outputAtStep + 1 && s.awaiting.consume === undefined) {
        clear(s, out, 'consumeRetry')
        consumeCheck(s, out)
      }
      return
    case 'timer':
      // The bound passed without evidence either way: write the next step.
      if (event.timer === 'consume') return writeNext(s, out)
      if (event.timer === 'consumeRetry') {
        if (s.steps.escape !== undefined) return escapeLook(s, out)
        if (s.awaiting.consume !== undefined) return
        return consumeCheck(s, out)
      }
      return anyPhase(s, event, out)
    default:
      return anyPhase(s, event, out)
  }
}

function consumeCheck(s: In<'submitting'>, out: SendEffect[]): void {
  if (!s.spec.exact || s.write.baseline.kind === 'none') return
  out.push({ type: 'consume', gen: ask(s, 'consume'), baseline: s.write.baseline, ...(s.spec.relayed && { inputBytes: s.write.bytes }) })
}

/** Whether consumption is checked on the input queue: a reader other than the shell, with the queue readable. */
function drainsFirst(s: In<'submitting'>): boolean {
  return s.spec.drainsInput && s.write.baseline.kind === 'probe'
}

/** Whether the open line, or the one before (the Node REPL previews below), ends with the step's echo. */
function echoed(s: In<'submitting'>): boolean {
  const echo = s.spec.steps[s.steps.step - 1]?.echo ?? ''
  if (echo === '' || s.outputCount === s.steps.outputAtStep) return false
  const view = s.spec.view
  return view.promptLine().trimEnd().endsWith(echo) || view.lastLine().trimEnd().endsWith(echo)
}

/**
 * Whether the step waits for a new prompt: the one before ended in a signal character at the
 * shell's prompt. readline reads again while bash still handles the SIGINT and then discards
 * what was typed meanwhile (`cho: command not found`), so the kernel's evidence cannot tell.
 */
function awaitsPrompt(s: In<'submitting'>): boolean {
  return s.write.baseline.kind === 'shell' && endsInSignal(s.spec.steps[s.steps.step - 1]?.data ?? '')
}

/** A step that `awaitsPrompt`: a prompt shown since the signal character was written. */
function promptAgain(s: In<'submitting'>): boolean {
  return awaitsPrompt(s) && s.spec.view.promptShown(s.steps.markersAtStep)
}

/** The step before was consumed (or the bound passed): write the next, after an ESC once the program took it as the Escape key. */
function writeNext(s: In<'submitting'>, out: SendEffect[]): void {
  clear(s, out, 'consume')
  clear(s, out, 'consumeRetry')
  s.awaiting.consume = undefined
  if (afterEscape(s)) {
    s.steps.escape = ESCAPE_WAIT
    return escapeLook(s, out)
  }
  return writeStep(s, s.write, s.steps.step, out)
}

/**
 * Whether the step waits for an ESC before it to be taken as the Escape key: written in the
 * program's wait for the rest of an escape sequence (vim's `ttimeoutlen`), Enter would be read
 * with it (`ESC CR`). Needs the /proc tier and a baseline to tell a read since the write.
 */
function afterEscape(s: In<'submitting'>): boolean {
  return s.steps.escape === undefined && s.spec.exact && s.write.baseline.kind !== 'none' && endsInEscape(s.spec.steps[s.steps.step - 1]?.data ?? '')
}

/** A probe for the escape wait of a step (`escapeDelay`), unless one is out. */
function escapeLook(s: In<'submitting'>, out: SendEffect[]): void {
  if (s.awaiting.probe !== undefined) return
  out.push({ type: 'probe', gen: ask(s, 'probe'), purpose: 'look' })
}

function finishWrite(s: SendState, write: WriteRecord, now: number, out: SendEffect[]): void {
  write.writtenAt = now
  if (s.spec.steps.length === 0) write.outputAtWrite = s.outputCount
  write.written = true
  out.push({ type: 'written' })
  // Input no reader reads (none; only signal characters, which ISIG turns into signals) is ahead
  // of no one, and no command is earlier than it.
  if (write.baseline.kind === 'probe' && write.bytes > 0) write.typedAheadOf = busyProgram(write.baseline.probe)
  return enterWaiting(s, write, now, out)
}

function enterWaiting(from: SendState, write: WriteRecord, now: number, out: SendEffect[]): void {
  const s = become(from, { phase: 'waiting', write, wait: waitState() })
  const spec = s.spec
  arm(s, out, 'deadline', spec.kind === 'signal' ? spec.handoffGraceMs : spec.timeoutMs)
  if (spec.kind !== 'signal') armSilence(s, out)
  if (spec.exact) arm(s, out, 'poll', spec.exactProbeAfterMs)
  // A handoff asked for while writing (a signal, or a cancel) starts now that the input is in.
  if (s.handoff.requested) startHandoff(s, now, out)
  else if (s.cancel.state === 'handoff') cancelAfterWrite(s, now, out)
  // Output may already be waiting (a startup banner, a prompt during a long write).
  if (spec.kind === 'startup' && spec.view.promptLine() !== '') {
    s.outputCount++
    return onOutput(s, now, out)
  }
  if (spec.view.promptShown(s.write.markersAtWrite)) {
    s.wait.markerSeen = true
    checkForeground(s, out)
  } else if (keepsWaiting(spec)) requestProbe(s, now, out)
}

/** Everything is written: the readiness tiers run until one settles the send. */
function waiting(s: In<'waiting'>, event: SendEvent, out: SendEffect[]): void {
  const spec = s.spec
  switch (event.type) {
    case 'output':
      return onOutput(s, event.now, out)
    case 'probed': {
      if (answers(s, 'confirm', event.gen)) {
        noteWait(s, event.probe)
        return onConfirmProbe(s, event, out)
      }
      if (!answers(s, 'probe', event.gen)) return
      // CPU time, not wall time (the driver measures it).
      s.wait.pacer = probeRan(s.wait.pacer, event.now, event.costMs)
      noteWait(s, event.probe)
      return onProbe(s, event.probe, event.now, out)
    }
    case 'foreground': {
      if (!answers(s, 'foreground', event.gen)) return
      // Not in front yet, or another program printed a marker: the poll tick takes over.
      if (!event.inFront) return
      // A prompt owed from before the send can come with the shell blocked before the input
      // reached it (the flip buffer): only a read after the input answers.
      if (event.reading === false || event.inputTaken === false) {
        if (s.wait.promptRechecks < PROMPT_RECHECKS) {
          const gap = Math.min(PROMPT_RECHECK_MS * 2 ** Math.min(s.wait.promptRechecks, 16), spec.pollIntervalMs / 5)
          s.wait.promptRechecks++
          arm(s, out, 'promptRecheck', gap)
        }
        return
      }
      if (spec.kind === 'startup') out.push({ type: 'learnShell', pgid: event.pgid })
      // Everything the shell printed before blocking is on its way: drain it, then look again.
      if (s.write.promptMayBeStale) return drain(s, out, { kind: 'prompt', markersAtLook: s.wait.markersAtLook })
      return settle(s, out, 'stdin_read', { tier: 'prompt', detail: 'controlled prompt' }, 'prompt')
    }
    case 'drained': {
      if (!answers(s, 'drain', event.gen)) return
      const after = s.wait.afterDrain
      s.wait.afterDrain = undefined
      if (after === undefined) return
      // The shell reading at its controlled prompt: the prompt tier settles it (with its
      // status), asked afresh since an earlier look may predate the shell's return.
      if (after.kind === 'proc' && shellAtPrompt(s, after.probe!)) return checkForeground(s, out, true)
      if (after.kind === 'prompt') {
        // Blocked reading does not prove the last Enter was read (drivers/tty/tty_buffer.c): a
        // prompt owed from before the send does not answer it. Without `inputTaken`, the only guard.
        if (!promptAnswers(s)) return
        // A marker read since the look (printed by the command once the shell read the line) is
        // confirmed only by a look after it: the one in flight, or a new one.
        if (spec.view.markers() !== after.markersAtLook) return checkForeground(s, out)
        return settle(s, out, 'stdin_read', { tier: 'prompt', detail: 'controlled prompt' }, 'prompt')
      }
      // A reader owed a query reply, or given one since the window's first look, awaits that.
      if (spec.view.repliesOwed() > 0 || spec.view.repliesWritten() !== after.repliesBefore) return requestProbe(s, event.now, out)
      return settleProc(s, out, after.probe!, after.sources!, after.quietMs!, after.how ?? '')
    }
    case 'termios': {
      if (!answers(s, 'termios', event.gen)) return
      const after = s.wait.afterTermios
      s.wait.afterTermios = undefined
      if (after === undefined) return
      // Output meanwhile: the read proved before it may be over; look again.
      if (s.outputCount !== after.outputBefore) return requestProbe(s, event.now, out)
      return settleProc(s, out, after.probe, after.sources, after.quietMs, after.how, event.hidden)
    }
    case 'timer':
      if (event.timer === 'handoff') return anyPhase(s, event, out)
      return onTimer(s, event.timer, event.now, out)
    default:
      return anyPhase(s, event, out)
  }
}

function onOutput(s: In<'waiting'>, now: number, out: SendEffect[]): void {
  const spec = s.spec
  if (s.wait.confirming !== undefined && s.awaiting.confirm === undefined) {
    // Output during the quiet window: the read is not confirmed; look again.
    s.wait.confirming = undefined
    clear(s, out, 'confirm')
    failConfirm(s, now, out)
    if ((s as SendState).phase !== 'waiting') return
  }
  armSilence(s, out)
  if (spec.view.promptShown(s.write.markersAtWrite)) {
    s.wait.markerSeen = true
    checkForeground(s, out)
    return
  }
  // Output is the moment to look, at once when the open line looks like a prompt. Under the
  // shell, whose prompts announce themselves, only a prompt-shaped line after the echo counts
  // (a program asking), at most once per `pollIntervalMs`; the poll timer covers the rest.
  if (!spec.exact) return
  const shell = s.write.baseline.kind === 'shell'
  if (shell && (spec.view.lastLine() === '' || now - s.wait.pacer.lastAt < spec.pollIntervalMs)) return
  const line = spec.view.promptLine()
  const shaped = line.trim() !== '' && promptShaped({ outputSinceWrite: s.outputCount !== s.write.outputAtWrite, promptLine: line, lastNonBlankLine: () => line, inputText: spec.inputText })
  if (shell && !shaped) return
  if (shaped && !shell) s.wait.pacer = eager(s.wait.pacer, s.outputCount)
  requestProbe(s, now, out)
}

function onTimer(s: In<'waiting'>, timer: Exclude<SendTimer, 'handoff'>, now: number, out: SendEffect[]): void {
  const spec = s.spec
  switch (timer) {
    case 'deadline':
      if (s.cancel.state === 'grace') return settle(s, out, 'timeout', { tier: 'cancel', detail: `interrupted with SIGINT; not ready within ${spec.handoffGraceMs} ms` })
      return settle(s, out, 'timeout', { tier: 'timeout', detail: `not ready after ${spec.timeoutMs} ms` })
    case 'silence': {
      // A startup that printed nothing is never published on silence.
      if (spec.kind === 'startup' && s.outputCount === 0) return
      const looks = spec.exact && s.awaiting.probe === undefined
      if (!looks && s.wait.confirming === undefined) return settleSilence(s, out)
      // One last look first, or the open window's verdict.
      s.wait.silenceDue = true
      if (s.wait.confirming === undefined) probeLook(s, out)
      return
    }
    case 'poll':
      if (s.wait.markerSeen && spec.view.promptShown(s.write.markersAtWrite)) checkForeground(s, out)
      requestProbe(s, now, out)
      arm(s, out, 'poll', spec.pollIntervalMs)
      return
    case 'probeGap':
      s.wait.pacer = endGap(s.wait.pacer)
      return requestProbe(s, now, out, true)
    case 'promptRecheck':
      return checkForeground(s, out)
    case 'confirm': {
      const confirming = s.wait.confirming
      if (confirming === undefined) return
      if (s.outputCount !== confirming.outputBefore) {
        s.wait.confirming = undefined
        return failConfirm(s, now, out)
      }
      out.push({ type: 'probe', gen: ask(s, 'confirm'), purpose: 'confirm' })
      return
    }
    case 'consume':
    case 'consumeRetry':
      return
    default:
      return unreachable(timer, 'send timer')
  }
}

// ─── The controlled prompt ──────────────────────────────────────────────────────────

/** The evidence of a prompt marker this host could not check with the kernel. */
export const UNCHECKED_PROMPT = "controlled prompt (its marker only: this host cannot see the terminal's processes)"

/**
 * The controlled prompt settles the send once the kernel agrees: the shell's group in front,
 * its main task blocked reading. `fresh`: a new look replaces the one in flight.
 */
function checkForeground(s: SendState, out: SendEffect[], fresh = false): void {
  if ((s.awaiting.foreground !== undefined && !fresh) || s.phase !== 'waiting') return
  if (!s.spec.observable) {
    // Nothing to ask (a remote container's terminal): the marker, nonce checked, is all there is.
    if (!promptAnswers(s)) return
    return settle(s, out, 'stdin_read', { tier: 'prompt', detail: UNCHECKED_PROMPT }, 'prompt')
  }
  const proveInput = s.write.promptMayBeStale && s.spec.drainsInput
  s.wait.markersAtLook = s.spec.view.markers()
  out.push({ type: 'foreground', gen: ask(s, 'foreground'), shell: s.spec.kind === 'startup' ? 'front' : 'shell', ...(proveInput && { proveInput }) })
}

/** Whether the prompt shown answers the input: a marker after the write (the last step, if one was owed). */
function promptAnswers(s: In<'waiting'>): boolean {
  const write = s.write
  return s.spec.view.promptShown(write.promptMayBeStale ? write.markersAtLastWrite : write.markersAtWrite)
}

/** Whether a proved read is the shell's main task reading at a controlled prompt that answers the input. */
function shellAtPrompt(s: In<'waiting'>, probe: ReadProbe): boolean {
  const shell = s.spec.shellPgid
  return shell !== undefined && probe.tpgid === shell && probe.reader?.tid === shell && promptAnswers(s)
}

// ─── The /proc tier ─────────────────────────────────────────────────────────────────

/** Runs a probe now, or after the one in flight, paced (probe-pacer.ts; an armed gap may be brought forward). */
function requestProbe(s: SendState, now: number, out: SendEffect[], gapEnded = false): void {
  const spec = s.spec
  if (s.phase !== 'waiting' || !spec.exact) return
  if (s.awaiting.probe !== undefined) {
    s.wait.probeAgain = true
    return
  }
  const paced = pace(s.wait.pacer, { now, outputCount: s.outputCount, floorMs: spec.pollIntervalMs / 5, gapEnded })
  s.wait.pacer = paced.pacer
  if (!paced.due) {
    if (paced.armMs !== undefined) arm(s, out, 'probeGap', paced.armMs)
    return
  }
  probeLook(s, out)
}

/** Asks for a look probe, noting the replies written so far (`repliesAtLook`). */
function probeLook(s: In<'waiting'>, out: SendEffect[]): void {
  s.wait.repliesAtLook = s.spec.view.repliesWritten()
  out.push({ type: 'probe', gen: ask(s, 'probe'), purpose: 'look' })
}

function onProbe(s: In<'waiting'>, probe: ReadProbe | undefined, now: number, out: SendEffect[]): void {
  const spec = s.spec
  s.wait.running = probe === undefined ? undefined : busyProgram(probe)
  const evidence = probe !== undefined && readEvidence(s, probe)
  const sources = probe?.sources ?? []
  // A read whose wait holds other wake sources counts only with prompt-shaped output, quiet over
  // the corroboration window (judgeWindow). A timed read alone is a plain read, unless after an
  // ESC, where the timer may be the wait for the rest of a sequence (`escapePending`).
  const shaped =
    sources.length === 0 ||
    timedKeyRead(spec, sources) ||
    promptShaped({ outputSinceWrite: s.outputCount !== s.write.outputAtWrite, promptLine: spec.view.promptLine(), lastNonBlankLine: () => spec.view.lastNonBlankLine(), inputText: spec.inputText })
  if (probe !== undefined && evidence && shaped) {
    // Confirm over a window of samples; one window at a time.
    if (s.wait.confirming !== undefined) return
    s.wait.confirming = { samples: [{ atMs: now, probe }], rules: windowRules(spec, sources), sources, outputBefore: s.outputCount, repliesBefore: s.wait.repliesAtLook }
    return judge(s, now, out)
  }
  if (s.wait.silenceDue) return settleSilence(s, out)
  if (s.wait.probeAgain || evidence) {
    // More output arrived meanwhile, or the read did not hold yet: look again, paced.
    s.wait.probeAgain = false
    requestProbe(s, now, out)
  }
}

/** The UTF-8 bytes of `data` a reader reads whatever its line discipline: not the signal characters, which ISIG turns into signals. */
function readerBytes(data: string): number {
  return Buffer.byteLength(data.replace(/[\x03\x1c\x1a]/g, ''))
}

/** Whether `probe` is read evidence for this send (`isReadEvidence`). */
function readEvidence(s: In<'waiting' | 'submitting'>, probe: ReadProbe): boolean {
  const spec = s.spec
  return isReadEvidence(probe, { startup: spec.kind === 'startup', input: !keepsWaiting(spec), baseline: s.write.baseline, wrapperPid: spec.wrapperPid, sawOutput: s.outputCount > 0, ...(spec.relayed && { inputBytes: s.write.bytes }) })
}

/** A timed read with no other wake source, confirmed as a plain read (`timedReadMs`), unless the input ended in ESC. */
function timedKeyRead(spec: SendSpec, sources: readonly string[]): boolean {
  return !spec.endsInEscape && timedReadMs(sources) !== undefined
}

/**
 * The window that confirms a read, ms: `pollIntervalMs / 10` alone; with other wake sources
 * twice `pollIntervalMs` of quiet, up to past a near timeout (`corroborationCapMs`), at most `idleMs`.
 */
function windowRules(spec: SendSpec, sources: readonly string[]): WindowRules {
  const stepMs = spec.pollIntervalMs
  if (sources.length === 0 || timedKeyRead(spec, sources)) return { quietMs: spec.pollIntervalMs / 10, capMs: spec.pollIntervalMs / 10, stepMs, corroborating: false }
  const quietMs = Math.min(spec.pollIntervalMs * 2, spec.idleMs)
  return { quietMs, capMs: corroborationCapMs(sources, quietMs, spec.idleMs), stepMs, corroborating: true }
}

function onConfirmProbe(s: In<'waiting'>, event: Extract<SendEvent, { type: 'probed' }>, out: SendEffect[]): void {
  const confirming = s.wait.confirming
  if (confirming === undefined) return
  const again = event.probe
  if (again === undefined || s.outputCount !== confirming.outputBefore) return decide(s, event.now, out, { kind: 'refuted', why: again === undefined ? 'the probe failed' : 'output arrived' })
  confirming.samples.push({ atMs: event.now, probe: again })
  return judge(s, event.now, out)
}

/** Asks `judgeWindow` about the open window: another sample, or a verdict. */
function judge(s: In<'waiting'>, now: number, out: SendEffect[]): void {
  const confirming = s.wait.confirming!
  const verdict = judgeWindow(confirming.samples, confirming.rules)
  if (verdict.kind === 'pending') return arm(s, out, 'confirm', verdict.nextInMs)
  return decide(s, now, out, verdict)
}

function decide(s: In<'waiting'>, now: number, out: SendEffect[], verdict: Exclude<WindowVerdict, { kind: 'pending' }>): void {
  const confirming = s.wait.confirming!
  s.wait.confirming = undefined
  const first = confirming.samples[0]!.probe
  if (verdict.kind === 'proven') {
    // A drain in flight settles on the read it proved, as when it answers first: a window that
    // output during it opened (the relay's, behind a sync) must not overtake it with another.
    if (s.awaiting.drain !== undefined) return
    return drain(s, out, { kind: 'proc', probe: first, sources: confirming.sources, quietMs: verdict.quietMs, how: verdict.detail, repliesBefore: confirming.repliesBefore })
  }
  s.wait.ambiguousRead = verdict.kind === 'ambiguous' ? `${first.detail}; also waits on ${confirming.sources.join(', ')}; ${verdict.why}` : s.wait.ambiguousRead
  return failConfirm(s, now, out)
}

function failConfirm(s: In<'waiting'>, now: number, out: SendEffect[]): void {
  if (s.wait.silenceDue) return settleSilence(s, out)
  s.wait.probeAgain = false
  requestProbe(s, now, out)
}

/** Settles a proved read; a reader in read(2)/readv(2) may ask for a secret, so termios is asked first. */
function settleProc(s: In<'waiting'>, out: SendEffect[], probe: ReadProbe, sources: string[], quietMs: number, how: string, hidden?: boolean): void {
  const spec = s.spec
  const reader = probe.reader!
  if (hidden === undefined && spec.kind === 'send' && spec.readsTermios && (reader.syscall === 'read' || reader.syscall === 'readv')) {
    s.wait.afterTermios = { probe, sources, quietMs, how, outputBefore: s.outputCount }
    out.push({ type: 'termios', gen: ask(s, 'termios') })
    return
  }
  if (spec.kind === 'startup') out.push({ type: 'learnShell', pgid: probe.tpgid })
  const shellReads = probe.tpgid !== undefined && probe.tpgid === spec.shellPgid
  const inputState: InputState = hidden === true ? 'hidden' : isContinuation(spec.view.promptLine(), shellReads) ? 'continuation' : 'prompt'
  const { name, pid, tid, syscall, fd, path } = reader
  const judged = how === '' ? '' : `; ${how}`
  const timed = timedReadMs(sources)
  const corroborated = sources.length > 0 && timed === undefined
  const detail = timed !== undefined
    ? `${probe.detail}; a timed read: its own timeout ends in ${timed} ms, nothing else can wake it`
    : corroborated ? `${probe.detail}; also waits on ${sources.join(', ')}; prompt-shaped output quiet for ${quietMs} ms${judged}` : probe.detail
  settle(s, out, 'stdin_read', { tier: 'proc', detail, process: { name, pid, tid, syscall, fd, path }, ...(corroborated && { corroborated: { sources, quietMs } }) }, inputState)
}

function drain(s: In<'waiting'>, out: SendEffect[], after: NonNullable<WaitState['afterDrain']>): void {
  s.wait.afterDrain = after
  out.push({ type: 'drain', gen: ask(s, 'drain') })
}

// ─── Silence, cancel, handoff ───────────────────────────────────────────────────────

function armSilence(s: In<'waiting'>, out: SendEffect[]): void {
  if (s.spec.kind === 'signal') return
  arm(s, out, 'silence', silenceMs(s))
}

function silenceMs(s: In<'waiting'>): number {
  return s.spec.idleMs + (s.wait.markerSeen ? s.spec.handoffGraceMs : 0)
}

function settleSilence(s: In<'waiting'>, out: SendEffect[]): void {
  s.wait.silenceDue = false
  if (escapePending(s, out)) return
  const ambiguous = s.wait.ambiguousRead === undefined ? '' : `; a read was found but not proven: ${s.wait.ambiguousRead}`
  settle(s, out, 'inferred_idle', { tier: 'silence', detail: `no output for ${silenceMs(s)} ms${ambiguous}` })
}

/** For a send ending in ESC: what the probe shows of its escape wait (`escapeSeen`). */
function noteWait(s: In<'waiting'>, probe: ReadProbe | undefined): void {
  if (s.spec.endsInEscape) s.wait.escape = escapeSeen(s, s.wait.escape, probe)
}

/** No probe seen yet of a wait after an ESC. */
const ESCAPE_WAIT: EscapeWait = { read: false, timed: undefined, deferredFor: undefined, deferrals: 0 }

/** `escape` with what `probe` shows: whether its reader read since the write, and whether its wait ends on its own within `NEAR_TIMEOUT_MS`. */
function escapeSeen(s: In<'waiting' | 'submitting'>, escape: EscapeWait, probe: ReadProbe | undefined): EscapeWait {
  const read = probe !== undefined && readEvidence(s, probe)
  const reader = read ? probe!.reader : undefined
  const task = reader === undefined ? undefined : probe!.tasks.find((candidate) => candidate.tid === reader.tid)
  const timeoutMs = task?.timeoutMs
  const timed = task !== undefined && timeoutMs !== undefined && timeoutMs <= NEAR_TIMEOUT_MS ? { tid: task.tid, switches: task.switches, timeoutMs } : undefined
  return { ...escape, read, timed }
}

/** How often an ESC is waited for at most (`escapeDelay`). */
const ESCAPE_DEFERRALS = 8

/**
 * How much longer, ms, to wait for the program to take an ESC as the Escape key, and the wait
 * with that deferral noted; undefined once it did. A program waits a little for the rest of an
 * escape sequence (vim's `ttimeoutlen`, readline's `keyseq-timeout`), and input written in that
 * wait would be read with it. `pollIntervalMs` while the reader has not read since the write, or
 * past its near timeout while it has not woken from it; at most `ESCAPE_DEFERRALS` times.
 */
function escapeDelay(escape: EscapeWait, pollIntervalMs: number): { ms: number; escape: EscapeWait } | undefined {
  if (escape.deferrals >= ESCAPE_DEFERRALS) return undefined
  const wait = escape.timed
  const before = escape.deferredFor
  let ms: number
  let deferredFor = before
  if (!escape.read) ms = pollIntervalMs
  else if (wait !== undefined && !(before !== undefined && before.tid === wait.tid && (wait.switches === undefined || wait.switches !== before.switches))) {
    deferredFor = { tid: wait.tid, switches: wait.switches }
    ms = wait.timeoutMs + pollIntervalMs
  } else return undefined
  return { ms, escape: { ...escape, deferredFor, deferrals: escape.deferrals + 1 } }
}

/** Whether silence waits after a send ending in ESC (`escapeDelay`): a send in that wait would be read with it. */
function escapePending(s: In<'waiting'>, out: SendEffect[]): boolean {
  if (!s.spec.endsInEscape || !s.spec.exact) return false
  const delay = escapeDelay(s.wait.escape, s.spec.pollIntervalMs)
  if (delay === undefined) return false
  s.wait.escape = delay.escape
  arm(s, out, 'silence', delay.ms)
  return true
}

/**
 * A cancel before anything was written rejects; after, the input goes whole, then `handoff`,
 * `signalling` (SIGINT), `grace` until ready or `handoffGraceMs` passed.
 */
function cancelling(s: SendState, event: Extract<SendEvent, { type: 'cancel' | 'abort' | 'signalled' | 'failed' }>, out: SendEffect[]): void {
  const cancel = s.cancel
  switch (event.type) {
    case 'cancel':
    case 'abort':
      if (cancel.state !== 'none') return
      if (s.phase === 'pending' || s.phase === 'baseline' || s.phase === 'checking') {
        return reject(s, out, new PtyError('SEND_CANCELLED', { reason: 'the send was cancelled before its input was written; nothing was written' }), true, true)
      }
      s.cancel = { state: 'handoff' }
      if (s.phase === 'waiting') return cancelAfterWrite(s, event.now, out)
      return
    case 'signalled':
      if (cancel.state !== 'signalling' || cancel.gen !== event.gen) return
      // The interrupted program normally returns to a prompt at once; give it the handoff grace.
      s.cancel = { state: 'grace' }
      arm(s, out, 'deadline', s.spec.handoffGraceMs)
      out.push({ type: 'cancelled' })
      return
    case 'failed':
      settle(s, out, 'timeout', { tier: 'cancel', detail: `cancelled; could not interrupt: ${messageOf(event.error)}` })
      out.push({ type: 'cancelled' })
      return
    default:
      return unreachable(event, 'cancel event')
  }
}

/**
 * Like a signal right after a send: let the command take the foreground first, or a SIGINT
 * that reaches bash while it runs a builtin (`echo x; sleep 600`) is ignored.
 */
function cancelAfterWrite(s: In<'waiting'>, now: number, out: SendEffect[]): void {
  s.handoff = { requested: true, deadline: 0, busy: 0 }
  startHandoff(s, now, out)
}

function startHandoff(s: In<'waiting'>, now: number, out: SendEffect[]): void {
  clear(s, out, 'handoff')
  s.handoff.deadline = s.write.writtenAt + s.spec.handoffGraceMs
  s.handoff.busy = 0
  if (now >= s.handoff.deadline) return handoffDone(s, out)
  look(s, out)
}

function look(s: In<'waiting'>, out: SendEffect[]): void {
  if (s.awaiting.handoff !== undefined) return
  const waiting = s.write.baseline.kind === 'probe' && s.write.baseline.probe.verdict === 'reading' ? s.write.baseline.probe.tpgid : undefined
  out.push({ type: 'handoffLook', gen: ask(s, 'handoff'), waiting })
}

/**
 * Done once the command has the input: another program than the shell in front (a signal before
 * a fresh child's exec is lost), or a waiting program (a REPL) busy at two looks in a row.
 */
function onHandoffLook(s: SendState, found: HandoffLook, now: number, out: SendEffect[]): void {
  if (!s.handoff.requested) return
  let done = found.pgid === undefined
  if (!done && found.waitingBusy !== undefined) {
    s.handoff.busy = found.waitingBusy ? s.handoff.busy + 1 : 0
    done = s.handoff.busy >= 2
  } else if (!done && found.otherProgram !== undefined) done = found.otherProgram
  if (done || now >= s.handoff.deadline) return handoffDone(s, out)
  arm(s, out, 'handoff', Math.min(s.spec.pollIntervalMs / 5, Math.max(0, s.handoff.deadline - now)))
}

function handoffDone(s: SendState, out: SendEffect[]): void {
  s.handoff = { requested: false, deadline: 0, busy: 0 }
  clear(s, out, 'handoff')
  out.push({ type: 'handedOff' })
  if (s.cancel.state === 'handoff') {
    s.cancel = { state: 'signalling', gen: ++s.gen }
    out.push({ type: 'signal', gen: s.cancel.gen, signal: 'SIGINT' })
  }
}

// ─── Settling ───────────────────────────────────────────────────────────────────────

function arm(s: SendState, out: SendEffect[], timer: SendTimer, ms: number): void {
  if (!s.timers.includes(timer)) s.timers.push(timer)
  out.push({ type: 'arm', timer, ms })
}

function clear(s: SendState, out: SendEffect[], timer: SendTimer): void {
  if (!s.timers.includes(timer)) return
  s.timers = s.timers.filter((name) => name !== timer)
  out.push({ type: 'clear', timer })
}

function finish(s: SendState, out: SendEffect[]): void {
  const written = 'write' in s && s.write.written
  for (const timer of s.timers) out.push({ type: 'clear', timer })
  become(s, { phase: 'settled' })
  s.timers = []
  s.awaiting = {}
  if (!written) out.push({ type: 'written' })
  if (s.handoff.requested) out.push({ type: 'handedOff' })
  if (s.cancel.state === 'handoff' || s.cancel.state === 'signalling') out.push({ type: 'cancelled' })
}

/** Ends the send. Typed-ahead input stays `not_reading` unless a continuation or hidden read asks now. */
function settle(s: SendState, out: SendEffect[], waitReason: WaitReason, evidence: ReadinessEvidence, inputState?: InputState): void {
  const write = 'write' in s ? s.write : undefined
  const program = write?.typedAheadOf
  const ahead = program === undefined ? undefined : 'not_reading'
  const state = waitReason === 'stdin_read' && inputState !== 'prompt' ? inputState : (ahead ?? inputState)
  const running = (waitReason === 'inferred_idle' || waitReason === 'timeout') && 'wait' in s ? s.wait.running : undefined
  const writtenAt = write?.writtenAt ?? 0
  finish(s, out)
  out.push({
    type: 'settle',
    waitReason,
    evidence,
    inputState: state,
    writtenAt,
    atPrompt: evidence.tier === 'prompt',
    ...(program !== undefined && { earlier: { program, markersAtWrite: write!.markersAtWrite } }),
    ...(running !== undefined && { running }),
    ...(evidence.tier === 'prompt' && write !== undefined && { job: { since: write.begunAt, ...(s.job !== undefined && { pgid: s.job }) } }),
  })
}

/** The names of a `not_reading` probe's processes (`bash, sleep`), once each in pid order, else undefined. */
function busyProgram(probe: ReadProbe): string | undefined {
  if (probe.verdict !== 'not_reading') return undefined
  const names = [...new Set(probe.tasks.map((task) => task.name))]
  return names.length === 0 ? undefined : names.join(', ')
}

function reject(s: SendState, out: SendEffect[], error: unknown, handOn: boolean, keepAtPrompt: boolean): void {
  finish(s, out)
  out.push({ type: 'reject', error, handOn, keepAtPrompt })
}

/** An abort before anything was written: a send is cancelled, a startup or watch rejects with the reason. */
function abortBeforeWrite(s: SendState, out: SendEffect[], reason: unknown): void {
  if (s.spec.kind === 'send') return cancelling(s, { type: 'cancel', now: 0 }, out)
  return reject(s, out, reason, false, false)
}

