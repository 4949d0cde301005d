/**
 * Byte bounds for text the model sees. Sizes are UTF-8 bytes (what the model API transports and
 * bills); cuts fall on code-point boundaries, so a surrogate pair (an emoji) is never split and
 * no U+FFFD replacement character is ever produced by a cut.
 */

/** The UTF-8 length of `text` in bytes (a lone surrogate counts as the 3 bytes of U+FFFD). */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8')
}

export interface BoundOptions {
  /** Keep the start (`head`, default) or the end (`tail`, for terminal output) of the text. */
  keep?: 'head' | 'tail'
}

export interface Bounded {
  /** An exact prefix (`head`) or suffix (`tail`) of the input, at most `maxBytes` UTF-8 bytes. */
  text: string
  truncated: boolean
  /** UTF-8 bytes of the input that `text` leaves out. */
  omittedBytes: number
}

/**
 * Cuts `text` to at most `maxBytes` UTF-8 bytes, keeping whole code points from the head or the
 * tail. Adds no notice; see `boundWithNotice` for the generic tool-result bound.
 * @throws RangeError when `maxBytes` is not a non-negative integer.
 */
export function boundUtf8(text: string, maxBytes: number, options: BoundOptions = {}): Bounded {
  if (!Number.isInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError(`maxBytes must be a non-negative integer of bytes, got ${maxBytes}`)
  }
  const total = utf8Bytes(text)
  if (total <= maxBytes) return { text, truncated: false, omittedBytes: 0 }
  let used = 0
  let kept: string
  if (options.keep === 'tail') {
    let start = text.length
    while (start > 0) {
      const low = text.charCodeAt(start - 1)
      const pair = isLowSurrogate(low) && start >= 2 && isHighSurrogate(text.charCodeAt(start - 2))
      const bytes = pair ? 4 : bmpBytes(low)
      if (used + bytes > maxBytes) break
      used += bytes
      start -= pair ? 2 : 1
    }
    kept = text.slice(start)
  } else {
    let end = 0
    while (end < text.length) {
      const high = text.charCodeAt(end)
      const pair = isHighSurrogate(high) && end + 1 < text.length && isLowSurrogate(text.charCodeAt(end + 1))
      const bytes = pair ? 4 : bmpBytes(high)
      if (used + bytes > maxBytes) break
      used += bytes
      end += pair ? 2 : 1
    }
    kept = text.slice(0, end)
  }
  return { text: kept, truncated: true, omittedBytes: total - used }
}

/**
 * The generic result bound: when `text` exceeds `maxBytes`, keeps its head and appends the line
 * `[output truncated: N bytes omitted]` (N in UTF-8 bytes of the input), the whole at most
 * `maxBytes` bytes. Text within the bound is returned unchanged.
 * @throws RangeError when `maxBytes` cannot hold the notice (`ToolsService` requires ≥ 64).
 */
export function boundWithNotice(text: string, maxBytes: number): Bounded {
  const total = utf8Bytes(text)
  if (total <= maxBytes) return { text, truncated: false, omittedBytes: 0 }
  // Size the notice for the largest possible count; the real count has no more digits.
  const budget = maxBytes - utf8Bytes(truncationNotice(total)) - 1
  if (budget < 0) throw new RangeError(`maxBytes ${maxBytes} is too small to hold the truncation notice`)
  const head = boundUtf8(text, budget, { keep: 'head' })
  const separator = head.text === '' || head.text.endsWith('\n') ? '' : '\n'
  return { text: head.text + separator + truncationNotice(head.omittedBytes), truncated: true, omittedBytes: head.omittedBytes }
}

/** The one-line notice appended by `boundWithNotice`. */
export function truncationNotice(omittedBytes: number): string {
  return `[output truncated: ${omittedBytes} bytes omitted]`
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff
}

/** UTF-8 bytes of one UTF-16 code unit that is not part of a surrogate pair (RFC 3629 §3). */
function bmpBytes(code: number): number {
  if (code < 0x80) return 1
  if (code < 0x800) return 2
  return 3
}
