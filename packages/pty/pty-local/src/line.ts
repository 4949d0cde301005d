/**
 * The current line of the line-mode output model: its text and cursor, edited by the parser's
 * actions (print, CR, BS, EL, CHA, ED 0). Appending is O(appended text) and keeps `revision`, so
 * a reader of a prefix can continue from its length; every other change bumps it.
 */

import { isHighSurrogate, isLowSurrogate } from '@conch/session'

/** Number of code points in `text[start, end)`. */
export function codePoints(text: string, start = 0, end = text.length): number {
  let count = end - start
  for (let i = start; i < end; i++) if (isLowSurrogate(text.charCodeAt(i))) count--
  return count
}

/**
 * One line of cells, a cell per code point; trailing blank cells are not represented (the cursor
 * may sit past the text). It wraps into rows of `cols`, on which CR, CHA, CUF, CUB and EL act;
 * writing a row's last cell leaves the wrap pending (DEC autowrap, as tmux keeps it).
 */
export class LineModel {
  /** The line's text. */
  text = ''
  /** UTF-16 index into `text`; beyond `text.length` means blank cells not yet written. */
  cursor = 0
  /** Counts changes that altered text on the line, not appends; never reset (it tells lines apart too). */
  revision = 0
  /** Cells per row: the terminal's width. */
  cols: number
  /** The last change was text written at the cursor (a wrap may be pending, see `wrapPending`). */
  private printed = false

  constructor(cols = 160) {
    this.cols = cols
  }

  /** Empties the line and returns the cursor to column 0 (after a line feed). */
  clear(): void {
    this.text = ''
    this.cursor = 0
    this.printed = false
    this.revision++
  }

  /** Replaces the line with `text`, the cursor at column 0 (a line the cursor moved onto). */
  reopen(text: string): void {
    this.text = text
    this.cursor = 0
    this.printed = false
    this.revision++
  }

  /** Writes printable `text` at the cursor, overwriting as many cells as it has code points. */
  print(text: string): void {
    const line = this.text
    const cursor = this.cursor
    if (cursor === line.length) {
      this.text = line + text
      this.cursor = cursor + text.length
    } else if (cursor > line.length) {
      this.text = line + ' '.repeat(cursor - line.length) + text
      this.cursor = this.text.length
    } else {
      let end = cursor
      for (let left = codePoints(text); left > 0 && end < line.length; left--) {
        end += isHighSurrogate(line.charCodeAt(end)) && isLowSurrogate(line.charCodeAt(end + 1)) ? 2 : 1
      }
      this.text = line.slice(0, cursor) + text + line.slice(end)
      this.cursor = cursor + text.length
      this.revision++
    }
    this.printed = true
  }

  /** The cursor's 0-based row within the line and column (`cols` while a wrap is pending). */
  position(): { row: number; col: number } {
    if (this.cursor < this.cols) return { row: 0, col: this.cursorCells() }
    const cells = this.cursorCells()
    const row = Math.floor(cells / this.cols)
    return this.printed && row > 0 && cells % this.cols === 0 ? { row: row - 1, col: this.cols } : { row, col: cells % this.cols }
  }

  /** Rows of the line below the cursor's row (the line's text wraps onto them). */
  rowsBelow(): number {
    if (this.text.length <= this.cols) return 0
    const rows = Math.ceil(codePoints(this.text) / this.cols)
    return Math.max(0, rows - 1 - this.position().row)
  }

  /** LF on a row the line wraps on from: returns the rows down to the cursor's and keeps the rest. */
  splitBelowCursor(): string {
    const { row, col } = this.position()
    this.moveToColumn((row + 1) * this.cols)
    const head = this.splitAt(this.cursor)
    this.moveToColumn(col)
    this.printed = col === this.cols
    // Its blank cells at the end are not part of it (see the class docs).
    return head.replace(/ +$/, '')
  }

