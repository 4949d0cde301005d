/**
 * What a background send's notifications repeat — of the command their label names, and of what
 * task_output already showed — with the real composition (pty-local, tasks, the task tools) and
 * a real bash.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { renderNotification, type Notification } from '@conch/agent'
import { until } from '@conch/test-support/wait'
import { bootCase, type CaseHarness } from './cases/harness.ts'

describe('what a background send notification repeats', () => {
  let harness: CaseHarness
  /** What the agent loop delivers after the next tool call. */
  const delivered = () => (harness.agent as unknown as { deliver(): Notification[] }).deliver()
  const queued = () => (harness.agent as unknown as { inbox: Notification[] }).inbox.length

  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('a notifyOn match read through task_output before delivery is named by that read and not notified again', async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', {
      sessionId,
      text: 'for i in 1 2 3; do echo line-$i; done; echo server READY on $((8000+80)); sleep 600',
      run_in_background: true,
      notifyOn: 'READY on 8080',
    })
    const taskId = String(started.meta.taskId)
    await until(async () => queued() > 0, 15_000, 'the notifyOn notification')
    const read = await harness.call('task_output', { taskId })
    expect(read.text).toMatch(/^server READY on 8080\n\[status: running, matched "READY on 8080"\]$/m)
    expect(delivered()).toEqual([])
    await harness.call('task_kill', { taskId })
  })

  it('a notification does not repeat the command the model sent: its tail leaves out the echo, however wide', async () => {
    const sessionId = await harness.open()
    // Wider than the terminal: an echo that wrapped would leave its rest in the tail.
    const command = `echo first-$((1)); echo second-$((2)) # ${'wide '.repeat(60)}`
    await harness.call('terminal_send', { sessionId, text: command, run_in_background: true, notify: true })
    await until(async () => queued() > 0, 15_000, 'the end notification')
    const [notification] = delivered()
    expect(notification).toMatchObject({ event: 'exited 0', label: expect.stringContaining(`${sessionId}: echo first-$((1));`) })
    // Its end at the shell's prompt (exited 0) leaves out the prompt row, as a foreground result does.
    expect(notification!.tail).toBe('first-1\nsecond-2')
    expect(renderNotification(notification!)).not.toMatch(/echo first/)
    expect(notification!.tail).not.toMatch(/wide/)
  })

  it('a notifyOn notification does not repeat the command either: its tail starts after the echo', async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', { sessionId, text: 'echo one-$((1)); echo ready-$((2)); sleep 600', run_in_background: true, notifyOn: '^ready-2$' })
    await until(async () => queued() > 0, 15_000, 'the notifyOn notification')
    const [notification] = delivered()
    expect(notification).toMatchObject({ event: 'matched "^ready-2$"', tail: 'one-1\nready-2' })
    expect(renderNotification(notification!)).not.toMatch(/echo one/)
    await harness.call('task_kill', { taskId: String(started.meta.taskId) })
  })

  it('a notification that a send waits for input quotes the prompt once', async () => {
    const sessionId = await harness.open()
    await harness.call('terminal_send', { sessionId, text: `printf -v p '%s goes there? ' Who; read -r -p "$p" name`, run_in_background: true })
    await until(async () => queued() > 0, 15_000, 'the waiting-for-input notification')
    const [notification] = delivered()
    expect(notification).toMatchObject({ event: 'waiting for input: Who goes there?' })
    expect(renderNotification(notification!).match(/Who goes there/g)).toHaveLength(1)
    // The reader by name: its host pid means nothing inside a sandbox.
    expect(notification!.evidence).toMatch(/^bash read fd0 \/dev\/pts\/\d+$/)
  })

  it("a task's end notification carries only the lines task_output has not shown", async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', {
      sessionId,
      text: 'echo first-$((1)); until [ -e go ]; do sleep 0.05; done; echo second-$((2))',
      run_in_background: true,
      notify: true,
    })
    const taskId = String(started.meta.taskId)
    let shown = ''
    await until(async () => /^first-1$/m.test((shown += `${(await harness.call('task_output', { taskId })).text}\n`)), 15_000, 'first-1 in task_output', () => shown)
    // Only now does the task go on: second-2 and the end come after the last read.
    writeFileSync(join(harness.workspace, 'go'), '')
    await until(async () => queued() > 0, 15_000, 'the end notification')
    const [notification] = delivered()
    expect(notification).toMatchObject({ source: taskId, event: 'exited 0' })
    expect(notification!.tail ?? '').not.toMatch(/first-1/)
    expect(notification!.tail).toMatch(/^second-2$/m)
  })

  it('task_kill after a delivered notifyOn match shows only what is new since: not the echo, not the tail', async () => {
    const sessionId = await harness.open()
    writeFileSync(join(harness.workspace, 'serve.sh'), 'for i in 1 2 3 4 5 6 7; do echo boot-$i; done\necho Listening on 127.0.0.1:8080\nsleep 600\n')
    const started = await harness.call('terminal_send', { sessionId, text: 'bash serve.sh', run_in_background: true, notifyOn: 'Listening on \\S+' })
    await until(async () => queued() > 0, 15_000, 'the notifyOn notification')
    const [notification] = delivered()
    expect(notification!.tail).toBe('boot-4\nboot-5\nboot-6\nboot-7\nListening on 127.0.0.1:8080')
    const killed = await harness.call('task_kill', { taskId: String(started.meta.taskId) })
    // The three lines before the tail were never shown: counted, not repeated.
    expect(killed.text).toMatch(/^\[… \d+ bytes \(3 lines\) omitted\]\n/)
    expect(killed.text).not.toMatch(/bash serve\.sh|boot-|Listening/)
    expect(killed.text).toMatch(/\]\n\[status: killed\b[^\n]*\]$/)
    expect(killed.text).not.toMatch(/^\$ /m)
  })

  it('task_output of a background send leaves out the echo of its text, which the model wrote itself', async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', { sessionId, text: 'echo out-$((6*7))', run_in_background: true })
    expect(started.text).toBe(`[task: ${String(started.meta.taskId)} started]`)
    const done = await harness.call('task_output', { taskId: String(started.meta.taskId), wait: true })
    expect(done.text).toBe('out-42\n[status: completed, exit: 0]')
    // The read showed the end: its notification is not delivered after it.
    expect(delivered()).toEqual([])
  })
})

