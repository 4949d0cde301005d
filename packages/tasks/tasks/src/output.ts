/**
 * Bounded unread output of one task. Producers append text; a read takes everything appended
 * since the previous read. When the unread text grows past the byte bound, the oldest bytes
 * are dropped — always on a code-point boundary, so a cut never produces U+FFFD — and the next
 * read reports `truncated`.
 */

/**
 * The longest suffix of `text` whose UTF-8 encoding is at most `maxBytes` bytes, cut on a
 * code-point boundary (never inside a multi-byte character or a surrogate pair). A lone
 * surrogate counts as the 3 bytes of the U+FFFD that `TextEncoder` would write for it.
 */
export function tailUtf8(text: string, maxBytes: number): string {
  let budget = maxBytes
  let start = text.length
  while (start > 0) {
    const unit = text.charCodeAt(start - 1)
    let from = start - 1
    let size: number
    if (isLowSurrogate(unit) && start >= 2 && isHighSurrogate(text.charCodeAt(start - 2))) {
      from = start - 2
      size = 4
    } else {
      // A lone surrogate encodes as U+FFFD: 3 bytes, like the rest of the BMP above U+07FF.
      size = unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3
    }
    if (size > budget) break
    budget -= size
    start = from
  }
  return text.slice(start)
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff
}

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
      const kept = tailUtf8(first, size - excess)
      this.chunks[0] = kept
      this.bytes -= size - Buffer.byteLength(kept, 'utf8')
    }
  }
}
