import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { eventually } from '@conch/test-support/wait'
import { MAX_REPLIES_PER_SECOND } from '../src/display.ts'
import { linesEqual, openSession, send } from './local-harness.ts'

const QUERIES = fileURLToPath(new URL('./fixtures/queries.py', import.meta.url))
const QUERY_FLOOD = fileURLToPath(new URL('./fixtures/query-flood.py', import.meta.url))

/** The `name=b'…'` lines the query fixture printed, as a map. */
function replies(viewport: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of viewport.split('\n')) {
    const match = /^(\w+)=(b['"].*['"])$/.exec(line)
    if (match) out[match[1]!] = match[2]!
  }
  return out
}

describe('terminal queries', () => {
  it('answers each query byte-exactly from the terminal state, and no reply shows in the output', async () => {
    const session = await openSession({ rows: 30, cols: 400 })
    const names = ['dsr5', 'dsr6', 'decxcpr', 'da1', 'da2', 'osc10', 'osc11', 'osc12', 'decrqm2004', 'decrqm25', 'decrqm9999', 'decrqm4', 'xtversion', 'size']
    const result = await send(session, `python3 ${QUERIES} text:abc ${names.join(' ')}`)
    expect(result.viewport).toContain('QUERIES-DONE')
    const got = replies(result.viewport)
    expect(got).toEqual({
      dsr5: String.raw`b'\x1b[0n'`,
      // The echoed command is line 1 of a fresh 400-column terminal (one row); `abc` was written on line 2.
      dsr6: String.raw`b'\x1b[2;4R'`,
      decxcpr: String.raw`b'\x1b[?2;4R'`,
      da1: String.raw`b'\x1b[?1;2c'`,
      da2: String.raw`b'\x1b[>0;276;0c'`,
      osc10: String.raw`b'\x1b]10;rgb:e5e5/e5e5/e5e5\x07'`,
      osc11: String.raw`b'\x1b]11;rgb:0000/0000/0000\x1b\\'`,
      osc12: String.raw`b'\x1b]12;rgb:e5e5/e5e5/e5e5\x07'`,
      // bash turns bracketed paste off before it runs a command.
      decrqm2004: String.raw`b'\x1b[?2004;2$y'`,
      decrqm25: String.raw`b'\x1b[?25;1$y'`,
      decrqm9999: String.raw`b'\x1b[?9999;0$y'`,
      decrqm4: String.raw`b'\x1b[4;2$y'`,
      xtversion: String.raw`b'\x1bP>|conch(0.1.0)\x1b\\'`,
      size: String.raw`b'\x1b[8;30;400t'`,
    })
    // Replies went to the program only: nothing of them in what the model reads.
    const shown = result.viewport.replace(/^\w+=b.*$/gm, '')
    expect(shown).not.toMatch(/\d+;\d+R|rgb:|conch\(0|\$y|1;2c/)
    expect(linesEqual(shown, 'abc')).toBe(1)
    expect(session.read({ offset: 0, count: 100 }).text.replace(/^\w+=b.*$/gm, '')).not.toMatch(/\d+;\d+R|rgb:|conch\(0|\$y|1;2c/)
  })

  it('reports the cursor where cursor-addressed text left it', async () => {
    const session = await openSession()
    const result = await send(session, `printf '\\033[2J\\033[7;9HX'; python3 ${QUERIES} dsr6`)
    expect(replies(result.viewport.replace(/^.*(dsr6=)/m, '$1')).dsr6 ?? result.viewport).toBe(String.raw`b'\x1b[7;10R'`)
  })
})

describe('query replies reach only a program still there to read them', () => {
  it('drops the reply to a query from a command that is over: the next command runs as typed', async () => {
    const session = await openSession()
    await send(session, "printf 'A\\033[6nB\\n'")
    const next = await send(session, 'echo clean-$((1+1))')
    expect(next.viewport).not.toContain('command not found')
    expect(linesEqual(next.viewport, 'clean-2')).toBe(1)
  })

  it('answers the shell itself when it reads the reply after the query', async () => {
    const session = await openSession()
    await send(session, `printf '\\033[6n'; read -s -t 10 -d R pos; echo "pos=\${pos#*[}"`)
    // The send may settle while bash waits in its read; the answer follows.
    let text = ''
    await eventually(() => /^pos=/m.test((text = session.read({ offset: 0, count: 20 }).text)), 15_000)
    expect(text).toMatch(/^pos=\d+;1$/m)
  })

  it.skipIf(spawnSync('sh', ['-c', 'command -v vim'], { stdio: 'ignore' }).status !== 0)('answers vim in front: its secondary device attributes arrive', async () => {
    const session = await openSession()
    await send(session, 'vim -u NONE -i NONE -N')
    const shown = await send(session, ':echo v:termresponse')
    expect(shown.viewport.split('\n').at(-1)).toContain('[>0;276;0c')
    await send(session, ':q!')
  })
})

describe('cursor-addressed output on the normal screen', () => {
  it('places every row where a person would see it', async () => {
    const session = await openSession({ rows: 50 })
    const result = await send(session, `printf '\\033[2J\\033[1;1HRow one\\033[5;1HRow five\\033[40;1H\\rF1Help F10Quit\\033[K\\n'`)
    const rows = result.viewport.split('\n')
    expect(rows[0]).toMatch(/^\[screen: normal 50x160, cursor \d+,\d+\]$/)
    expect(rows[1]).toBe('Row one')
    expect(rows[5]).toBe('Row five')
    expect(rows[40]).toBe('F1Help F10Quit')
    expect(rows.slice(2, 5)).toEqual(['', '', ''])
    expect(rows.at(-1)).toBe('$  ← cursor')
  })

  it('keeps rows apart that a status line would otherwise join', async () => {
    const session = await openSession()
    const result = await send(session, `printf '\\033[1;1Htop-left\\033[2;1Hsecond-row\\n'`)
    const rows = result.viewport.split('\n')
    expect(rows[1]).toMatch(/^top-left/)
    expect(rows[2]).toBe('second-row')
  })

  it('goes back to lines once the addressed screen scrolled out', async () => {
    const session = await openSession({ rows: 10 })
    await send(session, 'clear')
    const result = await send(session, 'seq 1 30')
    expect(result.viewport).not.toMatch(/^\[screen:/)
    for (const n of ['1', '15', '30']) expect(linesEqual(result.viewport, n)).toBe(1)
  })
})

describe('a hostile program', () => {
  it('flooding queries it never reads gets a bounded number of replies, and the terminal stays usable', async () => {
    const session = await openSession({ idleSilenceMs: 1000 })
    // 20000 DSR queries at once from a program that reads nothing while they are answered; it
    // then counts the replies queued on its input (not their echo: see the fixture).
    const started = performance.now()
    await send(session, `python3 ${QUERY_FLOOD}; echo flood-$((6 * 7))`)
    let page = ''
    await eventually(() => /^flood-42$/m.test((page = session.read({ offset: 0, count: 1000 }).text)), 15_000)
    // Replies are bounded per one-second window; the windows that can have opened are those
    // begun since the send started, however slowly a loaded machine parsed the flood.
    const windows = 1 + Math.floor((performance.now() - started) / 1000)
    const counted = /^replies=(\d+) stray=(\d+)$/m.exec(page)
    expect(counted, JSON.stringify(page.slice(-2000))).not.toBeNull()
    expect({ replies: Number(counted![1]) > 0, stray: Number(counted![2]) }).toEqual({ replies: true, stray: 0 })
    expect(Number(counted![1])).toBeLessThanOrEqual(windows * MAX_REPLIES_PER_SECOND)
    // The terminal goes on: the next command runs intact.
    const next = await send(session, 'echo after-flood')
    expect(linesEqual(next.viewport, 'after-flood')).toBe(1)
  }, 20_000)

  it('switching screens thousands of times ends in line mode with its output intact', async () => {
    const session = await openSession()
    const result = await send(session, `for i in $(seq 3000); do printf '\\033[?1049hX\\033[?1049l'; done; echo toggles-done`)
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport).not.toMatch(/^\[screen:/)
    expect(linesEqual(result.viewport, 'toggles-done')).toBe(1)
  })
})
