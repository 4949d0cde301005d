import { describe, expect, it } from 'vitest'
import { utf8Suffix } from '@conch/session'
import { OutputBuffer } from '../src/output.ts'

const sample = 'aé😀中\u0301z😀'
const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

describe('utf8Suffix', () => {
  it('returns the longest suffix that fits, for every byte bound, without splitting a character', () => {
    const codePoints = [...sample]
    for (let max = 0; max <= bytes(sample) + 1; max++) {
      const tail = utf8Suffix(sample, max)
      expect(sample.endsWith(tail)).toBe(true)
      expect(bytes(tail)).toBeLessThanOrEqual(max)
      expect(tail).not.toContain('\uFFFD')
      // Maximal: one more code point would not fit.
      const kept = [...tail].length
      if (kept < codePoints.length) {
        expect(bytes(codePoints.slice(codePoints.length - kept - 1).join(''))).toBeGreaterThan(max)
      }
    }
  })
})

describe('OutputBuffer', () => {
  it('keeps the newest bytes across chunk boundaries for every split point of the input', () => {
    const codePoints = [...sample]
    for (let split = 0; split <= codePoints.length; split++) {
      const buffer = new OutputBuffer(7)
      buffer.append(codePoints.slice(0, split).join(''))
      buffer.append(codePoints.slice(split).join(''))
      const { text, truncated } = buffer.take()
      expect(truncated).toBe(true)
      // 'z😀' is 5 bytes; the combining accent before it (2 bytes) fits too, '中' (3) does not.
      expect(text).toBe('\u0301z😀')
    }
  })

  it('is not truncated while the unread output fits', () => {
    const buffer = new OutputBuffer(4)
    buffer.append('ab')
    buffer.append('cd')
    expect(buffer.take()).toEqual({ text: 'abcd', truncated: false })
    expect(buffer.take()).toEqual({ text: '', truncated: false })
  })
})
