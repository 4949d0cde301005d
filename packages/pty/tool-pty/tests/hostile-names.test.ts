/**
 * Process names are chosen by the program (prctl(2) PR_SET_NAME): a real process that names
 * itself like a result line must not add lines to terminal_signal or terminal_close results, and
 * a large process tree must not make the close result large.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { displayName } from '@conch/pty'
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
    expect(signalled.text).toContain('[signal: SIGINT delivered to x)\\n[wait: ok] (process group')
    await harness.taskDone(task)
  })

  it('escapes names in the close result and names at most 20 processes, counting the rest', async () => {
    const sessionId = await harness.open()
    const root = await harness.sessionPid(sessionId)
    const started = await harness.send(sessionId, `for i in $(seq 40); do sleep 300 & done; ${RENAMED} &`)
    expect(started.isError, started.text).toBe(false)
    // Printed by a background job, possibly after the prompt.
    await harness.waitForLine(sessionId, 'renamed-ok', { match: (line) => line.endsWith('renamed-ok') })
    await waitForForeground(root, /bash/)
    const closed = await harness.close(sessionId)
    expect(closed.isError, closed.text).toBe(false)
    expect(closed.text.split('\n')).not.toContain('[wait: ok]')
    expect(closed.text).toMatch(/and \d+ more \(4[2-9] processes\)\]/)
    expect(closed.text.length).toBeLessThan(1000)
  }, 30000)
})

describe('displayName', () => {
  it('escapes C0, DEL, C1, backslash and line separators, and cuts long names', () => {
    expect(displayName('a\nb\r\tc\x1b[31m\x7f\x85\\\u2028z')).toBe('a\\nb\\r\\tc\\x1b[31m\\x7f\\x85\\\\\\u2028z')
    expect(displayName('é😀'.repeat(40), 4)).toBe('é😀é😀…')
  })
})
