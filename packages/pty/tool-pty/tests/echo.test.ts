/**
 * What a send's result leaves out: the terminal's echo of exactly the text the model sent, through
 * the tools on real bash and python3. Key presses, an echo the shell changed, and the scrollback
 * keep it.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, MODES, type CaseHarness } from './cases/harness.ts'

describe.each(MODES)('the echo of a send (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it("a heredoc's result does not repeat the file's lines, and the scrollback still has them", async () => {
    const id = await harness.open()
    const heredoc = "cat > notes.txt <<'EOF'\nalpha line\n  beta line\n\nEOF"
    const written = await harness.send(id, heredoc)
    expect(written.text).toBe('[exit: 0]')
    expect(readFileSync(path.join(harness.workspace, 'notes.txt'), 'utf8')).toBe('alpha line\n  beta line\n\n')
    const page = await harness.read(id, { count: 20 })
    expect(page.text).toContain('alpha line\n  beta line\n')
  })

  it("a REPL line's result is its answer and the next prompt; a block's, its output", async () => {
    const id = await harness.open()
    expect((await harness.send(id, 'python3 -q')).text).toBe('>>> \n[wait: stdin_read]')
    expect((await harness.send(id, '6 * 7')).text).toBe('42\n>>> \n[wait: stdin_read]')
    expect((await harness.send(id, 'for i in range(2):\n    print(i * 10)\n')).text).toBe('0\n10\n>>> \n[wait: stdin_read]')
    expect((await harness.send(id, 'exit()')).text).toBe('[exit: 0]')
  })

  it("a command still running when the send returns shows no echo: its output so far, then why", async () => {
    const id = await harness.open()
    const running = await harness.call('terminal_send', { sessionId: id, text: 'sleep 300', idleMs: 300 })
    expect(running.text).toMatch(/^\(no new output\)\n\[wait: inferred_idle\]\n\[note: still running: sleep,/)
    const interrupted = await harness.signal(id, 'SIGINT')
    expect(interrupted.text).toMatch(/^\[signal: SIGINT delivered to sleep in pty-\d+\]\n\[exit: 130\]$/)
  })

  it('keys Up and Enter keep the echo: it is how the model learns what ran', async () => {
    const id = await harness.open()
    expect((await harness.send(id, 'echo REPEAT-$((40+2))')).text).toBe('REPEAT-42\n[exit: 0]')
    const again = await harness.call('terminal_send', { sessionId: id, keys: ['Up', 'Enter'] })
    expect(again.text).toBe('echo REPEAT-$((40+2))\nREPEAT-42\n[exit: 0]')
  })

  it('an echo the shell changed is kept: a Tab readline took as completion', async () => {
    const id = await harness.open()
    // No file starts with qz, so readline completes nothing and the Tab never reaches the line.
    const changed = await harness.send(id, 'echo "qz\tw"')
    expect(changed.text).toBe('echo "qzw"\nqzw\n[exit: 0]')
  })

  it('text sent to a reader with echo off is not echoed: output that begins with it is kept whole', async () => {
    const id = await harness.open()
    expect((await harness.send(id, 'read -s x; echo "$x"; echo "Saved as: $x"')).text).toMatch(/\[input: hidden/)
    expect((await harness.send(id, 'abc')).text).toBe('abc\nSaved as: abc\n[exit: 0]')
    // Echo is on again at the prompt: the next send's echo is left out as before.
    expect((await harness.send(id, 'echo again')).text).toBe('again\n[exit: 0]')
  })

  it('text sent without Enter is shown as the line being edited', async () => {
    const id = await harness.open()
    expect((await harness.send(id, 'echo typed-$((1+1))', { submit: false })).text).toMatch(/^echo typed-\$\(\(1\+1\)\)\n\[wait: /)
    expect((await harness.send(id, '')).text).toBe('echo typed-$((1+1))\ntyped-2\n[exit: 0]')
  })
})
