import { PtyError } from '@conch/pty'
import { describe, expect, it } from 'vitest'
import { OutputParser } from '../src/output.ts'
import { Scrollback } from '../src/scrollback.ts'

function filled(count: number, options = { maxLines: 100, maxBytes: 10000 }): Scrollback {
  const scrollback = new Scrollback(options)
  for (let n = 1; n <= count; n++) scrollback.push(`line ${n}`)
  return scrollback
}

const BIG = 1_000_000

describe('retention', () => {
  it('numbers lines from 1 and returns the newest page whole when it fits', () => {
    const page = filled(3).read({ offset: 0, count: 500 }, BIG)
    expect(page).toEqual({ text: 'line 1\nline 2\nline 3', totalLines: 3, firstRetainedLine: 1, lineBegin: 1, lineEnd: 3, truncated: false })
  })

  it('drops the oldest lines past maxLines and keeps counting line numbers', () => {
    const scrollback = filled(12, { maxLines: 5, maxBytes: 10000 })
    expect(scrollback.firstRetainedLine).toBe(8)
    expect(scrollback.read({ offset: 0, count: 5 }, BIG)).toMatchObject({ text: 'line 8\nline 9\nline 10\nline 11\nline 12', totalLines: 12, lineBegin: 8, lineEnd: 12, truncated: false })
  })

  it('drops the oldest lines past maxBytes, counting UTF-8 bytes of the text', () => {
    const scrollback = new Scrollback({ maxLines: 100, maxBytes: 10 })
    scrollback.push('ééé') // 6 bytes
    scrollback.push('abcd') // 4 bytes: 10 in all, still fits
    expect(scrollback.firstRetainedLine).toBe(1)
    scrollback.push('x') // 11 bytes: the first line goes
    expect(scrollback.firstRetainedLine).toBe(2)
    expect(scrollback.retainedBytes).toBe(5)
  })

  it('cuts a single line longer than maxBytes to its tail on a code point and marks pages that include it', () => {
    const scrollback = new Scrollback({ maxLines: 100, maxBytes: 9 })
    scrollback.push('ab😀😀c') // 11 bytes
    expect(scrollback.read({ offset: 0, count: 1 }, BIG)).toMatchObject({ text: '😀😀c', truncated: true, lineBegin: 1, lineEnd: 1 })
    scrollback.push('d')
    expect(scrollback.read({ offset: 0, count: 1 }, BIG)).toMatchObject({ text: 'd', truncated: false })
  })

  it('keeps working after many lines have been dropped and storage compacted', () => {
    const scrollback = filled(5000, { maxLines: 10, maxBytes: 10000 })
    expect(scrollback.read({ offset: 0, count: 2 }, BIG)).toMatchObject({ text: 'line 4999\nline 5000', firstRetainedLine: 4991, totalLines: 5000 })
  })

  it('rejects bounds that are not positive integers, naming the option', () => {
    expect(() => new Scrollback({ maxLines: 0, maxBytes: 10 })).toThrow('maxLines')
    expect(() => new Scrollback({ maxLines: 1, maxBytes: 2.5 })).toThrow('maxBytes')
  })
})