  /** CR: column 0 of the cursor's row. */
  carriageReturn(): void {
    if (this.cursor < this.cols) this.cursor = 0
    else this.moveToColumn(this.position().row * this.cols)
    this.printed = false
  }

  /** CHA, CUF, CUB: to 0-based `column` of the cursor's row, held within the row. */
  moveInRow(column: number): void {
    this.moveToColumn(this.position().row * this.cols + Math.max(0, Math.min(column, this.cols - 1)))
  }

  /** BS: one cell left, from a pending wrap onto the row's last cell, from a row's start onto the row above's last. */
  backspace(): void {
    this.printed = false
    const cursor = this.cursor
    if (cursor === 0) return
    if (cursor > this.text.length) {
      this.cursor = cursor - 1
      return
    }
    const pair = cursor >= 2 && isLowSurrogate(this.text.charCodeAt(cursor - 1)) && isHighSurrogate(this.text.charCodeAt(cursor - 2))
    this.cursor = cursor - (pair ? 2 : 1)
  }

  /** Moves to 0-based cell `column` of the line, counted over its rows (cells past the end are blank). */
  moveToColumn(column: number): void {
    this.printed = false
    const line = this.text
    let index = 0
    let cells = 0
    while (cells < column && index < line.length) {
      index += isHighSurrogate(line.charCodeAt(index)) && isLowSurrogate(line.charCodeAt(index + 1)) ? 2 : 1
      cells++
    }
    this.cursor = index + (column - cells)
  }

  /** The cursor as a cell count (code points before it, plus blank cells past the end). */
  cursorCells(): number {
    const line = this.text
    return this.cursor > line.length ? codePoints(line) + (this.cursor - line.length) : codePoints(line, 0, this.cursor)
  }

  /**
   * EL (ECMA-48 §8.3.41) on the cursor's row: 0 to its end, 1 up to and including the cursor, 2
   * the row. Erased cells the line goes on after become spaces. A pending wrap stays pending.
   */
  erase(mode: number): void {
    if (this.cursor < this.cols && this.text.length <= this.cols && mode !== 1) {
      // The commonest: on a line of one row (a progress bar's `CR EL`, readline's redraw).
      if (mode === 0) this.eraseToEnd()
      else if (mode === 2 && this.text !== '') {
        this.cursor = this.cursorCells()
        this.text = ''
        this.revision++
      }
      return
    }
    if (mode < 0 || mode > 2) return
    const { row, col } = this.position()
    const start = row * this.cols
    const end = start + this.cols
    const pending = col === this.cols
    if (mode === 0) this.blank(start + col, end)
    else this.blank(start, mode === 1 ? start + Math.min(col, this.cols - 1) + 1 : end)
    // Where the cursor was (blanks past the end of the text count as cells).
    this.moveToColumn(pending ? end : start + col)
    this.printed = pending
  }

  /** ED 0 on the line: erases from the cursor to the end of the line, every row after it too. */
  eraseToEnd(): void {
    if (this.cursor < this.text.length) {
      this.text = this.text.slice(0, this.cursor)
      this.revision++
    }
  }

  /** Blanks cells `[from, to)`: the text ends at `from` when nothing is left after `to`. */
  private blank(from: number, to: number): void {
    if (from >= to) return
    const line = this.text
    this.moveToColumn(from)
    const start = this.cursor
    if (start >= line.length) return
    this.moveToColumn(to)
    const end = this.cursor
    this.text = end >= line.length ? line.slice(0, start) : line.slice(0, start) + ' '.repeat(to - from) + line.slice(end)
    this.revision++
  }

  /** Cuts the line at UTF-16 index `at` (never inside a surrogate pair, never empty); returns the head. */
  splitAt(at: number): string {
    let cut = at
    if (isHighSurrogate(this.text.charCodeAt(cut - 1))) cut = cut > 1 ? cut - 1 : cut + 1
    const head = this.text.slice(0, cut)
    this.text = this.text.slice(cut)
    this.cursor = Math.max(0, this.cursor - cut)
    this.printed = false
    this.revision++
    return head
  }
}
