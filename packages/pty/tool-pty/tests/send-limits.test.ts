/**
 * What a send's own limits ask for, with the real composition (pty-local, bubblewrap where a mode
 * confines) and a real bash: a `timeoutMs` is how long to wait for proof that the terminal is
 * ready, so quiet output does not end that wait unless the send also gives `idleMs`.
 */
import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, MODES, type CaseHarness } from './cases/harness.ts'

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

/** Quiet for 2 s, then a token the echo of the command does not hold. */
const QUIET = 'sleep 2; echo woke-$((6*7))'

describe.each(MODES.filter((mode) => mode === 'danger-full-access' || hasBwrap))('a send’s limits under %s', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    // A silence far shorter than the program's quiet spell: only the send's own limits can outlast it.
    harness = await bootCase({ mode, ptyLocal: { idleSilenceMs: 200 } })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('a send with its own timeoutMs waits through quiet output for the prompt', async () => {
    const sessionId = await harness.open()
    const sent = await harness.call('terminal_send', { sessionId, text: QUIET, timeoutMs: 60_000 })
    expect(sent.text).toMatch(/^woke-42$/m)
    expect(sent.text).toMatch(/^\[exit: 0\]$/m)
  })

  it('a send with timeoutMs and idleMs returns on the quiet it asked for', async () => {
    const sessionId = await harness.open()
    const sent = await harness.call('terminal_send', { sessionId, text: QUIET, timeoutMs: 60_000, idleMs: 200 })
    expect(sent.meta).toMatchObject({ waitReason: 'inferred_idle' })
    expect(sent.text).not.toMatch(/^woke-42$/m)
    // The command went on: its token reaches the scrollback.
    await harness.waitForLine(sessionId, 'woke-42')
  })

  it('a send without limits still returns on the backend’s silence', async () => {
    const sessionId = await harness.open()
    const sent = await harness.call('terminal_send', { sessionId, text: QUIET })
    expect(sent.meta).toMatchObject({ waitReason: 'inferred_idle' })
    await harness.waitForLine(sessionId, 'woke-42')
  })
})
