/**
 * One send, and its two relatives: the startup of a session and the watch after a signal. A
 * `Send` owns every timer and probe of its wait, runs the readiness tiers (see session.ts), and
 * settles exactly once.
 */
import {
  delay,
  describeStatus,
  PtyError,
  within,
  type InputState,
  type PtySignal,
  type ReadinessEvidence,
  type SendInput,
  type SendOperation,
  type SendResult,
  type SessionStatus,
  type SignalResult,
  type WaitReason,
} from '@conch/pty'
import { isContinuation } from './continuation.ts'
import { isNewReadEvidence, type Baseline, type ReadProbe } from './inspector.ts'
import { SendBuffer } from './send-buffer.ts'
import { corroborationCapMs, judgeWindow, promptShaped, type WindowSample, type WindowVerdict } from './wait-evidence.ts'
import type { LocalSession } from './session.ts'


/** A probe is followed by at least this many times its own duration without one (≈ 10 % duty). */
const PROBE_DUTY_GAP = 9

type SendState = 'pending' | 'writing' | 'waiting' | 'settled'

/**
 * - `startup`: nothing is written; waits for the shell's first ready point (zero output never
 *   counts as ready).
 * - `send`: writes the input, then waits.
 * - `signal`: instead of writing, signals the foreground group, then waits up to
 *   `handoffGraceMs` for the terminal to be ready again — a program resetting its input after a
 *   signal (readline discards typeahead after SIGINT) must not swallow the next send.
 */
export type SendKind = 'startup' | 'send' | 'signal'

/**
 * One send: `pending → writing → waiting → settled`. It owns every timer and probe of its
 * wait; all of them stop when it settles, and it settles exactly once.
 */
export class Send {
  readonly operation: SendOperation
  readonly done: Promise<SendResult>
  private resolve!: (result: SendResult) => void
  private reject!: (error: unknown) => void

  private state: SendState = 'pending'
  /** This send's bound and silence tier (the send's own limits, else the configured ones), ms. */
  private readonly timeoutMs: number
  private readonly idleMs: number
  private readonly buffer: SendBuffer
  private readonly outputListeners = new Set<() => void>()
  private writtenAt = 0
  private markersAtWrite = 0
  private markerSeen = false
  /**
   * Whether a prompt must also prove the input was consumed: when the shell was not known to sit
   * at its prompt at the write, a prompt it owed from before (e.g. after a command that settled on
   * silence) can arrive after the write while the input still waits in the terminal's queue.
   */
  private promptMayBeStale = false
  private baseline: Baseline = { kind: 'none' }
  private inputState: InputState | undefined
  private sawOutput = false
  /** Resolves when the input has been written (or the send settled without writing). */
  private readonly written: Promise<void>
  private markWritten!: () => void
  /** For `signal` watches: what the signal reached. */
  signalResult: SignalResult | undefined
  /** Output chunks seen while waiting. */
  private outputCount = 0
  /** `outputCount` once the input was written. */
  private outputAtWrite = 0

  private silenceTimer: NodeJS.Timeout | undefined
  private timeoutTimer: NodeJS.Timeout | undefined
  private pollTimer: NodeJS.Timeout | undefined
  private probing = false
  private probeAgain = false
  private lastProbeAt = -Infinity
  /** CPU time of the last probe, ms (0 below a millisecond). */
  private lastProbeCost = 0
  private probeGapTimer: NodeJS.Timeout | undefined
  private foregroundCheck = false
  private promptRechecks = 0
  private promptTimer: NodeJS.Timeout | undefined
  /** Whether a confirmation window (`confirmRead`) is open. */
  private confirming = false
  /** Why the last read found could not be told from activity (for the silence tier's evidence). */
  private ambiguousRead: string | undefined
  private cancelling: Promise<void> | undefined
  private readonly abortListener: (() => void) | undefined

  constructor(
    private readonly session: LocalSession,
    private readonly input: SendInput,
    readonly kind: SendKind,
    private readonly signalToSend?: PtySignal,
  ) {
    this.timeoutMs = input.timeoutMs ?? session.configRef.timeoutMs
    this.idleMs = input.idleMs ?? session.configRef.idleSilenceMs
    this.done = new Promise<SendResult>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.done.catch(() => {})
    this.written = new Promise<void>((resolve) => (this.markWritten = resolve))
    void this.done.then(() => this.markWritten(), () => this.markWritten())
    this.buffer = kind === 'startup' ? new SendBuffer(session.parserRef, { maxBytes: session.configRef.maxReadBytes }) : session.takeUnseen()
    const signal = input.signal
    if (signal !== undefined) {
      this.abortListener = kind === 'send' ? () => void this.cancel() : () => this.abandon(signal.reason)
      signal.addEventListener('abort', this.abortListener, { once: true })
    }
    this.operation = {
      done: this.done,
      readOutput: () => this.buffer.take().text,
      onOutput: (listener) => {
        this.outputListeners.add(listener)
        return () => this.outputListeners.delete(listener)
      },
      cancel: () => this.cancel(),
    }
  }

