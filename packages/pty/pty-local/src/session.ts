/**
 * One local terminal session: a node-pty process, its output pipeline (normaliser → scrollback,
 * the active send's buffer, the prompt detector), its readiness tiers (docs/architecture.md;
 * send-machine.ts, driven by send.ts, owns their timers and probes) and its teardown.
 */
import {
  LiveTextRedactor,
  SecretRedactor,
  delay,
  beforePrompt,
  PtyError,
  within,
  type BackendSession,
  type CloseResult,
  type ScreenState,
  type ScreenStateOptions,
  type PtySignal,
  type ReadPage,
  type SecretValue,
  type SendInput,
  type SendOperation,
  type ExposedPort,
  type SessionStatus,
  type ClosedProcess,
  type SignalResult,
} from '@conch/pty'
import { randomBytes } from 'node:crypto'
import { constants } from 'node:os'
import { StringDecoder } from 'node:string_decoder'
import type { ProcessRecord, TerminateReport } from '@conch/subprocess'
import { describeExit } from '@conch/session'
import type { Config } from './config.ts'
import { cleanProcessText, type TerminalInspector } from './inspector.ts'
import { OutputParser, type OutputMark } from './output.ts'
import { MARKER_OSC, type ControlledPrompt, type Marker } from './prompt.ts'
import { Scrollback } from './scrollback.ts'
import { Send, type SendHost, type SendKind, type SendRequest } from './send.ts'
import { SendBuffer } from './send-buffer.ts'
import { TerminalDisplay, type ScreenPoint } from './display.ts'
import { textCells } from './line.ts'
import { ScreenModel } from './screen.ts'
import { planInput } from './input.ts'
import type { PasteModes } from './input-steps.ts'
import { encodeKey, type KeyModes } from './keys.ts'
import { CANONICAL_LINE_MAX, isHiddenInput, overlongLine, type TermiosFlags } from './termios.ts'
import type { TerminalExit, TerminalProcess } from './terminal.ts'

/** Prompt markers kept for `promptAfter`: a send typed ahead asks for the first one after its write. */
const RECENT_PROMPTS = 8

export interface LocalSessionOptions {
  config: Config
  prompt: ControlledPrompt
  terminal: TerminalProcess
  inspector: TerminalInspector
  /** Stops the session's whole process tree (see `teardown` in backend.ts). */
  teardown: () => Promise<TerminateReport>
  /** What `teardown` would stop besides the shell and what conch started it through, without stopping it; undefined: unknown. Absent: never known. */
  leftRunning?: () => Promise<ProcessRecord[] | undefined>
  /** Signals the wrapper (the node-pty child), identity-fenced; used to acknowledge its exit marker. */
  signalWrapper: (signal: NodeJS.Signals) => Promise<void>
  /** Monotonic clock in ms. */
  now?: () => number
  /**
   * Reads this terminal's termios flags (termios.ts); called only when a decision needs them.
   * Absent: unknown — no line is refused, no input reported hidden.
   */
  termios?: () => Promise<TermiosFlags | undefined>
  /**
   * Secret values replaced by `[secret NAME]` in all output from the start (`SpawnOptions.redact`);
   * one shorter than `MIN_SECRET_BYTES` is left out (it would match ordinary output).
   */
  redact?: readonly SecretValue[]
  /** The absolute working directory the terminal was started in. */
  cwd: string
  /** The owner's sandbox ports reachable from the host (the sandbox's answer at open). */
  exposed?: ExposedPort[]
  /** Terminal size the PTY was opened with; default the config's. */
  rows?: number
  cols?: number
  /** The session runs a program, not the shell: no prompt is waited for; a full screen model serves `screenState`. */
  program?: boolean
  /**
   * A relayed terminal: writes `bytes` to its far end as output, as its programs do; whether all
   * went in. They arrive here behind everything written before. Absent when not reachable.
   */
  writeFarOutput?: (bytes: string) => Promise<boolean>
}

type ExitListener = (status: SessionStatus) => void

export class LocalSession implements BackendSession {
  readonly pid: number
  readonly cwd: string
  readonly exposed: ExposedPort[] | undefined
  motd = ''

  private readonly config: Config
  private readonly prompt: ControlledPrompt
  private readonly terminal: TerminalProcess
  private readonly inspector: TerminalInspector
  private readonly teardown: () => Promise<TerminateReport>
  private readonly leftInTree: (() => Promise<ProcessRecord[] | undefined>) | undefined
  private readonly signalWrapper: (signal: NodeJS.Signals) => Promise<void>
  private readonly now: () => number