describe('paging', () => {
  it('pages back from the newest line by offset and count', () => {
    expect(filled(10).read({ offset: 2, count: 3 }, BIG)).toMatchObject({ text: 'line 6\nline 7\nline 8', lineBegin: 6, lineEnd: 8, truncated: false })
  })

  it('clamps a page at line 1 without calling it truncated when nothing was dropped', () => {
    expect(filled(3).read({ offset: 1, count: 10 }, BIG)).toMatchObject({ text: 'line 1\nline 2', lineBegin: 1, lineEnd: 2, truncated: false })
  })

  it('says truncated when the page reaches for lines that were dropped, and returns the retained part', () => {
    const scrollback = filled(10, { maxLines: 4, maxBytes: 10000 })
    expect(scrollback.read({ offset: 2, count: 4 }, BIG)).toMatchObject({ text: 'line 7\nline 8', lineBegin: 7, lineEnd: 8, truncated: true })
  })

  it('returns an empty truncated page when every line it asks for was dropped', () => {
    const scrollback = filled(10, { maxLines: 4, maxBytes: 10000 })
    expect(scrollback.read({ offset: 6, count: 2 }, BIG)).toEqual({ text: '', totalLines: 10, firstRetainedLine: 7, lineBegin: 5, lineEnd: 4, truncated: true })
  })

  it('returns an empty untruncated page past the oldest line or for count 0', () => {
    expect(filled(3).read({ offset: 3, count: 5 }, BIG)).toMatchObject({ text: '', lineBegin: 1, lineEnd: 0, truncated: false })
    expect(filled(3).read({ offset: 0, count: 0 }, BIG)).toMatchObject({ text: '', lineBegin: 4, lineEnd: 3, truncated: false })
    expect(new Scrollback({ maxLines: 1, maxBytes: 1 }).read({ offset: 0, count: 5 }, BIG)).toEqual({ text: '', totalLines: 0, firstRetainedLine: 1, lineBegin: 1, lineEnd: 0, truncated: false })
  })

  it('fills a page of exactly maxReadBytes without calling it truncated', () => {
    // "line 2\nline 3" is 13 bytes.
    expect(filled(3).read({ offset: 0, count: 2 }, 13)).toMatchObject({ text: 'line 2\nline 3', lineBegin: 2, truncated: false })
  })

  it('keeps the newest lines and the tail of the oldest one that only partly fits maxReadBytes', () => {
    expect(filled(3).read({ offset: 0, count: 3 }, 12)).toMatchObject({ text: 'ine 2\nline 3', lineBegin: 2, lineEnd: 3, truncated: true })
  })

  it('leaves out an older line entirely when only its separator would fit', () => {
    expect(filled(3).read({ offset: 0, count: 3 }, 7)).toMatchObject({ text: 'line 3', lineBegin: 3, lineEnd: 3, truncated: true })
  })

  it('cuts a single line longer than maxReadBytes to its tail without splitting a code point', () => {
    const scrollback = new Scrollback({ maxLines: 10, maxBytes: 100 })
    scrollback.push('a😀b😀')
    expect(scrollback.read({ offset: 0, count: 1 }, 6)).toMatchObject({ text: 'b😀', truncated: true, lineBegin: 1 })
    expect(scrollback.read({ offset: 0, count: 1 }, 4)).toMatchObject({ text: '😀', truncated: true, lineBegin: 1 })
    expect(scrollback.read({ offset: 0, count: 1 }, 3)).toMatchObject({ text: '', truncated: true, lineBegin: 1, lineEnd: 1 })
  })

  it('rejects a negative or fractional offset or count with INVALID_INPUT', () => {
    const scrollback = filled(3)
    for (const range of [{ offset: -1, count: 1 }, { offset: 0, count: 1.5 }]) {
      expect(() => scrollback.read(range, BIG)).toThrow(PtyError)
      try {
        scrollback.read(range, BIG)
      } catch (error) {
        expect((error as PtyError).code).toBe('INVALID_INPUT')
      }
    }
    expect(() => scrollback.read({ offset: 0, count: 1 }, 0)).toThrow('maxReadBytes')
  })
})

describe('following a parser', () => {
  it('includes the non-empty partial line as the newest line and keeps its number once committed', () => {
    const parser = new OutputParser()
    const scrollback = new Scrollback({ maxLines: 100, maxBytes: 1000 })
    scrollback.follow(parser)
    parser.feed(Buffer.from('\x1b[31mone\x1b[0m\r\n$ '))
    expect(scrollback.read({ offset: 0, count: 10 }, BIG)).toMatchObject({ text: 'one\n$ ', totalLines: 2, lineBegin: 1, lineEnd: 2 })
    parser.feed(Buffer.from('echo hi\r\nhi\r\n'))
    expect(scrollback.read({ offset: 0, count: 10 }, BIG)).toMatchObject({ text: 'one\n$ echo hi\nhi', totalLines: 3, lineEnd: 3 })
  })

  it('stops retaining lines after its disposer runs and refuses a second source', () => {
    const parser = new OutputParser()
    const scrollback = new Scrollback({ maxLines: 100, maxBytes: 1000 })
    const stop = scrollback.follow(parser)
    expect(() => scrollback.follow(new OutputParser())).toThrow('already follows')
    parser.feed(Buffer.from('kept\n'))
    stop()
    parser.feed(Buffer.from('not kept\npartial'))
    expect(scrollback.read({ offset: 0, count: 10 }, BIG)).toMatchObject({ text: 'kept', totalLines: 1 })
  })
})

describe('a cursor that moves up', () => {
  it('retains a rewritten line once, numbered where it stands', () => {
    const parser = new OutputParser()
    const scrollback = new Scrollback({ maxLines: 100, maxBytes: 10000 })
    scrollback.follow(parser)
    parser.feed(Buffer.from('aaa\r\nbbb\r\n\x1b[2Axyz\r\n\r\nend\r\n'))
    expect(scrollback.read({ offset: 0, count: 500 }, BIG)).toMatchObject({ text: 'xyz\nbbb\nend', totalLines: 3, lineEnd: 3 })
  })

  it('pages the lines below a cursor that stays up after the line it is on, numbered on from it', () => {
    const parser = new OutputParser()
    const scrollback = new Scrollback({ maxLines: 100, maxBytes: 10000 })
    scrollback.follow(parser)
    parser.feed(Buffer.from('one\r\n\r\nthree\r\n\x1b[2A'))
    expect(scrollback.read({ offset: 0, count: 500 }, BIG)).toMatchObject({ text: 'one\n\nthree', totalLines: 3, lineEnd: 3 })
    expect(scrollback.read({ offset: 0, count: 1 }, BIG)).toMatchObject({ text: 'three', lineBegin: 3 })
  })
})

