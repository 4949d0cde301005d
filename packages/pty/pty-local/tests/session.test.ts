/**
 * Real-process tests of a local session: bash, python3, node and less on real PTYs. They assert
 * what the programs print and why a send settled, never which readiness tier won.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { PtyError, type SendResult, type SignalResult } from '@conch/pty'
import { untilEnterEchoed } from '@conch/test-support/screen'
import { until } from '@conch/test-support/wait'
import { linesEqual, openSession, owner, send, unconfinedBackend } from './local-harness.ts'

describe('a local bash session', () => {
  it('keeps shell state across sends: the working directory, exported variables and functions', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'conch-state-'))
    try {
      const session = await openSession()
      await send(session, `cd ${dir} && export GREETING=persisted && greet() { echo "fn-$GREETING"; }`)
      const result = await send(session, 'pwd; echo "$GREETING"; greet')
      expect(result.waitReason).toBe('stdin_read')
      expect(linesEqual(result.viewport, dir)).toBe(1)
      expect(linesEqual(result.viewport, 'persisted')).toBe(1)
      expect(linesEqual(result.viewport, 'fn-persisted')).toBe(1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('starts without variables that look like secrets, unless they are trusted', async () => {
    const env = { ...process.env, MY_API_KEY: 'k-1', DB_PASSWORD: 'p-1', GH_TOKEN: 't-1', CLIENT_SECRET: 's-1', PLAIN_VALUE: 'v-1', CONCH_INTERNAL: 'c-1', TRUSTED_TOKEN: 'parent' }
    const session = await openSession({ trustedEnv: { TRUSTED_TOKEN: 'from-config' } }, { env })
    const result = await send(session, 'env | sort')
    for (const leaked of ['k-1', 'p-1', 't-1', 's-1', 'c-1', 'parent']) expect(result.viewport).not.toContain(leaked)
    expect(result.viewport).toContain('PLAIN_VALUE=v-1')
    expect(result.viewport).toContain('TRUSTED_TOKEN=from-config')
    expect(result.viewport).toContain('PAGER=cat')
    expect(result.viewport).toContain('GIT_PAGER=cat')
    expect(result.viewport).toMatch(/CONCH_SESSION_TAG=[0-9a-f]{32}/)
  })

  it('gives the shell no descriptor of another terminal or of the harness, only its own terminal', async () => {
    const first = await openSession()
    const second = await openSession()
    for (const session of [first, second]) {
      const listing = await send(session, 'ls -l /proc/$$/fd; echo child-fds: $(ls /proc/self/fd | tr "\\n" " ")')
      expect(listing.viewport).not.toContain('ptmx')
      expect(listing.viewport).toMatch(/^child-fds: 0 1 2 3 ?$/m)
    }
  })

  it('sets IUTF8 so canonical-mode programs erase whole UTF-8 characters', async () => {
    const session = await openSession()
    const modes = await send(session, "stty -a | tr ' ' '\\n' | grep -x -- '-*iutf8'")
    expect(linesEqual(modes.viewport, 'iutf8')).toBe(1)
  })

  it('does not hand the prompt marker to child shells', async () => {
    const session = await openSession()
    const result = await send(session, 'bash -c \'echo "pc=[${PROMPT_COMMAND:-}] ps1=[${PS1:-}]"\'')
    expect(linesEqual(result.viewport, 'pc=[] ps1=[]')).toBe(1)
  })

  it('runs ! as typed: history expansion is off', async () => {
    const session = await openSession()
    const done = await send(session, 'echo "Done!"')
    expect(linesEqual(done.viewport, 'Done!')).toBe(1)
    const bang = await send(session, 'echo A!B')
    expect(linesEqual(bang.viewport, 'A!B')).toBe(1)
    expect(done.viewport + bang.viewport).not.toContain('event not found')
  })

  it('keeps PIPESTATUS for the next command, on a line of its own or the same line', async () => {
    const session = await openSession()
    await send(session, 'false | true')
    expect(linesEqual((await send(session, 'echo "ps=${PIPESTATUS[*]}"')).viewport, 'ps=1 0')).toBe(1)
    expect(linesEqual((await send(session, 'true | false; echo "ps=${PIPESTATUS[*]}"')).viewport, 'ps=0 1')).toBe(1)
  })

  it('keeps the exit status of the last command for $? and survives set -u and a user PS1', async () => {
    const session = await openSession()
    await send(session, 'false')
    expect(linesEqual((await send(session, 'echo "status=$?"')).viewport, 'status=1')).toBe(1)
    await send(session, "set -u; PS1='custom> '")
    const after = await send(session, 'echo still-$((1+1))')
    expect(after.waitReason).toBe('stdin_read')
    expect(linesEqual(after.viewport, 'still-2')).toBe(1)
    expect(after.viewport).not.toContain('unbound variable')
  })

  it('removes escape sequences, bracketed-paste toggles and the private marker from the output', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'conch-escapes-'))
    try {
      const file = path.join(dir, 'colored')
      writeFileSync(file, '\x1b[31mRED\x1b[0m \x1b]0;title\x07VISIBLE\x1bP1$r0m\x1b\\ \x1b_apc\x1b\\END\r\n')
      const session = await openSession()
      const result = await send(session, `cat ${file}`)
      expect(linesEqual(result.viewport, 'RED VISIBLE END')).toBe(1)
      const page = session.read({ offset: 0, count: 100 })
      for (const text of [result.viewport, page.text]) {
        // The echoed command names the random directory, which may spell `apc` or `title` itself.
        expect(text.replaceAll(dir, '<dir>')).not.toMatch(/\x1b|\[31m|\]0;|title|apc|2004|6973/)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('reports the shell exit with every byte of output drained', async () => {
    const session = await openSession()
    const result = await send(session, 'seq 1 3000; exit 3')
    expect(result.waitReason).toBe('session_exit')
    expect(result.sessionStatus).toEqual({ state: 'exited', exitCode: 3, signal: null })
    const page = session.read({ offset: 0, count: 10000 })
    const numbers = page.text.split('\n').filter((line) => /^\d+$/.test(line))
    expect(numbers).toHaveLength(3000)
    expect(numbers.at(-1)).toBe('3000')
  })

  it('refuses to send or signal after the shell exited, and still reads the scrollback', async () => {
    const session = await openSession()
    await send(session, 'echo goodbye-token; exit 4')
    expect(session.status()).toEqual({ state: 'exited', exitCode: 4, signal: null })
    expect(() => session.startSend({ text: 'echo x', submit: true })).toThrowError(expect.objectContaining({ code: 'SESSION_EXITED' }))
    await expect(session.signal('SIGINT')).rejects.toMatchObject({ code: 'SESSION_EXITED' })
    expect(linesEqual(session.read({ offset: 0, count: 50 }).text, 'goodbye-token')).toBe(1)
  })
})

describe('readiness of programs that read the terminal', () => {
  it('a Python REPL is ready at >>> and evaluates each send', async () => {
    const session = await openSession()
    const start = await send(session, 'python3 -q')
    expect(start.waitReason).toBe('stdin_read')
    expect(start.viewport.endsWith('>>> ')).toBe(true)
    const result = await send(session, '6*7')
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, '42')).toBe(1)
  })

  it('the Node REPL, which waits in epoll on a re-opened tty, is ready at its prompt', async () => {
    const session = await openSession()
    const start = await send(session, 'node')
    expect(start.waitReason).toBe('stdin_read')
    const result = await send(session, '6*7')
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, '42')).toBe(1)
    expect(result.inputState).toBe('prompt')
    const exit = await send(session, '.exit')
    expect(exit.waitReason).toBe('stdin_read')
    expect(linesEqual((await send(session, 'echo back-in-bash')).viewport, 'back-in-bash')).toBe(1)
  })

  it('a pager reading /dev/tty on fd 3 is ready, and q returns to the shell', async () => {
    const session = await openSession()
    const paged = await send(session, 'seq 1 500 | less')
    expect(paged.waitReason).toBe('stdin_read')
    for (const n of ['1', '2', '23']) expect(linesEqual(paged.viewport, n)).toBe(1)
    const quit = await send(session, 'q', false)
    expect(quit.waitReason).toBe('stdin_read')
    expect(linesEqual((await send(session, 'echo after-less')).viewport, 'after-less')).toBe(1)
  })

  it('a silent busy process is not reported as reading: it settles inferred_idle, then its output follows', async () => {
    const session = await openSession({ idleSilenceMs: 1000, handoffGraceMs: 100 })
    const busy = await send(session, 'python3 -c "import time; time.sleep(3); print(\'py-\' + \'done\')"')
    expect(busy.waitReason).toBe('inferred_idle')
    expect(linesEqual(busy.viewport, 'py-done')).toBe(0)
    await waitForScrollback(session, 'py-done')
    const next = await send(session, 'echo next-token')
    expect(next.waitReason).toBe('stdin_read')
    expect(linesEqual(next.viewport, 'next-token')).toBe(1)
  })

  it('shows output printed after a send settled at the start of the next send', async () => {
    const session = await openSession({ idleSilenceMs: 500, handoffGraceMs: 100 })
    const early = await send(session, 'sleep 1; echo late-$((40+2))')
    expect(early.waitReason).toBe('inferred_idle')
    await waitForScrollback(session, 'late-42')
    const next = await send(session, 'echo next-token')
    expect(linesEqual(next.viewport, 'late-42')).toBe(1)
    expect(linesEqual(next.viewport, 'next-token')).toBe(1)
    expect(linesEqual((await send(session, 'echo third')).viewport, 'late-42')).toBe(0)
  })

  it('input typed while a script runs says so, and the script\'s late output and exit status are marked as its own', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'conch-ahead-'))
    try {
      const gate = path.join(dir, 'gate')
      execFileSync('mkfifo', [gate])
      // Blocked opening the FIFO, not reading the terminal, until the test opens it.
      writeFileSync(path.join(dir, 'f.sh'), `echo started\nread go < ${gate}\necho LATE-OUTPUT\nexit 7\n`)
      const session = await openSession({ idleSilenceMs: 500, handoffGraceMs: 100 })
      const first = await send(session, `bash ${dir}/f.sh`)
      expect(first.waitReason).toBe('inferred_idle')
      // Silence can come before the script runs (a loaded machine): the input is typed ahead of
      // the script only once it printed, so leads the foreground group.
      await waitForScrollback(session, 'started')
      const second = session.startSend({ text: 'echo second-$((1+1))', submit: true }).done
      // The terminal echoed the typed-ahead line and its Enter, and the script still runs.
      await untilEnterEchoed(() => session.screen(), 'echo second-$((1+1))')
      writeFileSync(gate, 'go\n')
      const result = await second
      expect(result.waitReason).toBe('stdin_read')
      expect(result.inputState).toBe('not_reading')
      expect(result.earlier).toMatchObject({ program: 'bash', exitStatus: 7 })
      const lines = result.viewport.split('\n')
      const before = lines.slice(0, result.earlier!.lines)
      const after = lines.slice(result.earlier!.lines)
      expect(linesEqual(before.join('\n'), 'LATE-OUTPUT')).toBe(1)
      expect(linesEqual(after.join('\n'), 'LATE-OUTPUT')).toBe(0)
      expect(linesEqual(after.join('\n'), 'second-2')).toBe(1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a send that settles on silence names the program still running, and input typed ahead of it', async () => {
    const session = await openSession({ idleSilenceMs: 400, handoffGraceMs: 100 })
    const sleeping = await send(session, 'sleep 30')
    expect(sleeping.waitReason).toBe('inferred_idle')
    // `bash` when it went quiet before the forked shell ran sleep.
    expect(sleeping.running).toMatch(/^(sleep|bash)$/)
    await waitForForeground(session, 'sleep')
    const ahead = await send(session, 'echo typed-ahead')
    expect(ahead.waitReason).toBe('inferred_idle')
    expect(ahead.inputState).toBe('not_reading')
    expect(ahead.earlier).toEqual({ program: 'sleep' })
    expect(ahead.running).toBe('sleep')
    await session.signal('SIGINT')
  })

  it('the next result after input typed ahead of a command still running names that command\'s status once it ended: a signal\'s, a send without input\'s', async () => {
    const session = await openSession({ idleSilenceMs: 400, handoffGraceMs: 100 })
    /** Sends `echo typed-ahead` while `program` runs; then `next` sees the command end and the shell read the line. */
    const typedAhead = async (program: string, next: () => Promise<SendResult | SignalResult>) => {
      expect((await send(session, 'echo typed-ahead')).earlier).toEqual({ program })
      // The line and its Enter are in the input queue, echoed, before the command ends.
      await untilEnterEchoed(() => session.screen(), 'echo typed-ahead')
      const result = await next()
      const output = ('viewport' in result ? result.viewport : result.output!).split('\n')
      // The earlier command's prompt is the line the shell read the typed-ahead line on.
      expect(output[result.earlier!.lines!]).toMatch(/echo typed-ahead$/)
      return result
    }
    expect((await send(session, 'sleep 30')).waitReason).toBe('inferred_idle')
    await waitForForeground(session, 'sleep')
    const signalled = await typedAhead('sleep', () => session.signal('SIGINT'))
    expect(signalled).toMatchObject({ waitReason: 'stdin_read', exitStatus: 0, earlier: { program: 'sleep', exitStatus: 130 } })

    const dir = mkdtempSync(path.join(tmpdir(), 'conch-ahead-'))
    try {
      const gate = path.join(dir, 'gate')
      execFileSync('mkfifo', [gate])
      // Blocked opening the FIFO, not reading the terminal, until the test opens it.
      writeFileSync(path.join(dir, 'f.sh'), `echo started\nread go < ${gate}\nexit 3\n`)
      expect((await send(session, `bash ${dir}/f.sh`)).waitReason).toBe('inferred_idle')
      await waitForScrollback(session, 'started')
      const waited = await typedAhead('bash', async () => {
        const done = session.startSend({ text: '', submit: false, idleMs: 10_000 }).done
        writeFileSync(gate, 'go\n')
        return done
      })
      expect(waited).toMatchObject({ waitReason: 'stdin_read', exitStatus: 0, earlier: { program: 'bash', exitStatus: 3 } })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a send without input settles on the prompt or the read already there, and keeps waiting for a command still running', async () => {
    const session = await openSession({ idleSilenceMs: 10_000, handoffGraceMs: 100 })
    await send(session, 'read -t 1 -p "Slow? " ans; echo "rc=$? ans=$ans"')
    await waitForScrollback(session, 'Slow? rc=142 ans=')
    const atPrompt = await send(session, '', false)
    expect(atPrompt.waitReason).toBe('stdin_read')

    const early = await session.startSend({ text: 'sleep 1; echo late-$((40+2))', submit: true, idleMs: 300 }).done
    expect(early.waitReason).toBe('inferred_idle')
    const later = await send(session, '', false)
    expect(later.waitReason).toBe('stdin_read')
    expect(linesEqual(later.viewport, 'late-42')).toBe(1)

    await send(session, 'python3 -q')
    const repl = await send(session, '', false)
    expect(repl.waitReason).toBe('stdin_read')
    expect(repl.evidence.process?.name).toBe('python3')
  })

  it('a send without input types nothing ahead and names no earlier command, while the command runs and once it ends', async () => {
    const session = await openSession({ idleSilenceMs: 10_000, handoffGraceMs: 100 })
    await send(session, '(exit 2)')
    const started = await session.startSend({ text: 'sleep 1; echo mid; sleep 1.5; (exit 3)', submit: true, idleMs: 300 }).done
    expect(started.waitReason).toBe('inferred_idle')
    const running = await session.startSend({ text: '', submit: false, idleMs: 700 }).done
    expect(running.inputState).not.toBe('not_reading')
    expect(running.earlier).toBeUndefined()
    const ended = await session.startSend({ text: '', submit: false, idleMs: 3000 }).done
    expect(ended.waitReason).toBe('stdin_read')
    expect(ended.exitStatus).toBe(3)
    expect(ended.earlier).toBeUndefined()
  })

  it('settles timeout when output never stops, and says the command may still run', async () => {
    const session = await openSession({ timeoutMs: 800, idleSilenceMs: 5000 })
    const result = await send(session, 'while true; do echo tick; sleep 0.05; done')
    expect(result.waitReason).toBe('timeout')
    expect(result.sessionStatus.state).toBe('running')
    await session.signal('SIGINT')
  })

  it('reports a continuation prompt for an open Python block and an open bash quote', async () => {
    const session = await openSession()
    await send(session, 'python3 -q')
    const block = await send(session, 'for i in range(3):\n    print(i)')
    expect(block.waitReason).toBe('stdin_read')
    expect(block.inputState).toBe('continuation')
    expect(linesEqual(block.viewport, '0')).toBe(0)
    const run = await send(session, '')
    for (const n of ['0', '1', '2']) expect(linesEqual(run.viewport, n)).toBe(1)
    expect(run.inputState).toBe('prompt')
    await send(session, 'exit()')
    const quote = await send(session, 'echo "abc')
    expect(quote.waitReason).toBe('stdin_read')
    expect(quote.inputState).toBe('continuation')
  })
})

