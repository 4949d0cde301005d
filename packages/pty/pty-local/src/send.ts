/**
 * The driver of the send machine (send-machine.ts): feeds it events, runs its effects against
 * the session (`SendHost`) and turns the settle effect into the result. No send state lives here.
 */
import { constants } from 'node:os'
import { STOP_SIGNALS, within, type PtySignal, type SendLimits, type SendOperation, type SendResult, type SessionStatus, type SignalResult, type StopSignal } from '@conch/pty'
import type { Config } from './config.ts'
import { isNewReadEvidence, type Baseline, type ReadProbe, type TerminalInspector } from './inspector.ts'
import { endsInEscape, textSteps, type PasteModes, type WriteStep } from './input-steps.ts'
import type { Key } from './keys.ts'
import { initialState, transition, type HandoffLook, type SendEffect, type SendEvent, type SendKind, type SendState, type SendTimer } from './send-machine.ts'
import type { SendBuffer, SendOutput } from './send-buffer.ts'
import { unreachable } from '@conch/session'

export type { SendKind } from './send-machine.ts'

/** What a send needs from its session. Durations in ms. */
export interface SendHost {
  /** pid of the wrapper (the node-pty child). */
  readonly pid: number
  readonly limits: Pick<
    Config,
    'timeoutMs' | 'idleSilenceMs' | 'handoffGraceMs' | 'pollIntervalMs' | 'exactProbeAfterMs' | 'submitWaitMs'
  >
  readonly inspector: TerminalInspector
  /** The shell's process group, learned at startup. */
  shellPgid: number | undefined
  /** The shell sits at its controlled prompt with no output since. */
  readonly knownAtPrompt: boolean
  /** Prompt markers parsed so far. */
  readonly promptMarkerCount: number
  /** The status the latest prompt marker carried (the shell's `$?`, see prompt.ts). */
  readonly promptStatus: number | undefined
  /** Process groups a result reported stopped that may still be (`Send.stoppedJob`). */
  readonly reportedStops: Set<number>
  /**
   * The first prompt marker after the first `count` ones, if still kept: its status and how many
   * of `buffer`'s lines came before it (undefined when the buffer lost lines or a screen is shown).
   */
  promptAfter(count: number, buffer: SendBuffer): { status: number | undefined; lines: number | undefined } | undefined
  /** Input a result named typed ahead of a command whose prompt had not come yet: the next result to see that prompt names it. */
  typedAhead: { program: string; markersAtWrite: number } | undefined
  /** Replies to the program's terminal queries parsed and not yet written or dropped. */
  readonly repliesOwed: number
  /** Replies written to the program so far. */
  readonly repliesWritten: number
  /** Monotonic clock, ms. */
  now(): number
  status(): SessionStatus
  /** Whether the printable text after the latest marker (newer than the first `since`) is exactly the controlled PS1. */
  promptShown(since: number): boolean
  /** The unfinished line a prompt would be on. */
  promptLine(): string
  /** The modes the paste rule reads (input-steps.ts, `pastes`). */
  pasteModes(): PasteModes
  /** Reads the output the terminal holds for the session now, parsing it before it returns (terminal.ts, `readPending`). */
  readPending(): void
  /** Writes input; resolves when all of it is in the kernel. */
  write(data: string): Promise<void>
  /** A named key's bytes for the terminal's modes now (keys.ts). */
  encodeKey(key: Key): string
  /** Whether the terminal is set for hidden input now (termios.ts); absent when termios cannot be read. */
  readsHiddenInput?: () => Promise<boolean>
  /**
   * The input queue (termios.ts): canonical mode, and the bytes waiting once all written was moved
   * into it (FIONREAD after a poll); undefined when unreadable, absent without termios.
   */
  inputQueue?: () => Promise<{ canonical: boolean; queued: number } | undefined>
  /** Signals the foreground process group, resolved now. */
  signalForeground(signal: PtySignal): Promise<SignalResult>
  /** The buffer a send starts with: the output nobody has seen yet (or a new one for `startup`). */
  openBuffer(kind: SendKind): SendBuffer
  /** A send's result text. */
  resultOf(buffer: SendBuffer): SendOutput
  /** The current screen as a result shows it, while one is attached; else undefined. */
  screenNow(): string | undefined
  /** A text pass for one send's live output (redact.ts, `LiveTextRedactor`); `end`: the send settled. */
  liveRedactor(): { push(text: string, end: boolean): string }
  /** A relayed terminal's: resolves once all its programs wrote has arrived (LocalSession.relaySync). */
  relaySync?: () => Promise<void>
  /** A send is over (see LocalSession.settled). */
  settled(send: Send, atPrompt: boolean, unconsumed?: SendBuffer): void
}

