/**
 * Differential tests: the same input to a conch session and to a tmux pane of the same size
 * (tests/tmux.ts) running the same bash; the final screens must agree row by row. A recorded
 * byte stream is `cat`-ed in both; a real program gets the same keys in both.
 *
 * A case where conch still disagrees with the terminal runs as `it.fails` and names the
 * difference, so it turns into a failure the day conch agrees and must then become an ordinary
 * case. Programs whose screens change by themselves (top, htop) are compared on the rows that
 * do not, with every number made `#`.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { onPath } from '@conch/test-support/homes'
import type { LocalSession } from '../src/session.ts'
import { openSession, send } from './local-harness.ts'
import { hasTmux, screenRows, TmuxPane } from './tmux.ts'

const runs = (program: string, args: string[]) => spawnSync(program, args, { stdio: 'ignore', timeout: 20_000 }).status === 0
/** A row with every run of digits as `#` and no blanks (for rows whose figures, and so their widths, change by themselves). */
const numbersHidden = (row: string) => row.replace(/\d+/g, '#').replace(/ +/g, '')

const dir = mkdtempSync(join(tmpdir(), 'conch-diff-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const panes: TmuxPane[] = []
afterEach(() => {
  for (const pane of panes.splice(0)) pane.close()
})

const ROWS = 24
const COLS = 80

async function pair(rows = ROWS, cols = COLS): Promise<{ session: LocalSession; pane: TmuxPane }> {
  const [session, pane] = await Promise.all([openSession({ rows, cols, idleSilenceMs: 3000 }, { cwd: dir }), TmuxPane.open({ rows, cols, cwd: dir })])
  panes.push(pane)
  return { session, pane }
}

/** Writes `bytes` to a file named `name` in the shared directory; `cat name` replays it. */
function recording(name: string, bytes: string | Buffer): string {
  writeFileSync(join(dir, name), bytes)
  return name
}

/** `cat`s a recorded byte stream in both and compares the screens once tmux shows `last` on the row above its next prompt. */
async function replay(name: string, bytes: string | Buffer, last: string, rows = ROWS, cols = COLS) {
  const { session, pane } = await pair(rows, cols)
  const file = recording(name, bytes)
  const result = await send(session, `cat ${file}`)
  expect(result.waitReason).toBe('stdin_read')
  pane.type(`cat ${file}`)
  const expected = await pane.waitFor((shown) => shown.at(-1) === '$' && shown.at(-2) === last)
  expect(screenRows(session.screen())).toEqual(expected)
}

describe.skipIf(!hasTmux)('conch and tmux show the same screen', () => {
  describe('byte streams replayed with cat', () => {
    it('a wide line of 2000 columns wraps as the terminal wraps it', async () => {
      await replay('wide.txt', `${'0123456789'.repeat(200)}\nend\n`, 'end')
    }, 30_000)

    it('CJK and combining characters take the cells the terminal gives them', async () => {
      await replay('cjk.txt', '中文字符 wide\ne\u0301te\u0301 combining\n表\u0308 both\n', '表\u0308 both')
    }, 30_000)

    it('progress-bar redraws with CR leave the last frame', async () => {
      await replay('progress.txt', '10%\r50%\r100% done\n', '100% done')
    }, 30_000)

    it('clear then text shows only what came after the clear', async () => {
      await replay('clear.txt', 'before\n\x1b[H\x1b[2Jafter clear\n', 'after clear')
    }, 30_000)

    it('a line written at the bottom row scrolls the screen as the terminal does', async () => {
      await replay('scroll.txt', `\x1b[H\x1b[2JRow one\n\x1b[${ROWS};1Hbottom row\n`, 'bottom row')
    }, 30_000)

    it('a redraw that moves up two lines rewrites them', async () => {
      await replay('up.txt', 'aaa\nbbb\n\x1b[2Axyz\n\n', 'bbb')
    }, 30_000)

    it('a reverse index rewrites the line above', async () => {
      await replay('ri.txt', 'one\ntwo\x1bM\rTWO\n\n', 'two')
    }, 30_000)
  })

  describe('wide characters take two cells, combining marks none', () => {
    const LINE = '中文字符'.repeat(12)

    it('a line of CJK characters longer than the width wraps where tmux wraps it, and a cursor moving up counts its rows', async () => {
      // 48 wide characters are 96 cells: two rows at 80 columns. Two rows up is the first of them.
      await replay('cjk-wrap.txt', `${LINE}\n\x1b[2A\rU\n\n`, LINE.slice(40))
    }, 30_000)

    it('a CJK character that would start in the last column wraps whole onto the next row', async () => {
      // The CR acts on the row the character went to: Y lands on its left half.
      await replay('cjk-margin.txt', `${'0'.repeat(COLS - 1)}中X\rY\n`, 'Y X')
    }, 30_000)

    it('an emoji and a combining sequence on a row take the cells tmux gives them', async () => {
      await replay('emoji.txt', 'a\u{1F600}b\u{1F44D}ce\u0301d\n\u{1F600}\u{1F600}\u{1F600}e\u0301\x1b[3GX\n', '\u{1F600}X \u{1F600}e\u0301')
    }, 30_000)

    it('bash line editing over a wide-character command line ends with the same rows as tmux', async () => {
      const { session, pane } = await pair()
      // 2 + 5 + 72 + 3 cells: the command line wraps at 80 columns.
      const command = `echo ${'中文字符'.repeat(9)}xyz`
      const keys = ['Left', 'Left', 'Left', 'Left', 'Left', 'Backspace', 'Z']
      await session.startSend({ text: command, submit: false }).done
      await session.startSend({ keys, submit: false }).done
      pane.type(command, false)
      pane.keys('Left', 'Left', 'Left', 'Left', 'Left', 'BSpace', 'Z')
      const typed = `${command.slice(0, -6)}Z${command.slice(-5)}`
      expect(screenRows(session.screen())).toEqual(await pane.waitFor((rows) => rows.join('').replace(/ /g, '').includes(typed.replace(/ /g, ''))))
      const result = await session.startSend({ keys: ['Enter'], submit: false }).done
      expect(result.waitReason).toBe('stdin_read')
      pane.keys('Enter')
      const output = typed.slice(5)
      expect(screenRows(session.screen())).toEqual(await pane.waitFor((rows) => rows.at(-1) === '$' && rows.at(-2) === output))
    }, 30_000)

    it("the send result's text for printf of wide and combining lines is tmux's capture", async () => {
      const { session, pane } = await pair()
      const command = `s=中文字符x; printf '%s%s%s%s%s%s%s%s%s%s\\n' $s $s $s $s $s $s $s $s $s $s; printf 'e\\u0301t\\u00e9 \\U1F600 ok\\n'`
      const result = await send(session, command)
      expect(result.waitReason).toBe('stdin_read')
      pane.type(command)
      const captured = await pane.waitFor((rows) => rows.at(-1) === '$' && rows.at(-2)?.endsWith(' ok') === true)
      const joined = pane.joinedRows()
      expect(result.viewport.split('\n').slice(1, 3)).toEqual(joined.slice(-3, -1))
      expect(screenRows(session.screen())).toEqual(captured)
    }, 30_000)
  })

  describe('line editing that deletes and inserts characters (DCH, ICH, ECH) at 160 columns', () => {
    /** Types `command` without Enter in both, then each step's keys; compares the screens once tmux shows `$ ` and the step's line. */
    async function editLine(command: string, steps: { keys: string[]; tmuxKeys: string[]; line: string }[]) {
      const { session, pane } = await pair(40, 160)
      await session.startSend({ text: command, submit: false }).done
      pane.type(command, false)
      for (const step of steps) {
        await session.startSend({ keys: step.keys, submit: false }).done
        pane.keys(...step.tmuxKeys)
        const expected = await pane.waitFor((rows) => rows.at(-1) === `$ ${step.line}`.trimEnd())
        expect(screenRows(session.screen())).toEqual(expected)
      }
      const result = await session.startSend({ keys: ['Enter'], submit: false }).done
      expect(result.waitReason).toBe('stdin_read')
      pane.keys('Enter')
      expect(screenRows(session.screen())).toEqual(await pane.waitForPrompt(2))
      expect(result.viewport.split('\n')[0]).toBe(steps.at(-1)!.line)
    }

    it('Backspace in the middle of the line deletes the character before the cursor', async () => {
      await editLine('echo abcde', [{ keys: ['Left', 'Left', 'Backspace'], tmuxKeys: ['Left', 'Left', 'BSpace'], line: 'echo abde' }])
    }, 30_000)

    it('Backspace in the middle of a line of wide characters deletes one of them', async () => {
      await editLine('echo 文件一二三', [{ keys: ['Left', 'Left', 'Backspace'], tmuxKeys: ['Left', 'Left', 'BSpace'], line: 'echo 文件二三' }])
    }, 30_000)

    it('Delete at the start of the line and C-w at its end delete what the terminal shows deleted', async () => {
      await editLine('echo abcdXYef', [
        { keys: ['Home', 'Delete', 'Delete'], tmuxKeys: ['Home', 'DC', 'DC'], line: 'ho abcdXYef' },
        { keys: ['C-e', 'C-w'], tmuxKeys: ['C-e', 'C-w'], line: 'ho ' },
      ])
    }, 30_000)

    for (const [edit, command, shown] of [
      ['DCH', "printf 'abcdef\\e[3D\\e[2Pxy\\n'", 'abcxy'],
      ['ICH', "printf 'abcdef\\e[3D\\e[@Z\\n'", 'abcZdef'],
      ['ECH', "printf 'abcdefghij\\r\\e[3C\\e[4X\\n'", 'abc    hij'],
    ]) {
      it(`${edit} from a program edits the row as the terminal does`, async () => {
        const { session, pane } = await pair(40, 160)
        const result = await send(session, command!)
        expect(result.waitReason).toBe('stdin_read')
        pane.type(command!)
        expect(screenRows(session.screen())).toEqual(await pane.waitFor((rows) => rows.at(-1) === '$' && rows.at(-2) === shown))
        expect(result.viewport.split('\n')[1]).toBe(shown)
      }, 30_000)
    }
  })

  describe('real programs with the same keys', () => {
    it('reset leaves a clean screen with the prompt', async () => {
      const { session, pane } = await pair()
      await send(session, 'echo before')
      pane.type('echo before')
      await pane.waitForPrompt(2)
      const result = await send(session, 'reset')
      expect(result.waitReason).toBe('stdin_read')
      pane.type('reset')
      const expected = await pane.waitFor((rows) => rows.at(-1) === '$' && !rows.includes('before'))
      expect(screenRows(session.screen())).toEqual(expected)
    }, 30_000)

    it('^C at the prompt: readline discards the line and shows a fresh prompt, no Enter after it', async () => {
      const { session, pane } = await pair()
      await send(session, 'echo half', false)
      pane.type('echo half', false)
      const result = await send(session, '\x03')
      expect(result.waitReason).toBe('stdin_read')
      pane.keys('C-c')
      const expected = await pane.waitFor((rows) => rows.at(-2) === '$ echo half^C' && rows.at(-1) === '$')
      expect(screenRows(session.screen())).toEqual(expected)
    }, 30_000)

    it('bash 5.2 redraws a multi-line paste in place', async () => {
      const { session, pane } = await pair()
      const loop = 'for f in a b; do\n  echo "file $f"\ndone'
      const result = await send(session, loop)
      expect(result.waitReason).toBe('stdin_read')
      pane.paste(loop)
      const expected = await pane.waitFor((rows) => rows.at(-1) === '$' && rows.includes('file b'))
      expect(screenRows(session.screen())).toEqual(expected)
    }, 30_000)

    it('bash 5.2 redraws a heredoc paste in place', async () => {
      const { session, pane } = await pair()
      const heredoc = "cat > notes.txt <<'EOF'\nfirst\nsecond\nEOF"
      const result = await send(session, heredoc)
      expect(result.waitReason).toBe('stdin_read')
      pane.paste(heredoc)
      const expected = await pane.waitFor((rows) => rows.at(-1) === '$' && rows.includes('EOF'))
      expect(screenRows(session.screen())).toEqual(expected)
    }, 30_000)

    it('a program that moves the cursor up and waits leaves the lines below it on the screen', async () => {
      const { session, pane } = await pair()
      const command = "printf 'one\\ntwo\\nthree\\n\\033[2A'; read answer"
      const result = await send(session, command)
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport.split('\n').slice(1)).toEqual(['one', 'two', 'three'])
      pane.type(command)
      const expected = await pane.waitFor((rows) => rows.includes('three'))
      expect(screenRows(session.screen())).toEqual(expected)
      // The answer is typed over `two`; the next prompt is written over `three`.
      await send(session, 'hello')
      pane.type('hello')
      expect(screenRows(session.screen())).toEqual(await pane.waitFor((rows) => rows.includes('hello') && rows.at(-1)?.startsWith('$') === true))
    }, 30_000)

    it('python moving the cursor up before input() leaves the lines below it on the screen', async () => {
      const { session, pane } = await pair()
      writeFileSync(join(dir, 'up.py'), "import sys\nsys.stdout.write('one\\ntwo\\nthree\\n\\x1b[2A')\nsys.stdout.flush()\nprint('got', input())\n")
      const result = await send(session, 'python3 up.py')
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport.split('\n').slice(1)).toEqual(['one', 'two', 'three'])
      pane.type('python3 up.py')
      expect(screenRows(session.screen())).toEqual(await pane.waitFor((rows) => rows.includes('three')))
      const answered = await send(session, 'x')
      pane.type('x')
      expect(screenRows(session.screen())).toEqual(await pane.waitFor((rows) => rows.at(-1)?.startsWith('$') === true && rows.length > 3))
      expect(answered.viewport.split('\n')).toContain('got x')
    }, 30_000)

    describe('command lines and output at the right margin of 160 columns', () => {
      const WIDE = 160
      /** Sends `command` after a command with output, in both; compares the screens once tmux shows `last` above its prompt. */
      async function atMargin(command: string, last: string) {
        const { session, pane } = await pair(ROWS, WIDE)
        const before = 'N=5; echo "N=$N"'
        await send(session, before)
        pane.type(before)
        await pane.waitForPrompt(2)
        const result = await send(session, command)
        expect(result.waitReason).toBe('stdin_read')
        pane.type(command)
        const expected = await pane.waitFor((rows) => rows.at(-1) === '$' && rows.at(-2) === last)
        expect(screenRows(session.screen())).toEqual(expected)
        return result
      }

      // With the prompt `$ `, 158 characters fill the row exactly: bash forces the wrap with a space and redraws the last column.
      for (const length of [157, 158, 159, 160]) {
        it(`a ${length}-character command line with output below it`, async () => {
          const command = `echo FIRST-LINE; echo SECOND-LINE #${'x'.repeat(length - 35)}`
          const result = await atMargin(command, 'SECOND-LINE')
          expect(result.viewport.split('\n')).toEqual([command, 'FIRST-LINE', 'SECOND-LINE', '$ '])
        }, 30_000)
      }

      it('a command line of exactly the width without output', async () => {
        const command = `true #${'x'.repeat(WIDE - 2 - 6)}`
        const result = await atMargin(command, `$ ${command}`)
        expect(result.viewport.split('\n')).toEqual([command, '$ '])
      }, 30_000)

      it('output lines of the width minus one, the width and the width plus one, each ended by CR LF', async () => {
        const result = await atMargin(`for n in ${WIDE - 1} ${WIDE} ${WIDE + 1}; do printf "%0\${n}d\\n" 0; done; echo END`, 'END')
        expect(result.viewport.split('\n').slice(1, 4).map((line) => line.length)).toEqual([WIDE - 1, WIDE, WIDE + 1])
      }, 30_000)

      it('a command line that fills the row exactly with wide characters in it', async () => {
        // `$ echo FIRST-LINE; echo 中文 #` is 30 cells: 130 more fill the row.
        await atMargin(`echo FIRST-LINE; echo \u4e2d\u6587 #${'x'.repeat(WIDE - 30)}`, '\u4e2d\u6587')
      }, 30_000)

      it('a wide character that does not fit in the last column wraps early', async () => {
        await atMargin(`printf '%0${WIDE - 1}d\u4e2d\\n' 0; echo END`, 'END')
      }, 30_000)
    })

    async function vimThenQuit(session: LocalSession, pane: TmuxPane): Promise<void> {
      writeFileSync(join(dir, 'v.txt'), 'alpha\nbeta\n')
      const opened = await send(session, 'vim -u NONE -i NONE -N -n v.txt')
      expect(opened.waitReason).toBe('stdin_read')
      pane.type('vim -u NONE -i NONE -N -n v.txt')
      // vim writes its message line before the buffer's rows: wait for both.
      const expected = await pane.waitFor((rows) => rows.at(-1)?.startsWith('"v.txt"') === true && rows.includes('alpha') && rows.includes('beta'))
      expect(screenRows(session.screen())).toEqual(expected)
      await send(session, ':q')
      pane.type(':q')
      await pane.waitForPrompt(2)
      expect(screenRows(session.screen())).toEqual(pane.rows())
    }

    it.skipIf(!onPath('vim'))('vim shows the same screen, and the same lines after it quits', async () => {
      const { session, pane } = await pair()
      await vimThenQuit(session, pane)
    }, 60_000)

    it.skipIf(!onPath('vim'))('a text ending in ESC gets no Enter, and Enter after Escape waits until vim took it: the screens vim settles on', async () => {
      const { session, pane } = await pair()
      writeFileSync(join(dir, 'e.txt'), 'alpha\nbeta\n')
      // defaults.vim: `ttimeoutlen` 100 ms, the ruler and showcmd on.
      const command = 'vim -u DEFAULTS -i NONE -n e.txt'
      expect((await send(session, command)).waitReason).toBe('stdin_read')
      pane.type(command)
      await pane.waitFor((rows) => rows.at(-1)?.startsWith('"e.txt"') === true && rows.includes('beta'))
      // Submitted, a text ending in ESC is pressed as typed, with no Enter: the cursor stays on the edited line.
      const left = await send(session, 'iHello\x1b')
      expect(left.waitReason).toBe('stdin_read')
      pane.type('iHello', false)
      pane.keys('Escape')
      const edited = await pane.waitFor((rows) => rows[0] === 'Helloalpha' && rows.at(-1)?.includes('INSERT') === false && /\b1,5\b/.test(rows.at(-1) ?? ''))
      expect(screenRows(left.viewport)).toEqual(edited)
      // Enter read within vim's wait for the rest of a key code after the ESC would be read with it (`^[^M`).
      const result = await session.startSend({ keys: ['A', { text: '!' }, 'Escape', 'Enter'], submit: false }).done
      expect(result.waitReason).toBe('stdin_read')
      // A person: the keys, then Enter once INSERT is gone, which moves to the next line.
      pane.type('A!', false)
      pane.keys('Escape')
      await pane.waitFor((rows) => rows[0] === 'Helloalpha!' && rows.at(-1)?.includes('INSERT') === false)
      pane.keys('Enter')
      const settled = await pane.waitFor((rows) => /\b2,1\b/.test(rows.at(-1) ?? ''))
      expect(screenRows(result.viewport)).toEqual(settled)
    }, 60_000)

    /** less on a file shorter than the screen writes its lines from the row the cursor was on. */
    async function lessShort(session: LocalSession, pane: TmuxPane): Promise<void> {
      writeFileSync(join(dir, 'v.txt'), 'alpha\nbeta\n')
      const paged = await send(session, 'less v.txt')
      expect(paged.waitReason).toBe('stdin_read')
      pane.type('less v.txt')
      const shown = await pane.waitFor((rows) => rows.includes('beta') && rows.some((row) => row.includes('(END)')))
      expect(screenRows(session.screen())).toEqual(shown)
      await send(session, 'q', false)
      pane.type('q', false)
      await pane.waitForPrompt(2)
      expect(screenRows(session.screen())).toEqual(pane.rows())
    }

    it.skipIf(!onPath('less'))('less on a file shorter than the screen shows the same screen, and the same lines after it quits', async () => {
      const { session, pane } = await pair()
      await lessShort(session, pane)
    }, 60_000)

    it.skipIf(!onPath('vim') || !onPath('less'))('less after vim shows the same screen: its lines start on the row the cursor was on', async () => {
      const { session, pane } = await pair()
      await vimThenQuit(session, pane)
      await lessShort(session, pane)
    }, 60_000)

    it.skipIf(!runs('ipython3', ['--version']))('ipython shows a multi-line definition as the terminal does', async () => {
      const { session, pane } = await pair()
      const command = 'ipython3 --no-banner --colors=NoColor --no-confirm-exit --HistoryManager.enabled=False'
      await session.startSend({ text: command, submit: true, idleMs: 30_000 }).done
      pane.type(command)
      await pane.waitFor((rows) => rows.at(-1) === 'In [1]:', 30_000)
      const definition = 'def twice(x):\n    return 2 * x\n'
      await send(session, definition)
      pane.paste(definition)
      const expected = await pane.waitFor((rows) => rows.at(-1) === 'In [2]:')
      expect(screenRows(session.screen())).toEqual(expected)
      await send(session, 'exit')
    }, 90_000)

    it.skipIf(!runs('jshell', ['--version']))('jshell shows a multi-line method definition as the terminal does', async () => {
      const { session, pane } = await pair()
      await session.startSend({ text: 'jshell', submit: true, idleMs: 30_000 }).done
      pane.type('jshell')
      await pane.waitFor((rows) => rows.at(-1) === 'jshell>', 60_000)
      const method = 'int twice(int x) {\n  return 2 * x;\n}'
      await send(session, method)
      pane.paste(method)
      const expected = await pane.waitFor((rows) => rows.at(-1) === 'jshell>' && rows.some((row) => row.includes('created method twice(int)')))
      expect(screenRows(session.screen())).toEqual(expected)
      await send(session, '/exit')
    }, 120_000)

    it.skipIf(!onPath('top'))('top shows the same summary rows', async () => {
      const { session, pane } = await pair()
      await send(session, 'top -d 60')
      pane.type('top -d 60')
      const expected = await pane.waitFor((rows) => rows.some((row) => /^\s*PID USER/.test(row)))
      const conch = screenRows(session.screen())
      const summary = (rows: string[]) => rows.slice(0, rows.findIndex((row) => /^\s*PID USER/.test(row)) + 1).map(numbersHidden)
      expect(summary(conch)).toEqual(summary(expected))
      await send(session, 'q', false)
    }, 30_000)

    it.skipIf(!onPath('htop'))('htop shows the same column header and key bar', async () => {
      const { session, pane } = await pair()
      await send(session, 'htop -d 600')
      pane.type('htop -d 600')
      const expected = await pane.waitFor((rows) => rows.some((row) => row.includes('PID USER')) && /F10Quit/.test(rows.at(-1) ?? ''))
      const conch = screenRows(session.screen())
      const fixed = (rows: string[]) => [rows.find((row) => row.includes('PID USER')), rows.at(-1), rows.length].map((row) => numbersHidden(String(row)))
      expect(fixed(conch)).toEqual(fixed(expected))
      await send(session, 'q', false)
    }, 30_000)

    it.skipIf(!onPath('dialog'))('dialog shows the same box', async () => {
      const { session, pane } = await pair()
      // Unicode box drawing in both (capture-pane prints the alternate character set's letters).
      const command = 'NCURSES_NO_UTF8_ACS=1 dialog --msgbox "same box" 7 30'
      const result = await send(session, command)
      expect(result.waitReason).toBe('stdin_read')
      pane.type(command)
      const expected = await pane.waitFor((rows) => rows.some((row) => row.includes('same box')) && rows.some((row) => row.includes('OK')))
      expect(screenRows(session.screen())).toEqual(expected)
    }, 30_000)

    it.skipIf(!onPath('watch'))('watch shows the same screen', async () => {
      const { session, pane } = await pair()
      // watch sleeps on a timer: the send settles on silence.
      await send(session, "watch -t -n 60 'echo watched'")
      pane.type("watch -t -n 60 'echo watched'")
      const expected = await pane.waitFor((rows) => rows[0] === 'watched')
      expect(screenRows(session.screen())).toEqual(expected)
    }, 30_000)
  })
})
