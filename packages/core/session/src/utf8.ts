/**
 * UTF-8 sizes and cuts of strings, the one place every bound of text is measured with. Sizes are
 * what `Buffer.byteLength(text, 'utf8')` counts (RFC 3629; a lone surrogate is the 3 bytes of the
 * U+FFFD an encoder writes for it); cuts fall on code-point boundaries, never between the halves
 * of a surrogate pair, so a cut never produces U+FFFD.
 */

export function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff
}

export function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff
}

/**
 * UTF-8 length of `text`, in bytes. Short strings are counted here: a call into Node costs more
 * than counting a short line, and every committed terminal line is measured.
 */
export function utf8ByteLength(text: string): number {
  const n = text.length
  if (n > 32) return Buffer.byteLength(text, 'utf8')
  let bytes = n
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) continue
    if (c < 0x800) bytes += 1
    else if (isHighSurrogate(c) && i + 1 < n && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 2
      i++
    } else bytes += 2
  }
  return bytes
}

const encoder = new TextEncoder()

/** The longest prefix of `text` of at most `maxBytes` UTF-8 bytes. */
export function utf8Prefix(text: string, maxBytes: number): string {
  return text.slice(0, encoder.encodeInto(text, new Uint8Array(Math.max(0, maxBytes))).read)
}

/** The longest suffix of `text` of at most `maxBytes` UTF-8 bytes. */
export function utf8Suffix(text: string, maxBytes: number): string {
  if (text.length * 3 <= maxBytes || utf8ByteLength(text) <= maxBytes) return text
  let bytes = 0
  let i = text.length
  while (i > 0) {
    const c = text.charCodeAt(i - 1)
    const step = isLowSurrogate(c) && i >= 2 && isHighSurrogate(text.charCodeAt(i - 2)) ? 2 : 1
    const size = step === 2 ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3
    if (bytes + size > maxBytes) break
    bytes += size
    i -= step
  }
  return text.slice(i)
}
