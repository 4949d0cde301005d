/**
 * Each send's own bounded output: what appeared on the terminal from the moment the send
 * started until it settled, for the settled `viewport` and for background `readOutput()`.
 */
import { LineStore } from './line-store.ts'
import { keepUtf8Tail, utf8ByteLength, type OutputParser } from './output.ts'

/** The parts of an `OutputParser` a send buffer uses. */
export type SendBufferSource = Pick<OutputParser, 'onLine' | 'onRewind' | 'partial' | 'partialRevision' | 'lineCount' | 'mark'>

export interface SendBufferOptions {
  /** Bound of the buffered text, in UTF-8 bytes (the session passes `maxReadBytes`). */
  maxBytes: number
  /**
   * Include the whole line the send started on (e.g. the prompt `$ ` before the echoed
   * command) instead of only the text written on it after the start. Default false.
   */
  fromLineStart?: boolean
  /**
   * Start the first line at this column (UTF-16 index) when the send starts right of it: the end
   * of the shell's prompt, so text an earlier send typed after the prompt without Enter is shown
   * with what the send types after it (`qecho hi`, as the shell runs it).
   */
  startColumn?: number
}

/** Text plus whether data was lost to the byte bound, and where (`SendResult.omitted`). */
export interface SendOutput {
  text: string
  truncated: boolean
  omitted?: { headLines: number; bytes: number; lines: number }
}

/**
 * Collects the lines a parser commits after creation, and the partial line, bounded to
 * `maxBytes` keeping the newest text, plus the send's first lines (a quarter of `maxBytes`),
 * where errors of a flood often start; text is cut only on code-point boundaries.
 *
 * The first line is the one the send started on, from the column where the send started (text
 * written left of that column afterwards, e.g. after a CR, counts too — see `OutputMark`).
 * `close()` freezes the buffer when the send settles; later output is not the send's.
 */
export class SendBuffer {
  readonly maxBytes: number
  private readonly fromLineStart: boolean
  private readonly startColumn: number
  private readonly source: SendBufferSource
  private readonly start: ReturnType<SendBufferSource['mark']>
  private stopListening: (() => void) | undefined

  private readonly store = new LineStore()
  /** The send's first lines, kept when the store drops them; closed at the first line lost. */
  private readonly head = new LineStore()
  private headClosed = false
  /** What was lost between `head` and `store`. */
  private readonly lost = { bytes: 0, lines: 0 }
  /** Line number (in the parser's numbering) of the oldest kept line. */
  private firstLine: number
  private dropped = false
  private frozenPartial: string | undefined

  /** Next committed line `take()` returns. */
  private takeNext: number
  /** The partial line text the previous `take()` returned, while that line was still open. */
  private taken: { line: number; text: string; revision: number } | undefined

  constructor(source: SendBufferSource, options: SendBufferOptions) {
    if (!Number.isSafeInteger(options.maxBytes) || options.maxBytes < 1) {
      throw new RangeError(`SendBuffer option maxBytes must be a positive safe integer, got ${options.maxBytes}`)
    }
    this.maxBytes = options.maxBytes
    this.fromLineStart = options.fromLineStart ?? false
    this.startColumn = options.startColumn ?? Number.MAX_SAFE_INTEGER
    this.source = source
    this.start = source.mark({ keepLines: false })
    this.firstLine = this.start.line
    this.takeNext = this.start.line
    const stopLines = source.onLine((text, lineNumber) => this.push(text, lineNumber))
    const stopRewinds = source.onRewind((lineNumber) => this.rewind(lineNumber))
    this.stopListening = () => {
      stopLines()
      stopRewinds()
    }
  }

  /** Whether the buffer has lost data to its bound so far (the viewport would say `truncated`). */
  get truncated(): boolean {
    return this.dropped || this.store.anyCut()
  }

  /** Stops collecting: the partial line as it is now becomes the send's last line. Idempotent. */
  close(): void {
    if (this.stopListening === undefined) return
    this.frozenPartial = this.partial()
    this.stopListening()
    this.stopListening = undefined
    this.start.release()
  }

  /**
   * Everything the send produced that is still buffered: its lines joined by `\n`, then the
   * partial line when non-empty. At most `maxBytes` UTF-8 bytes, keeping the newest text.
   */
  viewport(): SendOutput {
    const parts = this.store.all()
    const partial = this.partial()
    if (partial !== '') parts.push(partial)
    const { text, cut } = joinTail(parts, this.maxBytes)
    if (this.head.length === 0) return { text, truncated: cut || this.truncated }
    const headText = this.head.all().join('\n')
    if (this.lost.lines === 0 && this.lost.bytes === 0 && !cut) return { text: text === '' ? headText : `${headText}\n${text}`, truncated: this.truncated }
    // Lines the cut of `text` dropped whole are omitted too.
    const whole = parts.join('\n')
    const dropped = whole.slice(0, whole.length - text.length)
    const lines = this.lost.lines + (dropped.match(/\n/g)?.length ?? 0)
    return { text: `${headText}\n${text}`, truncated: true, omitted: { headLines: this.head.length, bytes: this.lost.bytes + utf8ByteLength(dropped), lines } }
  }