/** What to send: a text (written as `textSteps`), or explicit write steps. */
export interface SendRequest extends SendLimits {
  text: string
  submit: boolean
  /** Explicit write steps instead of the text's (the text then only serves the prompt-shape rule). */
  steps?: readonly WriteStep[]
  /** Asked before the first write: a refusal (a `PtyError`) rejects the send with nothing written. */
  inputCheck?: () => Promise<unknown>
  signal?: AbortSignal
}

export class Send {
  readonly operation: SendOperation
  readonly done: Promise<SendResult>
  /** For `signal` watches: what the signal reached. */
  signalResult: SignalResult | undefined
  private resolve!: (result: SendResult) => void
  private reject!: (error: unknown) => void
  private state: SendState
  private readonly buffer: SendBuffer
  private readonly timers = new Map<SendTimer, { handle: NodeJS.Timeout; ms: number }>()
  private readonly outputListeners = new Set<() => void>()
  private queue: SendEvent[] | undefined
  private handoffWaiters: (() => void)[] = []
  private cancelWaiters: (() => void)[] = []
  private cancelling: Promise<void> | undefined
  private shellProgram: Promise<string | undefined> | undefined
  private readonly abortListener: (() => void) | undefined

  constructor(
    private readonly host: SendHost,
    private readonly input: SendRequest,
    readonly kind: SendKind,
    signalToSend?: PtySignal,
  ) {
    const limits = host.limits
    this.buffer = host.openBuffer(kind)
    const buffer = this.buffer
    const live = host.liveRedactor()
    const steps = kind === 'send' ? (input.steps ?? textSteps(input, host.pasteModes())) : []
    this.state = initialState({
      kind,
      steps,
      endsInEscape: endsInEscape(steps.at(-1)?.data ?? ''),
      inputText: input.text,
      ...(signalToSend !== undefined && { signal: signalToSend }),
      timeoutMs: input.timeoutMs ?? limits.timeoutMs,
      idleMs: input.idleMs ?? limits.idleSilenceMs,
      handoffGraceMs: limits.handoffGraceMs,
      pollIntervalMs: limits.pollIntervalMs,
      exactProbeAfterMs: limits.exactProbeAfterMs,
      submitWaitMs: limits.submitWaitMs,
      checkInput: kind === 'send' && input.inputCheck !== undefined,
      readsTermios: host.readsHiddenInput !== undefined,
      drainsInput: host.inputQueue !== undefined,
      exact: host.inspector.exact,
      observable: host.inspector.observable,
      relayed: host.inspector.relayed,
      wrapperPid: host.pid,
      shellPgid: host.shellPgid,
      view: {
        markers: () => host.promptMarkerCount,
        promptShown: (since) => host.promptShown(since),
        promptLine: () => host.promptLine(),
        lastNonBlankLine: () => buffer.lastNonBlankLine(),
        lastLine: () => buffer.lastLine(),
        repliesOwed: () => host.repliesOwed,
        repliesWritten: () => host.repliesWritten,
      },
    })
    this.done = new Promise<SendResult>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.done.catch(() => {})
    const signal = input.signal
    if (signal !== undefined) {
      this.abortListener = () => this.dispatch({ type: 'abort', now: host.now(), reason: signal.reason })
      signal.addEventListener('abort', this.abortListener, { once: true })
    }
    this.operation = {
      done: this.done,
      readOutput: () => live.push(this.buffer.take().text, this.state.phase === 'settled'),
      onOutput: (listener) => {
        this.outputListeners.add(listener)
        return () => this.outputListeners.delete(listener)
      },
      screen: () => host.screenNow(),
      cancel: () => this.cancel(),
    }
  }

  /** Starts the send. Never rejects: failures settle `done`. */
  begin(): void {
    this.dispatch({ type: 'begin', now: this.host.now(), ...this.checks() })
  }

