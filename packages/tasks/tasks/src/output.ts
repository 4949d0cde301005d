/**
 * Bounded unread output of one task. Producers append text; a read takes everything appended
 * since the previous read. When the unread text grows past the byte bound, the oldest bytes
 * are dropped — always on a code-point boundary, so a cut never produces U+FFFD — and the next
 * read reports how much was dropped.
 */
import { utf8Suffix } from '@conch/session'

/**
 * Output dropped unread: UTF-8 bytes, and lines (each line break dropped, plus the line the
 * cut ends in when it ends mid-line).
 */
export interface DroppedOutput {
  bytes: number
  lines: number
}

/** Unread output with a bound in UTF-8 bytes; the oldest bytes go first. */
export class OutputBuffer {
  private chunks: string[] = []
  private bytes = 0
  private dropped: DroppedOutput | undefined
  /** Whether the last dropped byte ended a line (so the kept text starts one). */
  private droppedAtLineStart = true
  /** Whether the text the reader last saw (a take, a forgotten tail) ended mid-line. */
  private openLine = false
  /** Text appended since the buffer began, and where the unread text starts in it (UTF-16 units). */
  private written = 0
  private start = 0

  /** @param limitBytes bound on unread output, in UTF-8 bytes (a positive integer). */
  constructor(readonly limitBytes: number) {}

  /** Unread bytes currently held. */
  get size(): number {
    return this.bytes
  }

  /** Where the text appended so far ends: a position `forget` takes. */
  get end(): number {
    return this.written
  }

  append(text: string): void {
    if (!text) return
    this.written += text.length
    this.chunks.push(text)
    this.bytes += Buffer.byteLength(text, 'utf8')
    if (this.bytes > this.limitBytes) this.dropOldest()
  }

  /**
   * Returns and forgets the unread text, and what was dropped since the previous take (undefined:
   * nothing). A line break that ends the line the reader last saw open is not shown again as a
   * blank line first.
   */
  take(): { text: string; dropped: DroppedOutput | undefined } {
    const dropped = this.dropped && { bytes: this.dropped.bytes, lines: this.dropped.lines + (this.droppedAtLineStart ? 0 : 1) }
    const unread = this.chunks.join('')
    const text = this.openLine && dropped === undefined ? unread.replace(/^\r?\n/, '') : unread
    if (unread !== '') this.openLine = !unread.endsWith('\n')
    const result = { text, dropped }
    this.chunks = []
    this.bytes = 0
    this.dropped = undefined
    this.droppedAtLineStart = true
    this.start = this.written
    return result
  }

  /**
   * Forgets the unread text before `position` (an `end`), which the reader saw elsewhere: its last
   * `seenLines` lines (a notification's tail); lines before those count as dropped.
   */
  forget(position: number, seenLines: number): void {
    const count = position - this.start
    if (count <= 0) return
    const text = this.chunks.join('')
    const gone = text.slice(0, count)
    this.chunks = [text.slice(count)]
    this.bytes -= Buffer.byteLength(gone, 'utf8')
    this.start = position
    this.openLine = !gone.endsWith('\n')
    const lines = gone.replace(/\n+$/, '').split('\n')
    const unseen = lines.slice(0, Math.max(0, lines.length - seenLines))
    if (unseen.length > 0) this.drop(`${unseen.join('\n')}\n`)
  }

  private dropOldest(): void {
    while (this.bytes > this.limitBytes) {
      const first = this.chunks[0]
      if (first === undefined) break
      const size = Buffer.byteLength(first, 'utf8')
      const excess = this.bytes - this.limitBytes
      const kept = size <= excess ? '' : utf8Suffix(first, size - excess)
      this.drop(first.slice(0, first.length - kept.length))
      if (kept === '') this.chunks.shift()
      else this.chunks[0] = kept
      this.start += first.length - kept.length
      this.bytes -= size - Buffer.byteLength(kept, 'utf8')
    }
  }

  /** Counts `text`, cut from the front of the unread output, as dropped. */
  private drop(text: string): void {
    if (text === '') return
    this.dropped ??= { bytes: 0, lines: 0 }
    this.dropped.bytes += Buffer.byteLength(text, 'utf8')
    for (let index = text.indexOf('\n'); index !== -1; index = text.indexOf('\n', index + 1)) this.dropped.lines++
    this.droppedAtLineStart = text.endsWith('\n')
  }
}
