import { describe, expect, it } from 'vitest'
import { boundUtf8, boundWithNotice, budgetOutput, truncationNotice, utf8Bytes } from '../src/index.ts'

// 1-, 2-, 3- and 4-byte code points (RFC 3629), a ZWJ sequence and CJK, so every cut point near
// a limit lands inside some multi-byte sequence.
const MIXED = 'a é € 中文 🐚 👩‍💻 z'.repeat(3)

function hasBrokenSurrogate(text: string): boolean {
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)
}

/** The next code point after a head cut (or before a tail cut) must not have fit. */
function nextCodePointBytes(text: string, kept: string, keep: 'head' | 'tail'): number {
  if (keep === 'head') {
    const rest = text.slice(kept.length)
    return rest === '' ? Infinity : utf8Bytes(String.fromCodePoint(rest.codePointAt(0)!))
  }
  const rest = text.slice(0, text.length - kept.length)
  if (rest === '') return Infinity
  const last = [...rest].at(-1)!
  return utf8Bytes(last)
}

describe('utf8Bytes', () => {
  it('counts UTF-8 bytes, not UTF-16 code units', () => {
    expect(utf8Bytes('abc')).toBe(3)
    expect(utf8Bytes('é')).toBe(2)
    expect(utf8Bytes('€')).toBe(3)
    expect(utf8Bytes('🐚')).toBe(4)
    expect('🐚'.length).toBe(2)
    expect(utf8Bytes('\ud800')).toBe(3)
  })
})

describe('boundUtf8', () => {
  for (const keep of ['head', 'tail'] as const) {
    it(`keeps the ${keep} on a code-point boundary at every limit from 0 to the full size`, () => {
      const total = utf8Bytes(MIXED)
      for (let max = 0; max <= total + 1; max++) {
        const bounded = boundUtf8(MIXED, max, { keep })
        const kept = bounded.text
        expect(utf8Bytes(kept)).toBeLessThanOrEqual(max)
        expect(keep === 'head' ? MIXED.startsWith(kept) : MIXED.endsWith(kept)).toBe(true)
        expect(hasBrokenSurrogate(kept)).toBe(false)
        expect(kept).not.toContain('\ufffd')
        expect(bounded.omittedBytes).toBe(total - utf8Bytes(kept))
        expect(bounded.truncated).toBe(max < total)
        // Maximal: one more code point would not have fit.
        if (bounded.truncated) expect(utf8Bytes(kept) + nextCodePointBytes(MIXED, kept, keep)).toBeGreaterThan(max)
      }
    })
  }

  it('never splits an emoji: three bytes of room for a four-byte code point keep nothing', () => {
    expect(boundUtf8('🐚🐚', 3)).toEqual({ text: '', truncated: true, omittedBytes: 8 })
    expect(boundUtf8('🐚🐚', 7, { keep: 'tail' })).toEqual({ text: '🐚', truncated: true, omittedBytes: 4 })
    expect(boundUtf8('x🐚', 4)).toEqual({ text: 'x', truncated: true, omittedBytes: 4 })
  })

  it('returns text within the limit unchanged', () => {
    expect(boundUtf8('héllo', 6)).toEqual({ text: 'héllo', truncated: false, omittedBytes: 0 })
  })

  it('keeps a lone surrogate whole and counts it as three bytes', () => {
    expect(boundUtf8('a\ud800b', 4)).toEqual({ text: 'a\ud800', truncated: true, omittedBytes: 1 })
  })

  it('rejects a limit that is not a non-negative integer', () => {
    expect(() => boundUtf8('x', -1)).toThrow(RangeError)
    expect(() => boundUtf8('x', 1.5)).toThrow(/non-negative integer of bytes/)
  })
})