  /** Called after each parsed chunk. */
  onOutput(): void {
    if (this.state.phase === 'settled') return
    for (const listener of [...this.outputListeners]) listener()
    this.dispatch({ type: 'output', now: this.host.now() })
  }

  onExit(status: SessionStatus): void {
    this.dispatch({ type: 'exit', now: this.host.now(), status })
  }

  /** Resolves once the program meant for the input has it (at most `handoffGraceMs`), or the send settled. */
  handedOff(): Promise<void> {
    if (this.kind !== 'send' || this.state.phase === 'settled') return Promise.resolve()
    return new Promise<void>((resolve) => {
      this.handoffWaiters.push(resolve)
      this.dispatch({ type: 'handoff', now: this.host.now() })
    })
  }

  /** Resolves when settled or after `ms`, whichever is first. */
  async settledWithin(ms: number): Promise<void> {
    if (this.state.phase === 'settled') return
    await within(this.done.then(noop, noop), ms)
  }

  cancel(): Promise<void> {
    if (this.cancelling !== undefined) return this.cancelling
    if (this.state.phase === 'settled') return (this.cancelling = Promise.resolve())
    this.cancelling = new Promise<void>((resolve) => {
      this.cancelWaiters.push(resolve)
      this.dispatch({ type: 'cancel', now: this.host.now() })
    })
    return this.cancelling
  }

  // ─── The loop ───────────────────────────────────────────────────────────────────

