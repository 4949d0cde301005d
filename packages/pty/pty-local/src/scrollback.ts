/**
 * Retained scrollback of one session: the committed lines of its `OutputParser`, bounded by a
 * line count and a byte budget, read in pages counted back from the newest line.
 */
import { PtyError, type ReadPage } from '@conch/pty'
import { LineStore } from './line-store.ts'
import { utf8ByteLength, utf8Suffix } from '@conch/session'

export interface ScrollbackOptions {
  /** Most lines retained (config `scrollbackLines`). */
  maxLines: number
  /** Most UTF-8 bytes retained, line breaks not counted (config `scrollbackMaxBytes`). */
  maxBytes: number
  /** Lines of a flood's beginning kept beyond `maxLines`, at most a quarter of `maxBytes` (config `scrollbackHeadLines`). */
  headLines?: number
}

/** Where the scrollback gets its lines: an `OutputParser` fits. */
export interface LineSource {
  onLine(listener: (text: string) => void): () => void
  /** Lines a cursor moved up into are open again (`OutputParser.onRewind`). */
  onRewind?(listener: (lineNumber: number) => void): () => void
  /** The current uncommitted line. */
  readonly partial: string
  /** The lines below it that a cursor moved up from, top to bottom (`OutputParser.linesBelow`). */
  linesBelow?(): string[]
}

/**
 * Lines are numbered from 1, the first ever pushed; the oldest go first past either bound. A line
 * over `maxBytes` keeps its tail and makes every page holding it `truncated`. The non-empty
 * partial line (and the lines below it a cursor moved up from) are read as the newest lines.
 */
export class Scrollback {
  readonly maxLines: number
  readonly maxBytes: number
  readonly headLines: number

  private readonly store = new LineStore()
  /** The first lines of a flood, kept when the store drops them. */
  private flood: { first: number; head: LineStore } | undefined
  /** Where the newest flood begins (`markFlood`); it replaces `flood` when its own first line is dropped. */
  private nextFlood: number | undefined
  private pushed = 0
  private source: LineSource | undefined

