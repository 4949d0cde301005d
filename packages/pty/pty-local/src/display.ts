/**
 * What the terminal shows, beyond the line stream: the answers to the program's terminal queries
 * and the screen model while a program needs one. One per session, wired to its output parser.
 *
 * - Queries (`TerminalQuery`) are answered from the terminal's real state (queries.ts): the
 *   screen's cursor while a screen is attached, else the line model's; the size; the tracked
 *   modes; the configured colours. Replies go to the program's input and never into the output.
 *   At most `MAX_REPLIES_PER_SECOND` are written per second; a program that floods queries gets
 *   no more replies until the next second, so it cannot make conch buffer input it never reads.
 * - A screen (`ScreenModel`) is attached when the parser says one is needed and detached when the
 *   program leaves the alternate screen or its addressed output scrolled out. While attached, a
 *   send's result is the rendered screen instead of its lines.
 */
import { utf8ByteLength, type OutputParser, type ScreenEvent } from './output.ts'
import { replyTo, type QueryState } from './queries.ts'
import type { Scrollback } from './scrollback.ts'
import { renderScreen, ScreenModel } from './screen.ts'
import type { SendBuffer, SendOutput } from './send-buffer.ts'

export const MAX_REPLIES_PER_SECOND = 100
/** What XTVERSION (`CSI > q`) reports. */
export const TERMINAL_VERSION = 'conch(0.1.0)'

export interface TerminalDisplayOptions {
  parser: OutputParser
  scrollback: Scrollback
  rows: number
  cols: number
  colors: { foreground: string; background: string; cursor: string }
  /** Bound of a rendered screen, in UTF-8 bytes (the session's `maxReadBytes`): the header and top rows are kept. */
  maxBytes: number
  /** Writes a reply to the program's input. */
  reply: (text: string) => void
  /** Monotonic clock in ms. */
  now: () => number
}

export class TerminalDisplay {
  private readonly parser: OutputParser
  private readonly scrollback: Scrollback
  private readonly writeReply: (text: string) => void
  private readonly now: () => number
  private readonly maxBytes: number
  private readonly state: QueryState
  private screen: ScreenModel | undefined
  private readonly disposers: (() => void)[] = []
  private windowStart = -Infinity
  private repliesInWindow = 0
  /** Replies dropped by the rate bound so far. */
  droppedReplies = 0

  constructor(options: TerminalDisplayOptions) {
    this.parser = options.parser
    this.scrollback = options.scrollback
    this.writeReply = options.reply
    this.now = options.now
    this.maxBytes = options.maxBytes
    const parser = options.parser
    this.state = {
      rows: options.rows,
      cols: options.cols,
      cursor: () => parser.cursorPosition(),
      privateModes: parser.privateModes,
      ansiModes: parser.ansiModes,
      colors: options.colors,
      version: TERMINAL_VERSION,
    }
    parser.resize(options.rows, options.cols)
    this.disposers.push(parser.onQuery((query) => this.answer(replyTo(query, this.state))))
    this.disposers.push(parser.onScreen((event) => this.onScreen(event)))
  }

  get rows(): number {
    return this.state.rows
  }

  get cols(): number {
    return this.state.cols
  }

  /** Whether a screen is attached (a full-screen or cursor-addressing program is in front). */
  get screenActive(): boolean {
    return this.screen !== undefined
  }

  /** A send's result: the rendered screen while one is attached, else the send's lines. */
  resultOf(buffer: SendBuffer): SendOutput {
    if (this.screen !== undefined) return this.bounded(renderScreen(this.screen.snapshot()))
    return buffer.viewport()
  }

  /**
   * The current screen, rendered: the attached one, or — when the line model alone describes the
   * terminal — a screen built from the newest retained lines, as a person would see them now.
   */
  screenText(): string {
    if (this.screen !== undefined) return this.bounded(renderScreen(this.screen.snapshot())).text
    const screen = this.seededScreen()
    try {
      return this.bounded(renderScreen(screen.snapshot())).text
    } finally {
      screen.dispose()
    }
  }

  /** A rendered screen within `maxBytes`: a screen reads top-down, so the head is kept, cut on a code point. */
  private bounded(text: string): SendOutput {
    if (text.length <= this.maxBytes / 3 || utf8ByteLength(text) <= this.maxBytes) return { text, truncated: false }
    const bytes = Buffer.from(text, 'utf8')
    let end = this.maxBytes
    // Back off continuation bytes (10xxxxxx) so the cut lands on a code point.
    while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
    return { text: bytes.subarray(0, end).toString('utf8'), truncated: true }
  }

  /** New size: the screen follows; later cursor reports and size reports use it. */
  resize(rows: number, cols: number): void {
    this.state.rows = rows
    this.state.cols = cols
    this.parser.resize(rows, cols)
    this.screen?.resize(rows, cols)
  }

  dispose(): void {
    for (const dispose of this.disposers.splice(0)) dispose()
    this.screen?.dispose()
    this.screen = undefined
  }

  private answer(reply: string | undefined): void {
    if (reply === undefined) return
    const now = this.now()
    if (now - this.windowStart >= 1000) {
      this.windowStart = now
      this.repliesInWindow = 0
    }
    if (++this.repliesInWindow > MAX_REPLIES_PER_SECOND) {
      this.droppedReplies++
      return
    }
    this.writeReply(reply)
  }

  private onScreen(event: ScreenEvent): void {
    if (event.kind === 'needed') {
      const screen = this.seededScreen()
      screen.write(event.sequence)
      this.screen = screen
      this.parser.attachScreen(screen)
      return
    }
    // Left the alternate screen, or the addressed output scrolled out: lines describe it again.
    this.parser.detachScreen()
    this.screen?.dispose()
    this.screen = undefined
  }

  /** A screen holding the newest retained lines and the current line, with the cursor where the line model has it. */
  private seededScreen(): ScreenModel {
    const screen = new ScreenModel({ rows: this.state.rows, cols: this.state.cols })
    const partial = this.parser.partial
    const page = this.scrollback.read({ offset: 0, count: this.state.rows }, Number.MAX_SAFE_INTEGER)
    let text = page.text.replace(/\n/g, '\r\n')
    if (partial === '' && page.text !== '') text += '\r\n'
    const { col } = this.parser.cursorPosition()
    screen.write(`${text}\x1b[${col}G`)
    return screen
  }
}