  private readonly parser: OutputParser
  private readonly scrollback: Scrollback
  private readonly display: TerminalDisplay
  private readonly disposers: (() => void)[] = []
  private readonly termios: (() => Promise<TermiosFlags | undefined>) | undefined
  private readonly writeFarOutput: ((bytes: string) => Promise<boolean>) | undefined
  /** The latest relay sync asked (`relaySync`): whether it came back. */
  private syncing: Promise<boolean> | undefined
  /** The relay sync on its way: its OSC payload, and the bytes that carry it. */
  private sync: { payload: string; bytes: Buffer; arrived: () => void } | undefined
  /** Secrets typed into this terminal, replaced in its output from then on (redact.ts). */
  private readonly redactor = new SecretRedactor()
  /**
   * The input on the current line. `from`: where the first send that typed on it began, where a
   * result on this line starts. `text`: what sends typed on it without Enter, counted against
   * the canonical limit; cleared by a line break, a keys or secret send, and SIGINT.
   */
  private openLine: { from: OutputMark; text: string } | undefined
  private holdTimer: NodeJS.Timeout | undefined
  /** A program session's full screen model, fed every chunk after redaction, and its decoder. */
  private readonly fullScreen: { model: ScreenModel; decoder: StringDecoder } | undefined
  private readonly changeListeners = new Set<() => void>()

  /** What sends see of this session (send.ts declares it). */
  private readonly host: SendHost
  private current: Send | undefined
  /** The watch of a signal sent while no send was active. */
  private watch: Send | undefined
  /** Output since the previous result, not yet shown: it opens the next send's viewport. */
  private unseen: SendBuffer | undefined
  private state: SessionStatus = { state: 'running' }
  private readonly exitListeners = new Set<ExitListener>()

  /** Mark just after the latest prompt marker, and how many prompt markers were seen. */
  private promptMark: OutputMark | undefined
  /**
   * Where the latest prompt marker left the cursor when it came on the alternate screen with a
   * screen attached: the line model rests there (output.ts), so the prompt is read off the screen.
   */
  private promptOnScreen: { row: number; col: number } | undefined
  /** Where the screen stood when each send buffer opened (display.ts, `ScreenPoint`). */
  private readonly bufferPoints = new WeakMap<SendBuffer, ScreenPoint>()
  private promptMarkers = 0
  /** The newest prompt markers (at most `RECENT_PROMPTS`, oldest first): the status each carried and its line. */
  private readonly prompts: { status: number | undefined; line: number }[] = []
  /** The shell's process group, learned when the first prompt is proved. */
  shellPgid: number | undefined
  /** The shell is known to sit at its controlled prompt with no output since. */
  private atPrompt = false
  private closing: Promise<CloseResult> | undefined
  /** Replies to terminal queries, in order (see `reply`). */
  private replies: Promise<void> = Promise.resolve()
  /** Replies parsed queries are owed and not yet written or dropped, and replies written so far (see `reply`). */
  private repliesOwed = 0
  private repliesWritten = 0
  /** An exit marker is being checked with the kernel. */
  private exitCheck = false

