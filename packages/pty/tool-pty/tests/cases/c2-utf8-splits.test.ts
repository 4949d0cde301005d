/**
 * C2 — UTF-8 split across chunks, calls and cuts (encoding).
 * A character printed in two halves two seconds apart, read by task_output in between; then
 * lines far larger than the result cap, of 2-byte and of 4-byte (surrogate-pair) characters.
 * Nothing anywhere may hold U+FFFD or a lone surrogate; the cut results are marked truncated,
 * stay within the byte cap and round-trip through UTF-8.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, count, hasLoneSurrogate, MODES, outputLines, roundTripsUtf8, type CaseHarness, type Seen } from './harness.ts'

/** The default result budget of tool-pty (`maxOutputBytes`). */
const RESULT_CAP = 30000

function expectClean(text: string): void {
  expect(text).not.toContain('\uFFFD')
  expect(hasLoneSurrogate(text)).toBe(false)
  expect(roundTripsUtf8(text)).toBe(true)
}

/**
 * A result cut to the budget: marked truncated, within the budget and clean (the case), and
 * showing the first and the newest part of the run of `char` around the omission marker — the
 * cuts fall inside the run, so the code-point boundary is exercised (tool-pty's README).
 */
function expectCutRun(seen: Seen, char: string): void {
  expect(seen.isError).toBe(false)
  expectClean(seen.text)
  expect(Buffer.byteLength(seen.text, 'utf8')).toBeLessThanOrEqual(RESULT_CAP)
  expect(seen.meta.truncated).toBe(true)
  expect(seen.text).toMatch(/^\[… [\d,]+ bytes \([\d,]+ lines?\) omitted; terminal_read \{offset: \d+, count: \d+\} pages them\]$/m)
  // The head holds the echoed command line too.
  const runs = outputLines(seen.text).filter((line) => line.includes(char) && !line.startsWith('python3 '))
  for (const line of runs) expect(line.replaceAll(char, '')).toBe('')
  expect.soft(runs.reduce((sum, line) => sum + line.length, 0), `no part of the ${char} run is shown:\n${seen.text.slice(0, 300)}`).toBeGreaterThan(10000)
}

describe.each(MODES)('C2 UTF-8 across chunks, calls and cuts (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    // The background send waits through a 2 s pause in its output: keep it from settling on silence.
    harness = await bootCase({ mode, ptyLocal: { idleSilenceMs: 10_000 } })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('joins a character split by a pause, keeps big results whole on code points, and never shows U+FFFD', async () => {
    const sessionId = await harness.open()
    const started = performance.now()
    const taskId = await harness.sendBackground(sessionId, 'printf "\\344\\270"; sleep 2; printf "\\255\\n"; echo END')

    // The case reads at 0.5 s and at 3 s: these waits let time pass (the first half of the
    // character is out, the second not yet, then both), they synchronise nothing — every
    // assertion holds whatever was printed by then.
    const reads: Seen[] = []
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 500 - (performance.now() - started))))
    reads.push(await harness.taskOutput(taskId))
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 3000 - (performance.now() - started))))
    reads.push(await harness.taskOutput(taskId))
    const final = await harness.taskDone(taskId)
    reads.push(final)
    for (const seen of reads) {
      expect(seen.isError).toBe(false)
      expectClean(seen.text)
    }
    expect(final.text).toContain('[status: completed, exit: 0]')
    const taskLines = reads.flatMap((seen) => outputLines(seen.text))
    expect(count(taskLines, '中')).toBe(1)
    expect(taskLines.indexOf('END')).toBeGreaterThan(taskLines.indexOf('中'))

    const page = await harness.read(sessionId, { count: 5000 })
    expectClean(page.text)
    const scrollback = outputLines(page.text)
    expect(count(scrollback, '中')).toBe(1)
    expect(scrollback.indexOf('END')).toBeGreaterThan(scrollback.indexOf('中'))

    // 300000 × U+00E9 (600000 bytes) and 100000 × U+1F600 (400000 bytes, surrogate pairs in
    // JavaScript): each line alone is larger than the cap.
    const accents = await harness.send(sessionId, 'python3 -c "print(\'é\'*300000)"')
    expectCutRun(accents, 'é')

    const emoji = await harness.send(sessionId, 'python3 -c "print(\'😀\'*100000)"')
    expectCutRun(emoji, '😀')

    const after = await harness.read(sessionId)
    expectClean(after.text)
    expect(Buffer.byteLength(after.text, 'utf8')).toBeLessThanOrEqual(RESULT_CAP)
    expect(harness.logged).toEqual([])
  }, 60_000)
})
