import { describe, expect, it } from 'vitest'
import { utf8ByteLength } from '@conch/session'
import { OutputParser } from '../src/output.ts'
import { SendBuffer } from '../src/send-buffer.ts'

function setup(before: string, maxBytes = 1000, fromLineStart = false) {
  const parser = new OutputParser()
  parser.feed(Buffer.from(before))
  const buffer = new SendBuffer(parser, { maxBytes, fromLineStart })
  const feed = (text: string) => parser.feed(Buffer.from(text))
  return { parser, buffer, feed }
}

const roundTrips = (text: string) => expect(Buffer.from(text, 'utf8').toString('utf8')).toBe(text)

describe('viewport', () => {
  it('holds what appeared after the send started, from the start column, without earlier lines', () => {
    const { buffer, feed } = setup('old line\r\n$ ')
    feed('echo hi\r\nhi\r\n\x1b[?2004h$ ')
    expect(buffer.viewport()).toEqual({ text: 'echo hi\nhi\n$ ', truncated: false })
  })

  it('includes the whole start line with fromLineStart', () => {
    const { buffer, feed } = setup('old line\r\n$ ', 1000, true)
    feed('echo hi\r\nhi\r\n$ ')
    expect(buffer.viewport().text).toBe('$ echo hi\nhi\n$ ')
  })

  it('counts text rewritten left of the start column after a CR', () => {
    const { buffer, feed } = setup('$ ')
    feed('\rXYZ')
    expect(buffer.viewport().text).toBe('XYZ')
    feed('\r\n')
    expect(buffer.viewport().text).toBe('XYZ')
  })

  it('is empty when nothing was written', () => {
    const { buffer } = setup('$ ')
    expect(buffer.viewport()).toEqual({ text: '', truncated: false })
  })

  it('stops collecting at close and keeps the partial line as it was', () => {
    const { buffer, feed } = setup('')
    feed('out\r\n>>> ')
    buffer.close()
    buffer.close()
    feed('late\r\nmore')
    expect(buffer.viewport().text).toBe('out\n>>> ')
  })

  it('keeps the newest text within maxBytes and says truncated', () => {
    const { buffer, feed } = setup('', 12)
    feed('line 1\nline 2\nline 3\n')
    expect(buffer.viewport()).toEqual({ text: 'ine 2\nline 3', truncated: true })
    expect(buffer.truncated).toBe(true)
  })

  it('cuts a single line longer than maxBytes to its tail on a code point', () => {
    const { buffer, feed } = setup('', 9)
    feed('ab😀😀c\n')
    expect(buffer.viewport()).toEqual({ text: '😀😀c', truncated: true })
  })

  it('never splits a code point at any bound', () => {
    const content = 'é中😀x\n😀😀\n中é'
    for (let max = 1; max <= utf8ByteLength(content) + 2; max++) {
      const { buffer, feed } = setup('', max)
      feed(content)
      const { text } = buffer.viewport()
      expect(utf8ByteLength(text)).toBeLessThanOrEqual(max)
      roundTrips(text)
      const taken = buffer.take().text
      expect(utf8ByteLength(taken)).toBeLessThanOrEqual(max)
      roundTrips(taken)
    }
  })

  it('rejects a bound that is not a positive integer', () => {
    expect(() => new SendBuffer(new OutputParser(), { maxBytes: 0 })).toThrow('maxBytes')
  })
})

describe('take', () => {
  it('returns only what was produced since the previous take', () => {
    const { buffer, feed } = setup('$ ')
    feed('echo a\r\na\r\n')
    expect(buffer.take()).toEqual({ text: 'echo a\na\n', truncated: false })
    expect(buffer.take()).toEqual({ text: '', truncated: false })
    feed('b\r\n')
    expect(buffer.take()).toEqual({ text: 'b\n', truncated: false })
  })

  it('continues a partial line it already returned', () => {
    const { buffer, feed } = setup('')
    feed('Password: ')
    expect(buffer.take().text).toBe('Password: ')
    feed('ok\r\nnext')
    expect(buffer.take().text).toBe('ok\nnext')
    feed(' line')
    expect(buffer.take().text).toBe(' line')
  })

  it('continues a partial line that was rewritten to the same prefix (compared by text)', () => {
    const { buffer, feed } = setup('')
    feed('abc')
    expect(buffer.take().text).toBe('abc')
    feed('\rab')
    expect(buffer.take().text).toBe('')
    feed('cdef')
    expect(buffer.take().text).toBe('def')
  })

  it('continues an open line appended in many chunks, each take returning only the new text', () => {
    const { buffer, feed } = setup('')
    let joined = ''
    for (let i = 0; i < 100; i++) {
      feed('y'.repeat(97))
      joined += buffer.take().text
    }
    expect(joined).toBe('y'.repeat(97 * 100))
  })

  it('starts a new line and repeats a partial line that was rewritten after it was taken', () => {
    const { buffer, feed } = setup('')
    feed('10%')
    expect(buffer.take().text).toBe('10%')
    feed('\r100%\r\ndone')
    expect(buffer.take().text).toBe('\n100%\ndone')
    feed('\r\x1b[KDONE')
    expect(buffer.take().text).toBe('\nDONE')
  })

  it('says truncated when lines were dropped before they were taken', () => {
    const { buffer, feed } = setup('', 8)
    feed('aaa\nbbb\nccc\n')
    expect(buffer.take()).toEqual({ text: 'bbb\nccc\n', truncated: true })
    feed('d\n')
    expect(buffer.take()).toEqual({ text: 'd\n', truncated: false })
  })

  it('returns the frozen partial line once after close, then nothing', () => {
    const { buffer, feed } = setup('')
    feed('out\r\n>>')
    expect(buffer.take().text).toBe('out\n>>')
    feed('> ')
    buffer.close()
    feed('later')
    expect(buffer.take().text).toBe('> ')
    expect(buffer.take().text).toBe('')
  })

  it('concatenates to the viewport text when lines are only appended', () => {
    const stream = Buffer.from('$ seq 3\r\n1\r\n2\r\n3\r\n\x1b[?2004h$ ')
    for (let cut = 0; cut <= stream.length; cut++) {
      const parser = new OutputParser()
      const buffer = new SendBuffer(parser, { maxBytes: 1000 })
      let joined = ''
      parser.feed(stream.subarray(0, cut))
      joined += buffer.take().text
      parser.feed(stream.subarray(cut))
      buffer.close()
      joined += buffer.take().text
      expect(joined, `split at ${cut}`).toBe(buffer.viewport().text)
    }
  })
})