describe('a flood', () => {
  it('keeps its first lines beyond maxLines, and pages them from an end inside the gap', () => {
    const scrollback = new Scrollback({ maxLines: 10, maxBytes: 10000, headLines: 3 })
    scrollback.push('before')
    scrollback.markFlood()
    for (let n = 1; n <= 100; n++) scrollback.push(`line ${n}`)
    // Line 1 is "before"; the flood is lines 2-101: its first three stay, then 91-101.
    expect(scrollback.gap).toEqual({ first: 5, last: 91 })
    expect(scrollback.read({ offset: 0, count: 500 }, BIG)).toEqual({ text: Array.from({ length: 10 }, (_, i) => `line ${91 + i}`).join('\n'), totalLines: 101, firstRetainedLine: 92, lineBegin: 92, lineEnd: 101, truncated: true, gap: { first: 5, last: 91 } })
    expect(scrollback.read({ offset: 50, count: 500 }, BIG)).toEqual({ text: 'line 1\nline 2\nline 3', totalLines: 101, firstRetainedLine: 2, lineBegin: 2, lineEnd: 4, truncated: true, gap: { first: 5, last: 91 } })
    expect(scrollback.read({ offset: 98, count: 2 }, BIG)).toMatchObject({ text: 'line 1\nline 2', lineBegin: 2, lineEnd: 3 })
  })

  it('returns none of the head for a range wholly inside the gap, and only the head lines a range reaches', () => {
    const scrollback = new Scrollback({ maxLines: 10, maxBytes: 10000, headLines: 3 })
    scrollback.push('before')
    scrollback.markFlood()
    for (let n = 1; n <= 100; n++) scrollback.push(`line ${n}`)
    // Lines 47-51 asked for, all dropped: an empty page, never lines 1-3 in their place.
    expect(scrollback.read({ offset: 50, count: 5 }, BIG)).toEqual({ text: '', totalLines: 101, firstRetainedLine: 2, lineBegin: 5, lineEnd: 4, truncated: true, gap: { first: 5, last: 91 } })
    // Lines 4-8: the head's last line, then the gap.
    expect(scrollback.read({ offset: 93, count: 5 }, BIG)).toMatchObject({ text: 'line 3', lineBegin: 4, lineEnd: 4, truncated: true })
  })

  it('says how many bytes of the oldest line returned a page cut to its bound left out', () => {
    const scrollback = new Scrollback({ maxLines: 10, maxBytes: 10000 })
    scrollback.push('é'.repeat(10))
    scrollback.push('newest')
    // 6 bytes, the separator, then 3 of the 20 bytes of the older line: a whole code point, 2 bytes.
    expect(scrollback.read({ offset: 0, count: 2 }, 10)).toMatchObject({ text: 'é\nnewest', lineBegin: 1, truncated: true, cut: { line: 1, bytes: 18 } })
  })

  it('reads the head with the newest lines while nothing between them was dropped', () => {
    const scrollback = new Scrollback({ maxLines: 4, maxBytes: 10000, headLines: 2 })
    scrollback.markFlood()
    for (let n = 1; n <= 6; n++) scrollback.push(`line ${n}`)
    expect(scrollback.gap).toBeUndefined()
    expect(scrollback.read({ offset: 0, count: 500 }, BIG)).toMatchObject({ text: 'line 1\nline 2\nline 3\nline 4\nline 5\nline 6', firstRetainedLine: 1, lineBegin: 1, truncated: false })
  })

  it('keeps a flood\'s head through later marks until the next flood overflows', () => {
    const scrollback = new Scrollback({ maxLines: 5, maxBytes: 10000, headLines: 2 })
    scrollback.markFlood()
    for (let n = 1; n <= 10; n++) scrollback.push(`a ${n}`)
    scrollback.markFlood()
    scrollback.push('small')
    scrollback.markFlood()
    scrollback.push('small again')
    expect(scrollback.gap).toEqual({ first: 3, last: 7 })
    expect(scrollback.read({ offset: 5, count: 500 }, BIG).text).toBe('a 1\na 2')
  })

  it('releases the previous flood\'s head when the next one overflows', () => {
    const scrollback = new Scrollback({ maxLines: 3, maxBytes: 10000, headLines: 2 })
    scrollback.markFlood()
    for (let n = 1; n <= 10; n++) scrollback.push(`a ${n}`)
    scrollback.markFlood()
    for (let n = 1; n <= 10; n++) scrollback.push(`b ${n}`)
    expect(scrollback.read({ offset: 5, count: 500 }, BIG).text).toBe('b 1\nb 2')
  })
})