  private dispatch(event: SendEvent): void {
    if (this.queue !== undefined) {
      this.queue.push(event)
      return
    }
    const queue: SendEvent[] = [event]
    this.queue = queue
    try {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        const [state, effects] = transition(this.state, next)
        this.state = state
        for (const effect of effects) this.execute(effect)
      }
    } finally {
      this.queue = undefined
    }
  }

  private checks(): { aborted: boolean; reason?: unknown; exited: boolean; knownAtPrompt: boolean } {
    const signal = this.input.signal
    return {
      aborted: signal?.aborted === true,
      ...(signal?.aborted === true && { reason: signal.reason }),
      exited: this.host.status().state === 'exited',
      knownAtPrompt: this.host.knownAtPrompt,
    }
  }

  private execute(effect: SendEffect): void {
    const host = this.host
    switch (effect.type) {
      case 'baseline':
        return void this.takeBaseline().then((baseline) => this.dispatch({ type: 'baseline', gen: effect.gen, now: host.now(), baseline, ...this.checks() }))
      case 'checkInput':
        return void (this.input.inputCheck?.() ?? Promise.resolve(undefined)).then(
          (refusal) => this.dispatch({ type: 'inputChecked', gen: effect.gen, now: host.now(), refusal }),
          (error: unknown) => this.dispatch({ type: 'failed', gen: effect.gen, now: host.now(), error }),
        )
      case 'termios':
        return void (host.readsHiddenInput?.() ?? Promise.resolve(false)).then(
          (hidden) => this.dispatch({ type: 'termios', gen: effect.gen, now: host.now(), hidden }),
          () => this.dispatch({ type: 'termios', gen: effect.gen, now: host.now(), hidden: false }),
        )
      case 'write':
        return void host.write(effect.key !== undefined ? host.encodeKey(effect.key) : effect.data).then(
          () => this.dispatch({ type: 'written', gen: effect.gen, now: host.now() }),
          (error: unknown) => this.dispatch({ type: 'failed', gen: effect.gen, now: host.now(), error }),
        )
      case 'consume':
        return void this.consumed(effect.baseline, effect.inputBytes).then((consumed) => this.dispatch({ type: 'consumed', gen: effect.gen, now: host.now(), consumed }))
      case 'signal':
        return void host.signalForeground(effect.signal).then(
          (result) => {
            if (this.kind === 'signal') this.signalResult = result
            this.dispatch({ type: 'signalled', gen: effect.gen, now: host.now(), result })
          },
          (error: unknown) => this.dispatch({ type: 'failed', gen: effect.gen, now: host.now(), error }),
        )
      case 'probe':
        return void this.probe(effect.purpose).then(({ probe, costMs }) => this.dispatch({ type: 'probed', gen: effect.gen, now: host.now(), probe, costMs }))
      case 'foreground':
        return void this.foreground(effect.shell, effect.proveInput === true).then((found) => this.dispatch({ type: 'foreground', gen: effect.gen, now: host.now(), ...found }))
      case 'drain':
        return void this.drain().then(() => this.dispatch({ type: 'drained', gen: effect.gen, now: host.now() }))
      case 'handoffLook':
        return void this.handoffLook(effect.waiting).then((look) => this.dispatch({ type: 'handoffLook', gen: effect.gen, now: host.now(), look }))
      case 'arm': {
        const timer = effect.timer
        const armed = this.timers.get(timer)
        // The same duration (the silence timer, on every chunk): restarted in place.
        if (armed !== undefined && armed.ms === effect.ms) return void armed.handle.refresh()
        if (armed !== undefined) clearTimeout(armed.handle)
        const handle = setTimeout(() => {
          this.timers.delete(timer)
          this.dispatch({ type: 'timer', timer, now: host.now() })
        }, effect.ms)
        this.timers.set(timer, { handle, ms: effect.ms })
        return
      }
      case 'clear':
        clearTimeout(this.timers.get(effect.timer)?.handle)
        this.timers.delete(effect.timer)
        return
      case 'written':
        return
      case 'handedOff':
        for (const resolve of this.handoffWaiters.splice(0)) resolve()
        return
      case 'cancelled':
        for (const resolve of this.cancelWaiters.splice(0)) resolve()
        return
      case 'learnShell':
        host.shellPgid ??= effect.pgid
        return
      case 'settle': {
        this.release()
        this.buffer.close()
        const viewport = host.resultOf(this.buffer)
        const result: SendResult = {
          viewport: viewport.text,
          waitReason: effect.waitReason,
          sessionStatus: host.status(),
          truncated: viewport.truncated,
          ...(viewport.omitted !== undefined && { omitted: viewport.omitted }),
          evidence: effect.evidence,
          elapsedMs: Math.max(0, Math.round(host.now() - effect.writtenAt)),
        }
        if (effect.inputState !== undefined) result.inputState = effect.inputState
        const status = effect.atPrompt ? host.promptStatus : undefined
        // This send's input typed ahead, else an earlier result's whose command has ended since.
        const earlier = effect.earlier ?? host.typedAhead
        const ended = earlier === undefined ? undefined : host.promptAfter(earlier.markersAtWrite, this.buffer)
        if (earlier !== undefined && (earlier === effect.earlier || ended !== undefined)) {
          result.earlier = { program: earlier.program, ...(ended?.status !== undefined && { exitStatus: ended.status }), ...(ended?.lines !== undefined && { lines: ended.lines }) }
        }
        // Kept for the next result while its command runs on: not once a read settled this one (a
        // REPL, which prints no marker, read the input; a reader blocked in read(2) has none queued).
        host.typedAhead = earlier !== undefined && effect.waitReason !== 'stdin_read' && host.promptMarkerCount <= earlier.markersAtWrite ? earlier : undefined
        if (effect.running !== undefined) result.running = effect.running
        host.settled(this, effect.atPrompt)
        const resolve = (stopped?: SendResult['stopped']) => {
          if (stopped !== undefined) result.stopped = stopped
          else if (status !== undefined && this.kind !== 'startup') result.exitStatus = status
          this.resolve(result)
        }
        const signal = stopSignalOf(status)
        if (signal === undefined) return resolve()
        // A stop status is a stop only when the kernel shows the job stopped (an `exit 148` is none).
        void this.stoppedJob(effect.job).then((program) => resolve(program === undefined ? undefined : { signal, program }))
        return
      }
      case 'reject':
        this.release()
        if (effect.handOn) host.settled(this, effect.keepAtPrompt && host.knownAtPrompt, this.buffer)
        else {
          this.buffer.close()
          host.settled(this, false)
        }
        this.reject(effect.error)
        return
      default:
        return unreachable(effect, 'send effect')
    }
  }

  /** Everything a settled send held goes: timers, the abort listener, waiters. */
  private release(): void {
    for (const timer of this.timers.values()) clearTimeout(timer.handle)
    this.timers.clear()
    if (this.abortListener !== undefined) this.input.signal?.removeEventListener('abort', this.abortListener)
    for (const resolve of [...this.handoffWaiters.splice(0), ...this.cancelWaiters.splice(0)]) resolve()
  }

  // ─── What the effects ask the kernel ─────────────────────────────────────────────

  /**
   * The name of the job a stop status at the prompt is about, when the kernel shows it stopped:
   * `job.pgid`, the group last seen in front; with none seen, the newest stopped job started
   * since the write began and not reported stopped before (an older one proves nothing of an
   * `exit 148`). Undefined when there is none, or the kernel cannot tell.
   */
  private async stoppedJob(job: { since: number; pgid?: number } | undefined): Promise<string | undefined> {
    const shell = this.host.shellPgid
    if (shell === undefined || job === undefined) return undefined
    const stopped = await this.host.inspector.stoppedJobs(shell).catch(() => undefined)
    if (stopped === undefined) return undefined
    const reported = this.host.reportedStops
    // A job no longer stopped was resumed: a later stop of it is news.
    for (const pgid of reported) if (!stopped.some((group) => group.pgid === pgid)) reported.delete(pgid)
    // Start times come in 10 ms steps (proc(5)): a job started just after the write may look older by one.
    const sinceMs = this.host.now() - job.since + START_TIME_STEP_MS
    const found = job.pgid !== undefined
      ? stopped.find((group) => group.pgid === job.pgid)
      : stopped.filter((group) => group.ageMs <= sinceMs && !reported.has(group.pgid)).sort((a, b) => a.ageMs - b.ageMs)[0]
    if (found !== undefined) reported.add(found.pgid)
    return found?.name
  }

  private async takeBaseline(): Promise<Baseline> {
    const host = this.host
    const inspector = host.inspector
    const shell = host.shellPgid
    try {
      if (host.knownAtPrompt && shell !== undefined) {
        // The shell at its prompt: its main task's counter (and, relayed, the bytes it read).
        const [switches, readBytes] = await Promise.all([inspector.taskSwitches(shell), inspector.relayed ? inspector.readBytes(shell, shell) : undefined])
        if (switches !== undefined) return { kind: 'shell', pgid: shell, switches, ...(readBytes !== undefined && { readBytes }) }
      }
      return { kind: 'probe', probe: await inspector.probe() }
    } catch {
      return { kind: 'none' }
    }
  }

  /**
   * Whether the foreground program consumed the input written so far:
   * - the shell at its prompt: its main task ran since the baseline and blocks reading again;
   * - another reader in raw mode: its input queue is empty (`inputQueue`), seen as soon as its
   *   read returned;
   * - in canonical mode (an unfinished line never counts as queued): its switches moved and the
   *   queue is empty; without termios, new read evidence of a probe;
   * - relayed (`inputBytes`): the input may still be in the relay, so new read evidence counting
   *   the bytes read.
   */
  private async consumed(baseline: Baseline, inputBytes?: number): Promise<boolean> {
    const inspector = this.host.inspector
    try {
      if (inputBytes !== undefined) return isNewReadEvidence(baseline, await inspector.probe(), inputBytes)
      if (baseline.kind === 'shell') {
        // The counter first: one small read, and unchanged means not consumed.
        const switches = await inspector.taskSwitches(baseline.pgid)
        if (switches === undefined || switches === baseline.switches) return false
        return (await inspector.blockedInRead(baseline.pgid)) === true
      }
      if (baseline.kind === 'probe') {
        const queue = await this.host.inputQueue?.()
        if (queue !== undefined && !queue.canonical) return queue.queued === 0
        const reader = baseline.probe.reader
        const before = reader === undefined ? undefined : baseline.probe.tasks.find((task) => task.tid === reader.tid)?.switches
        if (reader !== undefined && before !== undefined && queue !== undefined) {
          // /proc/<tid> resolves a thread too, so a reader that is not the main task is read alike.
          const switches = await inspector.taskSwitches(reader.tid)
          if (switches === undefined || switches === before) return false
          return queue.queued === 0
        }
        return isNewReadEvidence(baseline, await inspector.probe())
      }
    } catch {
      // Unreadable: no evidence; the bound decides.
    }
    return false
  }

  /** A probe and its CPU cost, ms. A `look` is skipped while the shell itself is busy in front. */
  private async probe(purpose: 'look' | 'confirm'): Promise<{ probe: ReadProbe | undefined; costMs: number }> {
    const before = process.cpuUsage()
    const busy = purpose === 'look' && (await this.shellBusy().catch(() => true))
    const probe = busy ? undefined : await this.host.inspector.probe().catch(() => undefined)
    // CPU time, not wall time: a loaded machine must not slow readiness down.
    const cpu = process.cpuUsage(before)
    return { probe, costMs: (cpu.user + cpu.system) / 1000 }
  }

  /** Whether the shell is in front and not blocked reading, so nothing waits for input (two reads, no probe). */
  private async shellBusy(): Promise<boolean> {
    const shell = this.host.shellPgid
    const state = this.state
    if (!('write' in state) || state.write.baseline.kind !== 'shell' || shell === undefined) return false
    const inspector = this.host.inspector
    if ((await inspector.foregroundGroup()) !== shell) return false
    return (await inspector.blockedInRead(shell)) === false
  }

  /**
   * The foreground group, and whether the expected group's leader is blocked reading (for the
   * shell, both asked at once). `proveInput`: first whether the input was read (`inputTaken`: raw
   * mode, empty queue), so a shell then seen blocked in its read is done with it.
   */
  private async foreground(shell: 'front' | 'shell', proveInput: boolean): Promise<{ pgid: number | undefined; inFront: boolean; reading: boolean | undefined; inputTaken?: boolean }> {
    const inspector = this.host.inspector
    try {
      if (proveInput) {
        const queue = await this.host.inputQueue?.()
        const taken = queue === undefined ? undefined : !queue.canonical && queue.queued === 0
        const found = await this.foreground(shell, false)
        return taken === undefined ? found : { ...found, inputTaken: taken }
      }
      if (shell === 'front') {
        const pgid = await inspector.foregroundGroup()
        if (pgid === undefined) return { pgid, inFront: false, reading: undefined }
        return { pgid, inFront: true, reading: await inspector.blockedInRead(pgid) }
      }
      const expected = this.host.shellPgid
      const [pgid, reading] = await Promise.all([inspector.foregroundGroup(), expected === undefined ? undefined : inspector.blockedInRead(expected)])
      if (pgid === undefined || pgid !== expected) return { pgid, inFront: false, reading: undefined }
      return { pgid, inFront: true, reading }
    } catch {
      return { pgid: undefined, inFront: false, reading: undefined }
    }
  }

  /**
   * Proof from /proc can come before the output written just before blocking left the PTY's flip
   * buffer. Rounds of `readPending` and libuv polls run until one brings no more output, so that
   * output belongs to this send. Never read within the dispatch that asked (it is parsed and
   * dispatched at once). A relayed terminal is synced through the relay first.
   */
  private async drain(): Promise<void> {
    await this.host.relaySync?.()
    let seen: number
    do {
      seen = this.state.outputCount
      await new Promise<void>((resolve) => setImmediate(resolve))
      if (this.state.phase !== 'settled') this.host.readPending()
      await new Promise<void>((resolve) => setImmediate(resolve))
    } while (this.state.outputCount !== seen && this.state.phase !== 'settled')
  }

  private async handoffLook(waiting: number | undefined): Promise<HandoffLook> {
    const inspector = this.host.inspector
    const shell = this.host.shellPgid
    try {
      this.shellProgram ??= shell === undefined ? Promise.resolve(undefined) : inspector.executable(shell)
      const shellProgram = await this.shellProgram
      const pgid = await inspector.foregroundGroup()
      if (pgid === undefined) return { pgid }
      if (pgid === waiting && pgid !== shell) return { pgid, waitingBusy: (await inspector.probe()).verdict === 'not_reading' }
      if (pgid !== shell) {
        const program = await inspector.executable(pgid)
        return { pgid, otherProgram: program === undefined || shellProgram === undefined || program !== shellProgram }
      }
      return { pgid }
    } catch {
      return { pgid: undefined }
    }
  }
}

function noop(): void {}

/** The step of the kernel's process start times, ms (proc(5) `starttime`, USER_HZ). */
const START_TIME_STEP_MS = 10

/** The stop signal a shell's `$?` names (128+N, bash(1) EXIT STATUS), if it names one. */
function stopSignalOf(status: number | undefined): StopSignal | undefined {
  if (status === undefined || status <= 128) return undefined
  return STOP_SIGNALS.find((name) => constants.signals[name] === status - 128)
}
