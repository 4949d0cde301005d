/**
 * What a person types, with real programs (tmux shows the same): keystrokes are typed — a single
 * line, a trailing CR, ESC and other control characters, anything to a full-screen program — and
 * only a block of text for a line editor is pasted. A send that ends in ESC settles only after
 * the program took the ESC as a key, so the next send is not read as the rest of an escape
 * sequence or as Alt+key.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { onPath, tempFolders } from '@conch/test-support/homes'
import { gitRepo, linesEqual, openSession, send } from './local-harness.ts'

const workdir = tempFolders('conch-keys-')

/** vim as it starts for a person without a vimrc: defaults.vim (`ttimeoutlen` 100 ms), no viminfo. */
const VIM = 'vim -u DEFAULTS -i NONE'

const repo = () => gitRepo(workdir(), VIM)
/** Sends `text` ending in ESC, asking for a silence shorter than every program's escape wait. */
async function escape(session: Awaited<ReturnType<typeof openSession>>, text: string) {
  return session.startSend({ text, submit: false, idleMs: 30 }).done
}

const log = (dir: string) => execFileSync('git', ['log', '--format=%s'], { cwd: dir, encoding: 'utf8' }).trim().split('\n')

describe.skipIf(!onPath('vim'))('vim (bracketed paste on, alternate screen)', () => {
  it('an editor command ending in a line break is typed: :wq saves, it is not inserted as text', async () => {
    const dir = workdir()
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    await send(session, `${VIM} x.txt`)
    await send(session, 'ihello\x1b', false)
    const saved = await send(session, ':wq\n', false)
    expect(saved.waitReason, saved.evidence.detail).toBe('stdin_read')
    expect(readFileSync(join(dir, 'x.txt'), 'utf8')).toBe('hello\n')
  }, 30_000)

  it('keys sent right after an <Esc> are not read as the rest of a key code', async () => {
    const dir = workdir()
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    await send(session, `${VIM} x.txt`)
    // A short silence of its own does not let the send return while vim waits `ttimeoutlen` for
    // the rest of a key code: ESC O A is the Up key, and `OA` read in that wait would move up.
    await escape(session, 'ihello\x1b')
    await escape(session, 'OAbove\x1b')
    await send(session, ':wq\n', false)
    expect(readFileSync(join(dir, 'x.txt'), 'utf8')).toBe('Above\nhello\n')
  }, 30_000)
})

describe.skipIf(!onPath('vim') || !onPath('git'))('git with vim as its editor', () => {
  it('git commit: the message and :wq in one text, ending in a line break, commit the message', async () => {
    const dir = repo()
    writeFileSync(join(dir, 'c'), 'c\n')
    execFileSync('git', ['add', 'c'], { cwd: dir })
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    await send(session, 'git commit')
    const done = await send(session, 'iadd c from vim\x1b:wq\n', false)
    expect(done.waitReason, done.evidence.detail).toBe('stdin_read')
    expect(log(dir)[0]).toBe('add c from vim')
  }, 30_000)

  it('git rebase -i: reword the todo line, then the message, each editor command ending in a line break', async () => {
    const dir = repo()
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    await send(session, 'git rebase -i HEAD~1')
    const message = await send(session, 'cwreword\x1b:wq\n', false)
    expect(message.viewport.split('\n')[1]).toMatch(/^add b/)
    const done = await send(session, 'ccreworded b\x1b:wq\n', false)
    expect(done.waitReason, done.evidence.detail).toBe('stdin_read')
    expect(log(dir)).toEqual(['reworded b', 'add a'])
  }, 30_000)
})

describe('bash (readline turns bracketed paste on at every prompt)', () => {
  it('a single line ending in a line break runs without submit; a block runs as one command line', async () => {
    const session = await openSession({ idleSilenceMs: 2000 })
    const line = await send(session, 'echo one-$((1 + 1))\n', false)
    expect(line.waitReason, line.evidence.detail).toBe('stdin_read')
    expect(linesEqual(line.viewport, 'one-2')).toBe(1)
    const block = await send(session, 'for i in 1 2; do\n  echo "n$((i * 10))"\ndone\n', false)
    expect(block.waitReason, block.evidence.detail).toBe('stdin_read')
    expect(linesEqual(block.viewport, 'n10') + linesEqual(block.viewport, 'n20')).toBe(2)
  }, 30_000)

  it('in vi mode, keys sent right after an <Esc> are commands, not the rest of a key code', async () => {
    const session = await openSession({ idleSilenceMs: 2000 })
    await send(session, 'set -o vi')
    await send(session, 'echo ab', false)
    await escape(session, '\x1b')
    // In command mode `A` appends at the end; read within keyseq-timeout of the <Esc>, ESC O A is Up.
    const shown = await send(session, 'OAc-$((2 + 3))')
    expect(linesEqual(shown.viewport, 'abc-5'), shown.viewport).toBe(1)
  }, 30_000)
})

describe.skipIf(!onPath('ipython3'))('ipython (prompt_toolkit turns bracketed paste on)', () => {
  it('a statement ending in a line break runs without submit; a block is pasted and runs', async () => {
    const session = await openSession({ idleSilenceMs: 5000 })
    await session.startSend({ text: 'ipython3 --no-banner --colors=NoColor --no-confirm-exit', submit: true, idleMs: 30_000 }).done
    const assign = await send(session, 'x = 6 * 7\n', false)
    expect(assign.waitReason, assign.evidence.detail).toBe('stdin_read')
    const block = await send(session, 'y = x + 1\nz = y * 2\n', false)
    expect(block.waitReason, block.evidence.detail).toBe('stdin_read')
    const shown = await send(session, 'z')
    expect(shown.viewport).toMatch(/Out\[\d+\]: 86/)
    await send(session, 'exit')
  }, 60_000)
})

describe('python3 and the Node REPL (they never turn bracketed paste on: always typed)', () => {
  it('python3 runs a block line by line, a blank line ending the definition', async () => {
    const session = await openSession({ idleSilenceMs: 3000 })
    await send(session, 'python3 -q')
    const ran = await send(session, 'def f():\n    return 41 + 1\n\nprint("f", f())\n', false)
    expect(ran.waitReason, ran.evidence.detail).toBe('stdin_read')
    expect(linesEqual(ran.viewport, 'f 42')).toBe(1)
    await send(session, 'exit()')
  }, 30_000)

  it('python3 with readline in vi mode: keys sent right after an <Esc> are commands, not the rest of a key code', async () => {
    const dir = workdir()
    writeFileSync(join(dir, 'inputrc'), 'set editing-mode vi\n')
    const session = await openSession({ idleSilenceMs: 3000 }, { env: { ...process.env, INPUTRC: join(dir, 'inputrc') } })
    await send(session, 'python3 -q')
    await send(session, "print('ab", false)
    await escape(session, '\x1b')
    const shown = await send(session, "OAc')")
    expect(linesEqual(shown.viewport, 'abc'), shown.viewport).toBe(1)
    await send(session, 'exit()')
  }, 30_000)

  it('node: keys sent right after an <Esc> are not read as Alt+key', async () => {
    const session = await openSession({ idleSilenceMs: 3000 })
    await send(session, 'node')
    await send(session, "'ab", false)
    await escape(session, '\x1b')
    // ESC c within the REPL's 500 ms escape wait is Meta-c: the `c` would be lost.
    const shown = await send(session, "c'")
    expect(shown.viewport, shown.viewport).toContain("'abc'")
    await send(session, '.exit')
  }, 30_000)
})
