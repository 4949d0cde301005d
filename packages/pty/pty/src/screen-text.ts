/**
 * The text of a rendered screen, as backends return it (a send's viewport while a full-screen or
 * cursor-addressing program is in front, `ctx.pty.screen`) and tools show it:
 *
 * ```
 * [screen: alternate 40x160, cursor 12,5]
 * row 1
 * …
 * row 12  ← cursor
 * ```
 *
 * A header (buffer, rows x cols, 1-based cursor row,col), then row 1, row 2, … as lines (trailing
 * blanks trimmed, empty rows after the last written one dropped), the cursor row ending in
 * `CURSOR_MARK`. `boundScreenText` cuts one to a byte bound without losing what locates it.
 */
import { utf8ByteLength, utf8Prefix } from '@conch/session'

/** Appended to the cursor row. */
export const CURSOR_MARK = '  ← cursor'

/** The first line of a rendered screen. */
const HEADER = /^\[screen: (normal|alternate) (\d+)x(\d+), cursor (\d+),(\d+)\]$/

export interface ScreenHeader {
  buffer: 'normal' | 'alternate'
  rows: number
  cols: number
  /** 1-based cursor position. */
  cursorRow: number
  cursorCol: number
}

/** The header line of a screen: `[screen: alternate 40x160, cursor 12,5]`. */
export function screenHeader(header: ScreenHeader): string {
  return `[screen: ${header.buffer} ${header.rows}x${header.cols}, cursor ${header.cursorRow},${header.cursorCol}]`
}

/**
 * The header of `text` when it is a rendered screen: its first line is a header and it has at
 * most `rows` rows after it; otherwise `undefined`.
 */
export function parseScreenHeader(text: string): ScreenHeader | undefined {
  const end = text.indexOf('\n')
  const match = HEADER.exec(end < 0 ? text : text.slice(0, end))
  if (match === null) return undefined
  const header: ScreenHeader = {
    buffer: match[1] as 'normal' | 'alternate',
    rows: Number(match[2]),
    cols: Number(match[3]),
    cursorRow: Number(match[4]),
    cursorCol: Number(match[5]),
  }
  let lines = 0
  for (let at = end; at >= 0; at = text.indexOf('\n', at + 1)) lines++
  return lines <= header.rows ? header : undefined
}

/** `row` within `maxBytes`, cut at its end; a cursor row keeps its mark while the mark fits. */
function cutRow(row: string, maxBytes: number): string {
  if (utf8ByteLength(row) <= maxBytes) return row
  const markBytes = utf8ByteLength(CURSOR_MARK)
  if (!row.endsWith(CURSOR_MARK) || markBytes > maxBytes) return utf8Prefix(row, maxBytes)
  return utf8Prefix(row.slice(0, row.length - CURSOR_MARK.length), maxBytes - markBytes) + CURSOR_MARK
}

/** The line standing for rows `first`–`last` (1-based) that a bound left out. */
export function omittedRows(first: number, last: number): string {
  return first === last ? `[row ${first} not shown]` : `[rows ${first}-${last} not shown]`
}

const OMITTED = /^\[rows? (\d+)(?:-(\d+))? not shown\]$/

/** The rows of a rendered screen with their 1-based numbers (a screen already cut skips numbers). */
function numberedRows(lines: readonly string[]): { row: number; text: string }[] {
  const rows: { row: number; text: string }[] = []
  let next = 1
  for (const text of lines) {
    const omitted = OMITTED.exec(text)
    if (omitted !== null) next = Number(omitted[2] ?? omitted[1]) + 1
    else rows.push({ row: next++, text })
  }
  return rows
}

/**
 * A rendered screen within `maxBytes` UTF-8 bytes, or `undefined` when `text` is not one (see
 * `parseScreenHeader`). What locates the screen is kept first: the header and the cursor row
 * (cut at its end, keeping the mark, only when the two and the line standing for the rows above
 * do not fit; under a bound smaller than the header, the header's head); then the rows above the cursor row top-down as far as
 * they fit, then — when all of those fit — the rows below it. Each run of rows left out becomes
 * one `[rows a-b not shown]` line, so every kept row keeps its number. Cuts fall on code points.
 */
export function boundScreenText(text: string, maxBytes: number): { text: string; truncated: boolean } | undefined {
  const header = parseScreenHeader(text)
  if (header === undefined) return undefined
  if (utf8ByteLength(text) <= maxBytes) return { text, truncated: false }
  const lines = text.split('\n')
  const head = lines[0]!
  const headBytes = utf8ByteLength(head)
  if (headBytes > maxBytes) return { text: utf8Prefix(head, maxBytes), truncated: true }
  const rows = numberedRows(lines.slice(1))
  const last = rows.length === 0 ? 0 : rows[rows.length - 1]!.row
  const cursor = rows.findIndex((entry) => entry.row === header.cursorRow)
  const gapBytes = (first: number, through: number) => (first <= through ? 1 + utf8ByteLength(omittedRows(first, through)) : 0)
  let budget = maxBytes - headBytes
  let cursorText: string | undefined
  if (cursor >= 0) {
    // Room for the line standing for every row above, so the cursor row is never read as row 1.
    const reserve = gapBytes(1, header.cursorRow - 1)
    cursorText = cutRow(rows[cursor]!.text, Math.max(0, budget - 1 - (budget - 1 - reserve >= utf8ByteLength(CURSOR_MARK) ? reserve : 0)))
    budget -= 1 + utf8ByteLength(cursorText)
  }
  const out = [head]
  /**
   * Adds rows[from, to) in order while they fit, the row before them being `after`, keeping room
   * for the line that stands for the rows up to `through` left out. Whether all of them fit.
   */
  const fill = (from: number, to: number, after: number, through: number): boolean => {
    let shown = after
    let index = from
    for (; index < to; index++) {
      const entry = rows[index]!
      // A run of rows this screen already left out stays one line.
      const skipped = gapBytes(shown + 1, entry.row - 1)
      const size = 1 + utf8ByteLength(entry.text)
      if (skipped + size + gapBytes(entry.row + 1, through) > budget) break
      if (skipped > 0) out.push(omittedRows(shown + 1, entry.row - 1))
      out.push(entry.text)
      budget -= skipped + size
      shown = entry.row
    }
    if (gapBytes(shown + 1, through) <= budget) {
      if (shown < through) out.push(omittedRows(shown + 1, through))
      budget -= gapBytes(shown + 1, through)
    }
    return index === to
  }
  if (cursor < 0) {
    fill(0, rows.length, 0, last)
    return { text: out.join('\n'), truncated: true }
  }
  const allAbove = fill(0, cursor, 0, header.cursorRow - 1)
  out.push(cursorText!)
  if (allAbove) fill(cursor + 1, rows.length, header.cursorRow, last)
  else if (header.cursorRow < last && gapBytes(header.cursorRow + 1, last) <= budget) out.push(omittedRows(header.cursorRow + 1, last))
  return { text: out.join('\n'), truncated: true }
}
