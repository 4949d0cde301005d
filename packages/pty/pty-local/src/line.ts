/**
 * The current line of the line-mode output model: its text and the cursor on it, edited by the
 * parser's actions (print, CR, BS, EL, CHA, ED 0). Committing a line is the parser's job; this
 * class only knows the one open line.
 *
 * Cost: appending at the end of the line (the common case, and the only one in a long
 * unbroken line such as `head -c 50000000 /dev/zero | tr '\0' x`) is O(appended text) and does
 * not change `revision`, so a reader that took a prefix of the line earlier can continue it
 * from its length without comparing the text again. Every other change (overwriting, erasing)
 * bumps `revision`.
 */

import { isHighSurrogate, isLowSurrogate } from '@conch/session'

/** Number of code points in `text[start, end)`. */
export function codePoints(text: string, start = 0, end = text.length): number {
  let count = end - start
  for (let i = start; i < end; i++) if (isLowSurrogate(text.charCodeAt(i))) count--
  return count
}

/**
 * One line of cells. A cell is one code point: wide (CJK) characters count as one column.
 * Blank cells at the end of the line are not represented, so erasing never leaves trailing
 * spaces, and the cursor may sit past the end of the text (blank cells not yet written).
 */
export class LineModel {
  /** The line's text. */
  text = ''
  /** UTF-16 index into `text`; beyond `text.length` means blank cells not yet written. */
  cursor = 0
  /**
   * Counts changes that altered text already on the line (overwrite, erase); appending at the
   * end leaves it alone. Never reset, so it also tells lines apart across `clear()`.
   */
  revision = 0

  /** Empties the line and returns the cursor to column 0 (after a line feed). */
  clear(): void {
    this.text = ''
    this.cursor = 0
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
  }

  /** CR: column 0. */
  carriageReturn(): void {
    this.cursor = 0
  }

  /** BS: one cell left, stopping at column 0. */
  backspace(): void {
    const cursor = this.cursor
    if (cursor === 0) return
    if (cursor > this.text.length) {
      this.cursor = cursor - 1
      return
    }
    const pair = cursor >= 2 && isLowSurrogate(this.text.charCodeAt(cursor - 1)) && isHighSurrogate(this.text.charCodeAt(cursor - 2))
    this.cursor = cursor - (pair ? 2 : 1)
  }

  /** CHA (ECMA-48 §8.3.9): moves to 0-based cell `column` of the line (cells past the end are blank). */
  moveToColumn(column: number): void {
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

  /** EL (ECMA-48 §8.3.41): 0 erases to the end of the line, 1 blanks up to and including the cursor, 2 blanks the line. */
  erase(mode: number): void {
    const line = this.text
    const cursor = this.cursor
    if (mode === 0) {
      if (cursor < line.length) {
        this.text = line.slice(0, cursor)
        this.revision++
      }
    } else if (mode === 1) {
      const cells = this.cursorCells()
      if (cursor >= line.length) {
        this.text = ''
      } else {
        const end = cursor + (isHighSurrogate(line.charCodeAt(cursor)) && isLowSurrogate(line.charCodeAt(cursor + 1)) ? 2 : 1)
        this.text = ' '.repeat(cells + 1) + line.slice(end)
      }
      this.cursor = cells
      this.revision++
    } else if (mode === 2) {
      const cells = this.cursorCells()
      this.text = ''
      this.cursor = cells
      this.revision++
    }
  }

  /**
   * Cuts the line at UTF-16 index `at` (moved left off a surrogate pair's middle, or right past
   * it when the pair is the first code point, so a cut always takes at least one): returns the
   * text before it and keeps the rest as the line, with the cursor moved along.
   */
  splitAt(at: number): string {
    let cut = at
    if (isHighSurrogate(this.text.charCodeAt(cut - 1))) cut = cut > 1 ? cut - 1 : cut + 1
    const head = this.text.slice(0, cut)
    this.text = this.text.slice(cut)
    this.cursor = Math.max(0, this.cursor - cut)
    this.revision++
    return head
  }
}
