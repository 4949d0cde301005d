/**
 * C5 — the Node REPL waits in epoll on a re-opened tty (readiness).
 * `node` settles `stdin_read` within 1.5 s with its prompt visible (libuv waits in epoll on a
 * re-opened terminal, not on fd 0); `1+1` gives `2`; after `.exit`, a Python that sleeps 3 s
 * before printing is never reported as reading the terminal before it prints `done`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, count, MODES, outputLines, type CaseHarness, type Seen } from './harness.ts'

function expectRead(seen: Seen, what: string): void {
  expect(seen.isError, seen.text).toBe(false)
  expect(seen.meta.waitReason, `${what}\n${seen.text}`).toBe('stdin_read')
}

describe.each(MODES)('C5 the Node REPL on a re-opened tty (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    // The sleeping Python is silent for 3 s: silence must not end its send before `done`.
    harness = await bootCase({ mode, ptyLocal: { idleSilenceMs: 10_000 } })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('proves the Node REPL is reading, and does not mistake a sleeping Python for a reader', async () => {
    const sessionId = await harness.open()

    const node = await harness.send(sessionId, 'node')
    expectRead(node, 'node')
    expect(node.meta.elapsedMs as number).toBeLessThan(1500)
    // The REPL's prompt is the last thing it printed.
    expect(outputLines(node.text).at(-1)?.trimEnd(), node.text).toBe('>')

    const sum = await harness.send(sessionId, '1+1')
    expectRead(sum, '1+1')
    expect(count(outputLines(sum.text), '2'), sum.text).toBe(1)

    expectRead(await harness.send(sessionId, '.exit'), '.exit')

    const sleeper = await harness.send(sessionId, 'python3 -c "import time; time.sleep(3); print(\'done\')"')
    expectRead(sleeper, 'the sleeping python')
    expect(count(outputLines(sleeper.text), 'done'), `settled before done:\n${sleeper.text}\n${JSON.stringify(sleeper.meta.evidence)}`).toBe(1)
    expect(harness.logged).toEqual([])
  }, 60_000)
})
