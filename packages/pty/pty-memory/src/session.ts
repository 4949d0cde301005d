/**
 * A memory session: the memory shell behind the `BackendSession` contract. A send is
 * `pending → waiting → settled`: it is written in a microtask after `startSend` returns (a
 * cancel in between writes nothing and rejects `done` with `SEND_CANCELLED`), and settles as
 * soon as the shell says where it stands — at once for everything except `hold`, which waits
 * for a signal, a cancel (SIGINT) or the close.
 */
import {
  type BackendSession,
  type BackendSendInput,
  type CloseResult,
  entersAfter,
  PtyError,
  type PtySignal,
  type ReadPage,
  type SendOperation,
  type SendResult,
  type SessionStatus,
  type SignalResult,
} from '@conch/pty'
import { MemoryShell, type ShellOptions, type ShellState } from './shell.ts'
import { OutputBuffer, Scrollback } from './text.ts'

export interface SessionOptions extends ShellOptions {
  sessionId: string
  motd: string
  /** Reported as `elapsedMs` of a send that settles `timeout`. */
  timeoutMs: number
  scrollbackLines: number
  /** Bound of one read page and of one send's viewport, in UTF-8 bytes. */
  maxReadBytes: number
}

export class MemorySession implements BackendSession {
  readonly pid: number | undefined = undefined
  readonly motd: string
  readonly cwd: string
  private readonly shell: MemoryShell
  private readonly scrollback: Scrollback
  private readonly exitListeners = new Set<(status: SessionStatus) => void>()
  private active: MemorySend | undefined
  private closing: Promise<CloseResult> | undefined
  /** Values of secrets typed here, by value, with their names: printed output shows `[secret NAME]` instead. */
  private readonly secrets = new Map<string, string>()
  /** While a secret is typed: its echo shows as `[secret NAME]`, once. */
  private typingSecret: { name: string; echoed: boolean } | undefined

  constructor(private readonly options: SessionOptions) {
    this.cwd = options.cwd
    this.scrollback = new Scrollback(options.scrollbackLines, options.maxReadBytes)
    this.shell = new MemoryShell(options, {
      output: (text) => {
        const shown = this.redact(text)
        this.scrollback.write(shown)
        this.active?.append(shown)
      },
      echo: (text) => {
        const typing = this.typingSecret
        if (typing === undefined) return this.scrollback.write(text)
        if (!typing.echoed) this.scrollback.write(`[secret ${typing.name}]`)
        typing.echoed = true
      },
      exited: (status) => {
        this.active?.check()
        for (const listener of [...this.exitListeners]) listener(status)
      },
    })
    this.shell.start(options.motd)
    this.motd = options.motd.replace(/\n$/, '')
  }

  status(): SessionStatus {
    return this.shell.status
  }

  onExit(listener: (status: SessionStatus) => void): () => void {
    this.exitListeners.add(listener)
    return () => this.exitListeners.delete(listener)
  }

  startSend(input: BackendSendInput): SendOperation {
    const typed = typedText(input)
    const send = new MemorySend(this.options, this.shell, (text) => this.type(text, input.secret?.name), typed, input, () => {
      if (this.active === send) this.active = undefined
    })
    this.active = send
    queueMicrotask(() => send.write())
    return send.operation
  }

  /** Types `text`; a secret's value is remembered for redaction first, and echoes as its name. */
  private type(text: string, secret: string | undefined): void {
    if (secret === undefined) return this.shell.type(text)
    const value = text.replace(/\n$/, '')
    this.secrets.set(value, secret)
    this.typingSecret = { name: secret, echoed: false }
    try {
      this.shell.type(value)
    } finally {
      this.typingSecret = undefined
    }
    this.shell.type('\n')
  }

  private redact(text: string): string {
    for (const [value, name] of this.secrets) text = text.split(value).join(`[secret ${name}]`)
    return text
  }

  read(options: { offset: number; count: number }): ReadPage {
    return this.scrollback.read(options.offset, options.count)
  }

  async signal(signal: PtySignal): Promise<SignalResult> {
    const { target, pgid } = this.shell.signal(signal)
    this.active?.check()
    return { signal, delivered: true, targetPgid: pgid, target }
  }

  close(): Promise<CloseResult> {
    this.closing ??= Promise.resolve().then(() => {
      const stopped = this.shell.hangup()
      return { status: this.shell.status, stopped, survivors: [] }
    })
    return this.closing
  }
}

class MemorySend {
  readonly operation: SendOperation
  private phase: 'pending' | 'waiting' | 'settled' = 'pending'
  private readonly viewport: OutputBuffer
  private readonly unread: OutputBuffer
  private readonly listeners = new Set<() => void>()
  private resolve!: (result: SendResult) => void
  private reject!: (error: PtyError) => void
  /** Set when a cancel interrupted the send after its write. */
  private interrupted = false

