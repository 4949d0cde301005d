/**
 * Each send's own bounded output: what appeared on the terminal from the moment the send
 * started until it settled, for the settled `viewport` and for background `readOutput()`.
 */
import { LineStore } from './line-store.ts'
import { utf8ByteLength, utf8Suffix } from '@conch/session'
import type { OutputParser } from './output.ts'

/** The parts of an `OutputParser` a send buffer uses. */
export type SendBufferSource = Pick<OutputParser, 'onLine' | 'onRewind' | 'partial' | 'partialRevision' | 'lineCount' | 'mark' | 'linesBelow'>

export interface SendBufferOptions {
  /** Bound of the buffered text, in UTF-8 bytes (the session passes `maxReadBytes`). */
  maxBytes: number
  /** Include the whole line the send started on (the prompt `$ ` too). Default false. */
  fromLineStart?: boolean
  /** Start the first line at this UTF-16 column when the send starts right of it (where typing began). */
  startColumn?: number
}

/** Text plus whether data was lost to the byte bound, and where (`SendResult.omitted`). */
export interface SendOutput {
  text: string
  truncated: boolean
  omitted?: { headLines: number; bytes: number; lines: number }
}

/**
 * Collects the lines a parser commits after creation and the open ones (`linesBelow` too),
 * bounded to `maxBytes` keeping the newest text, plus the send's first lines (a quarter of
 * `maxBytes`), where a flood's errors often start; cut only on code-point boundaries. The first
 * line starts at the send's mark (`OutputMark`). `close()` freezes it when the send settles.
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
  private frozenBelow: string[] | undefined

  /** Next committed line `take()` returns. */
  private takeNext: number
  /** The line the takes so far end inside (without its line break) and the text they returned of it. */
  private taken: { line: number; text: string; revision: number } | undefined
  /** Lines the takes returned that a cursor moved up into, held while open so a redraw is not shown twice. */
  private shown: { line: number; texts: string[] } | undefined

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

  /** Stops collecting: the open lines as they are now become the send's last lines. Idempotent. */
  close(): void {
    if (this.stopListening === undefined) return
    this.frozenPartial = this.partial()
    this.frozenBelow = this.source.linesBelow()
    this.stopListening()
    this.stopListening = undefined
    this.start.release()
  }

  /** Everything still buffered, lines joined by `\n`; at most `maxBytes` UTF-8 bytes, the newest kept. */
  viewport(): SendOutput {
    const parts = this.store.all()
    parts.push(...this.openLines())
    const whole = parts.join('\n')
    const text = utf8Suffix(whole, this.maxBytes)
    const cut = text.length < whole.length
    if (this.head.length === 0) return { text, truncated: cut || this.truncated }
    const headText = this.head.all().join('\n')
    if (this.lost.lines === 0 && this.lost.bytes === 0 && !cut) return { text: text === '' ? headText : `${headText}\n${text}`, truncated: this.truncated }
    // Lines the cut of `text` dropped whole are omitted too.
    const dropped = whole.slice(0, whole.length - text.length)
    const lines = this.lost.lines + (dropped.match(/\n/g)?.length ?? 0)
    return { text: `${headText}\n${text}`, truncated: true, omitted: { headLines: this.head.length, bytes: this.lost.bytes + utf8ByteLength(dropped), lines } }
  }

  /** How many viewport lines come before the parser's line `line`; undefined if absent or lines were lost. */
  linesBefore(line: number): number | undefined {
    if (this.truncated || this.head.length > 0 || line < this.start.line) return undefined
    return line - this.start.line
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
   * What the send produced since the previous `take()`, so all takes joined read like the
   * terminal: committed lines end in `\n`; the open line goes as far as it goes and the next take
   * continues it, or repeats it on a new line if it was rewritten. A line reopened by a cursor is
   * held, and returned again only if it changed. `truncated`: text was dropped or cut.
   */
  take(): SendOutput {
    let text = ''
    let truncated = false
    if (this.takeNext < this.firstLine) {
      truncated = true
      this.takeNext = this.firstLine
    }
    const end = this.firstLine + this.store.length
    for (let n = this.takeNext; n < end; n++) {
      const index = n - this.firstLine
      if (this.store.isCut(index)) truncated = true
      text += this.committedText(n, this.store.text(index))
    }
    this.takeNext = end
    // The partial line is always the one after the last committed line, numbered `end`.
    const open = this.frozenPartial === undefined ? [this.partial()] : this.openLines()
    for (let k = 0; k < open.length - 1; k++) text += this.committedText(end + k, open[k]!)
    const current = end + Math.max(0, open.length - 1)
    const partial = open.at(-1) ?? ''
    const revision = this.frozenPartial !== undefined ? -1 : this.source.partialRevision
    text += this.shown === undefined ? this.openText(current, partial, revision) : this.heldText(current, partial)
    const bounded = utf8Suffix(text, this.maxBytes)
    return { text: bounded, truncated: truncated || bounded.length < text.length }
  }

  /** What takes `line` number `n`, committed as `text`, from where the takes stand: '' when they already returned it so. */
  private committedText(n: number, text: string): string {
    const shown = this.shown
    if (shown !== undefined && shown.line === n && this.taken?.line !== n) {
      const was = shown.texts.shift()
      shown.line++
      if (shown.texts.length === 0) this.shown = undefined
      if (text === was) return ''
    }
    // Changed by a redraw: from here on every line is returned as it comes.
    this.shown = undefined
    const open = this.taken
    this.taken = undefined
    if (open !== undefined && open.line === n && text.startsWith(open.text)) return `${text.slice(open.text.length)}\n`
    return `${open !== undefined ? '\n' : ''}${text}\n`
  }

  /** What takes the open line `n` as far as `partial` goes, continuing it when the takes end inside it. */
  private openText(n: number, partial: string, revision: number): string {
    const open = this.taken
    this.taken = partial === '' ? undefined : { line: n, text: partial, revision }
    if (open !== undefined && open.line === n && continues(open, partial, revision)) return partial.slice(open.text.length)
    return `${open !== undefined ? '\n' : ''}${partial}`
  }

  /** The open line `n` is one the takes returned before a cursor moved up into it: nothing until it is final, then only a change. */
  private heldText(n: number, partial: string): string {
    if (this.frozenPartial === undefined) return ''
    const shown = this.shown!
    this.shown = undefined
    if (shown.line === n && this.taken?.line !== n && partial === shown.texts[0]) return ''
    return this.openText(n, partial, -1)
  }

  /** The send's open lines: its part of the current line, then the lines below it, '' and blank ones at the bottom left out. */
  private openLines(): string[] {
    const below = this.frozenBelow ?? this.source.linesBelow()
    const partial = this.partial()
    return below.length === 0 && partial === '' ? [] : [partial, ...below]
  }

  /** The send's part of the current line. */
  private partial(): string {
    if (this.frozenPartial !== undefined) return this.frozenPartial
    const text = this.source.partial
    if (this.fromLineStart || this.source.lineCount + 1 !== this.start.line) return text
    return text.slice(Math.min(this.start.column, this.startColumn, text.length))
  }

  /** Line `lineNumber` is open again: forgotten until committed again; what takes returned goes to `shown`. */
  private rewind(lineNumber: number): void {
    const store = this.store
    let text: string | undefined
    if (store.length > 0 && this.firstLine + store.length - 1 === lineNumber) {
      text = store.text(store.length - 1)
      store.dropNewest()
    } else if (store.length === 0 && lineNumber < this.firstLine) this.firstLine = lineNumber
    const taken = this.taken
    if (taken !== undefined && taken.line === lineNumber + 1 && this.shown === undefined) this.shown = { line: taken.line, texts: [taken.text] }
    const returned = taken?.line === lineNumber ? taken.text : text !== undefined && lineNumber < this.takeNext ? text : undefined
    if (returned !== undefined && (this.shown === undefined || this.shown.line === lineNumber + 1)) {
      this.shown ??= { line: lineNumber + 1, texts: [] }
      this.shown.texts.unshift(returned)
      this.shown.line = lineNumber
    }
    if (this.takeNext > lineNumber) this.takeNext = lineNumber
  }

  private push(text: string, lineNumber: number): void {
    const line = lineNumber === this.start.line && !this.fromLineStart ? text.slice(Math.min(this.start.column, this.startColumn, text.length)) : text
    const store = this.store
    store.push(line, this.maxBytes)
    // Over the bound (sizes plus separators), the oldest line goes, or keeps its tail.
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
 * Whether `partial` continues the line a take returned: at the same revision it only grew, so
 * no comparison is needed (linear in a long line's length); otherwise the text decides.
 */
function continues(open: { text: string; revision: number }, partial: string, revision: number): boolean {
  if (open.revision === revision && revision >= 0) return partial.length >= open.text.length
  return partial.startsWith(open.text)
}
