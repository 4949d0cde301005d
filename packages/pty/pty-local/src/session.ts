/**
 * One local terminal session: a node-pty process, its output pipeline (normaliser → scrollback,
 * the active send's buffer, the prompt detector), its readiness tiers and its teardown.
 *
 * Readiness, in order of strength (DESIGN.md, "The terminal contract"):
 * 1. the controlled prompt — the printable text after the latest marker of this session's nonce
 *    is exactly the controlled PS1, and the shell is the foreground process group → `stdin_read`;
 * 2. Linux /proc — the foreground group is blocked reading this terminal, proved to be new since
 *    the write (`isNewReadEvidence`) → `stdin_read`;
 * 3. silence — no output for `idleSilenceMs` (+ `handoffGraceMs` when a marker was seen but the
 *    foreground check had not passed yet) → `inferred_idle`;
 * 4. `timeoutMs` → `timeout`;
 * and the shell's exit (after its output is drained) → `session_exit`.
 *
 * Nothing runs while no send is active: timers and probes belong to the send.
 */
import {
  PtyError,
  type BackendSession,
  type CloseResult,
  type InputState,
  type PtySignal,
  type ReadinessEvidence,
  type ReadPage,
  type SendOperation,
  type SendResult,
  type SessionStatus,
  type SignalResult,
  type WaitReason,
} from '@conch/pty'
import { constants } from 'node:os'
import type { ProcessRecord, TerminateReport } from '@conch/subprocess'
import type { Config } from './config.ts'
import { isNewReadEvidence, type Baseline, type ReadProbe, type TerminalInspector } from './inspector.ts'
import { OutputParser, type OutputMark } from './output.ts'
import type { ControlledPrompt, Marker } from './prompt.ts'
import { Scrollback } from './scrollback.ts'
import { SendBuffer } from './send-buffer.ts'
import type { TerminalProcess } from './terminal.ts'

/**
 * Whether the line a reader waits on is a secondary prompt — the rest of a block is expected:
 * bash's default PS2 `> ` (only when the shell itself reads; the Node REPL's primary prompt is
 * also `> `), and the `... ` of the Python and Node REPLs.
 */
function isContinuation(partial: string, shellReads: boolean): boolean {
  return partial === '... ' || (shellReads && partial === '> ')
}

export interface LocalSessionOptions {
  config: Config
  prompt: ControlledPrompt
  terminal: TerminalProcess
  inspector: TerminalInspector
  /** Stops the session's whole process tree (see `teardown` in backend.ts). */
  teardown: () => Promise<TerminateReport>
  /** Signals the wrapper (the node-pty child), identity-fenced; used to acknowledge its exit marker. */
  signalWrapper: (signal: NodeJS.Signals) => Promise<void>
  /** Monotonic clock in ms. */
  now?: () => number
}

type ExitListener = (status: SessionStatus) => void

export class LocalSession implements BackendSession {
  readonly pid: number
  motd = ''

  private readonly config: Config
  private readonly prompt: ControlledPrompt
  private readonly terminal: TerminalProcess
  private readonly inspector: TerminalInspector
  private readonly teardown: () => Promise<TerminateReport>
  private readonly signalWrapper: (signal: NodeJS.Signals) => Promise<void>
  readonly now: () => number

  private readonly parser = new OutputParser()
  private readonly scrollback: Scrollback
  private readonly disposers: (() => void)[] = []

  private current: Send | undefined
  /** The watch of a signal sent while no send was active. */
  private watch: Send | undefined
  /**
   * Output since the previous result, not yet shown in one: it opens the next send's viewport
   * (or a signal's output). Created when a result is given; handed to the next send.
   */
  private unseen: SendBuffer | undefined
  private state: SessionStatus = { state: 'running' }
  private readonly exitListeners = new Set<ExitListener>()

