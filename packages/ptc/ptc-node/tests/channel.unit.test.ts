import { describe, expect, it, vi } from 'vitest'
import { ChannelError, encodeFrame, FrameDecoder, parseChildMessage } from '../src/channel.ts'
import { prefixWithin } from '../src/output-ledger.ts'

describe('frames', () => {
  it('decodes the same frames whatever the split point of the bytes', () => {
    const bytes = Buffer.concat([encodeFrame({ t: 'log', s: 'out', text: 'é😀\n' }), encodeFrame({ t: 'done', ok: true, value: [1, { a: null }] })])
    for (let split = 0; split <= bytes.length; split++) {
      const decoder = new FrameDecoder(1024)
      const frames = [...decoder.feed(bytes.subarray(0, split)).frames, ...decoder.feed(bytes.subarray(split)).frames]
      expect(frames).toEqual([{ t: 'log', s: 'out', text: 'é😀\n' }, { t: 'done', ok: true, value: [1, { a: null }] }])
    }
  })

  it('keeps the frames before a violation and nothing after it', () => {
    const decoder = new FrameDecoder(64)
    const head = Buffer.alloc(4)
    head.writeUInt32BE(65)
    const out = decoder.feed(Buffer.concat([encodeFrame({ t: 'ready' }), head]))
    expect(out.frames).toEqual([{ t: 'ready' }])
    expect(out.error).toBeInstanceOf(ChannelError)
    expect(decoder.feed(encodeFrame({ t: 'ready' }))).toEqual({ frames: [] })
  })

  it('says how much of an unfinished frame it holds, and nothing once every frame is complete', () => {
    const decoder = new FrameDecoder(1024)
    const bytes = encodeFrame({ t: 'ready' })
    expect(decoder.unfinished).toBeUndefined()
    decoder.feed(bytes.subarray(0, 2))
    expect(decoder.unfinished).toEqual({ have: 2, announced: undefined })
    decoder.feed(bytes.subarray(2, 6))
    expect(decoder.unfinished).toEqual({ have: 6, announced: bytes.length })
    expect(decoder.feed(bytes.subarray(6)).frames).toEqual([{ t: 'ready' }])
    expect(decoder.unfinished).toBeUndefined()
  })

  it('refuses malformed messages by shape', () => {
    expect(() => parseChildMessage({ t: 'call', id: 0, ns: 'a', fn: 'b' })).toThrow(ChannelError)
    expect(() => parseChildMessage({ t: 'call', id: 1.5, ns: 'a', fn: 'b' })).toThrow(ChannelError)
    expect(() => parseChildMessage({ t: 'call', id: 1, ns: 1, fn: 'b' })).toThrow(ChannelError)
    expect(() => parseChildMessage({ t: 'done', ok: false, kind: 'timeout', message: 'forged' })).toThrow(/unknown failure kind/)
    expect(() => parseChildMessage({ t: 'log', s: 'tty', text: '' })).toThrow(ChannelError)
    expect(() => parseChildMessage({ t: 'log', s: 'out', text: '', more: 1 })).toThrow(/unknown field "more"/)
    expect(parseChildMessage({ t: 'call', id: 1, ns: 'a', fn: 'b' })).toEqual({ t: 'call', id: 1, ns: 'a', fn: 'b', args: null })
  })

  it('cuts output on code-point boundaries', () => {
    expect(prefixWithin('aé😀', 1)).toBe('a')
    expect(prefixWithin('aé😀', 2)).toBe('a')
    expect(prefixWithin('aé😀', 3)).toBe('aé')
    expect(prefixWithin('aé😀', 6)).toBe('aé')
    expect(prefixWithin('aé😀', 7)).toBe('aé😀')
  })
})

describe('frame budgets', () => {
  it('decodes frames fed one byte at a time', () => {
    const bytes = Buffer.concat([encodeFrame({ t: 'ready' }), encodeFrame({ t: 'log', s: 'err', text: 'é😀' }), encodeFrame({ t: 'done', ok: true, value: null })])
    const decoder = new FrameDecoder(1024)
    const frames: unknown[] = []
    for (let at = 0; at < bytes.length; at++) frames.push(...decoder.feed(bytes.subarray(at, at + 1)).frames)
    expect(frames).toEqual([{ t: 'ready' }, { t: 'log', s: 'err', text: 'é😀' }, { t: 'done', ok: true, value: null }])
    expect(decoder.unfinished).toBeUndefined()
  })

  it('copies each byte of a large frame fed in pipe-sized chunks at most once', () => {
    const bytes = encodeFrame({ t: 'log', s: 'out', text: 'x'.repeat(4_000_000) })
    const concat = vi.spyOn(Buffer, 'concat')
    try {
      const decoder = new FrameDecoder(8_000_000)
      const frames: unknown[] = []
      for (let at = 0; at < bytes.length; at += 65_536) frames.push(...decoder.feed(bytes.subarray(at, at + 65_536)).frames)
      expect(frames).toHaveLength(1)
      const copied = concat.mock.results.reduce((sum, result) => sum + (result.value as Buffer).length, 0)
      expect(copied).toBeLessThanOrEqual(bytes.length)
    } finally {
      concat.mockRestore()
    }
  })

  it('charges every frame against the total budget at its prefix, and keeps nothing of a refused frame', () => {
    const frame = encodeFrame({ t: 'log', s: 'out', text: 'y'.repeat(100) })
    const decoder = new FrameDecoder(1024, frame.length * 2 + 10)
    expect(decoder.feed(Buffer.concat([frame, frame])).frames).toHaveLength(2)
    const out = decoder.feed(frame.subarray(0, 4))
    expect(out.error?.message).toMatch(new RegExp(`a control frame of ${frame.length - 4} bytes after ${frame.length * 2} bytes of this run exceeds maxChannelBytes ${frame.length * 2 + 10}`))
    expect(decoder.unfinished).toBeUndefined()
  })

  it('decodes the same frames whatever the split points, into three pieces', () => {
    const bytes = Buffer.concat([encodeFrame({ t: 'call', id: 1, ns: 'a', fn: 'b', args: { x: 'é' } }), encodeFrame({ t: 'ready' })])
    const expected = [{ t: 'call', id: 1, ns: 'a', fn: 'b', args: { x: 'é' } }, { t: 'ready' }]
    for (let first = 0; first <= bytes.length; first++) {
      for (let second = first; second <= bytes.length; second++) {
        const decoder = new FrameDecoder(1024)
        const frames = [bytes.subarray(0, first), bytes.subarray(first, second), bytes.subarray(second)].flatMap((piece) => decoder.feed(piece).frames)
        expect(frames).toEqual(expected)
      }
    }
  })
})
