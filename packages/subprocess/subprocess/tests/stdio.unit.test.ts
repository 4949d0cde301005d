import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { HEAD_BYTES, readableFrom } from '../src/index.ts'

async function lines(chunks: string[], maxFrameBytes: number): Promise<{ text: string; oversized: number; heads: string[] }> {
  const input = new PassThrough()
  let oversized = 0
  const heads: string[] = []
  const reader = readableFrom(input, {
    maxFrameBytes,
    onOversized: (_limit, head) => {
      oversized++
      heads.push(new TextDecoder().decode(head))
    },
  }).getReader()
  for (const chunk of chunks) input.write(chunk)
  input.end()
  let text = ''
  const decoder = new TextDecoder()
  while (true) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  return { text, oversized, heads }
}

describe('readableFrom with maxFrameBytes', () => {
  it('passes frames up to the limit unchanged', async () => {
    expect(await lines(['{"a":1}\n{"b":', '22}\n'], 8)).toEqual({ text: '{"a":1}\n{"b":22}\n', oversized: 0, heads: [] })
  })

  it('cuts a longer frame at the limit with a newline, drops its rest, and keeps the next frame, at every split point', async () => {
    const input = '{"a":1}\n{"long":"xxxxxxxxxxxxxxxx"}\n{"c":3}\n'
    for (let split = 0; split <= input.length; split++) {
      const result = await lines([input.slice(0, split), input.slice(split)], 10)
      expect(result, `split at ${split}`).toEqual({ text: '{"a":1}\n{"long":"x\n{"c":3}\n', oversized: 1, heads: ['{"long":"x'] })
    }
  })

  it('cuts an unterminated last frame too', async () => {
    expect(await lines(['{"x":"', 'y'.repeat(50)], 10)).toEqual({ text: '{"x":"yyyy\n', oversized: 1, heads: ['{"x":"yyyy'] })
  })

  it('hands onOversized the first HEAD_BYTES of the cut frame, gathered across chunks', async () => {
    const frame = `{"method":"session/update","text":"${'z'.repeat(1000)}"}`
    const result = await lines([frame.slice(0, 7), frame.slice(7, 50), frame.slice(50), '\n{"ok":1}\n'], 500)
    expect(result.heads).toEqual([frame.slice(0, HEAD_BYTES)])
    expect(result.text.endsWith('\n{"ok":1}\n')).toBe(true)
  })
})
