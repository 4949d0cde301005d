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
import { boundScreenText } from '@conch/pty'
import { utf8ByteLength, utf8Suffix } from '@conch/session'
import type { OutputParser, ScreenEvent } from './output.ts'
import { replyTo, type QueryState } from './queries.ts'
import type { Scrollback } from './scrollback.ts'
import { renderScreen, ScreenModel, type RowRedactor } from './screen.ts'
import type { SendBuffer, SendOutput } from './send-buffer.ts'

export const MAX_REPLIES_PER_SECOND = 100
/**
 * Most screens seeded with the retained lines per second. A program that addresses the cursor
 * and scrolls it out over and over gets blank screens beyond this, so each cycle costs a few
 * bytes of emulation instead of a screenful.
 */
export const SEEDS_PER_SECOND = 20
/**
 * Rows an attached normal screen keeps above its top, so the rows output scrolled off it during a
 * send can head that send's result (bounded again by `maxBytes` there).
 */
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
  private windowStart = -Infinity
  private repliesInWindow = 0
  private seedWindowStart = -Infinity
  private seedsInWindow = 0
  /** Replies dropped by the rate bound so far. */
  droppedReplies = 0

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

  /**
   * The text before the cursor on the cursor's row while a screen is attached (what a person
   * reads as the prompt of a program that draws it with cursor moves, e.g. prompt_toolkit);
   * `undefined` while the line model alone describes the terminal.
   */
  cursorLine(): string | undefined {
    if (this.screen === undefined) return undefined
    const snapshot = this.screen.snapshot()
    return [...(snapshot.lines[snapshot.cursorRow - 1] ?? '')].slice(0, snapshot.cursorCol - 1).join('')
  }

  /** Where the screen stands now, for a later `resultOf` (see `ScreenPoint`). */
  point(): ScreenPoint {
    return { attachment: this.attachment, scrolled: this.screen?.scrolledRows() ?? 0 }
  }

  /**
   * A send's result: while a screen is attached, the rows that scrolled off its top since `since`
   * (the send's buffer opened; the attach, when that came later) — newest kept within the bound —
   * then the rendered screen; else the send's lines.
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

  /**
   * The current screen, rendered: the attached one, or — when the line model alone describes the
   * terminal — a screen built from the newest retained lines, as a person would see them now.
   */
  screenText(): string {
    if (this.screen !== undefined) return this.bounded(renderScreen(this.screen.snapshot(this.redactor))).text
    const screen = this.seededScreen()
    try {
      return this.bounded(renderScreen(screen.snapshot(this.redactor))).text
    } finally {
      screen.dispose()
    }
  }

  /**
   * A rendered screen within `maxBytes`: the header and the cursor row always, then the top rows
   * as far as they fit (`boundScreenText` of `@conch/pty`).
   */
  private bounded(text: string): SendOutput {
    if (text.length <= this.maxBytes / 3 || utf8ByteLength(text) <= this.maxBytes) return { text, truncated: false }
    return boundScreenText(text, this.maxBytes) ?? { text: keepUtf8Head(text, this.maxBytes), truncated: true }
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
      // One emulator per session, reset and reused: a program that flips screens thousands of
      // times a second costs a reset each time, not a new terminal.
      const screen = this.spare ?? new ScreenModel({ rows: this.state.rows, cols: this.state.cols, scrollback: SCROLLED_ROWS_KEPT })
      this.spare = undefined
      // Rows an earlier attachment scrolled off are not this one's.
      screen.write('\x1b[3J')
      // A soft reset (DECSTR: modes, margins, attributes) instead of a full one, which costs
      // about a millisecond. The alternate screen starts blank (DECSET 1049 clears it) and is
      // left before the normal one shows again, so only cursor addressing on the normal screen
      // needs what the lines show — seeded at most SEEDS_PER_SECOND times a second. A spare
      // detached at a DECRST 1049 never got it (the parser stops feeding it there) and is still
      // on the alternate buffer, where a DECSET 1049 does nothing: leave it first.
      screen.write('\x1b[?1049l\x1b[!p')
      if (event.reason === 'addressing') {
        screen.write('\x1b[H\x1b[2J')
        if (this.takeSeed()) this.seed(screen)
      } else {
        // The alternate screen opens with the cursor where it was (a program that does not home
        // it, less on a short file, writes from there).
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

  private takeSeed(): boolean {
    const now = this.now()
    if (now - this.seedWindowStart >= 1000) {
      this.seedWindowStart = now
      this.seedsInWindow = 0
    }
    return ++this.seedsInWindow <= SEEDS_PER_SECOND
  }

  /** A new screen holding what the lines show now (for a screen read while none is attached). */
  private seededScreen(): ScreenModel {
    const screen = new ScreenModel({ rows: this.state.rows, cols: this.state.cols })
    this.seed(screen)
    return screen
  }

  /**
   * Writes the newest retained lines, the current line and the lines below it to `screen`, with
   * the cursor where the line model has it.
   */
  private seed(screen: ScreenModel): void {
    const page = this.scrollback.read({ offset: 0, count: this.state.rows }, Number.MAX_SAFE_INTEGER)
    let text = page.text.replace(/\n/g, '\r\n')
    const up = this.parser.rowsBelowCursor()
    if (up === 0 && this.parser.partial === '' && page.text !== '') text += '\r\n'
    const { col } = this.parser.cursorPosition()
    screen.write(`${text}${up > 0 ? `\x1b[${up}A` : ''}\x1b[${col}G`)
  }
}

/** The longest prefix of `text` within `maxBytes` UTF-8 bytes, cut on a code point. */
function keepUtf8Head(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8')
  let end = Math.min(maxBytes, bytes.length)
  // Back off continuation bytes (10xxxxxx) so the cut lands on a code point.
  while (end > 0 && end < bytes.length && (bytes[end]! & 0xc0) === 0x80) end--
  return bytes.subarray(0, end).toString('utf8')
}
