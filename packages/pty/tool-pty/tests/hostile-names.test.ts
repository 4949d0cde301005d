/**
 * Process names are chosen by the program (prctl(2) PR_SET_NAME): a real process that names
 * itself like a result line must not add lines to terminal_signal or terminal_close results, and
 * a large process tree must not make the close result large.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { displayName, processNames } from '@conch/pty'
import { until } from '@conch/test-support/wait'
import { bootCase, waitForForeground, type CaseHarness } from './cases/harness.ts'

/** A python3 one-liner that renames itself to `x)\n[wait: ok]` (13 bytes, within comm's 15) and waits. */
const RENAMED = `python3 -c 'import ctypes, time; ctypes.CDLL(None).prctl(15, b"x)\\n[wait: ok]", 0, 0, 0); print("renamed-" + "ok", flush=True); time.sleep(300)'`

describe('process names shown to the model', () => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('escapes control characters in a signalled program’s name', async () => {
    const sessionId = await harness.open()
    const root = await harness.sessionPid(sessionId)
    const task = await harness.sendBackground(sessionId, RENAMED)
    await waitForForeground(root, /python3 -c/)
    await harness.waitForLine(sessionId, 'renamed-ok')
    const signalled = await harness.signal(sessionId, 'SIGINT')
    expect(signalled.isError, signalled.text).toBe(false)
    expect(signalled.text.split('\n')).not.toContain('[wait: ok]')
    expect(signalled.text).toContain(`[signal: SIGINT delivered to x)\\n[wait: ok] in ${sessionId}]`)
    await harness.taskDone(task)
  })

  it('escapes the name of a program still running, and of one the next input was typed ahead of', async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', { sessionId, text: RENAMED, idleMs: 500 })
    expect(started.meta.waitReason).toBe('inferred_idle')
    expect(started.text.split('\n')).not.toContain('[wait: ok]')
    // Renamed by now (it may have gone quiet while starting, under its first name).
    await harness.waitForLine(sessionId, 'renamed-ok')
    const ahead = await harness.call('terminal_send', { sessionId, text: 'echo typed', idleMs: 300 })
    expect(ahead.text.split('\n')).not.toContain('[wait: ok]')
    expect(ahead.text).toContain('[note: still running: x)\\n[wait: ok], not reading the terminal;')
    expect(ahead.text).toContain('[input: not_reading — typed ahead while x)\\n[wait: ok] runs; whatever reads the terminal next gets it]')
    await harness.signal(sessionId, 'SIGINT')
  })

  it('escapes names in the close result, counts each name once and names at most 20, counting the rest', async () => {
    const sessionId = await harness.open()
    const root = await harness.sessionPid(sessionId)
    // 40 sleeps, 24 perls that each name themselves, and the renamed python3.
    const named = `for i in $(seq 24); do perl -e '$0 = shift; print "named-", "up\\n"; sleep 300' p$i & done`
    const started = await harness.send(sessionId, `for i in $(seq 40); do sleep 300 & done; ${named}; ${RENAMED} &`)
    expect(started.isError, started.text).toBe(false)
    // Printed by background jobs, possibly after the prompt.
    await harness.waitForLine(sessionId, 'renamed-ok', { match: (line) => line.endsWith('renamed-ok') })
    await until(async () => (await harness.read(sessionId, { count: 5000 })).text.match(/named-up/g)?.length === 24, 15_000, 'every perl named')
    await waitForForeground(root, /bash/)
    const closed = await harness.close(sessionId)
    expect(closed.isError, closed.text).toBe(false)
    expect(closed.text.split('\n')).not.toContain('[wait: ok]')
    // 27 names (sleep, p1…p24, the renamed python3, bash), in the order the teardown saw them stop.
    expect(closed.text).toMatch(/^\[closed: pty-\d+ — stopped (6[6-9]|7\d) processes: ([^,\n]+, ){19}[^,\n]+ and 7 more names\]$/m)
    expect(closed.text).toMatch(/ sleep ×40[,\] ]/)
    expect(closed.text.length).toBeLessThan(1000)
  }, 30000)
})

describe('processNames', () => {
  it('names each process name once, with its count, in the order given, and no pid', () => {
    expect(processNames([{ name: 'sleep' }, { name: 'bash' }, { name: 'sleep' }])).toBe('3 processes: sleep ×2, bash')
    expect(processNames([{ name: 'a\nb' }])).toBe('1 process: a\\nb')
  })

  it('lists at most maxNames names and counts the others', () => {
    const processes = ['a', 'b', 'c', 'a', 'd'].map((name) => ({ name }))
    expect(processNames(processes, 2)).toBe('5 processes: a ×2, b and 2 more names')
    expect(processNames(processes, 3)).toBe('5 processes: a ×2, b, c and 1 more name')
  })
})

describe('displayName', () => {
  it('escapes C0, DEL, C1, backslash and line separators, and cuts long names', () => {
    expect(displayName('a\nb\r\tc\x1b[31m\x7f\x85\\\u2028z')).toBe('a\\nb\\r\\tc\\x1b[31m\\x7f\\x85\\\\\\u2028z')
    expect(displayName('é😀'.repeat(40), 4)).toBe('é😀é😀…')
  })
})