  constructor(
    private readonly options: SessionOptions,
    private readonly shell: MemoryShell,
    private readonly type: (text: string) => void,
    private readonly typed: string,
    private readonly input: BackendSendInput,
    private readonly onSettled: () => void,
  ) {
    this.viewport = new OutputBuffer(options.maxReadBytes)
    this.unread = new OutputBuffer(options.maxReadBytes)
    const done = new Promise<SendResult>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.operation = {
      done,
      readOutput: () => this.unread.take(),
      onOutput: (listener) => {
        this.listeners.add(listener)
        return () => this.listeners.delete(listener)
      },
      cancel: () => this.cancel(),
    }
  }

  write(): void {
    if (this.phase !== 'pending') return
    if (this.shell.status.state === 'exited') {
      return this.refuse(new PtyError('SESSION_EXITED', { reason: `PTY session ${this.options.sessionId} exited before the input was written; nothing was written` }))
    }
    this.phase = 'waiting'
    this.type(this.typed)
    this.check()
  }

  append(text: string): void {
    if (this.phase === 'settled') return
    this.viewport.append(text)
    this.unread.append(text)
    for (const listener of [...this.listeners]) listener()
  }

  /** Settles the send if the shell no longer holds it. */
  check(): void {
    if (this.phase !== 'waiting') return
    const state = this.shell.state()
    if (state.waitReason !== 'pending') this.settle(state)
  }

  private cancel(): Promise<void> {
    if (this.phase === 'pending') {
      this.refuse(new PtyError('SEND_CANCELLED', { reason: `the send to ${this.options.sessionId} was cancelled before its input was written; nothing was written` }))
    } else if (this.phase === 'waiting') {
      this.interrupted = true
      this.shell.signal('SIGINT')
      this.check()
    }
    return Promise.resolve()
  }

  /** Settles a send that was never written. */
  private refuse(error: PtyError): void {
    this.phase = 'settled'
    this.onSettled()
    this.reject(error)
  }

  private settle(state: Exclude<ShellState, { waitReason: 'pending' }>): void {
    this.phase = 'settled'
    this.onSettled()
    const { text, truncated } = this.viewport.text()
    const detail = this.interrupted ? `interrupted with SIGINT; ${state.detail}` : state.detail
    this.resolve({
      viewport: text.replace(/\n$/, ''),
      waitReason: state.waitReason,
      sessionStatus: this.shell.status,
      truncated,
      ...('inputState' in state && { inputState: state.inputState }),
      evidence: { tier: 'fixed', detail },
      elapsedMs:
        state.waitReason === 'inferred_idle' ? (this.input.idleMs ?? this.options.idleSilenceMs) : state.waitReason === 'timeout' ? (this.input.timeoutMs ?? this.options.timeoutMs) : 0,
    })
  }
}

/**
 * What the memory shell's line discipline receives for a send. Keys: single characters and
 * `{text}` as typed, `Enter`, `Tab`, `Space` and `C-a`…`C-z` as their characters
 * (the memory shell has no cursor, history or screen, so other keys would mean nothing).
 * @throws PtyError `UNKNOWN_KEY` naming every other name, before anything is written.
 */
function typedText(input: BackendSendInput): string {
  if (input.secret !== undefined) return `${input.secret.value}\n`
  if (input.keys !== undefined) {
    const typed = input.keys.map(typedKey)
    const unknown = input.keys.flatMap((key, index) => (typed[index] === undefined ? [`${JSON.stringify(key)} (entry ${index + 1} of keys)`] : []))
    if (unknown.length > 0) {
      throw new PtyError('UNKNOWN_KEY', {
        reason:
          `${unknown.length === 1 ? 'unknown key' : 'unknown keys'} ${unknown.join(', ')}; nothing was written. ` +
          'The memory shell understands Enter, Tab, Space, C-a … C-z, any single character, or {"text": "…"} for literal text',
      })
    }
    return typed.join('')
  }
  return input.text + (entersAfter(input.text, input.submit) ? '\n' : '')
}

const MEMORY_KEYS: Record<string, string> = { enter: '\n', tab: '\t', space: ' ' }

/** What one key entry types, or undefined for a name the memory shell does not know. */
function typedKey(key: string | { text: string }): string | undefined {
  if (typeof key !== 'string') return key.text
  if ([...key].length === 1) return key
  const named = MEMORY_KEYS[key.toLowerCase()]
  if (named !== undefined) return named
  const control = /^C-([a-zA-Z])$/.exec(key)
  if (control !== null) return String.fromCharCode(control[1]!.toLowerCase().charCodeAt(0) & 0x1f)
  return undefined
}
