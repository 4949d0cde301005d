/**
 * C1 — output lost when the shell exits right after a burst (teardown).
 * `open()`; `send('seq 1 5000; exit 3')`: the send settles `session_exit` with code 3, and the
 * retained scrollback ends with `5000` and holds exactly 5000 numeric lines. 50 times, each in a
 * fresh session, run concurrently a few at a time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, MODES, outputLines, type CaseHarness } from './harness.ts'

const REPETITIONS = 50
/** Sessions run at once (C1_BATCH=1 runs the repetitions one after another, for diagnosis). */
const BATCH = Number(process.env.C1_BATCH ?? 5)
const EXPECTED = Array.from({ length: 5000 }, (_, index) => String(index + 1))

describe.each(MODES)('C1 output at exit (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  /** One repetition; returns what went wrong, or undefined. */
  async function repetition(run: number): Promise<string | undefined> {
    const sessionId = await harness.open()
    try {
      const sent = await harness.send(sessionId, 'seq 1 5000; exit 3')
      const problems: string[] = []
      if (sent.meta.waitReason !== 'session_exit') problems.push(`settled ${String(sent.meta.waitReason)}`)
      const status = sent.meta.sessionStatus as { state: string; exitCode?: number | null }
      if (status.state !== 'exited' || status.exitCode !== 3) problems.push(`status ${JSON.stringify(status)}`)
      const sentNumbers = outputLines(sent.text).filter((line) => /^\d+$/.test(line))
      if (sentNumbers.at(-1) !== '5000') problems.push(`the send result's last number is ${sentNumbers.at(-1)} (${sentNumbers.length} numbers)`)

      const page = await harness.read(sessionId, { count: 10000 })
      const lines = outputLines(page.text)
      const numbers = lines.filter((line) => /^\d+$/.test(line))
      if (numbers.length !== 5000 || numbers.some((line, index) => line !== EXPECTED[index])) {
        problems.push(`scrollback holds ${numbers.length} numeric lines, last ${numbers.at(-1)}`)
      }
      // After the last number only bash's own `exit` notice may follow.
      const tail = lines.slice(lines.lastIndexOf('5000') + 1)
      if (!lines.includes('5000') || tail.join('\n') !== 'exit') problems.push(`scrollback ends with ${JSON.stringify(lines.slice(-3))}`)
      const evidence = (sent.meta.evidence as { detail?: string } | undefined)?.detail
      return problems.length ? `run ${run} (${sessionId}): ${problems.join('; ')} [evidence: ${evidence}]` : undefined
    } finally {
      const closed = await harness.close(sessionId)
      if (closed.isError) throw new Error(`closing ${sessionId} failed: ${closed.text}`)
    }
  }

  it(`reports the exit only after every line of a burst, ${REPETITIONS} times out of ${REPETITIONS}`, async () => {
    const failures: string[] = []
    for (let start = 0; start < REPETITIONS; start += BATCH) {
      const runs = Array.from({ length: Math.min(BATCH, REPETITIONS - start) }, (_, index) => repetition(start + index + 1))
      for (const failure of await Promise.all(runs)) if (failure !== undefined) failures.push(failure)
    }
    expect(failures).toEqual([])
    expect(harness.logged).toEqual([])
  }, 180_000)
})