  /** Mark just after the latest prompt marker, and how many prompt markers were seen. */
  private promptMark: OutputMark | undefined
  private promptMarkers = 0
  /** `$?` of the last command, from the latest prompt marker. */
  lastStatus: number | undefined
  /** The shell's process group, learned when the first prompt is proved. */
  shellPgid: number | undefined
  /** The shell is known to sit at its controlled prompt with no output since. */
  private atPrompt = false
  private closing: Promise<CloseResult> | undefined

  constructor(options: LocalSessionOptions) {
    this.config = options.config
    this.prompt = options.prompt
    this.terminal = options.terminal
    this.inspector = options.inspector
    this.teardown = options.teardown
    this.signalWrapper = options.signalWrapper
    this.now = options.now ?? (() => performance.now())
    this.pid = options.terminal.pid
    this.scrollback = new Scrollback({ maxLines: this.config.scrollbackLines, maxBytes: this.config.scrollbackMaxBytes })
    this.disposers.push(this.scrollback.follow(this.parser))
    this.disposers.push(this.parser.onOsc((payload) => this.onOsc(payload)))
    this.disposers.push(this.terminal.onData((chunk) => this.onData(chunk)))
    this.disposers.push(
      this.terminal.onExit(({ exitCode, signal }) => {
        // The wrapper's exit marker normally arrives first; this is the fallback when the
        // wrapper itself was killed.
        this.markExited({ state: 'exited', exitCode: signal ? null : exitCode, signal: signal ? signalName(signal) : null })
      }),
    )
  }

  // ─── Startup ──────────────────────────────────────────────────────────────────────

  /**
   * Waits for the shell's first ready point and returns what it printed before it (the motd).
   * Rejects with `signal.reason` when the signal aborts, `PtyError` `SPAWN_FAILED` when the
   * shell exits first or nothing proves readiness within `timeoutMs` (zero-output silence never
   * counts at startup).
   */
  async ready(signal: AbortSignal): Promise<string> {
    const send = new Send(this, { text: '', submit: false, signal }, 'startup')
    this.current = send
    send.begin()
    let result: SendResult
    try {
      result = await send.done
    } catch (error) {
      if (signal.aborted) throw signal.reason
      throw error
    }
    if (signal.aborted) throw signal.reason
    if (result.waitReason === 'session_exit') {
      throw new PtyError('SPAWN_FAILED', `the shell exited during startup (${describeStatus(result.sessionStatus)}): ${lastLines(result.viewport)}`)
    }
    if (result.waitReason === 'timeout') {
      throw new PtyError('SPAWN_FAILED', `the shell did not become ready within ${this.config.timeoutMs} ms; output so far: ${lastLines(result.viewport) || '(none)'}`)
    }
    this.motd = stripPrompt(result.viewport, this.prompt.ps1)
    this.shellPgid ??= await this.inspector.foregroundGroup()
    return this.motd
  }

  // ─── BackendSession ───────────────────────────────────────────────────────────────

  status(): SessionStatus {
    return this.state
  }

  onExit(listener: ExitListener): () => void {
    this.exitListeners.add(listener)
    return () => this.exitListeners.delete(listener)
  }

  startSend(input: { text: string; submit: boolean; signal?: AbortSignal }): SendOperation {
    if (this.state.state === 'exited') {
      throw new PtyError('SESSION_EXITED', `the shell exited (${describeStatus(this.state)}); nothing was written`)
    }
    if (this.current !== undefined) throw new PtyError('SEND_ACTIVE', 'a send is already active on this session')
    const send = new Send(this, input, 'send')
    this.current = send
    queueMicrotask(() => send.begin())
    return send.operation
  }

  read(options: { offset: number; count: number }): ReadPage {
    return this.scrollback.read(options, this.config.maxReadBytes)
  }

