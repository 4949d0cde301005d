/**
 * Real full-screen and screen-asking programs: vim, git with vim as its editor, ipython
 * (prompt_toolkit asks for the cursor position), top or htop, dialog and less.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { SendResult } from '@conch/pty'
import { onPath, tempFolders } from '@conch/test-support/homes'
import { gitRepo, linesEqual, openSession, send } from './local-harness.ts'

const workdir = tempFolders('conch-screen-')

/** A clean vim: no user vimrc or viminfo, so every run draws the same screen. */
const VIM = 'vim -u NONE -i NONE -N'

/** A result rendered as a screen contains no escape sequences or other control bytes. */
function expectPlainScreen(result: SendResult, buffer: 'alternate' | 'normal' | 'alternate|normal') {
  expect(result.viewport.split('\n')[0]).toMatch(new RegExp(`^\\[screen: (${buffer}) \\d+x\\d+, cursor \\d+,\\d+\\]$`))
  expect(result.viewport).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/)
}


// Each real program is installed on the CI image (see the README's test setup); a machine without
// one skips only that program's tests, never the rest of the file.
describe.skipIf(!onPath('vim'))('vim', () => {
  it('edits and saves a file, shows the buffer and the mode line as rows, and the next command is not lost', async () => {
    const dir = workdir()
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    const opened = await send(session, `${VIM} x.txt`)
    expect(opened.waitReason).toBe('stdin_read')
    expectPlainScreen(opened, 'alternate')
    const rows = opened.viewport.split('\n')
    // An empty buffer: the cursor line, then `~` rows, then vim's message line with the file name.
    expect(rows[2]).toBe('~')
    expect(rows.some((row) => row.includes('"x.txt"'))).toBe(true)

    // Typed text and <Esc> go in two sends: after an <Esc> vim waits for the rest of a possible
    // key code while it reads the terminal, before it redraws.
    const inserted = await send(session, 'ihello', false)
    expectPlainScreen(inserted, 'alternate')
    const editing = inserted.viewport.split('\n')
    expect(editing[1]).toBe('hello  ← cursor')
    expect(editing.at(-1)).toMatch(/^-- INSERT --/)
    await send(session, '\x1b', false)

    const saved = await send(session, ':wq')
    expect(saved.viewport).not.toMatch(/^\[screen:/)
    const cat = await send(session, 'cat x.txt')
    expect(cat.waitReason).toBe('stdin_read')
    expect(linesEqual(cat.viewport, 'hello')).toBe(1)
    expect(readFileSync(join(dir, 'x.txt'), 'utf8')).toBe('hello\n')
  }, 30_000)

  it('a second full-screen program starts on a blank alternate screen, not on the rows vim left there', async () => {
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: workdir() })
    expect((await send(session, `${VIM} x.txt`)).waitReason).toBe('stdin_read')
    await send(session, ':q!')
    const paged = await send(session, 'seq 1 500 | less')
    expectPlainScreen(paged, 'alternate')
    expect(paged.viewport.split('\n').slice(1, 4)).toEqual(['1', '2', '3'])
  }, 30_000)
})

describe.skipIf(!onPath('vim') || !onPath('git'))('git with vim as its editor', () => {
  const repo = () => gitRepo(workdir(), VIM)
  const log = (dir: string) => execFileSync('git', ['log', '--format=%s'], { cwd: dir, encoding: 'utf8' }).trim().split('\n')

  it('git commit opens vim on the message, and the message written there is committed', async () => {
    const dir = repo()
    writeFileSync(join(dir, 'c'), 'c\n')
    execFileSync('git', ['add', 'c'], { cwd: dir })
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    const editing = await send(session, 'git commit')
    expectPlainScreen(editing, 'alternate')
    expect(editing.viewport).toContain('# Please enter the commit message')
    await send(session, 'iadd c from vim\x1b', false)
    const done = await send(session, ':wq')
    expect(done.waitReason).toBe('stdin_read')
    expect(log(dir)[0]).toBe('add c from vim')
  }, 30_000)

  it('git rebase -i rewords a commit with vim, both editors in turn', async () => {
    const dir = repo()
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    const todo = await send(session, 'git rebase -i HEAD~1')
    expectPlainScreen(todo, 'alternate')
    expect(todo.viewport).toMatch(/^pick [0-9a-f]+ add b/m)
    await send(session, 'cwreword\x1b', false)
    const message = await send(session, ':wq')
    expectPlainScreen(message, 'alternate')
    expect(message.viewport.split('\n')[1]).toMatch(/^add b/)
    await send(session, 'ccreworded b\x1b', false)
    const done = await send(session, ':wq')
    expect(done.waitReason).toBe('stdin_read')
    expect(log(dir)).toEqual(['reworded b', 'add a'])
  }, 30_000)
})

