/**
 * The agent's shell, through the tools on real bash: a call without a sessionId means the shell an
 * earlier id-less send of the same agent opened, and a send opens one when there is none running.
 */
import path from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { bootCase, MODES, type CaseHarness } from './cases/harness.ts'

describe.each(MODES)('the agent\'s shell (%s)', (mode) => {
  let harness: CaseHarness

  beforeEach(async () => {
    harness = await bootCase({ mode })
  })

  afterEach(async () => {
    await harness?.dispose()
  })

  const send = (input: Record<string, unknown>, agent = harness.agent) => harness.call('terminal_send', input, agent)

  it('a send without a sessionId opens one shell, with no header, and later ones reuse it', async () => {
    const first = await send({ text: 'mkdir -p sub && cd sub && echo IN-$((6*7))' })
    expect(first.isError).toBe(false)
    expect(first.text).toBe('IN-42\n[exit: 0]')
    const shell = first.meta.sessionId
    expect(shell).toMatch(/^pty-\d+$/)

    const second = await send({ text: 'pwd' })
    expect(second.meta.sessionId).toBe(shell)
    expect(second.text).toBe(`${path.join(harness.workspace, 'sub')}\n[exit: 0]`)
    // A terminal the agent opened itself is not its shell.
    const opened = await harness.open()
    expect((await send({ text: 'true' })).meta.sessionId).toBe(shell)
    expect(opened).not.toBe(shell)
  })

  it('another agent gets a shell of its own', async () => {
    const mine = await send({ text: 'cd / && echo MINE' })
    const theirs = await send({ text: 'pwd' }, harness.other)
    expect(theirs.isError).toBe(false)
    expect(theirs.meta.sessionId).not.toBe(mine.meta.sessionId)
    expect(theirs.text).toBe(`${harness.workspace}\n[exit: 0]`)
  })

  it('a background send without a sessionId runs in a shell of its own, and the next send runs at once in the agent\'s shell', async () => {
    const shell = (await send({ text: 'echo READY' })).meta.sessionId
    const started = await send({ text: 'echo BG-$((1+1)); sleep 300', run_in_background: true })
    expect(started.isError).toBe(false)
    const own = started.meta.sessionId
    expect(own).not.toBe(shell)
    expect(started.text).toBe(`[task: ${String(started.meta.taskId)} started in ${String(own)}]`)
    await harness.waitForLine(String(own), 'BG-2')

    const next = await send({ text: 'echo FG-$((2+2))' })
    expect(next.meta.sessionId).toBe(shell)
    expect(next.text).toBe('FG-4\n[exit: 0]')
    expect((await harness.taskOutput(String(started.meta.taskId))).text).toMatch(/\[status: running\]$/)

    // Sent to a terminal the model named, the line names only the task.
    const named = await send({ sessionId: shell, text: 'sleep 300', run_in_background: true, notifyOn: 'never' })
    expect(named.text).toBe(`[task: ${String(named.meta.taskId)} started]`)
    await harness.call('task_kill', { taskId: named.meta.taskId })
    await harness.call('task_kill', { taskId: started.meta.taskId })
  })

  it('a send after the agent\'s shell exited opens another and says so', async () => {
    const ended = await send({ text: 'exit 4' })
    expect(ended.text).toContain('[session: exited code=4]')
    const again = await send({ text: 'echo AGAIN' })
    expect(again.isError).toBe(false)
    expect(again.meta.sessionId).not.toBe(ended.meta.sessionId)
    expect(again.text).toBe(`AGAIN\n[exit: 0]\n[opened: ${String(again.meta.sessionId)}; your shell ${String(ended.meta.sessionId)} had exited]`)
    expect((await send({ text: 'true' })).text).toBe('[exit: 0]')
  })

  it('terminal_signal and terminal_read without a sessionId reach the agent\'s shell', async () => {
    const none = await harness.call('terminal_read', {})
    expect(none.isError).toBe(true)
    expect(none.text).toMatch(/^INVALID_INPUT: no sessionId given, and you have no shell yet/)

    const slept = await send({ text: 'echo SLEEPING; sleep 100', idleMs: 500 })
    expect(slept.meta.waitReason).toBe('inferred_idle')
    const shell = String(slept.meta.sessionId)
    const signalled = await harness.call('terminal_signal', { signal: 'SIGINT' })
    expect(signalled.isError).toBe(false)
    expect(signalled.text).toContain(`[signal: SIGINT delivered to sleep in ${shell}]`)
    const read = await harness.call('terminal_read', { count: 20 })
    expect(read.meta.sessionId).toBe(shell)
    expect(read.text).toContain('SLEEPING')
  })
})