  async signal(signal: PtySignal): Promise<SignalResult> {
    if (this.state.state === 'exited') {
      throw new PtyError('SESSION_EXITED', `the shell exited (${describeStatus(this.state)}); no signal was sent`)
    }
    const active = this.current
    if (active !== undefined) {
      // A signal right after a send is meant for what the send started: wait for the input to
      // be written and, while the shell itself is still in front, up to handoffGraceMs for the
      // command to take the foreground (a builtin never does; then the shell is signalled).
      await active.handedOff(this.config.handoffGraceMs)
      const result = await this.signalForeground(signal)
      // Let a send that the signal ends settle first, so the next send is not refused as active.
      await active.settledWithin(this.config.handoffGraceMs)
      return result
    }
    // No send: watch the terminal become ready again before returning (see SendKind).
    const watch = new Send(this, { text: '', submit: false }, 'signal', signal)
    this.watch = watch
    try {
      await watch.begin()
      const settled = await watch.done.catch(() => undefined)
      if (watch.signalResult === undefined || settled === undefined) {
        await watch.done
        throw new PtyError('NO_FOREGROUND', 'the signal was not sent')
      }
      return { ...watch.signalResult, output: settled.viewport, outputTruncated: settled.truncated }
    } finally {
      if (this.watch === watch) this.watch = undefined
    }
  }

  close(): Promise<CloseResult> {
    this.closing ??= this.runClose().then(
      (result) => {
        if (result.survivors.length) this.closing = undefined
        return result
      },
      (error: unknown) => {
        this.closing = undefined
        throw error
      },
    )
    return this.closing
  }

  // ─── Used by sends ────────────────────────────────────────────────────────────────

  /** @internal */ get parserRef(): OutputParser {
    return this.parser
  }

  /** @internal */ get configRef(): Config {
    return this.config
  }

  /** @internal */ get inspectorRef(): TerminalInspector {
    return this.inspector
  }

  /** @internal */ get promptMarkerCount(): number {
    return this.promptMarkers
  }

  /** @internal */ get knownAtPrompt(): boolean {
    return this.atPrompt
  }

  /** @internal Writes input; the caller checked the session is running. */
  write(data: string): void {
    this.atPrompt = false
    this.terminal.write(data)
  }

  /** @internal Whether the printable text after the latest marker is exactly the controlled PS1. */
  promptShown(sinceMarkers: number): boolean {
    const mark = this.promptMark
    if (mark === undefined || this.promptMarkers <= sinceMarkers) return false
    if (mark.line !== this.parser.lineCount + 1) return false
    return this.parser.textSince(mark) === this.prompt.ps1
  }

  /** @internal The buffer a send or signal watch starts with: the output nobody has seen yet. */
  takeUnseen(): SendBuffer {
    const buffer = this.unseen ?? new SendBuffer(this.parser, { maxBytes: this.config.maxReadBytes })
    this.unseen = undefined
    return buffer
  }

  /**
   * @internal A send is over. `atPrompt`: it settled on the controlled prompt. `unconsumed`: its
   * buffer, when no result showed it (a send cancelled before its write), to open the next one;
   * otherwise a new buffer starts collecting what comes after this result.
   */
  settled(send: Send, atPrompt: boolean, unconsumed?: SendBuffer): void {
    if (this.current === send) this.current = undefined
    this.atPrompt = atPrompt
    if (this.closing !== undefined) return
    this.unseen?.close()
    this.unseen = unconsumed ?? new SendBuffer(this.parser, { maxBytes: this.config.maxReadBytes })
  }

