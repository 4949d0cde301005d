/**
 * Lines kept oldest-first with their UTF-8 sizes and whether each was cut, with O(1) removal
 * from the oldest side: the storage shared by the scrollback and each send's buffer, which
 * differ only in how they bound it.
 */
import { keepUtf8Tail, utf8ByteLength } from './output.ts'

export class LineStore {
  private lines: string[] = []
  private sizes: number[] = []
  private cuts: boolean[] = []
  private head = 0
  /** UTF-8 bytes of the kept lines' text (terminators not counted). */
  bytes = 0

  /** Lines kept. */
  get length(): number {
    return this.lines.length - this.head
  }

  /**
   * Keeps one line; a line longer than `maxLineBytes` keeps its last `maxLineBytes` bytes (cut on
   * a code point) and is marked cut.
   */
  push(text: string, maxLineBytes: number): void {
    let line = text
    let size = utf8ByteLength(line)
    let cut = false
    if (size > maxLineBytes) {
      line = keepUtf8Tail(line, maxLineBytes)
      size = utf8ByteLength(line)
      cut = true
    }
    this.lines.push(line)
    this.sizes.push(size)
    this.cuts.push(cut)
    this.bytes += size
  }

  /** Line `index` (0 = the oldest kept). */
  text(index: number): string {
    return this.lines[this.head + index] ?? ''
  }

  size(index: number): number {
    return this.sizes[this.head + index] ?? 0
  }

  isCut(index: number): boolean {
    return this.cuts[this.head + index] === true
  }

  /** Whether any kept line was cut. */
  anyCut(): boolean {
    for (let index = this.head; index < this.cuts.length; index++) if (this.cuts[index]) return true
    return false
  }

  /** The kept lines, oldest first. */
  all(): string[] {
    return this.lines.slice(this.head)
  }

  /** Drops the oldest line. */
  dropOldest(): void {
    if (this.length === 0) return
    this.bytes -= this.sizes[this.head] ?? 0
    this.lines[this.head] = ''
    this.head++
    if (this.head > 1024 && this.head * 2 > this.lines.length) {
      this.lines = this.lines.slice(this.head)
      this.sizes = this.sizes.slice(this.head)
      this.cuts = this.cuts.slice(this.head)
      this.head = 0
    }
  }

  /** Cuts the oldest line to its last `maxBytes` bytes and marks it cut. */
  cutOldest(maxBytes: number): void {
    if (this.length === 0) return
    const tail = keepUtf8Tail(this.lines[this.head] ?? '', maxBytes)
    const size = utf8ByteLength(tail)
    this.bytes -= (this.sizes[this.head] ?? 0) - size
    this.lines[this.head] = tail
    this.sizes[this.head] = size
    this.cuts[this.head] = true
  }
}
