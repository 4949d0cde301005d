/**
 * What the terminal shows beyond the line stream, one per session: answers to the program's
 * queries from the terminal's real state (queries.ts), at most `MAX_REPLIES_PER_SECOND` so a
 * flood cannot make conch buffer input nobody reads; and a screen model while a program needs
 * one, whose rendering is then a send's result.
 */
import { boundScreenText } from '@conch/pty'
import { utf8ByteLength, utf8Prefix, utf8Suffix } from '@conch/session'
import type { OutputParser, ScreenEvent } from './output.ts'
import { replyTo, type QueryState } from './queries.ts'
import type { Scrollback } from './scrollback.ts'
import { renderScreen, ScreenModel, type RowRedactor } from './screen.ts'
import type { SendBuffer, SendOutput } from './send-buffer.ts'

export const MAX_REPLIES_PER_SECOND = 100
/** Most screens seeded with the retained lines per second; beyond it a cycling program gets blank ones. */
export const SEEDS_PER_SECOND = 20
/** Rows an attached screen keeps above its top, to head a send's result with what scrolled off. */
export const SCROLLED_ROWS_KEPT = 1000
/** What a send remembers of the screen when its buffer opens (`point()`), to find the rows that scrolled off since. */
export interface ScreenPoint {
  attachment: number
  scrolled: number
}
/** What XTVERSION (`CSI > q`) reports. */
export const TERMINAL_VERSION = 'conch(0.1.0)'

export interface TerminalDisplayOptions {
  parser: OutputParser
  scrollback: Scrollback
  rows: number
  cols: number
  colors: { foreground: string; background: string; cursor: string }
  /** Bound of a rendered screen, in UTF-8 bytes (the session's `maxReadBytes`): the header, the cursor row and the top rows are kept. */
  maxBytes: number
  /** Writes a reply to the program's input. */
  reply: (text: string) => void
  /** Monotonic clock in ms. */
  now: () => number
  /** Replaces secret values in the rendered screens, over rows wrapped at the margin too (screen.ts, `snapshot`). */
  redactor?: RowRedactor
}

export class TerminalDisplay {
  private readonly parser: OutputParser
  private readonly scrollback: Scrollback
  private readonly writeReply: (text: string) => void
  private readonly now: () => number
  private readonly maxBytes: number
  private readonly redactor: RowRedactor | undefined
  private readonly state: QueryState
  private screen: ScreenModel | undefined
  /** The emulator of the last screen, kept for the next one. */
  private spare: ScreenModel | undefined
  /** Screens attached so far; with `attachedAt`, the attached screen's `scrolledRows()` right after it was attached. */
  private attachment = 0
  private attachedAt = 0
  private readonly disposers: (() => void)[] = []
  private readonly replyAllowed = perSecond(MAX_REPLIES_PER_SECOND, () => this.now())
  private readonly seedAllowed = perSecond(SEEDS_PER_SECOND, () => this.now())