  constructor(options: ScrollbackOptions) {
    for (const key of ['maxLines', 'maxBytes'] as const) {
      const value = options[key]
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(`Scrollback option ${key} must be a positive safe integer, got ${value}`)
      }
    }
    this.maxLines = options.maxLines
    this.maxBytes = options.maxBytes
    this.headLines = options.headLines ?? 0
  }

  /** Output from the current line on is a new flood, whose first lines stay when newer ones push them out. */
  markFlood(): void {
    if (this.headLines > 0) this.nextFlood = this.pushed + 1
  }

  /** Lines between the flood's kept head and the newest retained lines that were dropped, if any. */
  get gap(): { first: number; last: number } | undefined {
    const flood = this.flood
    if (flood === undefined || flood.head.length === 0) return undefined
    const first = flood.first + flood.head.length
    const last = this.pushed - this.store.length
    return first <= last ? { first, last } : undefined
  }

  /** Lines committed so far, dropped ones included (the partial line is not counted here). */
  get committedLines(): number {
    return this.pushed
  }

  /** Oldest line number still retained (`committedLines + 1` when none is). */
  get firstRetainedLine(): number {
    return this.pushed - this.store.length + 1
  }

  /** UTF-8 bytes currently retained. */
  get retainedBytes(): number {
    return this.store.bytes
  }

  /** Retains every line `source` commits from now on; one source at a time. Returns a disposer. */
  follow(source: LineSource): () => void {
    if (this.source !== undefined) throw new Error('Scrollback already follows a line source')
    this.source = source
    const off = source.onLine((text) => this.push(text))
    const offRewind = source.onRewind?.(() => this.rewind())
    return () => {
      off()
      offRewind?.()
      if (this.source === source) this.source = undefined
    }
  }

  /** The newest committed line is open again: it is no longer retained (it comes again when committed). */
  rewind(): void {
    if (this.pushed === 0) return
    if (this.store.length > 0) this.store.dropNewest()
    this.pushed--
    // A flood begins on the line that is open again (a prompt redrawn), not past it.
    if (this.nextFlood !== undefined) this.nextFlood = Math.min(this.nextFlood, this.pushed + 1)
  }

  /** Retains one committed line (without its terminator). */
  push(text: string): void {
    this.store.push(text, this.maxBytes)
    this.pushed++
    while (this.store.length > this.maxLines || this.store.bytes > this.maxBytes) {
      // The flood's next line in order moves to its head while the head has room.
      const oldest = this.pushed - this.store.length + 1
      if (this.nextFlood !== undefined && oldest >= this.nextFlood) {
        this.flood = { first: oldest, head: new LineStore() }
        this.nextFlood = undefined
      }
      const flood = this.flood
      if (flood !== undefined && oldest === flood.first + flood.head.length && flood.head.length < this.headLines && flood.head.bytes + this.store.size(0) <= this.maxBytes / 4) {
        flood.head.push(this.store.text(0), this.maxBytes)
      }
      this.store.dropOldest()
    }
  }

  /**
   * One page of scrollback: lines `totalLines - offset - count + 1 … totalLines - offset`.
   * Dropped lines are not returned; the text is at most `maxReadBytes` UTF-8 bytes, newest first,
   * the first line that does not fit cut to its tail (`cut`); either makes `truncated` true, as
   * does a line cut when retained. `lineBegin … lineEnd` are the lines returned; an empty page has
   * `lineBegin = lineEnd + 1`.
   * @throws PtyError `INVALID_INPUT` when `offset` or `count` is not a non-negative safe
   *   integer, or `maxReadBytes` is not a positive safe integer.
   */
  read(range: { offset: number; count: number }, maxReadBytes: number): ReadPage {
    const { offset, count } = range
    for (const [name, value] of [['offset', offset], ['count', count]] as const) {
      if (!Number.isSafeInteger(value) || value < 0) {
        throw new PtyError('INVALID_INPUT', { reason: `scrollback ${name} must be a non-negative integer, got ${value}` })
      }
    }
    if (!Number.isSafeInteger(maxReadBytes) || maxReadBytes < 1) {
      throw new PtyError('INVALID_INPUT', { reason: `maxReadBytes must be a positive integer, got ${maxReadBytes}` })
    }

    const partial = this.source?.partial ?? ''
    const below = this.source?.linesBelow?.() ?? []
    const open = below.length === 0 && partial === '' ? [] : [partial, ...below]
    const totalLines = this.pushed + open.length
    const gap = this.gap
    // A page comes from one run of retained lines: the newest, or (ending in or before the gap) the flood's head.
    const inHead = gap !== undefined && totalLines - offset <= gap.last
    const storeFirst = this.firstRetainedLine
    const head = this.flood?.head
    const headFirst = this.flood?.first ?? storeFirst
    // Without a gap, a head still kept is the start of the newest run.
    const firstRetainedLine = inHead || (gap === undefined && head !== undefined && head.length > 0) ? headFirst : storeFirst
    // Lines inside the gap are not returned, and nothing outside the range stands in for them.
    const askedEnd = Math.max(0, totalLines - offset)
    const lineEnd = inHead ? Math.min(gap.first - 1, askedEnd) : askedEnd
    const extra = gap === undefined ? {} : { gap }
    let lineBegin = Math.max(1, askedEnd - count + 1)
    let truncated = lineEnd < askedEnd
    const none = count === 0 || lineEnd === 0 || lineBegin > lineEnd
    if (!none && lineBegin < firstRetainedLine) {
      truncated = true
      lineBegin = firstRetainedLine
    }
    if (none || lineBegin > lineEnd) return { text: '', totalLines, firstRetainedLine, lineBegin: lineEnd + 1, lineEnd, truncated, ...extra }

    const taken: string[] = []
    let used = 0
    let begin = lineEnd + 1
    let cut: { line: number; bytes: number } | undefined
    for (let number = lineEnd; number >= lineBegin; number--) {
      const [store, index] = number >= storeFirst ? [this.store, number - storeFirst] : [head!, number - headFirst]
      const isPartial = number > this.pushed
      const text = isPartial ? open[number - this.pushed - 1]! : store.text(index)
      const size = isPartial ? utf8ByteLength(text) : store.size(index)
      if (!isPartial && store.isCut(index)) truncated = true
      const separator = taken.length > 0 ? 1 : 0
      if (used + separator + size <= maxReadBytes) {
        taken.push(text)
        used += separator + size
        begin = number
        continue
      }
      truncated = true
      const room = maxReadBytes - used - separator
      if (room > 0) {
        const tail = utf8Suffix(text, room)
        taken.push(tail)
        begin = number
        cut = { line: number, bytes: size - utf8ByteLength(tail) }
      }
      break
    }
    return { text: taken.reverse().join('\n'), totalLines, firstRetainedLine, lineBegin: begin, lineEnd, truncated, ...extra, ...(cut && { cut }) }
  }
}
