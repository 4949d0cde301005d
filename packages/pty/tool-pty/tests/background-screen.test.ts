/**
 * A background send whose program draws a screen: task_output shows that screen as it is now,
 * with the real composition (pty-local, tasks, the task tools).
 */
import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { bootCase, type CaseHarness } from './cases/harness.ts'

const hasWatch = spawnSync('sh', ['-c', 'command -v watch'], { stdio: 'ignore' }).status === 0

describe.skipIf(!hasWatch)('a background full-screen program', () => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('task_output shows the screen watch draws while it runs', async () => {
    const sessionId = await harness.open()
    const taskId = await harness.sendBackground(sessionId, "watch -n 1 'echo tick-$((6*7))'")
    let seen = ''
    await until(async () => {
      seen = (await harness.taskOutput(taskId)).text
      return /^tick-42$/m.test(seen)
    }, 15_000, 'the screen of watch in task_output', () => seen)
    expect(seen).toMatch(/^\[screen: alternate \d+x\d+, cursor \d+,\d+\]$/m)
    expect(seen).toMatch(/^Every 1\.0s: echo tick-\$\(\(6\*7\)\)/m)
    expect(seen).toMatch(/\[status: running\]$/)
    expect(seen).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/)
    await harness.call('task_kill', { taskId })
  })
})
