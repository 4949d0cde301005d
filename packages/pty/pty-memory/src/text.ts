/**
 * Bounded text for the memory backend: the retained scrollback (lines, newest-relative pages)
 * and the per-send output buffers. Sizes are UTF-8 bytes; cuts fall on code points.
 */
import type { ReadPage } from '@conch/pty'
import { utf8ByteLength, utf8Suffix } from '@conch/session'

/** The longest suffix of `text` within `maxBytes` UTF-8 bytes, cut on a code-point boundary. */
export function keepTail(text: string, maxBytes: number): { text: string; truncated: boolean } {
  const kept = utf8Suffix(text, maxBytes)
  return { text: kept, truncated: kept.length < text.length }
}

/**
 * Output kept for one send, newest bytes first: appending past `maxBytes` drops the oldest
 * output and remembers that it did.
 */
export class OutputBuffer {
  private chunks: { text: string; bytes: number }[] = []
  private total = 0
  private dropped = false

  constructor(private readonly maxBytes: number) {}

  append(text: string): void {
    if (text === '') return
    const bytes = utf8ByteLength(text)
    this.chunks.push({ text, bytes })
    this.total += bytes
    while (this.chunks.length > 1 && this.total - this.chunks[0]!.bytes >= this.maxBytes) {
      this.total -= this.chunks.shift()!.bytes
      this.dropped = true
    }
  }

  /** The kept text (at most `maxBytes`) and whether anything was lost. */
  text(): { text: string; truncated: boolean } {
    const joined = this.chunks.map((chunk) => chunk.text).join('')
    const cut = keepTail(joined, this.maxBytes)
    return { text: cut.text, truncated: this.dropped || cut.truncated }
  }

  /** Returns the kept text and empties the buffer. */
  take(): string {
    const { text } = this.text()
    this.chunks = []
    this.total = 0
    this.dropped = false
    return text
  }
}

/**
 * The session's retained transcript: what the terminal showed, as lines, bounded by a line
 * count. Lines are numbered from 1 = the first line ever produced; the unterminated last line
 * (usually the prompt) is not part of any page.
 */
export class Scrollback {
  private lines: string[] = []
  private partial = ''
  private produced = 0

  constructor(private readonly maxLines: number, private readonly maxReadBytes: number) {}

  write(text: string): void {
    const pieces = (this.partial + text).split('\n')
    this.partial = pieces.pop()!
    for (const line of pieces) {
      this.lines.push(line)
      this.produced++
    }
    // Trim in batches so a burst of lines costs amortised O(1) per line.
    if (this.lines.length > 2 * this.maxLines) this.lines = this.lines.slice(-this.maxLines)
  }

  /** A page `offset` lines back from the newest, `count` lines long, within `maxReadBytes`. */
  read(offset: number, count: number): ReadPage {
    const kept = Math.min(this.lines.length, this.maxLines)
    const first = this.produced - kept + 1
    const wantEnd = this.produced - offset
    const wantBegin = wantEnd - count + 1
    const lineEnd = clamp(wantEnd, first - 1, this.produced)
    let lineBegin = clamp(wantBegin, first, lineEnd + 1)
    let truncated = wantEnd >= 1 && count > 0 && Math.max(wantBegin, 1) < first

    const taken: string[] = []
    let bytes = 0
    for (let line = lineEnd; line >= lineBegin; line--) {
      const text = this.lines[this.lines.length - (this.produced - line) - 1]!
      const cost = utf8ByteLength(text) + (taken.length > 0 ? 1 : 0)
      if (bytes + cost > this.maxReadBytes) {
        truncated = true
        if (taken.length === 0) {
          taken.push(keepTail(text, this.maxReadBytes).text)
          lineBegin = line
        } else lineBegin = line + 1
        break
      }
      taken.push(text)
      bytes += cost
    }
    return {
      text: taken.reverse().join('\n'),
      totalLines: this.produced,
      firstRetainedLine: first,
      lineBegin,
      lineEnd,
      truncated,
    }
  }
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(Math.max(value, low), high)
}