describe('a cursor that moves up', () => {
  it('keeps the lines it rewrote once, as they read after the rewrite, from the send start column', () => {
    const { buffer, feed } = setup('$ ')
    feed('for x\r\n  echo\r\ndone\x1b[A\x1b[A\b\bfor x\r\n\r  echo\r\n\rdone\r\nran\r\n$ ')
    expect(buffer.viewport()).toEqual({ text: 'for x\n  echo\ndone\nran\n$ ', truncated: false })
  })

  it('streams a rewritten line again, and the streamed pieces end as the terminal reads', () => {
    const { buffer, feed } = setup('')
    feed('aaa\r\nbbb\r\n')
    expect(buffer.take().text).toBe('aaa\nbbb\n')
    feed('\x1b[2Axyz\r\n\r\n')
    expect(buffer.take().text).toBe('xyz\nbbb\n')
    expect(buffer.viewport().text).toBe('xyz\nbbb')
  })

  it('streams lines a redraw writes again in place once, taken at any point of the stream', () => {
    const stream = 'for x\r\n  echo\r\ndone\x1b[A\x1b[A\b\bfor x\r\n\r  echo\r\n\rdone\r\nran\r\n$ '
    for (let cut = 0; cut <= stream.length; cut++) {
      const { buffer, feed } = setup('$ ')
      feed(stream.slice(0, cut))
      let joined = buffer.take().text
      feed(stream.slice(cut))
      joined += buffer.take().text
      buffer.close()
      joined += buffer.take().text
      expect(joined, `split at ${cut}`).toBe('for x\n  echo\ndone\nran\n$ ')
    }
  })

  it('holds a line it streamed while a cursor is back on it, and streams nothing of a redraw still under way', () => {
    const { buffer, feed } = setup('')
    feed('aaa\r\nbbb')
    expect(buffer.take().text).toBe('aaa\nbbb')
    feed('\x1b[A\rbbb')
    expect(buffer.take().text).toBe('')
  })

  it('streams a line a redraw changed on a line of its own, with the lines after it', () => {
    const { buffer, feed } = setup('')
    feed('a\r\nb\r\nc')
    expect(buffer.take().text).toBe('a\nb\nc')
    feed('\x1b[2A\rA\r\n\r\n\r\n')
    expect(buffer.take().text).toBe('\nA\nb\nc\n')
    expect(buffer.viewport().text).toBe('A\nb\nc')
  })

  it('ends with the lines below a cursor that stays up, in the viewport and the last take', () => {
    const { buffer, feed } = setup('')
    feed('one\r\ntwo\r\n')
    let joined = buffer.take().text
    feed('three\r\n\x1b[2A')
    joined += buffer.take().text
    buffer.close()
    joined += buffer.take().text
    expect(joined).toBe('one\ntwo\nthree')
    expect(buffer.viewport().text).toBe('one\ntwo\nthree')
  })
})

describe('a flood', () => {
  it('keeps its first lines and its last, and counts exactly the lines and bytes dropped between them', () => {
    for (const chunk of [37, 4096]) {
      const { buffer, feed } = setup('$ ', 20_000)
      let text = 'seq 1 20000\r\n'
      for (let line = 1; line <= 20_000; line++) text += `${line}\r\n`
      for (let at = 0; at < text.length; at += chunk) feed(text.slice(at, at + chunk))
      feed('$ ')
      const viewport = buffer.viewport()
      const omitted = viewport.omitted!
      const lines = viewport.text.split('\n')
      expect(lines.slice(0, 3)).toEqual(['seq 1 20000', '1', '2'])
      expect(lines.slice(-2)).toEqual(['20000', '$ '])
      // A quarter of the bound, line breaks not counted.
      expect(utf8ByteLength(lines.slice(0, omitted.headLines).join(''))).toBeLessThanOrEqual(5_000)
      // The line after the gap may be the tail of a cut one; the next is whole.
      const lastHead = Number(lines[omitted.headLines - 1])
      const afterGap = Number(lines[omitted.headLines + 1]) - 1
      expect(omitted.lines).toBe(afterGap - lastHead - 1)
      const droppedText = Array.from({ length: omitted.lines }, (_, index) => `${lastHead + 1 + index}\n`).join('')
      const cutPart = String(afterGap).length - lines[omitted.headLines]!.length
      expect(omitted.bytes).toBe(utf8ByteLength(droppedText) + cutPart)
    }
  })
})
