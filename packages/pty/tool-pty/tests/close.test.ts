/**
 * What terminal_close says it stopped, with the real composition (pty-local, bubblewrap where a
 * mode confines) and a real bash: the model's shell and programs, never the processes conch
 * starts the shell through, and one wording for the session's end.
 */
import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { bootCase, descendants, MODES } from './cases/harness.ts'

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

describe.each(MODES.filter((mode) => mode === 'danger-full-access' || hasBwrap))('terminal_close under %s', (mode) => {
  it('names the shell and its programs by name and count, not host pid, not the wrapper or bubblewrap, and ends with the hangup', async () => {
    const harness = await bootCase({ mode })
    try {
      const sessionId = await harness.open()
      await harness.send(sessionId, 'sleep 300 &')
      // The job's fork has become sleep (until then it is a bash).
      const root = await harness.sessionPid(sessionId)
      let sleeper: number | undefined
      await until(async () => (sleeper = descendants(root).find((process) => process.cmdline === 'sleep 300')?.pid) !== undefined, 10_000, 'sleep 300 below the terminal')
      const closed = await harness.call('terminal_close', { sessionId })
      // In the order the teardown saw them stop; the host's pids mean nothing in the sandbox's PID namespace.
      expect(closed.text).toMatch(/^\[closed: pty-\d+ — stopped 2 processes: (sleep, bash|bash, sleep)\]\n\[session: exited signal=SIGHUP\]$/)
      // The meta, for clients on the host, keeps them.
      const stopped = closed.meta.stopped as { pid: number; name: string }[]
      expect(stopped.map((process) => process.name).sort()).toEqual(['bash', 'sleep'])
      expect(stopped).toContainEqual({ pid: sleeper, name: 'sleep' })
      for (const { pid } of stopped) expect(closed.text).not.toContain(String(pid))
    } finally {
      await harness.dispose()
    }
  })
})