describe('boundWithNotice', () => {
  it('keeps the head and appends a one-line notice, the whole within the limit, at every limit near the size', () => {
    const text = MIXED.repeat(4)
    const total = utf8Bytes(text)
    for (let max = 64; max <= total + 2; max++) {
      const bounded = boundWithNotice(text, max)
      expect(utf8Bytes(bounded.text)).toBeLessThanOrEqual(max)
      if (max >= total) {
        expect(bounded).toEqual({ text, truncated: false, omittedBytes: 0 })
        continue
      }
      const notice = truncationNotice(bounded.omittedBytes)
      expect(bounded.text.endsWith('\n' + notice)).toBe(true)
      const head = bounded.text.slice(0, -(notice.length + 1))
      expect(text.startsWith(head)).toBe(true)
      expect(bounded.omittedBytes).toBe(total - utf8Bytes(head))
      expect(hasBrokenSurrogate(bounded.text)).toBe(false)
      expect(bounded.text).not.toContain('\ufffd')
    }
  })

  it('does not add a blank line when the kept head already ends a line', () => {
    const text = 'x'.repeat(20) + '\n' + 'y'.repeat(100)
    const notice = truncationNotice(100)
    const bounded = boundWithNotice(text, 21 + utf8Bytes(notice) + 1)
    expect(bounded.text).toBe('x'.repeat(20) + '\n' + notice)
  })

  it('names the omitted byte count in the notice', () => {
    const bounded = boundWithNotice('🐚'.repeat(100), 64)
    expect(bounded.text).toMatch(/\n\[output truncated: \d+ bytes omitted\]$/)
    expect(bounded.text.split('\n')[0]).toMatch(/^(🐚)+$/)
    expect(bounded.omittedBytes % 4).toBe(0)
  })

  it('refuses a limit too small to hold the notice', () => {
    expect(() => boundWithNotice('x'.repeat(100), 20)).toThrow(/too small to hold the truncation notice/)
  })
})

describe('budgetOutput', () => {
  const lines = Array.from({ length: 1000 }, (_, index) => `${index + 1} ${'é😀'.repeat(index % 4)}`)
  const text = lines.join('\n')

  it('keeps whole head and tail lines around a marker that counts exactly what it left out, at every budget', () => {
    for (let max = 200; max <= 3000; max += 7) {
      const budgeted = budgetOutput(text, max, { page: ({ lines: count, tailLines }) => `read {offset: ${tailLines}, count: ${count}}` })
      expect(utf8Bytes(budgeted.text)).toBeLessThanOrEqual(max)
      expect(hasBrokenSurrogate(budgeted.text)).toBe(false)
      const shown = budgeted.text.split('\n')
      const at = shown.findIndex((line) => line.startsWith('[… '))
      const head = shown.slice(0, at)
      const tail = shown.slice(at + 1)
      expect(head).toEqual(lines.slice(0, head.length))
      expect(tail).toEqual(lines.slice(lines.length - tail.length))
      const dropped = lines.slice(head.length, lines.length - tail.length)
      expect(budgeted.omittedLines).toBe(dropped.length)
      expect(budgeted.omittedBytes).toBe(utf8Bytes(dropped.join('\n')) + 1)
      expect(shown[at]).toBe(`[… ${budgeted.omittedBytes.toLocaleString('en-US')} bytes (${dropped.length.toLocaleString('en-US')} lines) omitted; read {offset: ${tail.length}, count: ${dropped.length}}]`)
    }
  })

  it('gives a failing command more tail with a larger tailShare', () => {
    const tailOf = (tailShare: number) => budgetOutput(text, 2000, { tailShare }).text.split('\n').length - budgetOutput(text, 2000, { tailShare }).text.split('\n').findIndex((line) => line.startsWith('[… '))
    expect(tailOf(0.8)).toBeGreaterThan(tailOf(0.6))
  })

  it('returns text within the budget unchanged, and summarises binary runs', () => {
    expect(budgetOutput('ok', 10)).toEqual({ text: 'ok', truncated: false, omittedBytes: 0, omittedLines: 0 })
    expect(budgetOutput('a\n\u0000\u0000\ufffd\ufffdxy\n\ufffd\ufffd\ufffd\ufffd\nb', 1000).text).toBe('a\n[binary: 11 bytes, 2 NUL, 6 invalid UTF-8]\nb')
  })
})
