/**
 * terminal_open rows/cols, terminal_read {screen: true} and terminal_resize on a real terminal,
 * through the tools the model calls.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { bootCase, type CaseHarness } from './cases/harness.ts'

let harness: CaseHarness | undefined

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** A program that prints the terminal size at start and after every SIGWINCH, then waits for input. */
const WINCH = `python3 -c "
import os, signal, sys
show = lambda *_: print('size', *os.get_terminal_size()[::-1], flush=True)
signal.signal(signal.SIGWINCH, show)
show()
sys.stdin.readline()
"`

describe('screen and size tools', () => {
  it('opens a terminal of the asked size and resizes it: the foreground program gets SIGWINCH', async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
    const opened = await harness.call('terminal_open', { type: 'shell', rows: 24, cols: 80 })
    expect(opened.isError, opened.text).toBe(false)
    const id = opened.meta['sessionId'] as string
    const started = await harness.send(id, WINCH)
    expect(started.text).toMatch(/^size 24 80$/m)
    const resized = await harness.call('terminal_resize', { sessionId: id, rows: 30, cols: 100 })
    expect(resized).toMatchObject({ isError: false, text: `[resized: ${id} to 30x100]` })
    await harness.waitForLine(id, 'size 30 100')
    await harness.send(id, '')
    expect((await harness.send(id, 'stty size')).text).toMatch(/^30 100$/m)
  })

  it('returns the current screen on request, as rows with the cursor marked, with no escape sequences', async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
    const opened = await harness.call('terminal_open', { type: 'shell', rows: 12, cols: 60 })
    const id = opened.meta['sessionId'] as string
    await harness.send(id, `printf '\\033[2J\\033[3;5Hthird row\\033[6;1Hsixth row\\033[8;1H'; read -r`)
    const screen = await harness.call('terminal_read', { sessionId: id, screen: true })
    expect(screen.isError, screen.text).toBe(false)
    const rows = screen.text.split('\n')
    expect(rows[0]).toBe('[screen: normal 12x60, cursor 8,1]')
    expect(rows[3]).toBe('    third row')
    expect(rows[6]).toBe('sixth row')
    expect(rows[8]).toBe('  ← cursor')
    expect(screen.text).not.toMatch(/\x1b/)
  })

  it('keeps a full-screen result\'s header and cursor row when the screen is larger than maxOutputBytes', async () => {
    harness = await bootCase({ mode: 'danger-full-access', toolPty: { maxOutputBytes: 1024 } })
    const opened = await harness.call('terminal_open', { type: 'shell', rows: 40, cols: 160 })
    const id = opened.meta['sessionId'] as string
    // 39 rows of 3-byte wide characters on the alternate screen (about 6 KB), then a prompt on row 40.
    const program = `python3 -c "
import sys
out = ['\\x1b[?1049h']
for row in range(1, 40): out.append('\\x1b[%d;1Hrow %d ' % (row, row) + '中' * 50)
out.append('\\x1b[40;1Hname? ')
sys.stdout.write(''.join(out)); sys.stdout.flush()
sys.stdin.readline()
"`
    const seen = await harness.send(id, program)
    expect(Buffer.byteLength(seen.text, 'utf8')).toBeLessThanOrEqual(1024)
    const lines = seen.text.split('\n')
    expect(lines[0]).toBe('[screen: alternate 40x160, cursor 40,7]')
    expect(lines[1]).toMatch(/^row 1 中+$/)
    expect(lines).toContain('name?  ← cursor')
    expect(lines[lines.indexOf('name?  ← cursor') - 1]).toMatch(/^\[rows \d+-39 not shown\]$/)
    expect(seen.text).toContain('[… output omitted]')
    expect(seen.text).not.toMatch(/\x1b/)
    await harness.send(id, 'x')
  })

  it('builds a screen from the lines when no program addressed the cursor', async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
    const opened = await harness.call('terminal_open', { type: 'shell', rows: 5, cols: 40 })
    const id = opened.meta['sessionId'] as string
    await harness.send(id, 'seq 1 10')
    const screen = await harness.call('terminal_read', { sessionId: id, screen: true })
    // The last five rows of what the terminal showed: 7 … 10 and the prompt with the cursor.
    expect(screen.text.split('\n')).toEqual(['[screen: normal 5x40, cursor 5,3]', '7', '8', '9', '10', '$  ← cursor'])
  })

  it('refuses a size out of bounds, naming the field', async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
    const id = await harness.open()
    const refused = await harness.call('terminal_resize', { sessionId: id, rows: 0, cols: 80 })
    expect(refused.isError).toBe(true)
    expect(refused.text).toMatch(/rows/)
  })
})