describe('task_output {wait: true} returns at the news a notification would bring', () => {
  let harness: CaseHarness
  const delivered = () => (harness.agent as unknown as { deliver(): Notification[] }).deliver()

  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('a dev server sent with notifyOn: the wait returns at the match, which no notification repeats, and a second wait waits', async () => {
    const started = await harness.call('terminal_send', { text: 'python3 -m http.server 0 --bind 127.0.0.1', run_in_background: true, notifyOn: 'Serving HTTP' })
    const taskId = String(started.meta.taskId)
    // A timeout past the test's own: only the match can end this wait in time.
    const matched = await harness.call('task_output', { taskId, wait: true, timeoutMs: 600_000 })
    // The pattern is tried on a line still being printed too: the rest of it may come later.
    expect(matched.text).toMatch(/^Serving HTTP[^\n]*\n\[status: running, matched "Serving HTTP"\]$/)
    expect(matched.meta['timedOut']).toBeUndefined()
    expect(delivered()).toEqual([])
    // Nothing new: the second wait lasts its timeoutMs.
    const again = await harness.call('task_output', { taskId, wait: true, timeoutMs: 200 })
    expect(again.text).toMatch(/\n\[status: running, waited 200 ms\]$/)
    expect(again.meta['timedOut']).toBe(true)
    expect(delivered()).toEqual([])
    await harness.call('task_kill', { taskId })
  })

  it('a send that blocks reading its terminal: the wait returns with the prompt and the input wait, not notified again', async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', { sessionId, text: `read -r -s -p "Pass""word: " secret`, run_in_background: true })
    const waiting = await harness.call('task_output', { taskId: String(started.meta.taskId), wait: true, timeoutMs: 600_000 })
    expect(waiting.text).toBe('Password: \n[status: completed, wait: stdin_read, input: hidden]')
    expect(delivered()).toEqual([])
  })

  it('a task that ends after printing: the wait returns with its end', async () => {
    const sessionId = await harness.open()
    const started = await harness.call('terminal_send', { sessionId, text: 'echo built-$((1+1)); exit_with() { return $1; }; exit_with 3', run_in_background: true })
    const ended = await harness.call('task_output', { taskId: String(started.meta.taskId), wait: true, timeoutMs: 600_000 })
    expect(ended.text).toBe('built-2\n[status: completed, exit: 3]')
    expect(delivered()).toEqual([])
  })
})
