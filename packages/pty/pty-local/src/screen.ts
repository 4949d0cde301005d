/**
 * The screen model, kept while a program needs one (`ScreenEvent`): @xterm/headless fed
 * synchronously, so it is exact wherever a query or result reads it. `renderScreen` is the
 * format of `@conch/pty`'s screen-text.ts, without colours or attributes.
 */
import type { IBuffer, IUnicodeVersionProvider, Terminal } from '@xterm/headless'
import { CURSOR_MARK, screenHeader, type ScreenHeader } from '@conch/pty'
import { cellWidth } from './line.ts'
import type { ScreenSink } from './output.ts'

type Xterm = typeof import('@xterm/headless')
/** @xterm/headless once loaded (about 20 ms of CPU to evaluate, so not at import). */
let xterm: Xterm | undefined
let loading: Promise<void> | undefined

/** Loads @xterm/headless; every `ScreenModel` needs it first (the backend awaits it on its first spawn). */
export function loadScreenModel(): Promise<void> {
  return (loading ??= import('@xterm/headless').then((module) => {
    xterm = ((module as { default?: Xterm }).default ?? module) as Xterm
  }))
}

/** The internals of xterm.js used here (`CoreTerminal.writeSync`, the normal buffer's line list), pinned with the exact version. */
interface SyncCore {
  writeSync(data: string): void
  buffers: { normal: { lines: { onTrim(listener: (amount: number) => void): { dispose(): void } } } }
}

export interface ScreenSnapshot extends ScreenHeader {
  /** Every row, trailing blanks (unwritten cells and written spaces) trimmed. */
  lines: string[]
}

export { CURSOR_MARK }

/** What a snapshot needs of the secret redactor (redact.ts, `SecretRedactor`). */
export interface RowRedactor {
  readonly active: boolean
  redactRows(rows: readonly string[]): string[]
}

/**
 * The line model's widths (line.ts, `cellWidth`) as the emulator's Unicode version, so both
 * models give a character the same cells. `charProperties` packs as xterm.js 6.0.0's
 * `UnicodeService.createPropertyValue` (width in bits 1–2, bit 0: joins the cell before, as a
 * mark does) and joins as its built-in versions do.
 */
const CELL_WIDTHS: IUnicodeVersionProvider = {
  version: 'conch',
  wcwidth: cellWidth,
  charProperties(codePoint, preceding) {
    let width: number = cellWidth(codePoint)
    let join = width === 0 && preceding !== 0
    if (join) {
      const before = (preceding >> 1) & 3
      if (before === 0) join = false
      else if (before > width) width = before
    }
    return (width << 1) | (join ? 1 : 0)
  },
}

export class ScreenModel implements ScreenSink {
  private readonly terminal: Terminal
  private readonly core: SyncCore
  /** Rows dropped from the front of the normal buffer's scrollback so far (its bound, ED 3). */
  private trimmed = 0

  /**
   * `scrollback`: rows kept above the viewport (0, the default, for the screens attached on demand).
   * @throws Error when `loadScreenModel()` has not resolved yet (a programming error).
   */
  constructor(options: { rows: number; cols: number; scrollback?: number }) {
    if (xterm === undefined) throw new Error('ScreenModel: @xterm/headless is not loaded; await loadScreenModel() first')
    this.terminal = new xterm.Terminal({
      rows: options.rows,
      cols: options.cols,
      scrollback: options.scrollback ?? 0,
      allowProposedApi: true,
      logLevel: 'off',
    })
    this.terminal.unicode.register(CELL_WIDTHS)
    this.terminal.unicode.activeVersion = CELL_WIDTHS.version
    this.core = (this.terminal as unknown as { _core: SyncCore })._core
    this.core.buffers.normal.lines.onTrim((amount) => {
      this.trimmed += amount
    })
  }

  /** How many rows have left the top of the normal screen into its scrollback since the screen was made. */
  scrolledRows(): number {
    return this.trimmed + this.terminal.buffer.normal.baseY
  }

  /**
   * The rows still kept that left the normal screen's top after `since` (a `scrolledRows()`),
   * wrapped rows joined, trailing blanks trimmed. `lost`: some are no longer kept.
   */
  rowsScrolledSince(since: number): { rows: string[]; lost: boolean } {
    const buffer = this.terminal.buffer.normal
    const from = Math.max(since, this.trimmed)
    return { rows: joinedRows(buffer, from - this.trimmed, buffer.baseY, true), lost: from > since }
  }