  /**
   * @internal Sends `signal` to the foreground process group, resolved now.
   * @throws PtyError `NO_FOREGROUND` when it cannot be resolved, `SIGNAL_REFUSED` for SIGKILL
   * to the shell itself.
   */
  async signalForeground(signal: PtySignal): Promise<SignalResult> {
    const pgid = await this.inspector.foregroundGroup()
    if (pgid === undefined || pgid <= 0) {
      throw new PtyError('NO_FOREGROUND', 'the terminal has no foreground process group right now; no signal was sent')
    }
    if (signal === 'SIGKILL' && (pgid === this.shellPgid || pgid === this.pid)) {
      throw new PtyError('SIGNAL_REFUSED', 'SIGKILL would kill the shell itself; close the session instead (terminal_close)')
    }
    const target = (await this.inspector.groupName(pgid)) ?? 'unknown'
    if (this.state.state === 'exited') {
      throw new PtyError('SESSION_EXITED', `the shell exited (${describeStatus(this.state)}); no signal was sent`)
    }
    try {
      // kill(2) with a negative pid signals every process of the group.
      process.kill(-pgid, signal)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') {
        throw new PtyError('NO_FOREGROUND', `the foreground process group ${pgid} is gone; no signal was sent`)
      }
      throw error
    }
    return { signal, delivered: true, targetPgid: pgid, target }
  }

  // ─── Output pipeline ──────────────────────────────────────────────────────────────

  private onData(chunk: Buffer): void {
    this.atPrompt = false
    this.parser.feed(chunk)
    this.current?.onOutput()
    this.watch?.onOutput()
  }

  private onOsc(payload: string): void {
    const marker: Marker | undefined = this.prompt.parse(payload)
    if (marker === undefined) return
    if (marker.kind === 'prompt') {
      this.promptMark?.release()
      this.promptMark = this.parser.mark({ keepLines: false })
      this.promptMarkers++
      this.lastStatus = marker.status
      return
    }
    // The wrapper prints the exit marker after the shell exited; everything the shell wrote is
    // ahead of it in the stream, so the output is drained at this point. The wrapper then waits
    // for this acknowledgement before it lets go of the slave. A status above 128 while closing
    // is the signal the teardown sent (sh(1) reports a death by signal n as 128 + n).
    const killed = this.closing !== undefined && marker.status > 128 ? signalName(marker.status - 128) : null
    this.markExited(killed !== null ? { state: 'exited', exitCode: null, signal: killed } : { state: 'exited', exitCode: marker.status, signal: null })
    // While closing, the teardown ends the wrapper itself.
    if (this.closing === undefined) void this.acknowledgeExit()
  }

  /** Tells the wrapper its exit marker was read (see prompt.ts), signal by signal, in order. */
  private async acknowledgeExit(): Promise<void> {
    try {
      for (const signal of this.prompt.exitAcknowledgement) await this.signalWrapper(signal)
    } catch {
      // The wrapper is gone already; nothing holds the terminal.
    }
  }

  private markExited(status: SessionStatus): void {
    if (this.state.state === 'exited') return
    this.state = status
    this.current?.onExit(status)
    this.watch?.onExit(status)
    for (const listener of [...this.exitListeners]) listener(status)
  }

  // ─── Teardown ─────────────────────────────────────────────────────────────────────

  private async runClose(): Promise<CloseResult> {
    const report = await this.teardown()
    const stopped = report.stopped.map(toClosed)
    const survivors = report.survivors.map(toClosed)
    if (survivors.length) return { status: this.state, stopped, survivors }
    // Everything that held the slave is gone: node-pty reaches EOF and reports the exit.
    const exit = await within(this.terminal.exit, this.config.disposeGraceMs)
    if (exit !== undefined && this.state.state === 'running') {
      this.markExited({ state: 'exited', exitCode: exit.signal ? null : exit.exitCode, signal: exit.signal ? signalName(exit.signal) : null })
    }
    this.markExited({ state: 'exited', exitCode: null, signal: 'SIGHUP' })
    for (const dispose of this.disposers.splice(0)) dispose()
    this.promptMark?.release()
    this.unseen?.close()
    this.unseen = undefined
    return { status: this.state, stopped, survivors }
  }
}

// ─── Sends ────────────────────────────────────────────────────────────────────────

type SendState = 'pending' | 'writing' | 'waiting' | 'settled'