  constructor(options: LocalSessionOptions) {
    this.cwd = options.cwd
    this.exposed = options.exposed
    this.config = options.config
    this.prompt = options.prompt
    this.terminal = options.terminal
    // What the session learns from its processes passes the redactor here and in `closed`.
    this.inspector = cleanProcessText(options.inspector, this.redactor)
    this.teardown = options.teardown
    this.leftInTree = options.leftRunning
    this.signalWrapper = options.signalWrapper
    this.now = options.now ?? (() => performance.now())
    for (const secret of options.redact ?? []) {
      try {
        this.redactor.add(secret.name, secret.value)
      } catch {
        // Too short to redact safely; a send that types it is refused with the reason.
      }
    }
    this.pid = options.terminal.pid
    this.termios = options.termios
    this.writeFarOutput = options.writeFarOutput
    this.parser = new OutputParser({ maxLineLength: this.config.maxLineLength, stringTimeoutMs: this.config.stringTimeoutMs })
    this.scrollback = new Scrollback({ maxLines: this.config.scrollbackLines, maxBytes: this.config.scrollbackMaxBytes, headLines: this.config.scrollbackHeadLines })
    this.disposers.push(this.scrollback.follow(this.parser))
    this.display = new TerminalDisplay({
      parser: this.parser,
      scrollback: this.scrollback,
      rows: options.rows ?? this.config.rows,
      cols: options.cols ?? this.config.cols,
      colors: this.config.colors,
      maxBytes: this.config.maxReadBytes,
      reply: (text) => this.reply(text),
      now: this.now,
      redactor: this.redactor,
    })
    this.disposers.push(() => this.display.dispose())
    if (options.program === true) {
      const model = new ScreenModel({ rows: options.rows ?? this.config.rows, cols: options.cols ?? this.config.cols, scrollback: this.config.programScrollbackRows })
      this.fullScreen = { model, decoder: new StringDecoder('utf8') }
      this.disposers.push(() => model.dispose())
    }
    this.host = this.sendHost()
    this.disposers.push(
      this.parser.onOsc((payload) => this.onOsc(payload)),
      this.terminal.onData((chunk) => this.onData(chunk)),
      this.terminal.onExit((exit) => {
        // The wrapper's real wait status. While closing, a death by a signal (or a status above
        // 128, sh(1)'s way) is the teardown's: reported as its hangup, whoever took which signal.
        if (this.closing !== undefined && (exit.signal || exit.exitCode > 128)) return this.markExited({ state: 'exited', exitCode: null, signal: 'SIGHUP' })
        this.markExited(exitStatus(exit))
      }),
    )
  }

  // ─── Startup ──────────────────────────────────────────────────────────────────────

