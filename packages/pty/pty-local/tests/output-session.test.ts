import { describe, expect, it } from 'vitest'
import { linesEqual, openSession, send } from './local-harness.ts'

describe('one very long line', () => {
  it('streams an unbroken 3 MB line in pieces of maxLineLength and ends with the token after it', async () => {
    const session = await openSession({ maxLineLength: 4096, timeoutMs: 60_000 })
    const bytes = 3_000_000
    const operation = session.startSend({ text: `head -c ${bytes} /dev/zero | tr '\\0' x; echo LONG-END`, submit: true })
    let streamed = ''
    operation.onOutput(() => {
      streamed += operation.readOutput()
    })
    const result = await operation.done
    streamed += operation.readOutput()
    expect(result.waitReason).toBe('stdin_read')
    // Every x the program wrote reached the stream exactly once, in lines no longer than the cap.
    const pieces = streamed.split('\n').filter((line) => /^x+(LONG-END)?$/.test(line))
    expect(pieces.reduce((sum, line) => sum + line.replace('LONG-END', '').length, 0)).toBe(bytes)
    expect(Math.max(...pieces.map((line) => line.length))).toBeLessThanOrEqual(4096)
    expect(pieces.at(-1)).toMatch(/LONG-END$/)
    expect(result.viewport).toMatch(/xLONG-END\n\$ $/)
  }, 90_000)
})

describe('an unterminated control string', () => {
  it('does not swallow the output after it: the text shows and the next prompt still settles the send', async () => {
    const session = await openSession()
    const result = await send(session, `printf 'J\\e]6973;'; echo K`)
    expect(result.waitReason).toBe('stdin_read')
    expect(result.evidence.tier).toBe('prompt')
    expect(linesEqual(result.viewport, 'J6973;K')).toBe(1)
    expect(linesEqual((await send(session, 'echo after-osc')).viewport, 'after-osc')).toBe(1)
  })

  it('abandons a DCS left open across a pause, so the output after the pause shows', async () => {
    const session = await openSession({ stringTimeoutMs: 300 })
    // Nothing but the pause ends the DCS before `after-dcs` (the next prompt marker's ESC would).
    const result = await send(session, `printf 'D\\eP'; sleep 0.6; echo after-dcs`)
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, 'Dafter-dcs')).toBe(1)
  })
})