  /** Takes the baseline, writes, and arms the tiers. Never rejects: failures settle `done`. */
  async begin(): Promise<void> {
    try {
      await this.run()
    } catch (error) {
      if (this.state === 'settled') return
      this.finish()
      this.session.settled(this, false, this.kind === 'startup' ? undefined : this.buffer)
      this.reject(error instanceof PtyError ? error : new PtyError('SPAWN_FAILED', `the send failed: ${(error as Error).message}`, { cause: error }))
    }
  }

  /** Startup only: the caller gave up; reject with its reason. */
  private abandon(reason: unknown): void {
    if (this.state === 'settled') return
    this.finish()
    this.buffer.close()
    this.session.settled(this, false)
    this.reject(reason)
  }

  private async run(): Promise<void> {
    if (this.state !== 'pending') return
    const session = this.session
    const config = session.configRef
    const aborted = (): boolean => this.input.signal?.aborted === true
    if (aborted()) return this.kind === 'send' ? void this.cancel() : this.abandon(this.input.signal?.reason)
    if (this.kind !== 'startup') this.baseline = await this.takeBaseline()
    if (this.state !== 'pending') return
    if (aborted()) return this.kind === 'send' ? void this.cancel() : this.abandon(this.input.signal?.reason)
    if (session.status().state === 'exited') return this.settle('session_exit', { tier: 'exit', detail: 'the shell exited before the input was written' })
    this.state = 'writing'
    this.markersAtWrite = session.promptMarkerCount
    this.writtenAt = session.now()
    if (this.kind === 'send') {
      this.promptMayBeStale = !session.knownAtPrompt
      const text = this.input.text.replace(/\r?\n/g, '\r')
      // Every readiness timer starts once the whole input is in the terminal's input queue: a
      // large paste takes as long as the reader needs to drain it, and silence while it is still
      // being written proves nothing.
      // Output counts as the answer from the moment the write begins: a fast program's reply can
      // be parsed before this continuation runs (its echo is told apart by promptShaped).
      this.outputAtWrite = this.outputCount
      await session.write(this.input.submit ? `${text}\r` : text)
      this.writtenAt = session.now()
      this.markWritten()
      if (this.isSettled()) return
      if (this.baseline.kind === 'probe' && this.baseline.probe.verdict === 'not_reading') this.inputState = 'not_reading'
    } else if (this.kind === 'signal' && this.signalToSend !== undefined) {
      this.signalResult = await session.signalForeground(this.signalToSend)
      if (this.isSettled()) return
    }
    this.state = 'waiting'
    const deadline = this.kind === 'signal' ? config.handoffGraceMs : this.timeoutMs
    this.timeoutTimer = setTimeout(() => void this.onTimeout(), deadline)
    if (this.kind !== 'signal') this.armSilence()
    if (session.inspectorRef.exact) {
      this.pollTimer = setTimeout(() => this.onPollTick(), config.exactProbeAfterMs)
    }
    // Output may already be waiting (startup banners arrive before begin() runs), and the
    // prompt may have come while a long input was still being written.
    if (this.kind === 'startup' && session.parserRef.partial !== '') this.onOutput()
    else if (session.promptShown(this.markersAtWrite)) {
      this.markerSeen = true
      void this.checkForeground()
    }
  }

  /** Called after each parsed chunk. */
  onOutput(): void {
    if (this.state === 'settled') return
    this.sawOutput = true
    this.outputCount++
    for (const listener of [...this.outputListeners]) listener()
    if (this.state !== 'waiting') return
    this.armSilence()
    if (this.session.promptShown(this.markersAtWrite)) {
      this.markerSeen = true
      void this.checkForeground()
      return
    }
    // A shell at its own prompt announces its next prompt itself: probing on its output (the
    // echo of the input) would be wasted; the poll timer from exactProbeAfterMs covers a program
    // the command starts. Otherwise output is the moment to look.
    if (this.session.inspectorRef.exact && this.baseline.kind !== 'shell') this.requestProbe()
  }