/**
 * - `startup`: nothing is written; waits for the shell's first ready point (zero output never
 *   counts as ready).
 * - `send`: writes the input, then waits.
 * - `signal`: instead of writing, signals the foreground group, then waits up to
 *   `handoffGraceMs` for the terminal to be ready again — a program resetting its input after a
 *   signal (readline discards typeahead after SIGINT) must not swallow the next send.
 */
type SendKind = 'startup' | 'send' | 'signal'

/**
 * One send: `pending → writing → waiting → settled`. It owns every timer and probe of its
 * wait; all of them stop when it settles, and it settles exactly once.
 */
class Send {
  readonly operation: SendOperation
  readonly done: Promise<SendResult>
  private resolve!: (result: SendResult) => void
  private reject!: (error: unknown) => void

  private state: SendState = 'pending'
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

  private silenceTimer: NodeJS.Timeout | undefined
  private timeoutTimer: NodeJS.Timeout | undefined
  private pollTimer: NodeJS.Timeout | undefined
  private probing = false
  private probeAgain = false
  private lastProbeAt = -Infinity
  private probeGapTimer: NodeJS.Timeout | undefined
  private foregroundCheck = false
  private cancelling: Promise<void> | undefined
  private readonly abortListener: (() => void) | undefined

  constructor(
    private readonly session: LocalSession,
    private readonly input: { text: string; submit: boolean; signal?: AbortSignal },
    readonly kind: SendKind,
    private readonly signalToSend?: PtySignal,
  ) {
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
      session.write(this.input.submit ? `${text}\r` : text)
      this.markWritten()
      if (this.baseline.kind === 'probe' && this.baseline.probe.verdict === 'not_reading') this.inputState = 'not_reading'
    } else if (this.kind === 'signal' && this.signalToSend !== undefined) {
      this.signalResult = await session.signalForeground(this.signalToSend)
      if (this.isSettled()) return
    }
    this.state = 'waiting'
    const deadline = this.kind === 'signal' ? config.handoffGraceMs : config.timeoutMs
    this.timeoutTimer = setTimeout(() => void this.onTimeout(), deadline)
    if (this.kind !== 'signal') this.armSilence()
    if (session.inspectorRef.exact) {
      this.pollTimer = setTimeout(() => this.onPollTick(), config.exactProbeAfterMs)
    }
    // Output may already be waiting (startup banners arrive before begin() runs).
    if (this.kind === 'startup' && session.parserRef.partial !== '') this.onOutput()
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

