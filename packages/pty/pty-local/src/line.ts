/**
 * The current line of the line-mode output model: its text and cursor, edited by the parser's
 * actions (print, CR, BS, EL, CHA, ED 0, DCH, ICH). Appending is O(appended text) and keeps
 * `revision`, so a reader of a prefix can continue from its length; every other change bumps it.
 */

import { eastAsianWidth } from 'get-east-asian-width'
import { isHighSurrogate, isLowSurrogate } from '@conch/session'

/** Marks, enclosing marks and format characters (ZWJ, ZWSP, variation selectors, soft hyphen) take no cell. */
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\p{Cf}]$/u
/** `cellWidth` of each BMP code point once asked, plus one (0: not yet asked). */
const bmpWidths = new Uint8Array(0x10000)

/**
 * The cells a code point takes on a terminal row, as wcwidth(3) gives them: 2 for East Asian
 * Wide and Fullwidth (UAX #11, which includes the emoji of emoji presentation; Ambiguous is
 * narrow), 0 for marks, format characters and Hangul medial and final jamo (they join the cell
 * before), 1 otherwise. The screen model (screen.ts) takes its widths from here too.
 */
export function cellWidth(codePoint: number): 0 | 1 | 2 {
  if (codePoint < 0x300) return codePoint === 0xad ? 0 : 1
  if (codePoint < 0x10000) {
    const known = bmpWidths[codePoint]!
    if (known !== 0) return (known - 1) as 0 | 1 | 2
    const width = widthOf(codePoint)
    bmpWidths[codePoint] = width + 1
    return width
  }
  return widthOf(codePoint)
}

function widthOf(codePoint: number): 0 | 1 | 2 {
  if ((codePoint >= 0x1160 && codePoint <= 0x11ff) || (codePoint >= 0xd7b0 && codePoint <= 0xd7ff)) return 0
  if (ZERO_WIDTH.test(String.fromCodePoint(codePoint))) return 0
  return eastAsianWidth(codePoint) === 2 ? 2 : 1
}

/** A code unit that is one narrow cell by itself (most text): no lookup needed. */
function narrow(unit: number): boolean {
  return unit < 0x300 && unit !== 0xad
}

/** A code unit that is not one narrow cell by itself (see `narrow`). */
const NOT_NARROW = /[^\0-\xac\xae-\u02ff]/

/**
 * The line cell (row × `cols` + column) just after `text[from, to)` written from line cell
 * `cell` in rows of `cols`: a wide character that would start in a row's last column starts
 * the next row, as a terminal wraps it (the last column stays blank).
 */
function advance(text: string, from: number, to: number, cell: number, cols: number): number {
  for (let i = from; i < to; i++) {
    const unit = text.charCodeAt(i)
    if (narrow(unit)) {
      cell++
      continue
    }
    let codePoint = unit
    if (isHighSurrogate(unit) && i + 1 < to && isLowSurrogate(text.charCodeAt(i + 1))) codePoint = text.codePointAt(i++)!
    const width = cellWidth(codePoint)
    if (width === 2 && cols > 1 && cell % cols === cols - 1) cell++
    cell += width
  }
  return cell
}

/** The cells `text` takes on one row (`cellWidth` of each code point). */
export function textCells(text: string): number {
  return advance(text, 0, text.length, 0, Infinity)
}

/** Rows `text` takes written from column 0 in rows of `cols` (at least 1); `oneCellEach`: its code units are known to be one cell each. */
export function rowsOf(text: string, cols: number, oneCellEach = false): number {
  const length = text.length
  // A code unit is at most two cells: short text is one row without counting.
  if (length * 2 <= cols) return 1
  const cells = oneCellEach ? length : advance(text, 0, length, 0, cols)
  return cells <= cols ? 1 : Math.ceil(cells / cols)
}

/** Where a line cell falls in a line's text (`LineModel.locate`). */
interface Place {
  /** UTF-16 index of the first character (not a mark) whose cells reach past the target, else the text's length. */
  index: number
  /** The line cell just after the text before `index` (where that character would start without a wrap). */
  before: number
  /** The line cell the character at `index` starts at (`before`, or one more when it wrapped whole). */
  start: number
  /** Index after that character and the marks that join it. */
  next: number
}

