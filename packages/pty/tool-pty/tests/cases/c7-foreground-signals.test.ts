/**
 * C7 — signals reach the foreground group, not the shell (signals).
 * SIGINT stops a foreground `sleep` (status 130) and the session keeps running; SIGTERM reaches
 * a `bash -c` whose trap runs (and exits 3) while its `sleep` dies; SIGINT interrupts a busy
 * Python; SIGTSTP stops a `sleep` that `jobs` then lists as stopped, and closing the terminal
 * leaves no `sleep 200` behind.
 *
 * Each signal is sent once the target is the terminal's foreground process group, observed in
 * /proc (its process group equals the terminal's `tpgid`) — a wait for a state, not a sleep.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { alive, bootCase, count, descendants, MODES, outputLines, waitForForeground, type CaseHarness, type Seen } from './harness.ts'

function expectOk(seen: Seen, what: string): void {
  expect(seen.isError, `${what}\n${seen.text}`).toBe(false)
}

function expectDelivered(seen: Seen, signal: string, target: string): void {
  expectOk(seen, signal)
  expect(seen.meta).toMatchObject({ signal, delivered: true, target })
  expect(seen.text).toContain(`[signal: ${signal} delivered to ${target}`)
}

describe.each(MODES)('C7 signals reach the foreground group (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('interrupts, terminates, suspends and cleans up the foreground program, never the shell', async () => {
    const sessionId = await harness.open()
    const root = await harness.sessionPid(sessionId)

    // SIGINT to a foreground sleep: the sleep dies, the shell stays.
    const first = await harness.sendBackground(sessionId, 'sleep 100')
    await waitForForeground(root, 'sleep 100')
    expectDelivered(await harness.signal(sessionId, 'SIGINT'), 'SIGINT', 'sleep')
    await harness.taskDone(first)
    const afterInt = await harness.send(sessionId, 'echo $?')
    expectOk(afterInt, 'echo $? after SIGINT')
    expect(count(outputLines(afterInt.text), '130'), afterInt.text).toBe(1)
    expect(afterInt.meta.sessionStatus).toEqual({ state: 'running' })

    // SIGTERM to the group of a bash -c with a TERM trap: the trap runs, `never` is never printed.
    const trapped = await harness.sendBackground(sessionId, "bash -c 'trap \"echo cleanup-ran; exit 3\" TERM; sleep 100; echo never'")
    await waitForForeground(root, 'sleep 100')
    expectDelivered(await harness.signal(sessionId, 'SIGTERM'), 'SIGTERM', 'bash')
    await harness.taskDone(trapped)
    const afterTerm = await harness.send(sessionId, 'echo $?')
    expectOk(afterTerm, 'echo $? after SIGTERM')
    expect(count(outputLines(afterTerm.text), '3'), afterTerm.text).toBe(1)
    const termLines = outputLines((await harness.read(sessionId, { count: 5000 })).text)
    expect(count(termLines, 'cleanup-ran')).toBe(1)
    expect(count(termLines, 'never')).toBe(0)

    // SIGINT to a busy Python: KeyboardInterrupt, and the REPL answers again.
    expectOk(await harness.send(sessionId, 'python3 -q'), 'python3 -q')
    const header = await harness.sendBackground(sessionId, 'while True: pass')
    // The REPL reads a compound statement until an empty line: the case's line leaves it at
    // `... `. The empty line that follows starts the loop, so the SIGINT meets a busy Python
    // rather than a reading one.
    const opened = await harness.taskDone(header)
    expect(opened.text).toContain('input: continuation')
    const loop = await harness.sendBackground(sessionId, '')
    const python = await waitForForeground(root, /(^|\/)python3 -q$/)
    await until(() => descendants(root).some((entry) => entry.pid === python.pid && entry.state === 'R'), 10_000, 'the Python loop to run (state R)')
    expectDelivered(await harness.signal(sessionId, 'SIGINT'), 'SIGINT', 'python3')
    const interrupted = await harness.taskDone(loop)
    const loopLines = [...outputLines(interrupted.text), ...outputLines((await harness.read(sessionId, { count: 50 })).text)]
    expect(count(loopLines, 'KeyboardInterrupt'), interrupted.text).toBeGreaterThanOrEqual(1)
    const aliveSeen = await harness.send(sessionId, 'print("alive")')
    expectOk(aliveSeen, 'print("alive")')
    expect(count(outputLines(aliveSeen.text), 'alive'), aliveSeen.text).toBe(1)

    // `sleep 200` and `jobs` are shell commands: leave the REPL first (a step the case implies).
    expectOk(await harness.send(sessionId, 'exit()'), 'exit()')
    const suspended = await harness.sendBackground(sessionId, 'sleep 200')
    const sleeper = await waitForForeground(root, 'sleep 200')
    expectDelivered(await harness.signal(sessionId, 'SIGTSTP'), 'SIGTSTP', 'sleep')
    await harness.taskDone(suspended)
    const jobs = await harness.send(sessionId, 'jobs')
    expectOk(jobs, 'jobs')
    expect(outputLines(jobs.text).filter((line) => /Stopped\s+sleep 200$/.test(line)), jobs.text).toHaveLength(1)

    const closed = await harness.close(sessionId)
    expectOk(closed, 'terminal_close')
    expect(alive(sleeper), `sleep 200 (pid ${sleeper.pid}) survived the close`).toBe(false)
    expect((closed.meta.stopped as { pid: number }[]).map((entry) => entry.pid)).toContain(sleeper.pid)
    expect(harness.logged).toEqual([])
  }, 60_000)
})
