/**
 * C9 — isolation and life after exit (isolation).
 * Two terminals of one agent share nothing (directory, variables, output); a terminal whose
 * shell exited stays readable, refuses sends and signals with clear errors that touch no
 * process, and is listed as exited; another agent can use neither terminal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, count, descendants, MODES, outputLines, type CaseHarness, type Seen } from './harness.ts'

/** A line on which A's background job printed its token. */
const fromA = (line: string): boolean => line.endsWith('from-A')

function expectOk(seen: Seen, what: string): void {
  expect(seen.isError, `${what}\n${seen.text}`).toBe(false)
}

describe.each(MODES)('C9 the per-agent terminal cap (%s)', (mode) => {
  it('refuses a real shell past maxSessionsPerOwner, leaves another agent its own, and opens again after a close', async () => {
    const harness = await bootCase({ mode, pty: { maxSessionsPerOwner: 2 } })
    try {
      const first = await harness.open()
      await harness.open()
      const refused = await harness.call('terminal_open', { type: 'shell' })
      expect(refused).toMatchObject({ isError: true, text: expect.stringMatching(/^TOO_MANY_SESSIONS: agent-\d+ already has 2 open terminals \(pty\.maxSessionsPerOwner: 2\); close one first/) })
      expectOk(await harness.call('terminal_open', { type: 'shell' }, harness.other), 'the other agent opens its own')
      expectOk(await harness.close(first), 'close one')
      expectOk(await harness.call('terminal_open', { type: 'shell' }), 'open again')
    } finally {
      await harness.dispose()
    }
  })
})

describe.each(MODES)('C9 isolation and life after exit (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('keeps two terminals apart, keeps an exited one readable but inert, and fences both from another agent', async () => {
    const a = await harness.open({ name: 'a' })
    const b = await harness.open({ name: 'b' })
    // The composition really runs the shells as configured: under bubblewrap or not.
    const confined = descendants(await harness.sessionPid(b)).some((entry) => /^(\S*\/)?bwrap /.test(entry.cmdline))
    expect(confined).toBe(mode === 'workspace-write')

    expectOk(await harness.send(a, 'cd /tmp && export FOO=a && (sleep 0.5; echo from-A) &'), 'A: background job')
    const fromB = await harness.send(b, 'pwd; echo ${FOO:-unset}; sleep 1; echo B-done')
    expectOk(fromB, 'B: pwd')
    expect(fromB.meta.waitReason).toBe('stdin_read')
    const bLines = outputLines(fromB.text)
    expect(count(bLines, harness.workspace), fromB.text).toBe(1)
    expect(count(bLines, 'unset'), fromB.text).toBe(1)
    expect(count(bLines, 'B-done'), fromB.text).toBe(1)

    // A's job prints into A's scrollback only — after A's prompt, on the prompt's line (the
    // echoed command holds `from-A` too, but ends in `&`).
    await harness.waitForLine(a, 'from-A', { match: fromA })
    expect(outputLines((await harness.read(b, { count: 1000 })).text).filter(fromA)).toEqual([])

    const exited = await harness.send(a, 'exit 4')
    expectOk(exited, 'A: exit 4')
    expect(exited.meta.waitReason).toBe('session_exit')
    expect(exited.meta.sessionStatus).toEqual({ state: 'exited', exitCode: 4, signal: null })
    expect(exited.text).toContain('[session: exited code=4]')

    // After the exit: reading works; sending and signalling are clear errors.
    const readA = await harness.read(a, { count: 1000 })
    expectOk(readA, 'A: read after exit')
    expect(outputLines(readA.text).filter(fromA)).toHaveLength(1)

    const sendA = await harness.send(a, 'echo x')
    expect(sendA.isError).toBe(true)
    expect(sendA.meta.errorCode).toBe('SESSION_EXITED')
    expect(sendA.text).toMatch(/^SESSION_EXITED: PTY session pty-\d+ exited with code 4; nothing was written/)

    const signalA = await harness.signal(a, 'SIGINT')
    expect(signalA.isError).toBe(true)
    expect(signalA.meta.errorCode).toBe('SESSION_EXITED')
    expect(signalA.text).toContain('no signal was sent')
    for (const seen of [sendA, signalA]) expect(seen.text).not.toMatch(/EBADF|ESRCH|TypeError/)

    const listed = await harness.list()
    expectOk(listed, 'terminal_list')
    expect(listed.meta.sessions).toMatchObject([
      { sessionId: a, name: 'a', status: { state: 'exited', exitCode: 4 } },
      { sessionId: b, name: 'b', status: { state: 'running' } },
    ])

    // Another agent gets "belongs to another agent" from every tool, for both terminals.
    for (const sessionId of [a, b]) {
      const foreign: Seen[] = [
        await harness.send(sessionId, 'echo intruder', { agent: harness.other }),
        await harness.call('terminal_send', { sessionId, text: 'echo intruder', run_in_background: true }, harness.other),
        await harness.call('terminal_read', { sessionId }, harness.other),
        await harness.call('terminal_signal', { sessionId, signal: 'SIGINT' }, harness.other),
        await harness.call('terminal_close', { sessionId }, harness.other),
      ]
      for (const seen of foreign) {
        expect(seen.isError, seen.text).toBe(true)
        expect(seen.meta.errorCode).toBe('FOREIGN_SESSION')
        expect(seen.text).toContain('belongs to another agent')
      }
    }
    const otherList = await harness.call('terminal_list', {}, harness.other)
    expect(otherList.meta.sessions).toEqual([])

    const answer = await harness.send(b, 'echo alive')
    expectOk(answer, 'B: echo alive')
    expect(count(outputLines(answer.text), 'alive'), answer.text).toBe(1)
    const bScrollback = outputLines((await harness.read(b, { count: 1000 })).text)
    expect(count(bScrollback, 'intruder')).toBe(0)
    expect(bScrollback.filter(fromA)).toEqual([])
    expect(harness.logged).toEqual([])
  }, 60_000)
})