describe('signals and cancellation', () => {
  it('SIGINT reaches the foreground process group, not the shell', async () => {
    const session = await openSession()
    const running = session.startSend({ text: 'sleep 100', submit: true })
    await waitForForeground(session, 'sleep')
    const signalled = await session.signal('SIGINT')
    expect(signalled).toMatchObject({ signal: 'SIGINT', delivered: true, target: 'sleep' })
    expect((await running.done).waitReason).toBe('stdin_read')
    expect(linesEqual((await send(session, 'echo "rc=$?"')).viewport, 'rc=130')).toBe(1)
  })

  it('a signal sent right after a send reaches the command that send started', async () => {
    const session = await openSession()
    const running = session.startSend({ text: 'sleep 100', submit: true })
    const signalled = await session.signal('SIGINT')
    // The group is the command's; its leader may not have exec'd sleep yet (still named bash).
    expect(signalled.targetPgid).not.toBe(session.shellPgid)
    expect((await running.done).waitReason).toBe('stdin_read')
    expect(linesEqual((await send(session, 'echo "rc=$?"')).viewport, 'rc=130')).toBe(1)
  })

  it('a signal with no send active returns what the interrupted program printed', async () => {
    const session = await openSession({ idleSilenceMs: 500, handoffGraceMs: 2000 })
    // The token is written whole (one write of the line) inside the try: a SIGINT that lands
    // as soon as it shows is the handler's, and cannot split the line.
    const script = 'import time\nimport sys\ntry:\n    sys.stdout.write("sleeping-" + "now\\n")\n    sys.stdout.flush()\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print("GOT-" + "INT")'
    const started = await send(session, `python3 -c '${script}'`)
    expect(started.waitReason).toBe('inferred_idle')
    await waitForScrollback(session, 'sleeping-now')
    const signalled = await session.signal('SIGINT')
    expect(linesEqual(signalled.output ?? '', 'GOT-INT')).toBe(1)
    expect(linesEqual((await send(session, 'echo after')).viewport, 'GOT-INT')).toBe(0)
  })

  it('a signal right after typing a block into a REPL interrupts the block, not the typing', async () => {
    const session = await openSession()
    await send(session, 'python3 -q')
    const running = session.startSend({ text: 'import time\nwhile True: time.sleep(0.01)\n', submit: true })
    await session.signal('SIGINT')
    const result = await running.done
    expect(result.viewport).toContain('KeyboardInterrupt')
    expect(linesEqual((await send(session, 'print("alive-" + "now")')).viewport, 'alive-now')).toBe(1)
  })

  it('a signal with no send active reports the status the shell reported at its next prompt', async () => {
    const session = await openSession({ idleSilenceMs: 500 })
    expect((await send(session, 'sleep 100')).waitReason).toBe('inferred_idle')
    expect(await session.signal('SIGINT')).toMatchObject({ target: 'sleep', waitReason: 'stdin_read', exitStatus: 130 })
  })

  it('SIGINT at a bash continuation prompt returns to the primary prompt without eating the next input', async () => {
    const session = await openSession()
    await send(session, 'echo "abc')
    await session.signal('SIGINT')
    expect(linesEqual((await send(session, 'echo "rc=$?"')).viewport, 'rc=130')).toBe(1)
  })

  it('names a signalled pipeline by a live member when its leader already exited', async () => {
    const session = await openSession()
    expect((await send(session, 'seq 1 500 | less')).waitReason).toBe('stdin_read')
    const signalled = await session.signal('SIGTERM')
    expect(signalled.target).toBe('less')
  })

  it('refuses SIGKILL to the shell itself', async () => {
    const session = await openSession()
    await expect(session.signal('SIGKILL')).rejects.toMatchObject({ code: 'SIGNAL_REFUSED' })
    expect((await send(session, 'echo alive')).waitReason).toBe('stdin_read')
  })

  it('a send cancelled before its write writes nothing', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'conch-cancel-'))
    try {
      const session = await openSession()
      const marker = path.join(dir, 'written')
      const operation = session.startSend({ text: `touch ${marker}`, submit: true })
      await operation.cancel()
      await expect(operation.done).rejects.toMatchObject({ code: 'SEND_CANCELLED' })
      await send(session, 'true')
      expect(existsSync(marker)).toBe(false)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('cancelling a running send interrupts the foreground program with a real SIGINT', async () => {
    const session = await openSession()
    const operation = session.startSend({ text: 'sleep 100', submit: true })
    await waitForForeground(session, 'sleep')
    await operation.cancel()
    const result = await operation.done
    expect(result.sessionStatus.state).toBe('running')
    expect(linesEqual((await send(session, 'echo "rc=$?"')).viewport, 'rc=130')).toBe(1)
  })

  it('a cancel right after the write interrupts the command, not a builtin running before it', async () => {
    const session = await openSession()
    const operation = session.startSend({ text: 'echo started; sleep 600; echo not-interrupted', submit: true })
    // Cancel as soon as anything shows (the echo of the input): the shell has the command now.
    await new Promise<void>((resolve) => {
      const off = operation.onOutput(() => {
        off()
        resolve()
      })
    })
    await operation.cancel()
    const result = await operation.done
    expect(linesEqual(result.viewport, 'not-interrupted')).toBe(0)
    expect(linesEqual((await send(session, 'echo "rc=$?"')).viewport, 'rc=130')).toBe(1)
  })

  it('an aborted signal cancels the send it was given to', async () => {
    const session = await openSession()
    const controller = new AbortController()
    const operation = session.startSend({ text: 'sleep 100', submit: true, signal: controller.signal })
    await waitForForeground(session, 'sleep')
    controller.abort(new Error('turn cancelled'))
    await operation.done
    expect(linesEqual((await send(session, 'echo "rc=$?"')).viewport, 'rc=130')).toBe(1)
  })
})