  onExit(status: SessionStatus): void {
    if (this.state === 'settled') return
    this.settle('session_exit', { tier: 'exit', detail: `the shell exited (${describeStatus(status)})` })
  }

  /**
   * Resolves once the input is written and the program meant to receive it has it — or the send
   * settled, or `ms` passed since the write:
   * - when the shell received the input: a command other than the shell is in front — a
   *   foreground group that is not the shell's, whose leader already runs another program (a
   *   freshly forked child still runs the shell's code, and a signal that lands before its exec
   *   is handled as the shell's and lost);
   * - when a program was waiting for the input (a REPL): it is busy with it, no longer blocked
   *   reading (a SIGINT while it still reads typed-ahead lines interrupts the reading, and the
   *   rest of the input runs afterwards) at two probes in a row, so a quick first line of a
   *   multi-line input (`import time`) does not count as the whole.
   */
  async handedOff(ms: number): Promise<void> {
    if (this.kind !== 'send') return
    await within(this.written, this.session.configRef.timeoutMs)
    const deadline = this.writtenAt + ms
    const inspector = this.session.inspectorRef
    const shell = this.session.shellPgid
    const shellProgram = shell === undefined ? undefined : await inspector.executable(shell)
    const waiting = this.baseline.kind === 'probe' && this.baseline.probe.verdict === 'reading' ? this.baseline.probe.tpgid : undefined
    let busy = 0
    while (!this.isSettled() && this.session.now() < deadline) {
      const pgid = await inspector.foregroundGroup()
      if (pgid === undefined) return
      if (pgid === waiting && pgid !== shell) {
        busy = (await inspector.probe()).verdict === 'not_reading' ? busy + 1 : 0
        if (busy >= 2) return
      } else if (pgid !== shell) {
        const program = await inspector.executable(pgid)
        if (program === undefined || shellProgram === undefined || program !== shellProgram) return
      }
      await delay(Math.min(this.session.configRef.pollIntervalMs / 5, Math.max(0, deadline - this.session.now())))
    }
  }

  /** Resolves when settled or after `ms`, whichever is first. */
  async settledWithin(ms: number): Promise<void> {
    if (this.state === 'settled') return
    await within(this.done.then(noop, noop), ms)
  }

  cancel(): Promise<void> {
    if (this.cancelling !== undefined) return this.cancelling
    this.cancelling = this.runCancel()
    return this.cancelling
  }

  private async runCancel(): Promise<void> {
    if (this.state === 'settled') return
    if (this.state === 'pending') {
      // Nothing was written and nothing will be; the output it would have shown waits for the next.
      this.finish()
      this.session.settled(this, this.session.knownAtPrompt, this.buffer)
      this.reject(new PtyError('SEND_CANCELLED', 'the send was cancelled before its input was written; nothing was written'))
      return
    }
    try {
      // Like a signal right after a send: let the command take the foreground first, or a SIGINT
      // that reaches bash while it runs a builtin (`echo x; sleep 600`) is ignored.
      await this.handedOff(this.session.configRef.handoffGraceMs)
      if (this.isSettled()) return
      await this.session.signalForeground('SIGINT')
    } catch (error) {
      this.settle('timeout', { tier: 'cancel', detail: `cancelled; could not interrupt: ${(error as Error).message}` })
      return
    }
    // The interrupted program normally returns to a prompt at once; give it the handoff grace.
    if (this.isSettled()) return
    clearTimeout(this.timeoutTimer)
    this.timeoutTimer = setTimeout(() => {
      this.settle('timeout', { tier: 'cancel', detail: `interrupted with SIGINT; not ready within ${this.session.configRef.handoffGraceMs} ms` })
    }, this.session.configRef.handoffGraceMs)
  }

  /** Re-reads the state after an await (TypeScript keeps the narrowing from before it). */
  private isSettled(): boolean {
    return this.state === 'settled'
  }

  // ─── Tiers ──────────────────────────────────────────────────────────────────────

  private async takeBaseline(): Promise<Baseline> {
    const session = this.session
    const inspector = session.inspectorRef
    if (!inspector.exact) return { kind: 'none' }
    const shell = session.shellPgid
    if (session.knownAtPrompt && shell !== undefined) {
      // The shell sits at its own prompt, reading: only its main task's counter is needed.
      const switches = await inspector.taskSwitches(shell)
      if (switches !== undefined) return { kind: 'shell', pgid: shell, switches }
    }
    try {
      return { kind: 'probe', probe: await inspector.probe() }
    } catch {
      return { kind: 'none' }
    }
  }

