/**
 * The five example tasks in the Terminal-Bench 2 layout (examples/terminal-bench/tasks), each
 * built and run in the agent's container that `@conch/sandbox-docker` makes in the real dockerd,
 * their oracle solutions typed through a real `conch run` with terminal_send, their verifiers run
 * in that container before the agent ends.
 * The base image is `CONCH_TBENCH_BASE`, else conch-test:bookworm (scripts/build-test-image.sh),
 * with the programs the tasks need added once when it lacks them (`taskBase`).
 */
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it, vi } from 'vitest'
import { runTask, taskBase } from '../examples/terminal-bench/run.ts'

// Deriving the base (apt-get, once per machine) is the slow part; a task takes seconds.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 600_000 })

const TASKS = join(import.meta.dirname, '..', 'examples', 'terminal-bench', 'tasks')
const names = readdirSync(TASKS).sort()
let baseImage: string

beforeAll(async () => {
  baseImage = await taskBase(process.env['CONCH_TBENCH_BASE'] ?? 'conch-test:bookworm')
})

describe('Terminal-Bench tasks through conch in containers', () => {
  it('has the five example tasks', () => {
    expect(names).toEqual(['fix-c-build', 'gdb-key', 'git-editor-commit', 'heredoc-files', 'python-repl'])
  })

  it.each(names)('%s: the oracle typed through terminal_send earns reward 1, each send settles on evidence, nothing is left', async (name) => {
    const report = await runTask(join(TASKS, name), { baseImage })
    expect(report.error).toBeUndefined()
    expect(report.reward).toBe(1)
    expect(report.sends.length).toBeGreaterThan(3)
    for (const send of report.sends) expect({ text: send.text, waitReason: send.waitReason }).toEqual({ text: send.text, waitReason: 'stdin_read' })
    expect(report.leftoverProcesses).toBe(0)
    expect(report.leftoverContainers).toBe(0)
  })

  it.each(names)('%s: the verifier gives reward 0 to the untouched environment', async (name) => {
    const report = await runTask(join(TASKS, name), { baseImage, solve: false })
    expect(report.error).toBeUndefined()
    expect(report.reward).toBe(0)
    expect(report.leftoverContainers).toBe(0)
  })

  it("a process that escaped the terminal's teardown and stays in the container is reported as a leftover", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-tbench-leak-'))
    try {
      const task = join(dir, 'leak')
      cpSync(join(TASKS, 'heredoc-files'), task, { recursive: true })
      // Closing the terminal ends what carries its session tag, a `setsid` one included; `env -i` drops the tag.
      // The escape is complete once sleep 302 runs (after setsid, with the emptied environment):
      // its send waits for that, or the close could find it still tagged, before its exec.
      const escaped = `(env -i /usr/bin/setsid /bin/sleep 302 & until read -rd '' program < /proc/$!/cmdline && [ "$program" = /bin/sleep ]; do :; done)`
      writeFileSync(join(task, 'solution', 'solve.sh'), `cd /app\n(setsid sleep 301 &)\n${escaped}\n`)
      const report = await runTask(task, { baseImage })
      expect(report.sends.map((send) => send.waitReason)).toEqual(['stdin_read', 'stdin_read', 'stdin_read'])
      expect(report.leftoverProcesses).toBe(1)
      // Removing the container ends it.
      expect(report.leftoverContainers).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
