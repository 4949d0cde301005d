/**
 * Byte bounds for text the model sees. Sizes are UTF-8 bytes (what the model API transports and
 * bills); cuts fall on code-point boundaries, so a surrogate pair (an emoji) is never split and
 * no U+FFFD replacement character is ever produced by a cut.
 */
import { utf8ByteLength as utf8Bytes, utf8Prefix, utf8Suffix } from '@conch/session'

/** The UTF-8 length of `text` in bytes (a lone surrogate counts as the 3 bytes of U+FFFD). */
export { utf8Bytes }

export interface BoundOptions {
  /** Keep the start (`head`, default) or the end (`tail`, for terminal output) of the text. */
  keep?: 'head' | 'tail'
}

export interface Bounded {
  /** An exact prefix (`head`) or suffix (`tail`) of the input, at most `maxBytes` UTF-8 bytes. */
  text: string
  truncated: boolean
  /** UTF-8 bytes of the input that `text` leaves out. */
  omittedBytes: number
}

/**
 * Cuts `text` to at most `maxBytes` UTF-8 bytes, keeping whole code points from the head or the
 * tail. Adds no notice; see `boundWithNotice` for the generic tool-result bound.
 * @throws RangeError when `maxBytes` is not a non-negative integer.
 */
export function boundUtf8(text: string, maxBytes: number, options: BoundOptions = {}): Bounded {
  if (!Number.isInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError(`maxBytes must be a non-negative integer of bytes, got ${maxBytes}`)
  }
  const total = utf8Bytes(text)
  if (total <= maxBytes) return { text, truncated: false, omittedBytes: 0 }
  const kept = options.keep === 'tail' ? utf8Suffix(text, maxBytes) : utf8Prefix(text, maxBytes)
  return { text: kept, truncated: true, omittedBytes: total - utf8Bytes(kept) }
}

/**
 * The generic result bound: when `text` exceeds `maxBytes`, keeps its head and appends the line
 * `[output truncated: N bytes omitted]` (N in UTF-8 bytes of the input), the whole at most
 * `maxBytes` bytes. Text within the bound is returned unchanged.
 * @throws RangeError when `maxBytes` cannot hold the notice (`ToolsService` requires ≥ 64).
 */
export function boundWithNotice(text: string, maxBytes: number): Bounded {
  const total = utf8Bytes(text)
  if (total <= maxBytes) return { text, truncated: false, omittedBytes: 0 }
  // Size the notice for the largest possible count; the real count has no more digits.
  const budget = maxBytes - utf8Bytes(truncationNotice(total)) - 1
  if (budget < 0) throw new RangeError(`maxBytes ${maxBytes} is too small to hold the truncation notice`)
  const head = boundUtf8(text, budget, { keep: 'head' })
  const separator = head.text === '' || head.text.endsWith('\n') ? '' : '\n'
  return { text: head.text + separator + truncationNotice(head.omittedBytes), truncated: true, omittedBytes: head.omittedBytes }
}

/** The one-line notice appended by `boundWithNotice`. */
export function truncationNotice(omittedBytes: number): string {
  return `[output truncated: ${omittedBytes} bytes omitted]`
}

/** Output already left out before a budget applies (a backend's own bound), between its head and its tail. */
export interface OmittedRange {
  /** Lines of the text before the gap. */
  headLines: number
  /** UTF-8 bytes and lines left out at the gap. */
  bytes: number
  lines: number
}

/**
 * Share of a cut output's room kept from its end (`BudgetOptions.tailShare`): 0.8 for a failing
 * command (an exit status other than 0, where the error is at the end), else 0.6.
 */
export function tailShareOf(exitStatus: number | string | undefined): number {
  return exitStatus !== undefined && String(exitStatus) !== '0' ? 0.8 : 0.6
}

export interface BudgetOptions {
  /** Share of the room kept from the end of the text (0…1; default `tailShareOf(undefined)`, 0.6). */
  tailShare?: number
  /** What a backend already left out between the head and the tail of `text`. */
  omitted?: OmittedRange
  /**
   * How to get what the marker stands for, given its lines and the lines kept after it
   * (`terminal_read {offset: N, count: M} pages them`); '' or absent: no hint.
   */
  page?: (range: { lines: number; tailLines: number }) => string
}

export interface Budgeted {
  text: string
  /** Whether anything was left out (here or by the backend). */
  truncated: boolean
  omittedBytes: number
  omittedLines: number
}

/**
 * Fits output into `maxBytes` UTF-8 bytes for a model: binary runs are summarised
 * (`summariseBinary`); then, when it is still too long, it keeps its head (where errors often
 * start) and its tail (where it ends), cut on line boundaries where a line fits, joined by one
 * marker line that says what was dropped and how to get it:
 * `[… 1,204,331 bytes (48,900 lines) omitted; terminal_read {offset: 3120, count: 48900} pages them]`.
 * Text within the bound (and with nothing omitted before) is returned unchanged.
 * @throws RangeError when `maxBytes` cannot hold the marker.
 */
