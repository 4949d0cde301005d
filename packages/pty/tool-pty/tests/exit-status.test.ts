/**
 * Results that name the outcome, through the tools on real bash: a send that settles at the
 * shell's prompt carries the exit status of what ran, or says its job was stopped (a background
 * send's task ends `stopped`), and a signal result says why the terminal is ready again, or that
 * the signal ended the shell.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Notification } from '@conch/agent'
import { untilEnterEchoed } from '@conch/test-support/screen'
import { until } from '@conch/test-support/wait'
import { bootCase, MODES, processes, waitForForeground, type CaseHarness } from './cases/harness.ts'

describe.each(MODES)('exit statuses in send results (%s)', (mode) => {
  let harness: CaseHarness
  /** What the agent loop delivers after the next tool call, and how many wait for it. */
  const delivered = () => (harness.agent as unknown as { deliver(): Notification[] }).deliver()
  const queued = () => (harness.agent as unknown as { inbox: Notification[] }).inbox.length

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('shows the status of what ran at the prompt, zero included, and none in a REPL', async () => {
    const id = await harness.open()
    const ok = await harness.send(id, 'true')
    expect(ok.text).toMatch(/^\[exit: 0\]$/)
    expect(ok.meta.exitStatus).toBe(0)
    expect((await harness.send(id, '(exit 17)')).text).toMatch(/(?:^|\n)\[exit: 17\]$/)
    expect((await harness.send(id, "sh -c 'kill -TERM $$'")).text).toMatch(/(?:^|\n)\[exit: 143\]$/)
    const python = await harness.send(id, 'python3 -q')
    expect(python.meta.waitReason).toBe('stdin_read')
    expect(python.text).not.toContain('[exit:')
    expect((await harness.send(id, '1 + 1')).text).not.toContain('[exit:')
    expect((await harness.send(id, 'exit()')).text).toMatch(/^\[exit: 0\]$/)
  })

  it('leaves out the shell\'s own prompt row at [exit: N], and keeps a program\'s prompt', async () => {
    const id = await harness.open()
    expect((await harness.send(id, 'echo A; echo B')).text).toBe('A\nB\n[exit: 0]')
    expect((await harness.send(id, 'true')).text).toBe('[exit: 0]')
    // Output without a final line break shares the prompt's row: the output stays.
    expect((await harness.send(id, 'printf foo')).text).toBe('foo\n[exit: 0]')
    expect((await harness.send(id, 'python3 -q')).text).toBe('>>> \n[wait: stdin_read]')
    expect((await harness.send(id, 'exit()')).text).toBe('[exit: 0]')
  })

  it('shows the status at the prompt after a program that left the alternate screen on, as a screen result', async () => {
    const id = await harness.open()
    const left = await harness.send(id, `(printf '\\033[?1049h'; exit 3)`)
    expect(left.text).toMatch(/^\[screen: alternate /)
    expect(left.text).toMatch(/\n\[exit: 3\]$/)
    expect((await harness.send(id, 'true')).text).toMatch(/\n\[exit: 0\]$/)
  })

  it('says a job was stopped, not ended, with fg as the way back: in a send result, a signal result, a notification and the task status', async () => {
    const id = await harness.open()
    const stopped = await harness.send(id, `sh -c 'kill -TSTP $$'`)
    expect(stopped.text).toMatch(/\n\[wait: stdin_read, stopped: SIGTSTP\]\n\[note: sh is stopped \(SIGTSTP\), not ended; the shell keeps it as a job: send "fg" to resume it\]$/)
    expect(stopped.meta).toMatchObject({ stopped: { signal: 'SIGTSTP', program: 'sh' } })
    expect(stopped.meta.exitStatus).toBeUndefined()
    // The status alone is no stop: an exit with it is an exit.
    expect((await harness.send(id, '(exit 148)')).text).toMatch(/^\[exit: 148\]$/)

    expect((await harness.call('terminal_send', { sessionId: id, text: 'sleep 101', idleMs: 500 })).meta.waitReason).toBe('inferred_idle')
    // Silence can come before bash started sleep (a loaded machine): the signal is for sleep.
    await waitForForeground(await harness.sessionPid(id), 'sleep 101')
    const signalled = await harness.signal(id, 'SIGTSTP')
    expect(signalled.text).toMatch(/\[signal: SIGTSTP delivered to sleep in pty-\d+\]\n\[wait: stdin_read, stopped: SIGTSTP\]\n\[note: sleep is stopped \(SIGTSTP\), not ended; .*"fg".*\]$/)

    const started = await harness.call('terminal_send', { sessionId: id, text: 'sleep 102', run_in_background: true, notify: true })
    let sleeping: number | undefined
    await until(async () => (sleeping = processes().find((entry) => entry.cmdline === 'sleep 102')?.pid) !== undefined, 15_000, 'sleep 102 to start')
    process.kill(sleeping!, 'SIGSTOP')
    await until(async () => queued() > 0, 15_000, 'the notification of the stopped job')
    expect(delivered()).toMatchObject([{ source: started.meta.taskId, event: 'stopped (SIGSTOP); fg resumes it' }])
    // The task is over, the job is not: its status says stopped, with the send's own fields.
    const ended = await harness.taskDone(String(started.meta.taskId))
    expect(ended.text).toMatch(/\n\[status: stopped, wait: stdin_read, stopped: SIGSTOP\]$/)
    expect((await harness.call('task_list', {})).text).toContain(`${started.meta.taskId} stopped pty-send "${id}: sleep 102" [wait: stdin_read, stopped: SIGSTOP]`)
  })

  it('says in a signal result why the terminal is ready again: the status at the prompt, the wait in a REPL', async () => {
    const id = await harness.open()
    expect((await harness.call('terminal_send', { sessionId: id, text: 'sleep 300', idleMs: 500 })).meta.waitReason).toBe('inferred_idle')
    const interrupted = await harness.signal(id, 'SIGINT')
    expect(interrupted.text).toMatch(/\[signal: SIGINT delivered to sleep in pty-\d+\]\n\[exit: 130\]$/)
    expect(interrupted.meta).toMatchObject({ waitReason: 'stdin_read', exitStatus: 130 })

    expect((await harness.send(id, 'python3 -q')).meta.waitReason).toBe('stdin_read')
    expect((await harness.call('terminal_send', { sessionId: id, text: 'import time; time.sleep(300)', idleMs: 500 })).meta.waitReason).toBe('inferred_idle')
    const traceback = await harness.signal(id, 'SIGINT')
    expect(traceback.text).toMatch(/KeyboardInterrupt\n>>> \n\[signal: SIGINT delivered to python3 in pty-\d+\]\n\[wait: stdin_read\]$/)
    expect(traceback.meta.exitStatus).toBeUndefined()
  })

  it('marks the late output and status of a script the next input was typed ahead of', async () => {
    const id = await harness.open()
    const gate = path.join(harness.workspace, `gate-${mode}`)
    execFileSync('mkfifo', [gate])
    // The script blocks opening the FIFO, not reading the terminal, until the test opens it.
    writeFileSync(path.join(harness.workspace, 'f.sh'), `echo started\nread go < ${gate}\necho LATE-OUTPUT\nexit 7\n`)
    const started = await harness.call('terminal_send', { sessionId: id, text: 'bash f.sh', idleMs: 1500 })
    expect(started.text).toBe('started\n[wait: inferred_idle]\n[note: still running: bash, not reading the terminal; to keep waiting send {"text":"","submit":false,"idleMs":N}; terminal_signal SIGINT interrupts it]')
    const second = harness.call('terminal_send', { sessionId: id, text: 'echo second-$((1+1))' })
    // The terminal echoed the typed-ahead line and its Enter, and the script still runs.
    await untilEnterEchoed(async () => (await harness.call('terminal_read', { sessionId: id, screen: true })).text, 'echo second-$((1+1))')
    writeFileSync(gate, 'go\n')
    // The new command's own status shows when the prompt, not /proc alone, settled the send.
    // At [exit: 0] the prompt row goes: put back as /proc would have left it.
    expect((await second).text.replace('[exit: 0]', '$ \n[wait: stdin_read]')).toBe(
      'LATE-OUTPUT\n[earlier command ended, exit: 7]\n$ echo second-$((1+1))\nsecond-2\n$ \n' +
        '[wait: stdin_read]\n[input: not_reading — typed ahead while bash ran]',
    )
  })

  it('says a line typed ahead of a busy REPL was read once the REPL reads again, and forgets it', async () => {
    const id = await harness.open()
    const gate = path.join(harness.workspace, `repl-gate-${mode}`)
    execFileSync('mkfifo', [gate])
    expect((await harness.send(id, 'python3 -q')).meta.waitReason).toBe('stdin_read')
    // Busy opening the FIFO, not reading the terminal, until the test opens it.
    expect((await harness.call('terminal_send', { sessionId: id, text: `_ = open(${JSON.stringify(gate)}).read(); print('wo' + 'ke')`, idleMs: 500 })).meta.waitReason).toBe('inferred_idle')
    const ahead = harness.call('terminal_send', { sessionId: id, text: 'print(5 * 2)' })
    await untilEnterEchoed(async () => (await harness.call('terminal_read', { sessionId: id, screen: true })).text, 'print(5 * 2)')
    writeFileSync(gate, 'go\n')
    expect((await ahead).text).toBe('woke\n>>> print(5 * 2)\n10\n>>> \n[wait: stdin_read]\n[input: not_reading — typed ahead while python3 was busy; read since]')
    // Read, it is not the next result's earlier command.
    expect((await harness.send(id, 'exit()')).text).toBe('[exit: 0]')
  })

  it('names in a signal result the status of the command the input was typed ahead of, as a send result does', async () => {
    const id = await harness.open()
    expect((await harness.call('terminal_send', { sessionId: id, text: 'sleep 300', idleMs: 500 })).meta.waitReason).toBe('inferred_idle')
    // Silence can come before bash started sleep (a loaded machine): the input is typed ahead of sleep.
    await waitForForeground(await harness.sessionPid(id), 'sleep 300')
    const ahead = await harness.call('terminal_send', { sessionId: id, text: 'echo ahead-$((1+1))', idleMs: 500 })
    expect(ahead.text).toContain('[input: not_reading — typed ahead while sleep runs; whatever reads the terminal next gets it]')
    // The line and its Enter are in the input queue, echoed, before the command ends.
    await untilEnterEchoed(async () => (await harness.call('terminal_read', { sessionId: id, screen: true })).text, 'echo ahead-$((1+1))')
    // SIGINT ends sleep (bash prints a line break for it); bash reads the typed-ahead line at its next prompt.
    const interrupted = await harness.signal(id, 'SIGINT')
    expect(interrupted.text).toMatch(/^\n\[earlier command ended, exit: 130\]\n\$ echo ahead-\$\(\(1\+1\)\)\nahead-2\n\[signal: SIGINT delivered to sleep in pty-\d+\]\n\[exit: 0\]$/)
    expect(interrupted.meta).toMatchObject({ waitReason: 'stdin_read', exitStatus: 0, earlier: { program: 'sleep', exitStatus: 130 } })
  })

  it('says in a signal result that the signal ended the shell', async () => {
    const id = await harness.open()
    const signalled = await harness.signal(id, 'SIGHUP')
    expect(signalled.isError).toBe(false)
    expect(signalled.text).toMatch(/^\[signal: SIGHUP delivered to bash .*\]\n\[wait: session_exit\]\n\[session: exited code=129 \(128\+SIGHUP\)\]$/m)
    expect(signalled.meta.sessionStatus).toMatchObject({ state: 'exited', exitCode: 129 })
  })
})