describe('a job stopped, not ended', () => {
  it('a foreground command stopped with SIGTSTP settles its send as stopped, not with exit status 148', async () => {
    const session = await openSession()
    const running = session.startSend({ text: 'sleep 100', submit: true })
    await waitForForeground(session, 'sleep')
    await session.signal('SIGTSTP')
    const result = await running.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', stopped: { signal: 'SIGTSTP', program: 'sleep' } })
    expect(result.exitStatus).toBeUndefined()
    // The shell keeps it: fg brings it back, and SIGINT then ends it.
    const resumed = session.startSend({ text: 'fg', submit: true })
    await waitForForeground(session, 'sleep')
    await session.signal('SIGINT')
    expect((await resumed.done).exitStatus).toBe(130)
  })

  it('a signal with no send active says which job it stopped', async () => {
    const session = await openSession({ idleSilenceMs: 500 })
    expect((await send(session, 'sleep 100')).waitReason).toBe('inferred_idle')
    const signalled = await session.signal('SIGTSTP')
    expect(signalled).toMatchObject({ waitReason: 'stdin_read', stopped: { signal: 'SIGTSTP', program: 'sleep' } })
  })

  it('a job that stops itself at once is stopped too, by the signal that stopped it', async () => {
    const session = await openSession()
    const result = await send(session, `sh -c 'kill -STOP $$'`)
    expect(result).toMatchObject({ waitReason: 'stdin_read', stopped: { signal: 'SIGSTOP', program: 'sh' } })
    expect(result.exitStatus).toBeUndefined()
  })

  it('exit status 148 with no job stopped by the send is an exit, even while an older job is stopped', async () => {
    const session = await openSession()
    expect((await send(session, `sh -c 'kill -TSTP $$'`)).stopped).toMatchObject({ signal: 'SIGTSTP' })
    const exited = await send(session, '(exit 148)')
    expect(exited.exitStatus).toBe(148)
    expect(exited.stopped).toBeUndefined()
  })
})

