/**
 * C3 — escape sequences split across writes (output).
 * A CSI, an OSC ended by BEL and an OSC ended by ESC \ (ST), each printed in two writes half a
 * second apart. Only the text a person would see may reach the model: `RED`, `VISIBLE`,
 * `AFTER`, `hi`, and no escape residue anywhere.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, count, MODES, outputLines, type CaseHarness } from './harness.ts'

const SENDS: [command: string, token: string][] = [
  ["printf '\\033[3'; sleep 0.5; printf '1mRED\\033[0m\\n'", 'RED'],
  ["printf '\\033]0;ti'; sleep 0.5; printf 'tle\\007VISIBLE\\n'", 'VISIBLE'],
  ["printf '\\033]0;t\\033'; sleep 0.5; printf '\\\\AFTER\\n'", 'AFTER'],
  ['echo hi', 'hi'],
]

/** Residue that must appear nowhere, not even in the echo of a command. */
const NEVER = ['\x1b', '[31m', 'title', '?2004']
/** Residue that must appear nowhere but in the echoed commands (which contain these characters as typed). */
const NEVER_IN_OUTPUT = [']0;', '\\AFTER']

function expectNoResidue(text: string): void {
  for (const residue of NEVER) expect(text, `${JSON.stringify(residue)} in:\n${text}`).not.toContain(residue)
  const output = text.split('\n').filter((line) => !SENDS.some(([command]) => line.endsWith(command)))
  for (const residue of NEVER_IN_OUTPUT) {
    expect(output.filter((line) => line.includes(residue)), `${JSON.stringify(residue)} in:\n${text}`).toEqual([])
  }
}

describe.each(MODES)('C3 escape sequences split across writes (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    // The case's pause is 0.5 s; an open string is abandoned after `stringTimeoutMs` (1 s by
    // default), a margin a loaded machine's scheduling can eat. The bound has tests of its own.
    harness = await bootCase({ mode, ptyLocal: { stringTimeoutMs: 5000 } })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('shows only the visible text of sequences split across writes, and every send settles stdin_read', async () => {
    const sessionId = await harness.open()
    for (const [command, token] of SENDS) {
      const seen = await harness.send(sessionId, command)
      expect(seen.isError).toBe(false)
      expect(seen.meta.waitReason, `${command}\n${seen.text}`).toBe('stdin_read')
      expect(count(outputLines(seen.text), token), seen.text).toBe(1)
      expectNoResidue(seen.text)
    }
    const page = await harness.read(sessionId)
    const lines = outputLines(page.text)
    for (const [, token] of SENDS) expect(count(lines, token), page.text).toBe(1)
    expectNoResidue(page.text)
    expect(harness.logged).toEqual([])
  }, 30_000)
})
