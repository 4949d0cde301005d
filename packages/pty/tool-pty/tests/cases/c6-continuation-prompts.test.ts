/**
 * C6 — continuation prompts swallow the next input (readiness / input state).
 * A Python block left open, then closed with an empty line; an open quote in bash, more input
 * swallowed by it, then SIGINT. Every continuation must be visible to the model, and SIGINT
 * returns bash to its primary prompt with `$?` = 130.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, count, MODES, outputLines, type CaseHarness, type Seen } from './harness.ts'

const CONTINUATION = '[input: continuation'

function expectRead(seen: Seen, what: string): void {
  expect(seen.isError, seen.text).toBe(false)
  expect(seen.meta.waitReason, `${what}\n${seen.text}`).toBe('stdin_read')
}

function expectContinuation(seen: Seen, what: string): void {
  expectRead(seen, what)
  expect(seen.meta.inputState, `${what}\n${seen.text}`).toBe('continuation')
  expect(seen.text, what).toContain(CONTINUATION)
}

function expectPrimary(seen: Seen, what: string): void {
  expectRead(seen, what)
  expect(seen.meta.inputState, `${what}\n${seen.text}`).not.toBe('continuation')
  expect(seen.text, what).not.toContain(CONTINUATION)
}

describe.each(MODES)('C6 continuation prompts (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('shows an open Python block and an open bash quote as continuations, and SIGINT leaves them', async () => {
    const sessionId = await harness.open()
    expectPrimary(await harness.send(sessionId, 'python3 -q'), 'python3 -q')

    const block = await harness.send(sessionId, 'for i in range(3):\n    print(i)')
    expectContinuation(block, 'the for block')
    expect(count(outputLines(block.text), '0'), block.text).toBe(0)

    const ran = await harness.send(sessionId, '')
    expectPrimary(ran, 'the empty line')
    const ranLines = outputLines(ran.text)
    for (const digit of ['0', '1', '2']) expect(count(ranLines, digit), ran.text).toBe(1)

    const hello = await harness.send(sessionId, 'print("hello")')
    expectPrimary(hello, 'print("hello")')
    expect(count(outputLines(hello.text), 'hello'), hello.text).toBe(1)
    expect(hello.text).not.toContain('SyntaxError')

    expectPrimary(await harness.send(sessionId, 'exit()'), 'exit()')

    const quote = await harness.send(sessionId, 'echo "abc')
    expectContinuation(quote, 'echo "abc')
    expect(quote.meta.elapsedMs as number, 'echo "abc settles at PS2 in about 1 s').toBeLessThan(1500)

    const swallowed = await harness.send(sessionId, 'echo second')
    expectContinuation(swallowed, 'echo second (inside the open quote)')
    expect(count(outputLines(swallowed.text), 'second'), swallowed.text).toBe(0)

    const interrupted = await harness.signal(sessionId, 'SIGINT')
    expect(interrupted.isError, interrupted.text).toBe(false)
    expect(interrupted.meta.delivered).toBe(true)

    const status = await harness.send(sessionId, 'echo $?')
    expectPrimary(status, 'echo $?')
    expect(count(outputLines(status.text), '130'), status.text).toBe(1)
    expect(harness.logged).toEqual([])
  }, 60_000)
})