describe('startup', () => {
  it('a program that prints nothing is never published on silence; the startup timeout rejects the spawn', async () => {
    const backend = unconfinedBackend({ shellPath: '/bin/cat', shellArgs: [], idleSilenceMs: 100, handoffGraceMs: 100, timeoutMs: 700 })
    const spawn = backend.spawn({ owner, sessionId: 'pty-cat', signal: new AbortController().signal })
    await expect(spawn).rejects.toMatchObject({ code: 'SPAWN_FAILED', message: expect.stringContaining('did not become ready') })
  })

  it('a cancelled startup rejects with the caller’s exact reason', async () => {
    const backend = unconfinedBackend({ shellPath: '/bin/cat', shellArgs: [], timeoutMs: 10000 })
    const controller = new AbortController()
    const reason = new Error('caller gave up')
    const spawn = backend.spawn({ owner, sessionId: 'pty-cancel', signal: controller.signal })
    setImmediate(() => controller.abort(reason))
    await expect(spawn).rejects.toBe(reason)
  })

  it('a shell without the controlled prompt (dash) is ready once it reads the terminal', async () => {
    const session = await openSession({ shellPath: '/bin/sh', shellArgs: ['-i'] })
    const result = await send(session, 'echo from-dash-$((2+3))')
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, 'from-dash-5')).toBe(1)
  })

  it('a cwd that is not a directory fails the spawn naming the path', async () => {
    const backend = unconfinedBackend()
    const spawn = backend.spawn({ owner, sessionId: 'pty-cwd', cwd: '/nonexistent/conch', signal: new AbortController().signal })
    await expect(spawn).rejects.toBeInstanceOf(PtyError)
    await expect(spawn).rejects.toMatchObject({ code: 'SPAWN_FAILED', message: expect.stringContaining('/nonexistent/conch') })
  })
})

/** Waits until a line equal to `token` is in the scrollback (the child printed it). */
function waitForScrollback(session: { read(o: { offset: number; count: number }): { text: string } }, token: string): Promise<unknown> {
  return until(() => linesEqual(session.read({ offset: 0, count: 200 }).text, token) > 0, 15_000, `${token} in the scrollback`)
}

/** Waits until the terminal's foreground process group is led by `name` (a token from /proc, not a sleep). */
function waitForForeground(session: { pid: number }, name: string): Promise<unknown> {
  return until(
    async () => {
      const stat = await readFile(`/proc/${session.pid}/stat`, 'utf8')
      const tpgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[5])
      return (await readFile(`/proc/${tpgid}/stat`, 'utf8').catch(() => '')).includes(`(${name})`)
    },
    10_000,
    `${name} to lead the foreground process group`,
  )
}
