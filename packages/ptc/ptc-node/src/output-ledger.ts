/**
 * The output budget of one run: log text plus the completion value's JSON, at most `maxBytes`
 * UTF-8 bytes. A log chunk that does not fit keeps the prefix that does, and the ledger is over.
 */
export class OutputLedger {
  private readonly parts: string[] = []
  private used = 0
  private over = false

  constructor(readonly maxBytes: number) {}

  /** Appends log text; returns false (keeping the prefix that fits) when the budget is exceeded. */
  append(text: string): boolean {
    if (this.over) return false
    const bytes = Buffer.byteLength(text, 'utf8')
    if (this.used + bytes <= this.maxBytes) {
      this.parts.push(text)
      this.used += bytes
      return true
    }
    this.parts.push(prefixWithin(text, this.maxBytes - this.used))
    this.used = this.maxBytes
    this.over = true
    return false
  }

  /** Whether a value of `valueBytes` JSON bytes still fits after the logs. */
  fits(valueBytes: number): boolean {
    return !this.over && this.used + valueBytes <= this.maxBytes
  }

  get logs(): string {
    return this.parts.join('')
  }
}

/** The longest prefix of `text` of at most `bytes` UTF-8 bytes, never splitting a code point. */
export function prefixWithin(text: string, bytes: number): string {
  if (bytes <= 0) return ''
  const encoded = Buffer.from(text, 'utf8')
  if (encoded.length <= bytes) return text
  let end = bytes
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a code-point start.
  while (end > 0 && (encoded[end]! & 0xc0) === 0x80) end--
  return encoded.subarray(0, end).toString('utf8')
}