  /**
   * Waits for the shell's first ready point and returns what it printed before it (the motd).
   * Rejects with `signal.reason` when aborted, `PtyError` `SPAWN_FAILED` when the shell exits
   * first or nothing proves readiness within `timeoutMs`.
   */
  async ready(signal: AbortSignal): Promise<string> {
    const send = new Send(this.host, { text: '', submit: false, signal }, 'startup')
    this.current = send
    send.begin()
    const result = await send.done.catch((error: unknown) => {
      throw signal.aborted ? signal.reason : error
    })
    if (signal.aborted) throw signal.reason
    if (result.waitReason === 'session_exit') {
      throw new PtyError('SPAWN_FAILED', { reason: `the shell ${describeExit(result.sessionStatus)} during startup: ${lastLines(result.viewport)}` })
    }
    if (result.waitReason === 'timeout') {
      throw new PtyError('SPAWN_FAILED', { reason: `the shell did not become ready within ${this.config.timeoutMs} ms; output so far: ${lastLines(result.viewport) || '(none)'}` })
    }
    this.motd = beforePrompt(result.viewport)
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

  /**
   * Starts a send: `text`, `keys` or a `secret`, planned as write steps (input.ts) for the modes
   * now (or `input.steps`). A secret is registered for redaction before anything is written; a
   * line over the canonical limit is checked against termios first. One at a time (the seam).
   * @throws PtyError `SESSION_EXITED`, `UNKNOWN_KEY`, `INVALID_INPUT` — before anything is written.
   */
  startSend(input: SendInput & Pick<SendRequest, 'steps'>): SendOperation {
    this.refuseExited('nothing was written')
    const plan = planInput(input, { ...this.keyModes(), ...this.pasteModes() })
    if (plan.secret !== undefined) this.redactor.add(plan.secret.name, plan.secret.value)
    const openText = this.openLine?.text ?? ''
    const lines = input.text !== undefined ? openText + plan.lines : plan.lines
    const long = overlongLine(lines)
    const request: SendRequest = {
      text: plan.inputText,
      submit: input.submit,
      steps: input.steps ?? plan.steps,
      ...(long !== undefined && { inputCheck: () => this.refuseLines(lines, long, openText.length > 0) }),
      ...(input.timeoutMs !== undefined && { timeoutMs: input.timeoutMs }),
      ...(input.idleMs !== undefined && { idleMs: input.idleMs }),
      ...(input.signal !== undefined && { signal: input.signal }),
    }
    if (this.openLine?.from.line !== this.parser.lineCount + 1 && !this.parser.onAlternateScreen) {
      this.openLine?.from.release()
      this.openLine = { from: this.parser.mark({ keepLines: false }), text: '' }
    }
    const send = new Send(this.host, request, 'send')
    this.current = send
    // Written whole once it settles: what it leaves open on the line is counted by the next.
    send.operation.done.then(
      () => {
        if (this.openLine !== undefined) this.openLine.text = input.text === undefined || input.submit ? '' : (lines.split(/\r\n|\r|\n/).at(-1) ?? '')
      },
      () => undefined,
    )
    queueMicrotask(() => send.begin())
    return send.operation
  }

  read(options: { offset: number; count: number }): ReadPage {
    const page = this.scrollback.read(options, this.config.maxReadBytes)
    return this.redactor.active ? { ...page, text: this.redactor.redactText(page.text, this.pageContext(page)) } : page
  }

  /**
   * The text around a page for redact.ts (the line before and the head the first line lost, the
   * line after), so a value cut across two lines (`maxLineLength`) is found in either.
   */
  private pageContext(page: ReadPage): { before: string; after: string } {
    if (page.lineEnd < page.lineBegin) return { before: '', after: '' }
    const line = (number: number) =>
      number < page.firstRetainedLine || number > page.totalLines ? '' : this.scrollback.read({ offset: page.totalLines - number, count: 1 }, Number.MAX_SAFE_INTEGER).text
    const first = line(page.lineBegin)
    const shown = page.text.slice(0, page.text.includes('\n') ? page.text.indexOf('\n') : undefined)
    const head = first.length > shown.length ? first.slice(0, first.length - shown.length) : ''
    return { before: line(page.lineBegin - 1) + head, after: line(page.lineEnd + 1) }
  }

  async signal(signal: PtySignal): Promise<SignalResult> {
    this.refuseExited('no signal was sent')
    if (signal === 'SIGINT' && this.openLine !== undefined) this.openLine.text = ''
    const active = this.current
    if (active !== undefined) {
      // A signal right after a send is meant for what it started: wait for the input to be
      // written and up to handoffGraceMs for the command to take the foreground.
      await active.handedOff()
      const result = await this.signalForeground(signal)
      // Let a send that the signal ends settle first, so the next send is not refused as active.
      await active.settledWithin(this.config.handoffGraceMs)
      return { ...result, sessionStatus: this.status() }
    }
    // No send: watch the terminal become ready again before returning (see SendKind).
    const watch = new Send(this.host, { text: '', submit: false }, 'signal', signal)
    this.watch = watch
    try {
      watch.begin()
      const settled = await watch.done.catch(() => undefined)
      if (watch.signalResult === undefined || settled === undefined) {
        await watch.done
        throw new PtyError('NO_FOREGROUND', { reason: 'the signal was not sent' })
      }
      return {
        ...watch.signalResult,
        output: settled.viewport,
        outputTruncated: settled.truncated,
        ...(settled.omitted !== undefined && { outputOmitted: settled.omitted }),
        waitReason: settled.waitReason,
        sessionStatus: settled.sessionStatus,
        ...(settled.stopped !== undefined && { stopped: settled.stopped }),
        ...(settled.exitStatus !== undefined && { exitStatus: settled.exitStatus }),
        ...(settled.earlier !== undefined && { earlier: settled.earlier }),
      }
    } finally {
      if (this.watch === watch) this.watch = undefined
    }
  }

  /** What a close would stop besides the shell (`BackendSession.leftRunning`), named as the close names them. */
  async leftRunning(): Promise<ClosedProcess[] | undefined> {
    if (this.state.state !== 'running' || this.closing !== undefined || this.leftInTree === undefined) return undefined
    return (await this.leftInTree().catch(() => undefined))?.map((record) => this.closed(record))
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

  /** @throws PtyError `SESSION_EXITED` after the shell exited; the reason ends with `what`. */
  private refuseExited(what: string): void {
    if (this.state.state === 'exited') throw new PtyError('SESSION_EXITED', { reason: `the shell ${describeExit(this.state)}; ${what}` })
  }

  // ─── Raw input and the full screen (program sessions) ─────────────────────────────

  /**
   * Writes `data` as it is (no planning, no readiness wait); resolves once it is in the input queue.
   * @throws PtyError `SEND_ACTIVE` while a signal's watch is active (the seam does not see those).
   */
  write(data: string): Promise<void> {
    if (this.watch !== undefined) throw new PtyError('SEND_ACTIVE', { reason: 'a signal is waiting for the terminal to be ready again; nothing was written' })
    this.atPrompt = false
    return this.terminal.write(data)
  }

  /**
   * The full screen model's rows, cursor and the DEC private modes output.ts tracks.
   * @throws PtyError `INVALID_INPUT` for a shell session (it keeps no full screen model).
   */
  screenState(options: ScreenStateOptions): ScreenState {
    if (this.fullScreen === undefined) {
      throw new PtyError('INVALID_INPUT', { reason: 'a shell session keeps no full screen model (only a session opened with a command does); read its screen or scrollback' })
    }
    const snapshot = this.fullScreen.model.snapshot()
    return {
      buffer: snapshot.buffer,
      rows: this.redactor.redactRows(this.fullScreen.model.renderedRows(options.scrollback === true)),
      cursorRow: snapshot.cursorRow,
      cursorCol: snapshot.cursorCol,
      decModes: Object.fromEntries(this.parser.privateModes),
    }
  }

  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener)
    return () => this.changeListeners.delete(listener)
  }