  /**
   * The controlled prompt was printed after the write: it settles the send only when the kernel
   * agrees — the shell's group is in front and the shell's main task is blocked reading this
   * terminal (a program that printed the marker itself, in front or behind, fails one of the
   * two; see prompt.ts). The shell prints its prompt just before it blocks, so a miss is looked
   * at again shortly (every 1 ms, up to 20 times), then at the poll tick.
   */
  private async checkForeground(): Promise<void> {
    if (this.foregroundCheck || this.state !== 'waiting') return
    this.foregroundCheck = true
    let again = false
    try {
      const inspector = this.session.inspectorRef
      const pgid = await inspector.foregroundGroup()
      if (this.state !== 'waiting') return
      const shell = this.kind === 'startup' ? pgid : this.session.shellPgid
      if (pgid === undefined || pgid !== shell) return
      // Otherwise the shell printed its marker before the kernel shows it in the foreground
      // again, or another program printed one: the poll tick and the silence tier take over.
      const reading = await inspector.blockedInRead(shell)
      if (this.isSettled()) return
      if (reading === false) {
        again = true
        return
      }
      if (this.promptMayBeStale && reading === true) {
        // The shell blocked in its read means its input queue is empty: the input was consumed
        // and everything it printed before blocking is on its way; drain it, then look again.
        await this.drainPendingOutput()
        if (this.isSettled() || !this.session.promptShown(this.markersAtWrite)) return
      }
      if (this.kind === 'startup') this.session.shellPgid ??= pgid
      this.settle('stdin_read', { tier: 'prompt', detail: 'controlled prompt' }, 'prompt')
    } finally {
      this.foregroundCheck = false
      if (again && !this.isSettled() && this.promptRechecks < 20) {
        this.promptRechecks++
        clearTimeout(this.promptTimer)
        this.promptTimer = setTimeout(() => void this.checkForeground(), 1)
      }
    }
  }

  private onPollTick(): void {
    if (this.state !== 'waiting') return
    if (this.markerSeen && this.session.promptShown(this.markersAtWrite)) void this.checkForeground()
    this.requestProbe()
    this.pollTimer = setTimeout(() => this.onPollTick(), this.session.configRef.pollIntervalMs)
  }

  /** Runs a /proc probe now, or after the one in flight, at most once per pollIntervalMs / 5 when output drives it. */
  private requestProbe(): void {
    if (this.state !== 'waiting' || !this.session.inspectorRef.exact) return
    if (this.probing) {
      this.probeAgain = true
      return
    }
    // Probes are at most pollIntervalMs / 5 apart, and a probe that cost a millisecond of CPU or
    // more (a program with many threads) is followed by a gap of PROBE_DUTY_GAP times its cost:
    // probing never takes more than about a tenth of a core, whatever the program in front.
    const gap = Math.max(this.session.configRef.pollIntervalMs / 5, this.lastProbeCost * PROBE_DUTY_GAP)
    const wait = this.lastProbeAt + gap - this.session.now()
    if (wait > 0) {
      this.probeGapTimer ??= setTimeout(() => {
        this.probeGapTimer = undefined
        this.requestProbe()
      }, wait)
      return
    }
    void this.runProbe()
  }