// prompt_toolkit waits in epoll beside asyncio's socketpair with a 0.5 s timeout (it polls the
// terminal size): its wait holds wake sources, and it settles stdin_read only because each wake-up
// in the window is proven to be that timer's (wait-evidence.ts).
describe.skipIf(!onPath('ipython3'))('ipython (prompt_toolkit asks for the cursor position)', () => {
  it('x = 6 * 7 then x shows Out[2]: 42, each settling stdin_read on the corroborated read', async () => {
    const session = await openSession({ idleSilenceMs: 5000 })
    // A cold start of ipython on a loaded machine runs silently for seconds: the start gets a
    // longer silence tier of its own (it is busy, and the /proc tier sees it running).
    const started = await session.startSend({ text: 'ipython3 --no-banner --colors=NoColor --no-confirm-exit', submit: true, idleMs: 30_000 }).done
    expect(started.waitReason, started.evidence.detail).toBe('stdin_read')
    const assign = await send(session, 'x = 6 * 7')
    expect(assign.waitReason, assign.evidence.detail).toBe('stdin_read')
    // Its wait held the socketpair and a timer due soon: the read was corroborated, and the
    // reader's wake-ups in the window were shown to be its own timer's.
    expect(assign.evidence.corroborated?.sources).toContainEqual(expect.stringMatching(/^timer in \d+ ms$/))
    expect(assign.evidence.detail).toMatch(/woke only at the end of its own timeout/)
    const shown = await send(session, 'x')
    expect(shown.waitReason, shown.evidence.detail).toBe('stdin_read')
    expect(shown.viewport).toMatch(/Out\[2\]: 42/)
    await send(session, 'exit')
  }, 60_000)
})