  private changed(): void {
    for (const listener of [...this.changeListeners]) listener()
  }

  /** Feeds output to the parser and, for a program, the full screen model; then tells the listeners. */
  private feed(chunk: Buffer): void {
    this.parser.feed(chunk)
    if (this.fullScreen !== undefined) this.fullScreen.model.write(this.fullScreen.decoder.write(chunk))
    this.current?.onOutput()
    this.watch?.onOutput()
    this.changed()
  }

  // ─── The screen ───────────────────────────────────────────────────────────────────

  /** The current screen, rendered (see display.ts). */
  screen(): string {
    return this.redactor.redactText(this.display.screenText())
  }

  /**
   * Resizes the PTY (TIOCSWINSZ: SIGWINCH to the foreground group) and the screen model.
   * @throws PtyError `SESSION_EXITED` after the shell exited.
   */
  resize(size: { rows: number; cols: number }): void {
    this.refuseExited('the terminal was not resized')
    this.terminal.resize(size.cols, size.rows)
    this.display.resize(size.rows, size.cols)
  }

  // ─── Used by sends ────────────────────────────────────────────────────────────────

  private sendHost(): SendHost {
    const session = this
    const config = this.config
    return {
      pid: this.pid,
      limits: config,
      inspector: this.inspector,
      get shellPgid() {
        return session.shellPgid
      },
      set shellPgid(pgid) {
        session.shellPgid = pgid
      },
      get knownAtPrompt() {
        return session.atPrompt
      },
      get promptMarkerCount() {
        return session.promptMarkers
      },
      get promptStatus() {
        return session.prompts.at(-1)?.status
      },
      reportedStops: new Set<number>(),
      typedAhead: undefined,
      promptAfter: (count, buffer) => {
        const prompt = this.prompts[this.prompts.length - (this.promptMarkers - count)]
        if (count >= this.promptMarkers || prompt === undefined) return undefined
        return { status: prompt.status, lines: this.display.screenActive ? undefined : buffer.linesBefore(prompt.line) }
      },
      get repliesOwed() {
        return session.repliesOwed
      },
      get repliesWritten() {
        return session.repliesWritten
      },
      now: this.now,
      status: () => this.state,
      promptShown: (since) => this.promptShown(since),
      // The cursor row of an attached screen, else the line model's partial line.
      promptLine: () => this.display.cursorLine() ?? this.parser.partial,
      pasteModes: () => this.pasteModes(),
      readPending: () => void this.terminal.readPending(),
      write: (data) => {
        this.atPrompt = false
        return this.terminal.write(data)
      },
      encodeKey: (key) => encodeKey(key, this.keyModes()),
      ...(this.termios !== undefined && {
        readsHiddenInput: async () => isHiddenInput(await this.termios!()),
        inputQueue: async () => {
          const flags = await this.termios!()
          return flags?.queued === undefined ? undefined : { canonical: flags.canonical, queued: flags.queued }
        },
      }),
      signalForeground: (signal) => this.signalForeground(signal),
      openBuffer: (kind: SendKind) => (kind === 'startup' ? this.newBuffer() : this.takeUnseen()),
      liveRedactor: () => new LiveTextRedactor(this.redactor),
      resultOf: (buffer) => {
        const output = this.display.resultOf(buffer, this.bufferPoints.get(buffer))
        return this.redactor.active ? { ...output, text: this.redactor.redactText(output.text) } : output
      },
      screenNow: () => (this.display.screenActive ? this.screen() : undefined),
      ...(this.writeFarOutput !== undefined && { relaySync: () => this.relaySync() }),
      settled: (send, atPrompt, unconsumed) => this.settled(send, atPrompt, unconsumed),
    }
  }

  // ─── Input checks (input.ts, keys.ts, termios.ts, redact.ts) ──────────────────────