  private async runProbe(): Promise<void> {
    this.probing = true
    let state: ReadProbe | undefined
    const cpuBefore = process.cpuUsage()
    try {
      state = (await this.shellBusy()) ? undefined : await this.session.inspectorRef.probe()
    } catch {
      state = undefined
    } finally {
      this.probing = false
      this.lastProbeAt = this.session.now()
      // CPU time, not wall time: on a loaded machine a cheap probe can take long to finish, and
      // that must not slow readiness down. Probes under a millisecond are not paced.
      const cpu = process.cpuUsage(cpuBefore)
      const cost = (cpu.user + cpu.system) / 1000
      this.lastProbeCost = cost >= 1 ? cost : 0
    }
    if (this.state !== 'waiting') return
    const evidence = state !== undefined && this.isReadEvidence(state)
    const sources = state?.sources ?? []
    // A read whose wait also holds other wake sources (sockets, foreign pipes, a timer due soon,
    // another thread waiting on one) proves nothing alone: it counts once the output ends in a
    // prompt-shaped line and stays quiet over the corroboration window, the group idle but for
    // the reader's own timed wake-ups (wait-evidence.ts).
    const window = this.corroborationMs(sources)
    const shaped = sources.length === 0 || this.promptShaped()
    // One window at a time: a probe that finds the read while a window is open leaves it to that window.
    if (this.confirming) return
    this.confirming = state !== undefined && evidence && shaped
    const verdict = this.confirming ? await this.confirmRead(state!, window, sources.length > 0).finally(() => (this.confirming = false)) : undefined
    if (this.state !== 'waiting') return
    this.ambiguousRead = verdict?.kind === 'ambiguous' ? `${state!.detail} also waits on ${sources.join(', ')}; ${verdict.why}` : undefined
    if (state !== undefined && verdict?.kind === 'proven') {
      const quietMs = verdict.quietMs
      await this.drainPendingOutput()
      if (this.state !== 'waiting') return
      const reader = state.reader!
      const shellReads = state.tpgid !== undefined && state.tpgid === this.session.shellPgid
      const inputState: InputState = isContinuation(this.session.promptLine(), shellReads) ? 'continuation' : 'prompt'
      if (this.kind === 'startup') this.session.shellPgid ??= state.tpgid
      const { name, pid, tid, syscall, fd, path } = reader
      const how = verdict.detail === '' ? '' : `; ${verdict.detail}`
      const detail = sources.length > 0 ? `${state.detail}; also waits on ${sources.join(', ')}; prompt-shaped output quiet for ${quietMs} ms${how}` : state.detail
      this.settle(
        'stdin_read',
        { tier: 'proc', detail, process: { name, pid, tid, syscall, fd, path }, ...(sources.length > 0 && { corroborated: { sources, quietMs } }) },
        inputState,
      )
      return
    }
    if (this.probeAgain || evidence) {
      // More output arrived meanwhile, or the read did not hold yet (a program that still wakes
      // up for a moment after answering): look again, paced by the probe gap.
      this.probeAgain = false
      this.requestProbe()
    }
  }

  /**
   * Whether a full probe can be skipped because the shell itself is in front and not blocked in
   * its read (running a builtin, or between commands): then nothing can be waiting for input. Two
   * small reads instead of a probe's dozens, for sends that started at the shell's prompt.
   */
  private async shellBusy(): Promise<boolean> {
    const shell = this.session.shellPgid
    if (this.baseline.kind !== 'shell' || shell === undefined) return false
    const inspector = this.session.inspectorRef
    if ((await inspector.foregroundGroup()) !== shell) return false
    return (await inspector.blockedInRead(shell)) === false
  }

  /**
   * The window that confirms a read, ms: without other wake sources a short gap
   * (pollIntervalMs / 10); with them (corroboration) at least twice pollIntervalMs of quiet, and
   * up to past the wait's own near timeout when it has one (`corroborationCapMs`), at most idleMs.
   */
  private corroborationMs(sources: readonly string[]): { quietMs: number; capMs: number } {
    const config = this.session.configRef
    if (sources.length === 0) return { quietMs: config.pollIntervalMs / 10, capMs: config.pollIntervalMs / 10 }
    const quietMs = Math.min(config.pollIntervalMs * 2, this.idleMs)
    return { quietMs, capMs: corroborationCapMs(sources, quietMs, this.idleMs) }
  }

  /**
   * Whether the output since the write ends in what looks like a prompt: a non-blank partial
   * line (no line break after it) that is not the echo of the input's last line.
   */
  private promptShaped(): boolean {
    // A program that reserves rows below its prompt (prompt_toolkit prints blank lines, then
    // moves the cursor back up) leaves the line model's open line blank: the last line it wrote
    // counts instead.
    const openLine = this.session.promptLine()
    return promptShaped({
      outputSinceWrite: this.outputCount !== this.outputAtWrite,
      openLine,
      lastLine: openLine.trim() === '' ? this.buffer.lastNonBlankLine() : '',
      input: this.input.text,
    })
  }

