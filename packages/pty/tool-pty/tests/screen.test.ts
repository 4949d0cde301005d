/**
 * terminal_open rows/cols, terminal_read {screen: true} and terminal_resize on a real terminal,
 * through the tools the model calls.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CURSOR_MARK } from '@conch/pty'
import { onPath } from '@conch/test-support/homes'
import { hasTmux, TmuxPane } from '../../pty-local/tests/tmux.ts'
import { bootCase, type CaseHarness } from './cases/harness.ts'

let harness: CaseHarness | undefined
let pane: TmuxPane | undefined

afterEach(async () => {
  pane?.close()
  pane = undefined
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

/**
 * The rows a send's screen stands for, as tmux's `capture-pane -p` prints them: the rows it shows,
 * and for each `[rows a-b unchanged]` those of `before` (the rows the previous screen stood for).
 */
function screenRowsOf(text: string, before: readonly string[] = []): string[] {
  const lines = text.split('\n')
  expect(lines[0]).toMatch(/^\[screen: /)
  const rows: string[] = []
  for (const line of lines.slice(1, lines.findIndex((entry) => entry.startsWith('[wait: ')))) {
    const unchanged = /^\[rows (\d+)-(\d+) unchanged\]$/.exec(line)
    if (unchanged === null) rows.push((line.endsWith(CURSOR_MARK) ? line.slice(0, -CURSOR_MARK.length) : line).replace(/ +$/, ''))
    else for (let row = Number(unchanged[1]); row <= Number(unchanged[2]); row++) rows.push(before[row - 1] ?? '')
  }
  while (rows.at(-1) === '') rows.pop()
  return rows
}

describe.skipIf(!hasTmux)('a screen like the one the last send showed', () => {
  /** A 12x60 terminal and a tmux pane of that size in the same directory; `type` gives both the same input. */
  async function pair() {
    harness = await bootCase({ mode: 'danger-full-access' })
    const opened = await harness.call('terminal_open', { type: 'shell', rows: 12, cols: 60 })
    const id = opened.meta['sessionId'] as string
    pane = await TmuxPane.open({ rows: 12, cols: 60, cwd: harness.workspace })
    let before: string[] = []
    const h = harness
    const p = pane
    /** Sends `text` to both; the rows the result stands for must become tmux's rows. */
    const type = async (text: string, options: { submit?: boolean; maxOutputBytes?: number } = {}) => {
      const submit = options.submit ?? true
      const seen = await h.call('terminal_send', { sessionId: id, text, submit, ...(options.maxOutputBytes !== undefined && { maxOutputBytes: options.maxOutputBytes }) })
      expect(seen.isError, seen.text).toBe(false)
      if (text.endsWith('\u001b')) {
        p.type(text.slice(0, -1), false)
        p.keys('Escape')
      } else p.type(text, submit)
      // Lines (the shell again) and a cut screen are not compared.
      const whole = seen.text.startsWith('[screen: ') && !seen.text.includes('[… output omitted]')
      const rows = whole ? screenRowsOf(seen.text, before) : []
      if (whole) await p.waitFor((shown) => JSON.stringify(shown) === JSON.stringify(rows))
      before = rows
      return seen.text
    }
    return { id, type }
  }

  it.skipIf(!onPath('vim'))('shows only the rows an edit in vim changed and the cursor row, as tmux shows them; a new file fills every row', async () => {
    const { type } = await pair()
    writeFileSync(join(harness!.workspace, 'a.txt'), 'alpha\nbeta\ngamma\n')
    writeFileSync(join(harness!.workspace, 'b.txt'), Array.from({ length: 20 }, (_, index) => `b line ${index + 1}`).join('\n'))
    const opened = await type('vim -u NONE -i NONE -N -n a.txt')
    expect(opened).not.toContain('unchanged')
    expect(opened.split('\n').slice(0, 4)).toEqual(['[screen: alternate 12x60, cursor 1,1]', 'alpha  ← cursor', 'beta', 'gamma'])
    // The message line "a.txt" … gave way to -- INSERT --, then to nothing: an empty row, shown.
    const edited = await type('iX\u001b', { submit: false })
    expect(edited).toBe(['[screen: alternate 12x60, cursor 1,1]', 'Xalpha  ← cursor', '[rows 2-11 unchanged]', '', '[wait: stdin_read]'].join('\n'))
    const other = await type(':e! b.txt')
    expect(other).not.toContain('unchanged')
    expect(other.split('\n')[1]).toBe('b line 1  ← cursor')
    await type(':q!')
  }, 60_000)

  it.skipIf(!onPath('less'))('shows only less\'s changed status row; a cut screen, a resize and a signal make the next screen whole', async () => {
    const { id, type } = await pair()
    writeFileSync(join(harness!.workspace, 'long.txt'), Array.from({ length: 100 }, (_, index) => `line ${index + 1}`).join('\n'))
    expect(await type('less long.txt')).not.toContain('unchanged')
    const status = await type('=', { submit: false })
    expect(status.split('\n')[0]).toMatch(/^\[screen: alternate 12x60, cursor 12,\d+\]$/)
    expect(status.split('\n')[1]).toBe('[rows 1-11 unchanged]')
    expect(status.split('\n')[2]).toMatch(/^long\.txt lines 1-11\/100 .*  ← cursor$/)

    // A screen cut by the byte bound is not compared with: the one after it is whole.
    const cut = await type('j', { submit: false, maxOutputBytes: 80 })
    expect(cut).toContain('[… output omitted]')
    expect(await type('k', { submit: false })).not.toContain('unchanged')
    expect(await type('=', { submit: false })).toContain('[rows 1-11 unchanged]')

    // A resize there and back gives the same size, yet the next screen is whole. (The tmux pane
    // is not resized, and less redraws when it takes the SIGWINCH: not compared.)
    for (const size of [{ rows: 12, cols: 70 }, { rows: 12, cols: 60 }]) expect((await harness!.call('terminal_resize', { sessionId: id, ...size })).isError).toBe(false)
    const resized = await harness!.call('terminal_send', { sessionId: id, text: '=', submit: false })
    expect(resized.text).toMatch(/^\[screen: alternate 12x60, /)
    expect(resized.text).not.toContain('unchanged')
    // So is the screen after a signal (less stays on SIGINT).
    expect((await harness!.call('terminal_signal', { sessionId: id, signal: 'SIGINT' })).isError).toBe(false)
    const signalled = await harness!.call('terminal_send', { sessionId: id, text: '=', submit: false })
    expect(signalled.text).toMatch(/^\[screen: alternate 12x60, /)
    expect(signalled.text).not.toContain('unchanged')
  }, 60_000)

  it.skipIf(!onPath('less'))('leaves terminal_read\'s screen whole, and the send after it shows its screen whole', async () => {
    const { id, type } = await pair()
    writeFileSync(join(harness!.workspace, 'long.txt'), Array.from({ length: 100 }, (_, index) => `line ${index + 1}`).join('\n'))
    const first = await type('less long.txt')
    await type('=', { submit: false })
    const read = await harness!.call('terminal_read', { sessionId: id, screen: true })
    expect(read.text).not.toContain('unchanged')
    expect(screenRowsOf(`${read.text}\n[wait: x]`)).toEqual(pane!.rows())
    expect(read.text.split('\n').slice(1, 12)).toEqual(first.split('\n').slice(1, 12))
    expect(await type('=', { submit: false })).not.toContain('unchanged')
    await type('q', { submit: false })
  }, 60_000)
})
