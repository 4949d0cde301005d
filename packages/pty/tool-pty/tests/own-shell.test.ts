/**
 * The shell an id-less background send opens for its job, through the tools on real bash: it is
 * closed when the job ends at its prompt with nothing left in it, and kept while something is —
 * a job the command left running, a stopped job, a program waiting for input.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { type Notification } from '@conch/agent'
import { until } from '@conch/test-support/wait'
import { bootCase, descendants, MODES, processes, type CaseHarness, type Seen } from './cases/harness.ts'

describe.each(MODES)('the own shell of a background send (%s)', (mode) => {
  let harness: CaseHarness

  beforeEach(async () => {
    harness = await bootCase({ mode, pty: { maxSessionsPerOwner: 4 } })
  })

  afterEach(async () => {
    await harness?.dispose()
  })

  const background = async (input: Record<string, unknown>): Promise<{ taskId: string; sessionId: string }> => {
    const started = await harness.call('terminal_send', { ...input, run_in_background: true })
    expect(started.isError, started.text).toBe(false)
    return { taskId: String(started.meta.taskId), sessionId: String(started.meta.sessionId) }
  }
  const listed = async (): Promise<string[]> => ((await harness.list()).meta.sessions as { sessionId: string }[]).map((session) => session.sessionId)
  /** What the agent loop delivers after the next tool call, and how many wait for it. */
  const delivered = () => (harness.agent as unknown as { deliver(): Notification[] }).deliver()
  const queued = () => (harness.agent as unknown as { inbox: Notification[] }).inbox.length

  it('closes the shell when the job ended at its prompt, and task_output still returns what was not read', async () => {
    const { taskId, sessionId } = await background({ text: 'printf "A\\nB\\n"; true' })
    const ended = await harness.taskDone(taskId)
    expect(ended.text).toBe('A\nB\n[status: completed, exit: 0]')
    expect(await listed()).not.toContain(sessionId)

    const closed = `NO_SESSION: PTY session ${sessionId} was closed when its task ${taskId} ended — terminal_list shows your terminals; terminal_open starts a new one`
    const send: Seen = await harness.send(sessionId, 'echo again')
    expect(send).toMatchObject({ isError: true, text: closed })
    expect((await harness.read(sessionId)).text).toBe(closed)
    // A terminal the model closed itself says only that.
    const opened = await harness.open()
    await harness.close(opened)
    expect((await harness.send(opened, 'true')).text).toMatch(new RegExp(`^NO_SESSION: PTY session ${opened} was closed — `))
  })

  it('leaves the prompt row out of the output of a job watched for a pattern, as of one that is not', async () => {
    // A notifyOn task reads its output as it comes, the prompt row included.
    for (const notifyOn of [undefined, 'NEVER-PRINTED']) {
      const { taskId } = await background({ text: 'sleep 0.2; echo watched-$((6*7))', ...(notifyOn && { notifyOn }) })
      await until(async () => queued() > 0, 15_000, `the notification of the job (notifyOn ${notifyOn})`)
      const [notice] = delivered()
      expect(notice).toMatchObject({ source: taskId, event: 'exited 0', tail: 'watched-42' })
      expect((await harness.call('task_output', { taskId })).text).toBe('(no new output)\n[status: completed, exit: 0]')
    }
  })

  it('notifies with the same tail as a job in a shell the model named, which stays open', async () => {
    const named = await harness.open()
    const kept = await background({ sessionId: named, text: 'seq 3' })
    await until(async () => queued() > 0, 15_000, 'the notification of the job in the named shell')
    const [keptNotice] = delivered()
    const own = await background({ text: 'seq 3' })
    await until(async () => queued() > 0, 15_000, 'the notification of the job in its own shell')
    const [ownNotice] = delivered()
    expect(keptNotice).toMatchObject({ source: kept.taskId, event: 'exited 0', tail: '1\n2\n3' })
    expect(ownNotice).toMatchObject({ source: own.taskId, event: 'exited 0', tail: keptNotice!.tail })
    expect(await listed()).toEqual([named])
  })

  it('keeps the shell while a job the command started runs in it', async () => {
    const { taskId, sessionId } = await background({ text: 'sleep 300 &' })
    expect((await harness.taskDone(taskId)).text).toMatch(/\[status: completed, exit: 0\]$/)
    expect(await listed()).toContain(sessionId)
    const root = await harness.sessionPid(sessionId)
    expect(descendants(root).some((entry) => entry.cmdline === 'sleep 300' && entry.state !== 'Z')).toBe(true)
    expect((await harness.send(sessionId, 'jobs')).text).toMatch(/Running\s+sleep 300 &/)
  })

  it('keeps the shell while a program the command started outside its process tree runs, as its close would stop it', async () => {
    for (const [text, program] of [['(sleep 302 &)', 'sleep 302'], ['setsid -f sleep 303', 'sleep 303']] as const) {
      const { taskId, sessionId } = await background({ text })
      expect((await harness.taskDone(taskId)).text).toMatch(/\[status: completed, exit: 0\]$/)
      expect(await listed()).toContain(sessionId)
      // Forked before the prompt came back, it may not have exec'd sleep yet.
      await until(async () => processes().some((entry) => entry.cmdline === program && entry.state !== 'Z'), 15_000, `${program} to run`)
      expect((await harness.close(sessionId)).text).toMatch(/^\[closed: pty-\d+ — stopped 2 processes: (sleep, bash|bash, sleep)\]/)
    }
  })

  it('keeps the shell of a stopped job and of a program waiting for input', async () => {
    const stopped = await background({ text: 'sleep 301' })
    let sleeping: number | undefined
    await until(async () => (sleeping = processes().find((entry) => entry.cmdline === 'sleep 301')?.pid) !== undefined, 15_000, 'sleep 301 to start')
    process.kill(sleeping!, 'SIGSTOP')
    expect((await harness.taskDone(stopped.taskId)).text).toMatch(/\[status: stopped, wait: stdin_read, stopped: SIGSTOP\]$/)

    const waiting = await background({ text: 'read -p "name? " name' })
    expect((await harness.taskDone(waiting.taskId)).text).toMatch(/^name\? \n\[status: completed, wait: stdin_read\]$/)
    expect(await listed()).toEqual([stopped.sessionId, waiting.sessionId])
    // The stopped job is still the shell's to resume.
    expect((await harness.send(stopped.sessionId, 'jobs')).text).toMatch(/Stopped.*sleep 301/)
  })

  it('runs 40 id-less background jobs one after another without reaching maxSessionsPerOwner', async () => {
    for (let job = 1; job <= 40; job++) {
      const { taskId } = await background({ text: `echo JOB-$((${job}*2))` })
      expect((await harness.taskDone(taskId)).text).toBe(`JOB-${job * 2}\n[status: completed, exit: 0]`)
    }
    expect(await listed()).toEqual([])
  })
})
