import { describe, expect, it } from 'vitest'
import { lex, expandWord } from '../src/lex.ts'
import { OutputBuffer, Scrollback, keepTail } from '../src/text.ts'

describe('keepTail', () => {
  it('keeps the newest bytes and never splits a code point', () => {
    const text = 'aé中😀'
    for (let max = 0; max <= Buffer.byteLength(text); max++) {
      const { text: kept } = keepTail(text, max)
      expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(max)
      expect(text.endsWith(kept)).toBe(true)
      expect(kept).not.toContain('\uFFFD')
    }
    expect(keepTail(text, 4)).toEqual({ text: '😀', truncated: true })
    expect(keepTail(text, 6)).toEqual({ text: '😀', truncated: true })
    expect(keepTail(text, 7)).toEqual({ text: '中😀', truncated: true })
    expect(keepTail(text, 100)).toEqual({ text, truncated: false })
  })
})

describe('OutputBuffer', () => {
  it('drops the oldest output past its bound and says so', () => {
    const buffer = new OutputBuffer(8)
    buffer.append('12345\n')
    buffer.append('abcdef\n')
    expect(buffer.text()).toEqual({ text: '\nabcdef\n', truncated: true })
    buffer.append('0123456789\n')
    expect(buffer.text()).toEqual({ text: '3456789\n', truncated: true })
    expect(buffer.take()).toBe('3456789\n')
    expect(buffer.text()).toEqual({ text: '', truncated: false })
  })
})

describe('Scrollback', () => {
  function filled(lines: number, maxLines = 100, maxReadBytes = 10_000): Scrollback {
    const scrollback = new Scrollback(maxLines, maxReadBytes)
    for (let line = 1; line <= lines; line++) scrollback.write(`line ${line}\n`)
    return scrollback
  }

  it('pages newest-relative with inclusive line numbers', () => {
    const scrollback = filled(10)
    expect(scrollback.read(0, 3)).toEqual({ text: 'line 8\nline 9\nline 10', totalLines: 10, firstRetainedLine: 1, lineBegin: 8, lineEnd: 10, truncated: false })
    expect(scrollback.read(2, 2)).toMatchObject({ text: 'line 7\nline 8', lineBegin: 7, lineEnd: 8 })
  })

  it('returns an empty page past the start without claiming loss', () => {
    const scrollback = filled(10)
    expect(scrollback.read(20, 5)).toEqual({ text: '', totalLines: 10, firstRetainedLine: 1, lineBegin: 1, lineEnd: 0, truncated: false })
    expect(scrollback.read(0, 0)).toMatchObject({ text: '', lineBegin: 11, lineEnd: 10, truncated: false })
  })

  it('marks a page that reaches for dropped lines as truncated', () => {
    const scrollback = filled(250, 100)
    expect(scrollback.read(0, 5)).toMatchObject({ firstRetainedLine: 151, lineBegin: 246, truncated: false })
    expect(scrollback.read(95, 10)).toMatchObject({ text: 'line 151\nline 152\nline 153\nline 154\nline 155', lineBegin: 151, lineEnd: 155, truncated: true })
    expect(scrollback.read(200, 10)).toMatchObject({ text: '', lineBegin: 151, lineEnd: 150, truncated: true })
  })

  it('cuts a page to the byte bound from the oldest side, and a single long line to its tail', () => {
    const scrollback = new Scrollback(100, 16)
    scrollback.write('first line\nsecond\nthird\n')
    expect(scrollback.read(0, 10)).toMatchObject({ text: 'second\nthird', lineBegin: 2, lineEnd: 3, truncated: true })
    scrollback.write(`${'é'.repeat(20)}\n`)
    expect(scrollback.read(0, 1)).toMatchObject({ text: 'é'.repeat(8), lineBegin: 4, lineEnd: 4, truncated: true })
  })

  it('keeps an unterminated last line out of pages', () => {
    const scrollback = new Scrollback(100, 100)
    scrollback.write('done\n$ ')
    expect(scrollback.read(0, 10)).toMatchObject({ text: 'done', totalLines: 1 })
  })
})

describe('lex', () => {
  const words = (source: string) => {
    const result = lex(source)
    if (!result.complete) return 'incomplete'
    return result.list.map((item) => [item.connector, ...item.words.map((word) => expandWord(word, (name) => ({ HOME: '/h', X: 'x' })[name]))])
  }

  it('splits lists on ; && || and newlines', () => {
    expect(words('a 1; b && c || d\ne')).toEqual([[';', 'a', '1'], [';', 'b'], ['&&', 'c'], ['||', 'd'], [';', 'e']])
  })

  it('honours single quotes, double quotes and backslashes', () => {
    expect(words(`echo '$X' "$X" \\$X "\\$X" "a\\"b" ""`)).toEqual([[';', 'echo', '$X', 'x', '$X', '$X', 'a"b', '']])
    expect(words('echo ~ ~/d a~')).toEqual([[';', 'echo', '/h', '/h/d', 'a~']])
  })

  it('is incomplete inside an open quote or after a trailing backslash', () => {
    expect(words('echo "abc')).toBe('incomplete')
    expect(words("echo 'abc")).toBe('incomplete')
    expect(words('echo abc \\')).toBe('incomplete')
    expect(words('echo "a\nb"')).toEqual([[';', 'echo', 'a\nb']])
    expect(words('echo a \\\nb')).toEqual([[';', 'echo', 'a', 'b']])
  })
})