  /** The modes key encodings depend on, as the program set them (output.ts tracks them). */
  keyModes(): KeyModes {
    return { applicationCursor: this.parser.privateModes.get(1) === true, applicationKeypad: this.parser.applicationKeypad }
  }

  /** The modes the paste rule and Enter read (input-steps.ts, `textSteps`). */
  pasteModes(): PasteModes {
    return { bracketedPaste: this.parser.privateModes.get(2004) === true, alternateScreen: this.parser.onAlternateScreen, shellPrompt: this.atPrompt }
  }

  /**
   * Why `lines`, whose line `long` is over the canonical limit (`CANONICAL_LINE_MAX`, termios(3)),
   * must not be written, or undefined: a reader in canonical mode would cut it silently.
   */
  private async refuseLines(lines: string, long: { line: number; bytes: number }, openBefore: boolean): Promise<PtyError | undefined> {
    if (this.termios === undefined) return undefined
    const flags = await this.termios()
    if (flags?.canonical !== true) return undefined
    const which = `${lines.includes('\r') ? `line ${long.line} of the input is` : 'the input is'}${openBefore && long.line === 1 ? ' (with the text earlier sends typed on it without Enter)' : ''}`
    return new PtyError('LINE_TOO_LONG', {
      reason: `${which} ${long.bytes} bytes, longer than the ${CANONICAL_LINE_MAX} bytes a line can hold when the program reads in canonical mode (termios ICANON; the kernel drops the rest of the line); nothing was written. Write the data to a file and have the program read it (e.g. a heredoc at the shell prompt, or a redirect < file)`,
    })
  }

  /** Whether the printable text after the latest marker is exactly the controlled PS1. */
  private promptShown(sinceMarkers: number): boolean {
    const mark = this.promptMark
    if (mark === undefined || this.promptMarkers <= sinceMarkers) return false
    if (this.promptOnScreen !== undefined) return this.promptShownOnScreen(this.promptOnScreen)
    if (mark.line !== this.parser.lineCount + 1) return false
    return this.parser.textSince(mark) === this.prompt.ps1
  }

  /**
   * Whether the screen's cursor row holds exactly the controlled PS1 from where the marker left the
   * cursor (`at`), with the cursor just after it: a program that exited leaving the alternate screen
   * on. Positions and widths in cells, whatever wide characters stand before the prompt.
   */
  private promptShownOnScreen(at: { row: number; col: number }): boolean {
    const ps1 = this.prompt.ps1
    const cursor = this.parser.cursorPosition()
    if (!this.parser.onAlternateScreen || cursor.row !== at.row || cursor.col !== at.col + textCells(ps1)) return false
    // The row as shown has its trailing blanks trimmed, PS1's own trailing space with them.
    return this.display.cursorLine(at.col)?.replace(/ +$/, '') === ps1.replace(/ +$/, '')
  }

  /** The buffer a send or signal watch starts with: the output nobody has seen yet. */
  private takeUnseen(): SendBuffer {
    const buffer = this.unseen ?? this.newBuffer()
    this.unseen = undefined
    return buffer
  }

  /** A send is over. `unconsumed`: its buffer, when no result showed it, to open the next one. */
  private settled(send: Send, atPrompt: boolean, unconsumed?: SendBuffer): void {
    if (this.current === send) this.current = undefined
    this.atPrompt = atPrompt
    if (this.closing !== undefined) return
    this.unseen?.close()
    this.unseen = unconsumed ?? this.newBuffer()
  }

  /** A buffer collecting from here on; on a line typed on already, from where that input began (`openLine`). */
  private newBuffer(): SendBuffer {
    const line = this.parser.lineCount + 1
    const starts: number[] = []
    if (this.openLine?.from.line === line) starts.push(this.openLine.from.column)
    const mark = this.promptMark
    if (mark?.line === line && this.parser.textSince(mark).startsWith(this.prompt.ps1)) starts.push(mark.column + this.prompt.ps1.length)
    const buffer = new SendBuffer(this.parser, { maxBytes: this.config.maxReadBytes, ...(starts.length > 0 && { startColumn: Math.max(...starts) }) })
    this.scrollback.markFlood()
    this.bufferPoints.set(buffer, this.display.point())
    return buffer
  }