  /** The newest committed line of the send's output, or '' when it has none. */
  lastLine(): string {
    const count = this.store.length
    return count === 0 ? '' : this.store.text(count - 1)
  }

  /** The last line of the send's output that is not blank (the open partial line included), or ''. */
  lastNonBlankLine(): string {
    const partial = this.partial()
    if (partial.trim() !== '') return partial
    const lines = this.store.all()
    for (let index = lines.length - 1; index >= 0; index--) if (lines[index]!.trim() !== '') return lines[index]!
    return ''
  }

  /**
   * What the send produced since the previous `take()` (consumed). Each committed line is
   * followed by `\n`; the open partial line is returned as far as it goes, and the next take
   * continues it. If that line was rewritten in the meantime (CR, erase), the next take starts a
   * new line and repeats it whole, so the concatenation of all takes reads like the terminal.
   * `truncated` says lines produced since the previous take were dropped before being taken, or
   * the text was cut to `maxBytes`.
   */
  take(): SendOutput {
    let text = ''
    let truncated = false
    if (this.takeNext < this.firstLine) {
      truncated = true
      this.takeNext = this.firstLine
    }
    const end = this.firstLine + this.store.length
    let open = this.taken
    for (let n = this.takeNext; n < end; n++) {
      const index = n - this.firstLine
      const line = this.store.text(index)
      if (this.store.isCut(index)) truncated = true
      if (open !== undefined && open.line === n && line.startsWith(open.text)) text += `${line.slice(open.text.length)}\n`
      else text += `${open !== undefined ? '\n' : ''}${line}\n`
      open = undefined
    }
    this.takeNext = end
    // The partial line is always the one after the last committed line, numbered `end`.
    const partial = this.partial()
    const current = end
    const revision = this.frozenPartial !== undefined ? -1 : this.source.partialRevision
    if (open !== undefined && open.line === current && continues(open, partial, revision)) text += partial.slice(open.text.length)
    else text += `${open !== undefined ? '\n' : ''}${partial}`
    this.taken = partial === '' ? undefined : { line: current, text: partial, revision }
    const bounded = keepUtf8Tail(text, this.maxBytes)
    return { text: bounded, truncated: truncated || bounded.length < text.length }
  }

  /** The send's part of the current line. */
  private partial(): string {
    if (this.frozenPartial !== undefined) return this.frozenPartial
    const text = this.source.partial
    if (this.fromLineStart || this.source.lineCount + 1 !== this.start.line) return text
    return text.slice(Math.min(this.start.column, this.startColumn, text.length))
  }

  /**
   * Line `lineNumber` is open again (a cursor moved up into it): the buffer forgets it, and comes
   * to hold it again, as it then reads, when it is committed again. A line before the send's
   * first one becomes its first.
   */
  private rewind(lineNumber: number): void {
    const store = this.store
    if (store.length > 0 && this.firstLine + store.length - 1 === lineNumber) store.dropNewest()
    else if (store.length === 0 && lineNumber < this.firstLine) this.firstLine = lineNumber
    if (this.takeNext > lineNumber) {
      this.takeNext = lineNumber
      this.taken = undefined
    }
  }

  private push(text: string, lineNumber: number): void {
    const line = lineNumber === this.start.line && !this.fromLineStart ? text.slice(Math.min(this.start.column, this.startColumn, text.length)) : text
    const store = this.store
    store.push(line, this.maxBytes)
    // Retained text is the lines joined by `\n`: sizes plus one separator between lines. Over
    // the bound, the oldest line goes whole, or keeps its tail when only part of it must go.
    for (;;) {
      const excess = store.bytes + store.length - 1 - this.maxBytes
      if (excess <= 0 || store.length < 2) break
      const size = store.size(0)
      if (!this.headClosed && this.head.bytes + size <= this.maxBytes / 4) {
        this.head.push(store.text(0), this.maxBytes)
        store.dropOldest()
        this.firstLine++
        continue
      }
      this.headClosed = true
      this.dropped = true
      if (size - excess > 0) {
        store.cutOldest(size - excess)
        this.lost.bytes += excess
        continue
      }
      this.lost.bytes += size + 1
      this.lost.lines++
      store.dropOldest()
      this.firstLine++
    }
  }

}

/**
 * Whether `partial` continues the open line a previous take returned. At the same revision the
 * line only grew at its end, so no comparison is needed: this keeps a long line that arrives in
 * many chunks linear in its length. Otherwise the text decides (bounded by the parser's line cap).
 */
function continues(open: { text: string; revision: number }, partial: string, revision: number): boolean {
  if (open.revision === revision && revision >= 0) return partial.length >= open.text.length
  return partial.startsWith(open.text)
}

/** `parts` joined by `\n`, cut to its last `maxBytes` UTF-8 bytes on a code-point boundary. */
function joinTail(parts: string[], maxBytes: number): { text: string; cut: boolean } {
  const text = parts.join('\n')
  const kept = keepUtf8Tail(text, maxBytes)
  return { text: kept, cut: kept.length < text.length }
}
