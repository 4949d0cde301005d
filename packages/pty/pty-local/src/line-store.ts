/**
 * Lines kept oldest-first with their UTF-8 sizes and whether each was cut, for the scrollback
 * and send buffers: a power-of-two ring that doubles when full, so push and drop are O(1).
 */
import { utf8ByteLength, utf8Suffix } from '@conch/session'

export class LineStore {
  private texts: string[] = new Array<string>(64).fill('')
  private sizes = new Float64Array(64)
  private cuts = new Uint8Array(64)
  private mask = 63
  private start = 0
  private count = 0
  /** UTF-8 bytes of the kept lines' text (terminators not counted). */
  bytes = 0

  /** Lines kept. */
  get length(): number {
    return this.count
  }

  /** Keeps one line; a longer one than `maxLineBytes` keeps its tail and is marked cut. */
  push(text: string, maxLineBytes: number): void {
    let line = text
    let size = utf8ByteLength(line)
    let cut = 0
    if (size > maxLineBytes) {
      line = utf8Suffix(line, maxLineBytes)
      size = utf8ByteLength(line)
      cut = 1
    }
    if (this.count > this.mask) this.grow()
    const index = (this.start + this.count) & this.mask
    this.texts[index] = line
    this.sizes[index] = size
    this.cuts[index] = cut
    this.count++
    this.bytes += size
  }

  /** Line `index` (0 = the oldest kept). */
  text(index: number): string {
    return this.texts[(this.start + index) & this.mask] ?? ''
  }

  size(index: number): number {
    return this.sizes[(this.start + index) & this.mask] ?? 0
  }

  isCut(index: number): boolean {
    return this.cuts[(this.start + index) & this.mask] === 1
  }

  /** Whether any kept line was cut. */
  anyCut(): boolean {
    for (let index = 0; index < this.count; index++) if (this.isCut(index)) return true
    return false
  }

  /** The kept lines, oldest first. */
  all(): string[] {
    return Array.from({ length: this.count }, (_, index) => this.text(index))
  }

  /** Drops the oldest line. */
  dropOldest(): void {
    if (this.count === 0) return
    this.bytes -= this.sizes[this.start] ?? 0
    this.texts[this.start] = ''
    this.start = (this.start + 1) & this.mask
    this.count--
  }

  /** Drops the newest line. */
  dropNewest(): void {
    if (this.count === 0) return
    const index = (this.start + this.count - 1) & this.mask
    this.bytes -= this.sizes[index] ?? 0
    this.texts[index] = ''
    this.count--
  }

  /** Cuts the oldest line to its last `maxBytes` bytes and marks it cut. */
  cutOldest(maxBytes: number): void {
    if (this.count === 0) return
    const tail = utf8Suffix(this.texts[this.start] ?? '', maxBytes)
    const size = utf8ByteLength(tail)
    this.bytes -= (this.sizes[this.start] ?? 0) - size
    this.texts[this.start] = tail
    this.sizes[this.start] = size
    this.cuts[this.start] = 1
  }

  private grow(): void {
    const capacity = (this.mask + 1) * 2
    const texts = new Array<string>(capacity).fill('')
    const sizes = new Float64Array(capacity)
    const cuts = new Uint8Array(capacity)
    for (let index = 0; index < this.count; index++) {
      const from = (this.start + index) & this.mask
      texts[index] = this.texts[from] ?? ''
      sizes[index] = this.sizes[from] ?? 0
      cuts[index] = this.cuts[from] ?? 0
    }
    this.texts = texts
    this.sizes = sizes
    this.cuts = cuts
    this.mask = capacity - 1
    this.start = 0
  }
}
