/**
 * Bounded unread output of one task. Producers append text; a read takes everything appended
 * since the previous read. When the unread text grows past the byte bound, the oldest bytes
 * are dropped — always on a code-point boundary, so a cut never produces U+FFFD — and the next
 * read reports `truncated`.
 */
import { utf8Suffix } from '@conch/session'

/** Unread output with a bound in UTF-8 bytes; the oldest bytes go first. */
export class OutputBuffer {
  private chunks: string[] = []
  private bytes = 0
  private dropped = false

  /** @param limitBytes bound on unread output, in UTF-8 bytes (a positive integer). */
  constructor(readonly limitBytes: number) {}

  /** Unread bytes currently held. */
  get size(): number {
    return this.bytes
  }

  append(text: string): void {
    if (!text) return
    this.chunks.push(text)
    this.bytes += Buffer.byteLength(text, 'utf8')
    if (this.bytes > this.limitBytes) this.dropOldest()
  }

  /** Returns and forgets the unread text, and whether any was dropped since the previous take. */
  take(): { text: string; truncated: boolean } {
    const result = { text: this.chunks.join(''), truncated: this.dropped }
    this.chunks = []
    this.bytes = 0
    this.dropped = false
    return result
  }

  private dropOldest(): void {
    this.dropped = true
    while (this.bytes > this.limitBytes) {
      const first = this.chunks[0]
      if (first === undefined) break
      const size = Buffer.byteLength(first, 'utf8')
      const excess = this.bytes - this.limitBytes
      if (size <= excess) {
        this.chunks.shift()
        this.bytes -= size
        continue
      }
      const kept = utf8Suffix(first, size - excess)
      this.chunks[0] = kept
      this.bytes -= size - Buffer.byteLength(kept, 'utf8')
    }
  }
}