/**
 * One line of cells; trailing blank cells are not represented (the cursor may sit past the
 * text). A character takes `cellWidth` cells. The line wraps into rows of `cols`, on which CR,
 * CHA, CUF, CUB, EL, DCH and ICH act; writing a row's last cell leaves the wrap pending (DEC
 * autowrap, as tmux keeps it). A wide character that does not fit in a row's last column starts the next row.
 */
export class LineModel {
  /** The line's text. */
  text = ''
  /** UTF-16 index into `text`; beyond `text.length` means blank cells not yet written. */
  cursor = 0
  /**
   * Cells between the end of `text[0, cursor)` and the cursor, when the cursor is inside the
   * character at `cursor`: the blank cell before a wide character that wrapped whole, or its
   * right half (a terminal keeps the character until a write lands on it). Else 0.
   */
  private inside = 0
  /** The text may hold characters that are not one narrow cell (else cells are code units, counted without a walk). */
  private wide = false
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
    this.inside = 0
    this.wide = false
    this.printed = false
    this.revision++
  }

  /** Replaces the line with `text`, the cursor at column 0 (a line the cursor moved onto). */
  reopen(text: string): void {
    this.text = text
    this.cursor = 0
    this.inside = 0
    this.wide = NOT_NARROW.test(text)
    this.printed = false
    this.revision++
  }

  /** Rows the line takes (at least 1). */
  rows(): number {
    return rowsOf(this.text, this.cols, !this.wide)
  }

  /**
   * Writes printable `text` at the cursor, over the cells it covers: a wide character it covers
   * in part leaves its other half blank, as a terminal does. `ascii`: the text is known to be
   * ASCII (the parser saw its bytes), so nothing in it is counted.
   */
  print(text: string, ascii = false): void {
    if (!ascii && !this.wide) this.wide = NOT_NARROW.test(text)
    const cursor = this.cursor
    if (cursor === this.text.length) {
      this.text += text
      this.cursor = cursor + text.length
    } else if (cursor > this.text.length) {
      this.text += ' '.repeat(cursor - this.text.length) + text
      this.cursor = this.text.length
    } else {
      this.overwrite(text)
    }
    this.printed = true
  }

  private overwrite(text: string): void {
    if (this.inside > 0) this.splitInside()
    const line = this.text
    const cursor = this.cursor
    let end = cursor + text.length
    let blanks = 0
    if (this.wide) {
      const to = advance(text, 0, text.length, this.cursorCells(), this.cols)
      // Every character that starts before the new text's end goes; cells of it past that end stay
      // blank, except at the end of the text, where blank cells are not represented.
      const after = this.endBefore(to)
      end = after.index
      if (end < line.length) blanks = Math.max(0, after.cell - to)
    }
    this.text = line.slice(0, cursor) + text + ' '.repeat(blanks) + line.slice(end)
    this.cursor = cursor + text.length
    this.revision++
  }

  /** The cursor is inside a character (see `inside`): that character becomes blanks, so the cursor is on a cell of its own. */
  private splitInside(): void {
    const line = this.text
    const cursor = this.cursor
    const place = this.locate(advance(line, 0, cursor, 0, this.cols))
    const cells = advance(line, cursor, place.next, place.before, this.cols) - place.before
    this.text = line.slice(0, cursor) + ' '.repeat(cells) + line.slice(place.next)
    this.cursor = cursor + this.inside
    this.inside = 0
    this.revision++
  }

  /** The cursor's 0-based row within the line and column (`cols` while a wrap is pending). */
  position(): { row: number; col: number } {
    const cells = this.cursorCells()
    if (cells < this.cols) return { row: 0, col: cells }
    const row = Math.floor(cells / this.cols)
    return this.printed && row > 0 && cells % this.cols === 0 ? { row: row - 1, col: this.cols } : { row, col: cells % this.cols }
  }

  /** Rows of the line below the cursor's row (the line's text wraps onto them). */
  rowsBelow(): number {
    if (this.text.length * (this.wide ? 2 : 1) <= this.cols) return 0
    return Math.max(0, this.rows() - 1 - this.position().row)
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
    if (this.cursor * (this.wide ? 2 : 1) < this.cols && this.inside === 0) this.cursor = 0
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
    if (cursor === 0 && this.inside === 0) return
    if (cursor > this.text.length || (this.inside === 0 && narrow(this.text.charCodeAt(cursor - 1)))) {
      this.cursor = cursor - 1
      return
    }
    this.moveToColumn(this.cursorCells() - 1)
  }

  /** Moves to 0-based cell `column` of the line, counted over its rows (cells past the end are blank). */
  moveToColumn(column: number): void {
    this.printed = false
    const place = this.locate(column)
    if (place.index === this.text.length) {
      this.cursor = place.index + (column - place.before)
      this.inside = 0
    } else {
      this.cursor = place.index
      this.inside = column - place.before
    }
  }

  /** The cursor as a line cell (cells before it over the rows, plus blank cells past the end). */
  cursorCells(): number {
    const line = this.text
    const cursor = this.cursor
    if (!this.wide) return cursor
    if (cursor > line.length) return advance(line, 0, line.length, 0, this.cols) + (cursor - line.length)
    return advance(line, 0, cursor, 0, this.cols) + this.inside
  }

  /**
   * The first character, not a mark, whose cells reach past line cell `cell` (the one on it, or
   * the next after a blank cell before it), with the cells around it; the end of the text when
   * none does.
   */
  private locate(cell: number): Place {
    const line = this.text
    if (!this.wide) {
      const index = Math.min(cell, line.length)
      return { index, before: index, start: index, next: Math.min(index + 1, line.length) }
    }
    const cols = this.cols
    let at = 0
    let i = 0
    while (i < line.length) {
      const unit = line.charCodeAt(i)
      let length = 1
      let width: number = 1
      if (!narrow(unit)) {
        let codePoint = unit
        if (isHighSurrogate(unit) && isLowSurrogate(line.charCodeAt(i + 1))) {
          codePoint = line.codePointAt(i)!
          length = 2
        }
        width = cellWidth(codePoint)
        if (width === 0) {
          i += length
          continue
        }
      }
      const start = width === 2 && cols > 1 && at % cols === cols - 1 ? at + 1 : at
      if (start + width > cell) {
        let next = i + length
        while (next < line.length && !narrow(line.charCodeAt(next)) && cellWidth(line.codePointAt(next)!) === 0) next += line.codePointAt(next)! > 0xffff ? 2 : 1
        return { index: i, before: at, start, next }
      }
      at = start + width
      i += length
    }
    return { index: line.length, before: at, start: at, next: line.length }
  }

  /**
   * EL (ECMA-48 §8.3.41) on the cursor's row: 0 to its end, 1 up to and including the cursor, 2
   * the row. Erased cells the line goes on after become spaces. A pending wrap stays pending.
   */
  erase(mode: number): void {
    const unit = this.wide ? 2 : 1
    if (this.text.length * unit <= this.cols && this.cursor * unit < this.cols && mode !== 1) {
      // The commonest: on a line of one row (a progress bar's `CR EL`, readline's redraw).
      if (mode === 0) this.eraseToEnd()
      else if (mode === 2 && this.text !== '') {
        this.cursor = this.cursorCells()
        this.inside = 0
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

  /** DCH (ECMA-48 §8.3.26): deletes `count` cells at the cursor; the rest of its row shifts left, blanks fill the row's end. */
  deleteCells(count: number): void {
    this.editRow((cells, col) => {
      if (col < cells.length) cells.splice(col, count)
    })
  }

  /** ICH (ECMA-48 §8.3.64): inserts `count` blank cells at the cursor; the rest of its row shifts right, cells past the row's end are lost. */
  insertCells(count: number): void {
    this.editRow((cells, col) => {
      if (col < cells.length) cells.splice(col, 0, ...Array<string>(Math.min(count, this.cols - col)).fill(' '))
    })
  }

  /** ECH (ECMA-48 §8.3.38): erases `count` cells from the cursor, within its row; nothing shifts. */
  eraseCells(count: number): void {
    this.editRow((cells, col) => {
      for (let k = col; k < Math.min(col + count, cells.length); k++) cells[k] = ' '
    })
  }

  /**
   * Applies `edit` to the cells of the cursor's row (one string per cell: a character with its
   * marks, '' for a wide character's right half; the row's blank end not included on the line's
   * last row) at the cursor's column. A wide character the edit split leaves its other half
   * blank, as xterm.js does (tmux keeps the lone half); the cursor stays, a pending wrap pending.
   */
  private editRow(edit: (cells: string[], col: number) => void): void {
    const { row, col } = this.position()
    const cols = this.cols
    const rowStart = row * cols
    const line = this.text
    const cells: string[] = []
    let lead = ''
    const first = this.locate(rowStart).index
    let i = first
    let at = rowStart
    while (i < line.length) {
      const codePoint = line.codePointAt(i)!
      const length = codePoint > 0xffff ? 2 : 1
      const width = cellWidth(codePoint)
      const character = line.slice(i, i + length)
      if (width === 0) {
        if (cells.length > 0) cells[cells.length - 1] += character
        else lead += character
      } else {
        if (at + width > rowStart + cols) break
        cells.push(character)
        if (width === 2) cells.push('')
        at += width
      }
      i += length
    }
    const last = i >= line.length
    if (!last) while (cells.length < cols) cells.push(' ')
    edit(cells, Math.min(col, cols - 1))
    cells.length = Math.min(cells.length, cols)
    for (let k = 0; k < cells.length; k++) {
      const wide = cells[k] !== '' && cellWidth(cells[k]!.codePointAt(0)!) === 2
      if (wide && cells[k + 1] !== '') cells[k] = last && k === cells.length - 1 ? '' : ' '
      else if (cells[k] === '' && (k === 0 || cells[k - 1] === '' || cellWidth(cells[k - 1]!.codePointAt(0)!) !== 2)) cells[k] = ' '
    }
    if (!last) while (cells.length < cols) cells.push(' ')
    this.text = line.slice(0, first) + lead + cells.join('') + line.slice(i)
    this.moveToColumn(rowStart + col)
    this.printed = col === cols
    this.revision++
  }

  /**
   * ED 0 on the line: erases from the cursor to the end of the line, every row after it too. A
   * wide character the cursor is on the right half of stays (tmux keeps it).
   */
  eraseToEnd(): void {
    let end = this.cursor
    if (end >= this.text.length) return
    if (this.inside > 0) {
      const cell = this.cursorCells()
      const place = this.locate(cell)
      if (place.start < cell) end = place.next
    }
    this.text = this.text.slice(0, end)
    this.revision++
  }

  /**
   * Blanks cells `[from, to)`: the characters that start there (a wide one the range ends on the
   * left half of, whole); the text ends at `from` when nothing is left after `to`.
   */
  private blank(from: number, to: number): void {
    if (from >= to) return
    const line = this.text
    // A wide character the range starts on the right half of stays, as tmux keeps it.
    const start = this.endBefore(from)
    if (start.index >= line.length) return
    const end = this.endBefore(to)
    if (end.index <= start.index) return
    const blanks = end.index >= line.length ? '' : ' '.repeat(end.cell - start.cell) + line.slice(end.index)
    this.text = line.slice(0, start.index) + blanks
    this.revision++
  }

  /** UTF-16 index and line cell just after the characters that start before line cell `cell` (one it cuts, whole). */
  private endBefore(cell: number): { index: number; cell: number } {
    const place = this.locate(cell)
    if (place.index === this.text.length || place.start >= cell) return { index: place.index, cell: place.before }
    return { index: place.next, cell: advance(this.text, place.index, place.next, place.before, this.cols) }
  }

  /** Cuts the line at UTF-16 index `at` (never inside a surrogate pair, never empty); returns the head. */
  splitAt(at: number): string {
    let cut = at
    if (isHighSurrogate(this.text.charCodeAt(cut - 1))) cut = cut > 1 ? cut - 1 : cut + 1
    const head = this.text.slice(0, cut)
    this.text = this.text.slice(cut)
    if (this.cursor < cut) this.inside = 0
    this.cursor = Math.max(0, this.cursor - cut)
    this.printed = false
    this.revision++
    return head
  }
}