  private async checkForeground(): Promise<void> {
    if (this.foregroundCheck || this.state !== 'waiting') return
    this.foregroundCheck = true
    try {
      const inspector = this.session.inspectorRef
      const pgid = await inspector.foregroundGroup()
      if (this.state !== 'waiting') return
      const shell = this.session.shellPgid
      if (this.kind === 'startup' || (pgid !== undefined && pgid === shell)) {
        if (this.kind === 'startup') this.session.shellPgid ??= pgid
        if (this.promptMayBeStale && shell !== undefined) {
          // The shell blocked in its read means its input queue is empty: the input was consumed
          // and everything it printed before blocking is on its way; drain it, then look again.
          if ((await inspector.blockedInRead(shell)) === false) return
          await this.drainPendingOutput()
          if (this.isSettled() || !this.session.promptShown(this.markersAtWrite)) return
        }
        this.settle('stdin_read', { tier: 'prompt', detail: 'controlled prompt' }, 'prompt')
      }
      // Otherwise the shell printed its marker before the kernel shows it in the foreground
      // again (or a child shell printed one): the poll tick and the silence tier take over.
    } finally {
      this.foregroundCheck = false
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
    const gap = this.session.configRef.pollIntervalMs / 5
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
    try {
      state = (await this.shellBusy()) ? undefined : await this.session.inspectorRef.probe()
    } catch {
      state = undefined
    } finally {
      this.probing = false
      this.lastProbeAt = this.session.now()
    }
    if (this.state !== 'waiting') return
    const evidence = state !== undefined && this.isReadEvidence(state)
    if (state !== undefined && evidence && (await this.confirmRead(state))) {
      await this.drainPendingOutput()
      if (this.state !== 'waiting') return
      const reader = state.reader!
      const shellReads = state.tpgid !== undefined && state.tpgid === this.session.shellPgid
      const inputState: InputState = isContinuation(this.session.parserRef.partial, shellReads) ? 'continuation' : 'prompt'
      if (this.kind === 'startup') this.session.shellPgid ??= state.tpgid
      const { name, pid, tid, syscall, fd, path } = reader
      this.settle('stdin_read', { tier: 'proc', detail: state.detail, process: { name, pid, tid, syscall, fd, path } }, inputState)
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
   * A read must be stable to count: after a short gap (pollIntervalMs / 10) the same task is
   * still blocked in it without having run, and no output arrived. This rejects a program that
   * passes through a read on its way out — the Node REPL re-enters epoll after `.exit` before
   * it exits.
   */
  private async confirmRead(first: ReadProbe): Promise<boolean> {
    const outputBefore = this.outputCount
    await delay(this.session.configRef.pollIntervalMs / 10)
    if (this.state !== 'waiting' || this.outputCount !== outputBefore) return false
    let again: ReadProbe
    try {
      again = await this.session.inspectorRef.probe()
    } catch {
      return false
    }
    const reader = first.reader
    if (this.isSettled() || this.outputCount !== outputBefore || reader === undefined) return false
    if (again.verdict !== 'reading' || again.reader?.tid !== reader.tid || again.tpgid !== first.tpgid) return false
    const before = first.tasks.find((task) => task.tid === reader.tid)?.switches
    const after = again.tasks.find((task) => task.tid === reader.tid)?.switches
    return before !== undefined && before === after
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
    const wait = config.idleSilenceMs + (this.markerSeen ? config.handoffGraceMs : 0)
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
    this.settle('inferred_idle', {
      tier: 'silence',
      detail: `no output for ${config.idleSilenceMs + (this.markerSeen ? config.handoffGraceMs : 0)} ms`,
    })
  }

  private async onTimeout(): Promise<void> {
    if (this.state !== 'waiting') return
    this.settle('timeout', { tier: 'timeout', detail: `not ready after ${this.session.configRef.timeoutMs} ms` })
  }

  // ─── Settling ───────────────────────────────────────────────────────────────────

  private settle(waitReason: WaitReason, evidence: ReadinessEvidence, inputState?: InputState): void {
    if (this.state === 'settled') return
    this.finish()
    this.buffer.close()
    const viewport = this.buffer.viewport()
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
    if (this.abortListener !== undefined) this.input.signal?.removeEventListener('abort', this.abortListener)
  }
}

// ─── Helpers ──────────────────────────────────────────────────────────────────────

function delay(ms: number): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), ms))
}

/** `promise`, or undefined after `ms` — without leaving a timer behind when the promise wins. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)))])
  } finally {
    clearTimeout(timer)
  }
}

function noop(): void {}

function toClosed(record: ProcessRecord): { pid: number; name: string } {
  return { pid: record.pid, name: record.comm }
}

function stripPrompt(viewport: string, ps1: string): string {
  return viewport.endsWith(ps1) ? viewport.slice(0, viewport.length - ps1.length).replace(/\n$/, '') : viewport
}

function lastLines(text: string): string {
  return text.split('\n').slice(-5).join('\n').trim()
}

export function describeStatus(status: SessionStatus): string {
  if (status.state === 'running') return 'running'
  if (status.signal !== null) return `signal ${status.signal}`
  return `code ${status.exitCode ?? 'unknown'}`
}

/** The name of signal number `signal` on this platform (signal(7)), e.g. 1 → `SIGHUP`. */
function signalName(signal: number): string {
  const entry = Object.entries(constants.signals).find(([, number]) => number === signal)
  return entry?.[0] ?? `signal ${signal}`
}