  get rows(): number {
    return this.terminal.rows
  }

  get cols(): number {
    return this.terminal.cols
  }

  /** Feeds decoded terminal output; processed before this returns. */
  write(text: string): void {
    if (text !== '') this.core.writeSync(text)
  }

  cursor(): { row: number; col: number } {
    const buffer = this.terminal.buffer.active
    return { row: buffer.cursorY + 1, col: Math.min(buffer.cursorX, this.terminal.cols - 1) + 1 }
  }

  resize(rows: number, cols: number): void {
    this.terminal.resize(cols, rows)
  }

  /**
   * The cursor's row from cell `from` (1-based, as `cursor()`) up to the cursor's cell (a wide
   * character takes two), without the blanks that end the row.
   */
  textBeforeCursor(from = 1): string {
    const buffer = this.terminal.buffer.active
    const line = buffer.getLine(buffer.viewportY + buffer.cursorY)
    if (line === undefined) return ''
    // Both are prefixes of the row's text from `from`: the shorter one.
    const before = line.translateToString(false, from - 1, Math.min(buffer.cursorX, this.terminal.cols))
    const row = line.translateToString(true, from - 1).replace(/ +$/, '')
    return before.length <= row.length ? before : row
  }

  /**
   * The viewport's rows and the cursor. An active `redactor` reads rows written up to the margin
   * on into the next (`redactRows`), wrapped by the emulator or drawn so by the program.
   */
  snapshot(redactor?: RowRedactor): ScreenSnapshot {
    const buffer = this.terminal.buffer.active
    const cols = this.terminal.cols
    let lines: string[] = []
    if (redactor?.active === true) {
      for (let y = 0; y < this.terminal.rows; y++) {
        const line = buffer.getLine(buffer.viewportY + y)
        let text = line?.translateToString(false) ?? ''
        // A wide character that did not fit wrapped early, leaving the last cell empty: not a blank the row shows.
        if (buffer.getLine(buffer.viewportY + y + 1)?.isWrapped === true && line?.getCell(cols - 1)?.getChars() === '') text = text.replace(/ $/, '')
        lines.push(text)
      }
      lines = redactor.redactRows(lines).map((text) => text.replace(/ +$/, ''))
    } else {
      for (let y = 0; y < this.terminal.rows; y++) lines.push((buffer.getLine(buffer.viewportY + y)?.translateToString(true) ?? '').replace(/ +$/, ''))
    }
    const { row, col } = this.cursor()
    return { buffer: buffer.type, rows: this.terminal.rows, cols, cursorRow: row, cursorCol: col, lines }
  }

  /** The viewport's rows, or with `scrollback` all retained; wrapped rows joined, trailing empty rows dropped. */
  renderedRows(scrollback: boolean): string[] {
    const buffer = this.terminal.buffer.active
    const start = scrollback ? 0 : buffer.viewportY
    const rows = joinedRows(buffer, start, scrollback ? buffer.length : buffer.viewportY + this.terminal.rows, false)
    while (rows.length > 0 && rows[rows.length - 1] === '') rows.pop()
    return rows
  }

  dispose(): void {
    this.terminal.dispose()
  }
}

/** Rows `[start, end)` of `buffer`, a wrapped row joined to the one before; `trim`: each row's written trailing spaces dropped too. */
function joinedRows(buffer: IBuffer, start: number, end: number, trim: boolean): string[] {
  const rows: string[] = []
  for (let y = start; y < end; y++) {
    const line = buffer.getLine(y)
    const text = line?.translateToString(true) ?? ''
    const row = trim ? text.replace(/ +$/, '') : text
    if (line?.isWrapped === true && rows.length > 0) rows[rows.length - 1] += row
    else rows.push(row)
  }
  return rows
}

/** The text the model sees for a screen (see the module docs). */
export function renderScreen(snapshot: ScreenSnapshot): string {
  let last = snapshot.lines.length - 1
  while (last >= 0 && snapshot.lines[last] === '' && last !== snapshot.cursorRow - 1) last--
  const rows = snapshot.lines.slice(0, last + 1)
  const cursor = snapshot.cursorRow - 1
  if (cursor >= 0 && cursor < rows.length) rows[cursor] = `${rows[cursor]}${CURSOR_MARK}`
  return [screenHeader(snapshot), ...rows].join('\n')
}
