import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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

  it('does not let an unterminated DCS, SOS, PM or APC swallow the command\'s output, in the result or the scrollback', async () => {
    const session = await openSession()
    for (const [introducer, token, first] of [['P', 'Q54', 101], ['X', 'Q55', 201], ['^', 'Q56', 301], ['_', 'Q57', 401]] as const) {
      const result = await send(session, `printf 'P\\e${introducer}'; echo ${token}; seq ${first} ${first + 4}`)
      expect(result.waitReason).toBe('stdin_read')
      expect(linesEqual(result.viewport, `P${token}`), introducer).toBe(1)
      for (const n of [first, first + 2, first + 4]) expect(linesEqual(result.viewport, String(n)), `${introducer} ${n}`).toBe(1)
      const page = session.read({ offset: 0, count: 20 }).text
      expect(linesEqual(page, `P${token}`), introducer).toBe(1)
      expect(linesEqual(page, String(first + 4)), introducer).toBe(1)
    }
  })

  it('abandons a DCS left open across a pause, so the output after the pause shows', async () => {
    const session = await openSession({ stringTimeoutMs: 300 })
    // Nothing but the pause ends the DCS before `after-dcs` (the next prompt marker's ESC would).
    const result = await send(session, `printf 'D\\eP'; sleep 0.6; echo after-dcs`)
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, 'Dafter-dcs')).toBe(1)
  })
})


describe('a large coloured, redrawn stream', () => {
  it('arrives line for line in order, as the line model reads it, through the parser’s WebAssembly pass', async () => {
    // 20 000 lines in one write, so the parser gets full 64 KiB chunks: SGR colours, a window
    // title before each line, bracketed-paste toggles, a progress redraw (CR, EL) over non-ASCII
    // text, and at the end a byte that is not UTF-8.
    const dir = mkdtempSync(join(tmpdir(), 'conch-mixed-'))
    const script = join(dir, 'mixed.py')
    writeFileSync(
      script,
      [
        'import sys',
        'parts = []',
        'for n in range(20000):',
        '    toggle = b"\\x1b[?2004h" if n % 100 == 0 else b""',
        '    parts.append(toggle + b"\\x1b]0;t%d\\x07L%d \\x1b[1;3%dm\\xce\\xb1\\xf0\\x9f\\x98\\x80\\x1b[0m 10%%\\r\\x1b[KL%d \\xce\\xb1\\xf0\\x9f\\x98\\x80 100%%\\r\\n" % (n, n, n % 8, n))',
        'parts.append(b"\\x1b[?2004lBAD\\xffEND\\r\\n")',
        'sys.stdout.buffer.write(b"".join(parts))',
        'sys.stdout.buffer.flush()',
      ].join('\n'),
    )
    const session = await openSession({ timeoutMs: 60_000 })
    const operation = session.startSend({ text: `python3 ${script}; echo MIXED-END`, submit: true })
    let streamed = ''
    operation.onOutput(() => {
      streamed += operation.readOutput()
    })
    const result = await operation.done
    streamed += operation.readOutput()
    expect(result.waitReason).toBe('stdin_read')
    const lines = streamed.split('\n')
    // Every committed line, in order; a streaming read may also show an open line before its
    // redraw (that line then comes again whole), never anything else.
    const committed = lines.filter((line) => /^L\d+ α😀 100%$/.test(line))
    expect(committed).toEqual(Array.from({ length: 20000 }, (_, n) => `L${n} α😀 100%`))
    const others = lines.filter((line) => line.startsWith('L') && !/^L\d+ α😀 100%$/.test(line))
    expect(others.length).toBeLessThan(200)
    for (const line of others) expect(line).toMatch(/^L\d+( (α(😀( (1(0(0?%?)?)?)?)?)?)?)?$/)
    expect(lines.some((line) => /[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(line))).toBe(false)
    expect(lines).toContain('BAD\ufffdEND')
    expect(linesEqual(streamed, 'MIXED-END')).toBe(1)
    rmSync(dir, { recursive: true, force: true })
  }, 90_000)
})