  /**
   * A read must be stable to count: it is sampled over a window (`window`: a short gap, longer
   * when it must be corroborated; see `corroborationMs`) while no output arrives, and
   * `judgeWindow` (wait-evidence.ts) decides from the samples — the same task still blocked in
   * the same wait and, for an event loop with other wake sources, the group idle but for the
   * reader's own timed wake-ups. This also rejects a program that passes through a read on its
   * way out — the Node REPL re-enters epoll after `.exit` before it exits.
   */
  private async confirmRead(first: ReadProbe, window: { quietMs: number; capMs: number }, corroborating = false): Promise<WindowVerdict> {
    const outputBefore = this.outputCount
    const samples: WindowSample[] = [{ atMs: this.session.now(), probe: first }]
    const rules = { ...window, stepMs: this.session.configRef.pollIntervalMs, corroborating }
    for (;;) {
      const verdict = judgeWindow(samples, rules)
      if (verdict.kind !== 'pending') return verdict
      await delay(verdict.nextInMs)
      if (this.state !== 'waiting' || this.outputCount !== outputBefore) return { kind: 'refuted', why: 'output arrived' }
      let again: ReadProbe
      try {
        again = await this.session.inspectorRef.probe()
      } catch {
        return { kind: 'refuted', why: 'the probe failed' }
      }
      if (this.isSettled() || this.outputCount !== outputBefore) return { kind: 'refuted', why: 'output arrived' }
      samples.push({ atMs: this.session.now(), probe: again })
    }
  }

  private isReadEvidence(state: ReadProbe): boolean {
    // The wrapper reads the terminal only for the exit handshake, after the shell exited: that
    // is not a program waiting for input (its exit marker is on its way).
    if (state.reader?.pid === this.session.pid) return false
    if (this.kind === 'startup') return state.verdict === 'reading' && state.reader !== undefined && this.sawOutput
    return isNewReadEvidence(this.baseline, state)
  }

  /**
   * Proof from /proc can arrive before the output the program wrote just before blocking has
   * been read from the master. Let libuv poll the PTY (each setImmediate runs after a poll phase)
   * until a round brings no more output, so that output belongs to this send, not the next one.
   */
  private async drainPendingOutput(): Promise<void> {
    let seen: number
    do {
      seen = this.outputCount
      await new Promise<void>((resolve) => setImmediate(resolve))
      await new Promise<void>((resolve) => setImmediate(resolve))
    } while (this.outputCount !== seen && !this.isSettled())
  }

  private armSilence(): void {
    if (this.kind === 'signal') return
    clearTimeout(this.silenceTimer)
    const config = this.session.configRef
    const wait = this.idleMs + (this.markerSeen ? config.handoffGraceMs : 0)
    this.silenceTimer = setTimeout(() => void this.onSilence(), wait)
  }

  private async onSilence(): Promise<void> {
    if (this.state !== 'waiting') return
    // A startup that printed nothing is never published on silence.
    if (this.kind === 'startup' && !this.sawOutput) return
    if (this.session.inspectorRef.exact && !this.probing) {
      await this.runProbe()
      if (this.state !== 'waiting') return
    }
    const config = this.session.configRef
    const ambiguous = this.ambiguousRead === undefined ? '' : `; a read was found but not proven: ${this.ambiguousRead}`
    this.settle('inferred_idle', {
      tier: 'silence',
      detail: `no output for ${this.idleMs + (this.markerSeen ? config.handoffGraceMs : 0)} ms${ambiguous}`,
    })
  }

  private async onTimeout(): Promise<void> {
    if (this.state !== 'waiting') return
    this.settle('timeout', { tier: 'timeout', detail: `not ready after ${this.timeoutMs} ms` })
  }

  // ─── Settling ───────────────────────────────────────────────────────────────────

  private settle(waitReason: WaitReason, evidence: ReadinessEvidence, inputState?: InputState): void {
    if (this.state === 'settled') return
    this.finish()
    this.buffer.close()
    const viewport = this.session.resultOf(this.buffer)
    const result: SendResult = {
      viewport: viewport.text,
      waitReason,
      sessionStatus: this.session.status(),
      truncated: viewport.truncated,
      evidence,
      elapsedMs: Math.max(0, Math.round(this.session.now() - this.writtenAt)),
    }
    const state = waitReason === 'stdin_read' ? inputState : this.inputState
    if (state !== undefined) result.inputState = state
    this.session.settled(this, evidence.tier === 'prompt')
    this.resolve(result)
  }

  private finish(): void {
    this.state = 'settled'
    clearTimeout(this.silenceTimer)
    clearTimeout(this.timeoutTimer)
    clearTimeout(this.pollTimer)
    clearTimeout(this.probeGapTimer)
    clearTimeout(this.promptTimer)
    if (this.abortListener !== undefined) this.input.signal?.removeEventListener('abort', this.abortListener)
  }
}

function noop(): void {}
