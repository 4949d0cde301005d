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
      const { text, dropped } = buffer.take()
      expect(dropped).toEqual({ bytes: bytes(sample) - bytes(text), lines: 1 })
      // 'z😀' is 5 bytes; the combining accent before it (2 bytes) fits too, '中' (3) does not.
      expect(text).toBe('\u0301z😀')
    }
  })

  it('is not truncated while the unread output fits', () => {
    const buffer = new OutputBuffer(4)
    buffer.append('ab')
    buffer.append('cd')
    expect(buffer.take()).toEqual({ text: 'abcd', dropped: undefined })
    expect(buffer.take()).toEqual({ text: '', dropped: undefined })
  })

  it('counts the bytes and lines it dropped, a line cut in two once, until the next take', () => {
    const buffer = new OutputBuffer(4)
    buffer.append('one\ntwo\n')
    buffer.append('thre')
    buffer.append('e\nfour')
    // Dropped 'one\ntwo\nthree\n': three whole lines.
    expect(buffer.take()).toEqual({ text: 'four', dropped: { bytes: 14, lines: 3 } })
    buffer.append('ab\ncdefg')
    // Dropped 'ab\nc': a whole line and the start of the next, which counts once.
    expect(buffer.take()).toEqual({ text: 'defg', dropped: { bytes: 4, lines: 2 } })
    buffer.append('ab\ncdef')
    // Dropped 'ab\n': it ended a line, so the kept text starts one.
    expect(buffer.take()).toEqual({ text: 'cdef', dropped: { bytes: 3, lines: 1 } })
    buffer.append('x'.repeat(1000))
    expect(buffer.take()).toEqual({ text: 'xxxx', dropped: { bytes: 996, lines: 1 } })
  })

  it('forgets what was read elsewhere up to a position, counting the lines before those seen as dropped', () => {
    const buffer = new OutputBuffer(1024)
    buffer.append('old-1\nold-2\nseen-1\n')
    buffer.append('seen-2\n')
    const end = buffer.end
    buffer.append('new-1\n')
    buffer.forget(end, 2)
    expect(buffer.take()).toEqual({ text: 'new-1\n', dropped: { bytes: 12, lines: 2 } })
    // A position already taken forgets nothing.
    buffer.append('after\n')
    buffer.forget(end, 2)
    expect(buffer.take()).toEqual({ text: 'after\n', dropped: undefined })
  })

  it('forgets from where the oldest unread bytes were dropped, not from where the text began', () => {
    const buffer = new OutputBuffer(8)
    buffer.append('aaaa\nbbbb\n')
    const end = buffer.end
    buffer.append('cc\n')
    buffer.forget(end, 1)
    expect(buffer.take()).toEqual({ text: 'cc\n', dropped: { bytes: 5, lines: 1 } })
  })

  it('shows no blank line for the break that ends a line the reader saw open', () => {
    const buffer = new OutputBuffer(1024)
    buffer.append('Serving HTTP on 127.0.0.1')
    expect(buffer.take().text).toBe('Serving HTTP on 127.0.0.1')
    buffer.append('\nGET / 200\n')
    expect(buffer.take().text).toBe('GET / 200\n')
    // A line that ended stays ended: the next break is a blank line of its own.
    buffer.append('\nafter a blank line\n')
    expect(buffer.take().text).toBe('\nafter a blank line\n')
    // A tail seen in a notification that ended mid-line, then the rest of that line.
    buffer.append('Listening on 8080')
    const end = buffer.end
    buffer.append('\r\nready\n')
    buffer.forget(end, 1)
    expect(buffer.take()).toEqual({ text: 'ready\n', dropped: undefined })
  })
})
