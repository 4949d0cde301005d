/**
 * Results that name the outcome, through the tools on real bash: a send that settles at the
 * shell's prompt carries the exit status of what ran, and a signal that ends the shell says so in
 * its own result.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, MODES, type CaseHarness } from './cases/harness.ts'

describe.each(MODES)('exit statuses in send results (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('shows the status of what ran at the prompt, zero included, and none in a REPL', async () => {
    const id = await harness.open()
    const ok = await harness.send(id, 'true')
    expect(ok.text).toMatch(/\n\[wait: stdin_read, exit: 0\]$/)
    expect(ok.meta.exitStatus).toBe(0)
    expect((await harness.send(id, '(exit 17)')).text).toMatch(/\n\[wait: stdin_read, exit: 17\]$/)
    expect((await harness.send(id, "sh -c 'kill -TERM $$'")).text).toMatch(/\n\[wait: stdin_read, exit: 143\]$/)
    const python = await harness.send(id, 'python3 -q')
    expect(python.meta.waitReason).toBe('stdin_read')
    expect(python.text).not.toContain('[exit:')
    expect((await harness.send(id, '1 + 1')).text).not.toContain('[exit:')
    expect((await harness.send(id, 'exit()')).text).toMatch(/\n\[wait: stdin_read, exit: 0\]$/)
  })

  it('says in a signal result that the signal ended the shell', async () => {
    const id = await harness.open()
    const signalled = await harness.signal(id, 'SIGHUP')
    expect(signalled.isError).toBe(false)
    expect(signalled.text).toMatch(/^\[signal: SIGHUP delivered to bash .*\]\n\[session: exited code=129 \(128\+SIGHUP\)\]$/m)
    expect(signalled.meta.sessionStatus).toMatchObject({ state: 'exited', exitCode: 129 })
  })
})