  constructor(options: TerminalDisplayOptions) {
    this.parser = options.parser
    this.scrollback = options.scrollback
    this.writeReply = options.reply
    this.now = options.now
    this.maxBytes = options.maxBytes
    this.redactor = options.redactor
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

  /** Whether a screen is attached (a full-screen or cursor-addressing program is in front). */
  get screenActive(): boolean {
    return this.screen !== undefined
  }

  /** The text before the cursor on its row, from cell `from`, while a screen is attached (a prompt_toolkit prompt), else undefined. */
  cursorLine(from?: number): string | undefined {
    return this.screen?.textBeforeCursor(from)
  }

  /** Where the screen stands now, for a later `resultOf` (see `ScreenPoint`). */
  point(): ScreenPoint {
    return { attachment: this.attachment, scrolled: this.screen?.scrolledRows() ?? 0 }
  }

  /**
   * A send's result: while a screen is attached, the rows that scrolled off its top since `since`
   * (or the attach), newest kept within the bound, then the rendered screen; else the send's lines.
   */
  resultOf(buffer: SendBuffer, since?: ScreenPoint): SendOutput {
    const screen = this.screen
    if (screen === undefined) return buffer.viewport()
    const rendered = this.bounded(renderScreen(screen.snapshot(this.redactor)))
    const scrolled = screen.rowsScrolledSince(since?.attachment === this.attachment ? since.scrolled : this.attachedAt)
    if (scrolled.rows.length === 0) return rendered
    const budget = this.maxBytes - utf8ByteLength(rendered.text) - 1
    const above = budget > 0 ? utf8Suffix(scrolled.rows.join('\n'), budget) : ''
    const cut = scrolled.lost || above.length < scrolled.rows.join('\n').length
    if (above === '') return { text: rendered.text, truncated: true }
    return { text: `${above}\n${rendered.text}`, truncated: rendered.truncated || cut }
  }

  /** The current screen, rendered: the attached one, else one built from the newest retained lines. */
  screenText(): string {
    if (this.screen !== undefined) return this.bounded(renderScreen(this.screen.snapshot(this.redactor))).text
    const screen = new ScreenModel({ rows: this.state.rows, cols: this.state.cols })
    try {
      this.seed(screen)
      return this.bounded(renderScreen(screen.snapshot(this.redactor))).text
    } finally {
      screen.dispose()
    }
  }

  /** A rendered screen within `maxBytes` (`boundScreenText` of `@conch/pty`). */
  private bounded(text: string): SendOutput {
    if (text.length <= this.maxBytes / 3 || utf8ByteLength(text) <= this.maxBytes) return { text, truncated: false }
    return boundScreenText(text, this.maxBytes) ?? { text: utf8Prefix(text, this.maxBytes), truncated: true }
  }

  /** New size: the screen follows; later cursor reports and size reports use it. */
  resize(rows: number, cols: number): void {
    this.state.rows = rows
    this.state.cols = cols
    this.parser.resize(rows, cols)
    this.screen?.resize(rows, cols)
    this.spare?.resize(rows, cols)
  }

  dispose(): void {
    for (const dispose of this.disposers.splice(0)) dispose()
    this.screen?.dispose()
    this.spare?.dispose()
    this.screen = undefined
    this.spare = undefined
  }

  private answer(reply: string | undefined): void {
    if (reply !== undefined && this.replyAllowed()) this.writeReply(reply)
  }

  private onScreen(event: ScreenEvent): void {
    if (event.kind === 'needed') {
      // One emulator per session, reset and reused: flipping screens costs a reset, not a terminal.
      const screen = this.spare ?? new ScreenModel({ rows: this.state.rows, cols: this.state.cols, scrollback: SCROLLED_ROWS_KEPT })
      this.spare = undefined
      // Rows an earlier attachment scrolled off are not this one's.
      screen.write('\x1b[3J')
      // A soft reset (DECSTR), a full one being slow. Only cursor addressing on the normal screen
      // needs the lines seeded (the alternate screen starts blank). A spare detached at DECRST
      // 1049 is still on the alternate buffer, where DECSET 1049 does nothing: leave it first.
      screen.write('\x1b[?1049l\x1b[!p')
      if (event.reason === 'addressing') {
        screen.write('\x1b[H\x1b[2J')
        if (this.seedAllowed()) this.seed(screen)
      } else {
        // The alternate screen opens with the cursor where it was (less on a short file writes there).
        const { row, col } = this.parser.cursorPosition()
        screen.write(`\x1b[${row};${col}H`)
      }
      screen.write(event.sequence)
      this.attachment++
      this.attachedAt = screen.scrolledRows()
      this.screen = screen
      this.parser.attachScreen(screen)
      return
    }
    // Left the alternate screen, or the addressed output scrolled out: lines describe it again.
    this.parser.detachScreen()
    this.spare = this.screen
    this.screen = undefined
  }

  /** Writes the newest retained and open lines to `screen`, the cursor where the line model has it. */
  private seed(screen: ScreenModel): void {
    const page = this.scrollback.read({ offset: 0, count: this.state.rows }, Number.MAX_SAFE_INTEGER)
    let text = page.text.replace(/\n/g, '\r\n')
    const up = this.parser.rowsBelowCursor()
    if (up === 0 && this.parser.partial === '' && page.text !== '') text += '\r\n'
    const { col } = this.parser.cursorPosition()
    screen.write(`${text}${up > 0 ? `\x1b[${up}A` : ''}\x1b[${col}G`)
  }
}

/** Whether one more event fits within `limit` in the current one-second window of `now`. */
function perSecond(limit: number, now: () => number): () => boolean {
  let start = -Infinity
  let count = 0
  return () => {
    const at = now()
    if (at - start >= 1000) {
      start = at
      count = 0
    }
    return ++count <= limit
  }
}