describe('top or htop, dialog and less as screens', () => {
  it.skipIf(!onPath('htop') && !onPath('top'))('shows the header rows and the process table of htop (or top)', async () => {
    const session = await openSession({ idleSilenceMs: 1500 })
    const program = onPath('htop') ? 'htop' : 'top'
    const result = await send(session, program)
    expectPlainScreen(result, 'alternate')
    if (program === 'htop') {
      expect(result.viewport).toMatch(/PID\s+USER/)
      expect(result.viewport).toMatch(/F1\s*Help/)
    } else {
      expect(result.viewport).toMatch(/^top - /m)
      expect(result.viewport).toMatch(/PID\s+USER/)
    }
    await session.signal('SIGINT').catch(() => undefined)
    await send(session, 'q', false)
  }, 30_000)

  it.skipIf(!onPath('top'))('top -d 1, waiting for a key with a timeout of its own, is ready once its screen is drawn', async () => {
    const session = await openSession({ idleSilenceMs: 3000, timeoutMs: 10_000 })
    const result = await send(session, 'top -d 1')
    expect(result.waitReason, result.evidence.detail).toBe('stdin_read')
    expect(result.evidence.detail).toMatch(/^top\[\d+\] \w+ fd0 \S+; a timed read: its own timeout ends in \d+ ms/)
    expect(result.viewport).toMatch(/^top - /m)
    expect(result.viewport).toMatch(/PID\s+USER/)
    const quit = await send(session, 'q', false)
    expect(quit.waitReason).toBe('stdin_read')
  }, 30_000)

  it.skipIf(!onPath('dialog'))('shows a dialog --yesno box with its question and buttons, and its answer reaches the shell', async () => {
    const session = await openSession({ idleSilenceMs: 1500 })
    const box = await send(session, `dialog --yesno 'Delete the widgets?' 7 40; echo "answer=$?"`)
    // dialog draws on the alternate screen or, where its terminfo entry says so, the normal one.
    expectPlainScreen(box, 'alternate|normal')
    expect(box.viewport).toContain('Delete the widgets?')
    expect(box.viewport).toMatch(/<\s*Yes\s*>/)
    expect(box.viewport).toMatch(/<\s*No\s*>/)
    const answered = await send(session, '\r', false)
    expect(linesEqual(answered.viewport, 'answer=0')).toBe(1)
  }, 30_000)

  it('shows less on a long file as a screen, one page of it', async () => {
    const dir = workdir()
    writeFileSync(join(dir, 'long.txt'), Array.from({ length: 500 }, (_, i) => `line-${i + 1}`).join('\n'))
    const session = await openSession({ rows: 20 }, { cwd: dir })
    const page = await send(session, 'less long.txt')
    expectPlainScreen(page, 'alternate')
    const rows = page.viewport.split('\n')
    expect(rows[1]).toBe('line-1')
    expect(rows[19]).toBe('line-19')
    expect(page.viewport).not.toContain('line-20\n')
    const next = await send(session, ' ', false)
    expect(next.viewport.split('\n')[1]).toBe('line-20')
    const quit = await send(session, 'q', false)
    expect(quit.viewport).not.toMatch(/^\[screen:/)
    expect(linesEqual((await send(session, 'echo after-less')).viewport, 'after-less')).toBe(1)
  }, 30_000)

  it('keeps a full-screen result within maxReadBytes and free of escape sequences on a wide screen of wide characters', async () => {
    const dir = workdir()
    writeFileSync(join(dir, 'wide.txt'), Array.from({ length: 100 }, () => '界'.repeat(150)).join('\n'))
    // 60 rows of 150 wide characters are about 27 KB: more than the 16 KiB bound.
    const session = await openSession({ rows: 60, cols: 300, maxReadBytes: 16384, scrollbackMaxBytes: 65536 }, { cwd: dir })
    const page = await send(session, 'less -S wide.txt')
    expectPlainScreen(page, 'alternate')
    expect(page.truncated).toBe(true)
    expect(Buffer.byteLength(page.viewport)).toBeLessThanOrEqual(16384)
    expect(page.viewport.split('\n')[1]).toBe('界'.repeat(150))
    await send(session, 'q', false)
  }, 30_000)
})

describe('a program that exits leaving the alternate screen on', () => {
  it('each later result at the shell prompt, shown as a screen, carries the exit status the prompt reported', async () => {
    const session = await openSession({ idleSilenceMs: 5000 })
    const left = await send(session, `(printf '\\033[?1049h'; exit 3)`)
    expectPlainScreen(left, 'alternate')
    expect(left).toMatchObject({ waitReason: 'stdin_read', exitStatus: 3, evidence: { tier: 'prompt' } })
    expect(await send(session, 'true')).toMatchObject({ exitStatus: 0, evidence: { tier: 'prompt' } })
    // A program killed on its screen (a crash) leaves it on too.
    const killed = await send(session, `sh -c 'printf "\\033[?1049hdrawn"; kill -KILL $$'`)
    expectPlainScreen(killed, 'alternate')
    expect(killed).toMatchObject({ waitReason: 'stdin_read', exitStatus: 137, evidence: { tier: 'prompt' } })
    // Output after the prompt is not a prompt: a program printing `$ ` and waiting is not the shell.
    const asks = await send(session, `printf 'x\\n$ '; read -r answer`)
    expect(asks.exitStatus).toBeUndefined()
    expect((await send(session, 'yes')).exitStatus).toBe(0)
  }, 30_000)

  it('finds the prompt by cells after wide characters and emoji on its row', async () => {
    const session = await openSession({ idleSilenceMs: 5000 })
    for (const [text, status] of [['中文 ', 3], ['😀x', 4], ['e\u0301界', 5]] as const) {
      const left = await send(session, `(printf '\\033[?1049h${text}'; exit ${status})`)
      expectPlainScreen(left, 'alternate')
      expect(left.viewport, text).toContain(`${text}$`)
      expect(left, text).toMatchObject({ waitReason: 'stdin_read', exitStatus: status, evidence: { tier: 'prompt' } })
    }
  }, 30_000)
})