export function budgetOutput(input: string, maxBytes: number, options: BudgetOptions = {}): Budgeted {
  const before = options.omitted
  // Split where the backend's gap is before summarising, so its line count still holds.
  const split = before === undefined ? input.length : offsetOfLine(input, before.headLines)
  const headSource = summariseBinary(input.slice(0, split))
  const tailSource = before === undefined ? headSource : summariseBinary(input.slice(split))
  if (before === undefined && utf8Bytes(headSource) <= maxBytes) return { text: headSource, truncated: false, omittedBytes: 0, omittedLines: 0 }
  // Size the marker for the largest counts possible; the real ones have no more digits.
  const mostBytes = utf8Bytes(input) + (before?.bytes ?? 0)
  const mostLines = lineCount(input) + (before?.lines ?? 0)
  const hint = (omittedLines: number, tailLines: number) => options.page?.({ lines: omittedLines, tailLines }) ?? ''
  // A hint may word a tail that leaves lines pageable differently from one that does not: the longer.
  const room = maxBytes - Math.max(...[mostLines, 0].map((tailLines) => utf8Bytes(omissionMarker(mostBytes, mostLines, hint(mostLines, tailLines))))) - 2
  if (room < 0) throw new RangeError(`maxBytes ${maxBytes} is too small to hold the omission marker`)
  const tailShare = options.tailShare ?? tailShareOf(undefined)
  // A short head (or tail) gives its unused room to the other side.
  const headRoom = Math.min(utf8Bytes(headSource), Math.floor(room * (1 - tailShare)))
  const tailRoom = Math.min(utf8Bytes(tailSource), room - headRoom)
  const head = wholeLines(boundUtf8(headSource, Math.min(utf8Bytes(headSource), room - tailRoom), { keep: 'head' }).text, 'head', headSource)
  const tail = wholeLines(boundUtf8(tailSource, tailRoom, { keep: 'tail' }).text, 'tail', tailSource)
  const middle = before === undefined ? [headSource.slice(head.length, headSource.length - tail.length)] : [headSource.slice(head.length), tailSource.slice(0, tailSource.length - tail.length)]
  const omittedBytes = middle.reduce((sum, part) => sum + utf8Bytes(part), before?.bytes ?? 0)
  const omittedLines = middle.reduce((sum, part) => sum + linesOf(part), before?.lines ?? 0)
  const tailLines = tail === '' ? 0 : lineCount(tail)
  const marker = omissionMarker(omittedBytes, omittedLines, hint(omittedLines, tailLines))
  const shown = [head.replace(/\n$/, ''), marker, tail.replace(/^\n/, '')].filter((part) => part !== '').join('\n')
  return { text: shown, truncated: true, omittedBytes, omittedLines }
}

/**
 * The one marker for output left out: `[… 1,204,331 bytes (48,900 lines) omitted; HINT]`, or
 * `[… output omitted]` when the amount is not known.
 */
export function omissionMarker(bytes?: number, lines?: number, hint = ''): string {
  const amount = bytes === undefined ? 'output' : `${count(bytes)} bytes${lines === undefined ? '' : ` (${count(lines)} line${lines === 1 ? '' : 's'})`}`
  return `[… ${amount} omitted${hint === '' ? '' : `; ${hint}`}]`
}

/**
 * Runs of lines that look binary — NULs, U+FFFD (what an invalid UTF-8 sequence decodes to) and
 * other control characters making up at least a tenth of a line with at least four of them —
 * replaced by one summary line each: `[binary: 4,096 bytes, 312 NUL, 97 invalid UTF-8]`.
 */
export function summariseBinary(text: string): string {
  if (!/[\x00\ufffd]/.test(text)) return text
  const lines = text.split('\n')
  const out: string[] = []
  let run: string[] = []
  const flush = () => {
    if (run.length === 0) return
    const joined = run.join('\n')
    const nul = countOf(joined, /\x00/g)
    const invalid = countOf(joined, /\ufffd/g)
    // An invalid sequence counts as the one byte it most often is, not as U+FFFD's three.
    const parts = [`${count(utf8Bytes(joined) - 2 * invalid)} bytes`, ...(nul > 0 ? [`${count(nul)} NUL`] : []), ...(invalid > 0 ? [`${count(invalid)} invalid UTF-8`] : [])]
    out.push(`[binary: ${parts.join(', ')}]`)
    run = []
  }
  for (const line of lines) {
    const odd = countOf(line, /[\x00-\x08\x0e-\x1f\ufffd]/g)
    if (odd >= 4 && odd * 10 >= line.length) run.push(line)
    else {
      flush()
      out.push(line)
    }
  }
  flush()
  return out.join('\n')
}

function countOf(text: string, pattern: RegExp): number {
  return text.match(pattern)?.length ?? 0
}

function count(value: number): string {
  return value.toLocaleString('en-US')
}

function lineCount(text: string): number {
  let lines = 1
  for (let index = text.indexOf('\n'); index !== -1; index = text.indexOf('\n', index + 1)) lines++
  return lines
}

/** Lines of a cut-out part, not counting the line breaks at its edges. */
function linesOf(part: string): number {
  const inner = part.replace(/^\n|\n$/g, '')
  return inner === '' ? 0 : lineCount(inner)
}

/** UTF-16 index where line `line` (0-based) of `text` starts; `text.length` past the end. */
function offsetOfLine(text: string, line: number): number {
  let index = 0
  for (let seen = 0; seen < line; seen++) {
    const next = text.indexOf('\n', index)
    if (next === -1) return text.length
    index = next + 1
  }
  return index
}

/** A kept head (tail) cut back to its last (first) line break, unless that would lose more than half of it (a long line). */
function wholeLines(kept: string, side: 'head' | 'tail', source: string): string {
  if (kept.length === source.length) return kept
  if (side === 'head') {
    const end = kept.lastIndexOf('\n')
    return end === -1 || end + 1 < kept.length / 2 ? kept : kept.slice(0, end + 1)
  }
  if (source[source.length - kept.length - 1] === '\n') return kept
  const start = kept.indexOf('\n')
  return start === -1 || start + 1 > kept.length / 2 ? kept : kept.slice(start + 1)
}