  /**
   * Sends `signal` to the foreground process group, resolved now.
   * @throws PtyError `NO_FOREGROUND` when it cannot be resolved, `SIGNAL_REFUSED` for SIGKILL
   * to the shell itself.
   */
  private async signalForeground(signal: PtySignal): Promise<SignalResult> {
    const pgid = await this.inspector.foregroundGroup()
    if (pgid === undefined || pgid <= 0) {
      throw new PtyError('NO_FOREGROUND', { reason: 'the terminal has no foreground process group right now; no signal was sent' })
    }
    if (signal === 'SIGKILL' && (pgid === this.shellPgid || pgid === this.pid)) {
      throw new PtyError('SIGNAL_REFUSED', { reason: 'SIGKILL would kill the shell itself; close the session instead (terminal_close)' })
    }
    const target = (await this.inspector.groupName(pgid)) ?? 'unknown'
    this.refuseExited('no signal was sent')
    try {
      // kill(2) with a negative pid signals every process of the group.
      process.kill(-pgid, signal)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') {
        throw new PtyError('NO_FOREGROUND', { reason: `the foreground process group ${pgid} is gone; no signal was sent` })
      }
      throw error
    }
    return { signal, delivered: true, targetPgid: pgid, target }
  }

  // ─── Output pipeline ──────────────────────────────────────────────────────────────

  private onData(chunk: Buffer): void {
    if (this.sync !== undefined) {
      // The relay sync is conch's own, not output: a chunk that was only the sync changes nothing.
      chunk = this.takeSync(this.sync, chunk)
      if (chunk.length === 0) return
    }
    this.atPrompt = false
    if (this.redactor.active) {
      clearTimeout(this.holdTimer)
      chunk = this.redactor.push(chunk)
      if (this.redactor.holding) this.holdTimer = setTimeout(() => this.releaseHeld(), this.config.secretHoldMs)
      if (chunk.length === 0) return
    }
    this.feed(chunk)
  }

  /** `chunk` without the relay sync, when it holds it whole; a split one is parsed as its OSC (`onOsc`). */
  private takeSync(sync: { bytes: Buffer; arrived: () => void }, chunk: Buffer): Buffer {
    const at = chunk.indexOf(sync.bytes)
    if (at < 0) return chunk
    sync.arrived()
    return Buffer.concat([chunk.subarray(0, at), chunk.subarray(at + sync.bytes.length)])
  }

  /** Output held back as the possible start of a secret, shown as it was once nothing completed it. */
  private releaseHeld(): void {
    const held = this.redactor.flush()
    if (held.length === 0 || this.closing !== undefined) return
    this.feed(held)
  }

  /**
   * Writes a query's reply (display.ts) unless no program is left to read it: one reaching a
   * shell back at its prompt is typed into the next command (`2Recho …`). Another program in
   * front gets it at once; with the shell in front, once it blocks reading and its output is
   * drained, the reply is dropped if a prompt came after the query. In order; until written or
   * dropped it is owed (`repliesOwed`), and a read meanwhile proves nothing.
   */
  private reply(text: string): void {
    const markers = this.promptMarkers
    this.repliesOwed++
    this.replies = this.replies.then(async () => {
      try {
        if (this.closing !== undefined || !(await this.replyRead(markers))) return
        await this.terminal.write(text).catch(() => {})
        // Written is not yet queued (the flip buffer): the termios query's poll waits for that.
        await this.termios?.().catch(() => undefined)
        this.repliesWritten++
      } finally {
        this.repliesOwed--
      }
    })
  }

  private async replyRead(markersAtQuery: number): Promise<boolean> {
    const shell = this.shellPgid
    try {
      if (shell === undefined || (await this.inspector.foregroundGroup()) !== shell) return true
      const deadline = this.now() + this.config.handoffGraceMs
      for (let gap = 1; ; gap = Math.min(gap * 2, this.config.pollIntervalMs / 5)) {
        const reading = await this.inspector.blockedInRead(shell)
        if (reading === undefined) return true
        if (reading) break
        if (this.now() >= deadline) return false
        await delay(gap)
      }
      // Blocked in its read: everything it printed before is on its way; let it arrive.
      for (let round = 0; round < 2; round++) await new Promise<void>((resolve) => setImmediate(resolve))
      return this.promptMarkers === markersAtQuery
    } catch {
      return true
    }
  }

  /**
   * Waits until everything the relayed terminal's programs wrote has arrived: a private OSC with a
   * random token, written to the far end as output, came back. Gives up when unwritable or after
   * `idleSilenceMs`. One at a time; one asked meanwhile ends with a sync that did not come back.
   */
  private relaySync(): Promise<void> {
    const before = this.syncing
    const sync = (async () => ((before === undefined || (await before)) ? this.syncOnce() : false))()
    this.syncing = sync
    return sync.then(() => {
      if (this.syncing === sync) this.syncing = undefined
    })
  }

  /** One sync through the relay (`relaySync`): whether it came back. */
  private async syncOnce(): Promise<boolean> {
    const payload = `${MARKER_OSC};sync;${randomBytes(16).toString('hex')}`
    let timer: NodeJS.Timeout | undefined
    const bytes = Buffer.from(`\x1b]${payload}\x07`)
    const back = new Promise<boolean>((resolve) => {
      this.sync = { payload, bytes, arrived: () => resolve(true) }
      timer = setTimeout(() => resolve(false), this.config.idleSilenceMs)
    })
    try {
      return (await this.writeFarOutput!(bytes.toString('latin1'))) && (await back)
    } finally {
      clearTimeout(timer)
      this.sync = undefined
    }
  }

  private onOsc(payload: string): void {
    if (payload === this.sync?.payload) return this.sync.arrived()
    const marker: Marker | undefined = this.prompt.parse(payload)
    if (marker === undefined) return
    if (marker.kind === 'prompt') {
      this.promptMark?.release()
      this.promptMark = this.parser.mark({ keepLines: false })
      this.promptOnScreen = this.parser.onAlternateScreen && this.display.screenActive ? this.parser.cursorPosition() : undefined
      this.promptMarkers++
      this.prompts.push({ status: marker.status, line: this.promptMark.line })
      if (this.prompts.length > RECENT_PROMPTS) this.prompts.shift()
      return
    }
    // The exit marker follows all the shell wrote; any program can print it, so it only starts
    // a check with the kernel (see prompt.ts).
    void this.onExitMarker()
  }

  /**
   * Acknowledges an exit marker once the kernel shows the wrapper stopped with no child left; it
   * then exits with the shell's status. Else it is ignored. Rechecked every 2 ms up to
   * `handoffGraceMs`, as the wrapper stops just after printing. Without /proc it is trusted.
   */
  private async onExitMarker(): Promise<void> {
    if (this.exitCheck) return
    this.exitCheck = true
    try {
      const deadline = this.now() + this.config.handoffGraceMs
      for (;;) {
        if (this.state.state === 'exited' || this.closing !== undefined) return
        const stopped = await this.inspector.stoppedWithoutChildren(this.pid)
        if (stopped === true || stopped === undefined) break
        if (this.now() >= deadline) return
        await delay(2)
      }
      if (this.status().state === 'exited' || this.closing !== undefined) return
      await this.acknowledgeExit()
    } finally {
      this.exitCheck = false
    }
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
    this.changed()
  }

  // ─── Teardown ─────────────────────────────────────────────────────────────────────

  /** A process the teardown stopped or left, as a close result names it: its name cleaned like the inspector's (see the constructor). */
  private closed(record: ProcessRecord): { pid: number; name: string } {
    return { pid: record.pid, name: this.redactor.redactProcessText(record.comm) }
  }

  private async runClose(): Promise<CloseResult> {
    const report = await this.teardown()
    const stopped = report.stopped.map((record) => this.closed(record))
    const survivors = report.survivors.map((record) => this.closed(record))
    if (survivors.length) return { status: this.state, stopped, survivors }
    // Everything that held the slave is gone: node-pty reaches EOF and reports the exit.
    const exit = await within(this.terminal.exit, this.config.disposeGraceMs)
    if (exit !== undefined && this.state.state === 'running') this.markExited(exitStatus(exit))
    this.markExited({ state: 'exited', exitCode: null, signal: 'SIGHUP' })
    for (const dispose of this.disposers.splice(0)) dispose()
    this.changeListeners.clear()
    clearTimeout(this.holdTimer)
    this.promptMark?.release()
    this.unseen?.close()
    this.unseen = undefined
    return { status: this.state, stopped, survivors }
  }
}

// ─── Helpers ──────────────────────────────────────────────────────────────────────

function lastLines(text: string): string {
  return text.split('\n').slice(-5).join('\n').trim()
}

/** A terminal's exit as a session status, a signal by its name on this platform (signal(7)), e.g. 1 → `SIGHUP`. */
function exitStatus({ exitCode, signal }: TerminalExit): SessionStatus {
  if (!signal) return { state: 'exited', exitCode, signal: null }
  const name = Object.entries(constants.signals).find(([, number]) => number === signal)?.[0]
  return { state: 'exited', exitCode: null, signal: name ?? `signal ${signal}` }
}
