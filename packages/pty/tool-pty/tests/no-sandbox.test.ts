/**
 * A terminal that cannot be confined because nothing confines on this machine (the bubblewrap
 * runner is missing): the model is told the error is not retryable, not to check its arguments
 * and try again. The real stack of the terminal cases, with `runnerCommand` pointed at a missing file.
 */
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bootCase, type CaseHarness } from './cases/harness.ts'

let harness: CaseHarness

beforeAll(async () => {
  harness = await bootCase({ mode: 'workspace-write', sandboxLocal: { runnerCommand: '/nonexistent/bwrap' } })
})

afterAll(async () => {
  await harness?.dispose()
})

it('terminal_open without a working sandbox says the error is not retryable and what to install', async () => {
  const seen = await harness.call('terminal_open', { type: 'shell' })
  expect(seen.isError).toBe(true)
  expect(seen.text).toMatch(/^SPAWN_FAILED: .*\/nonexistent\/bwrap was not found.*apt-get install bubblewrap.* — not retryable: nothing can confine a terminal on this machine; tell the user what the message says to install or fix$/)
  expect(seen.text).not.toContain('try again')
})
