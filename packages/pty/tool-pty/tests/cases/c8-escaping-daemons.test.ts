/**
 * C8 — daemons escape the process tree (teardown).
 * A background job, a `nohup` job, a `setsid` job, a `setsid` from a subshell (re-parented to
 * init at once) and a foreground `sleep`: after terminal_close, within the dispose grace, no
 * `sleep 100[1-5]` exists, no zombie child of this process remains, and the close result names
 * what it stopped.
 *
 * A daemon that clears its environment but stays in the terminal's session (`(env -i sleep
 * 1007 &)`) is found by its session id. The one way left to escape: a program that clears its
 * environment and leaves the session — `env -i setsid sleep 1006 &` (or a daemon that
 * double-forks, resets its environment and calls setsid). It carries no session tag, so the tag
 * sweep misses it, and it is re-parented to init, so the tree walk misses it too; run
 * unconfined it outlives the terminal. Only a PID namespace
 * contains it: under `workspace-write` bubblewrap (`--unshare-pid`) runs the shell as the
 * namespace's first process, and when that ends the kernel kills everything left inside. That
 * test is below, for workspace-write only (unconfined it would leave a process behind).
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { alive, bootCase, MODES, processes, zombieChildren, type CaseHarness, type ProcEntry, type Seen } from './harness.ts'

/** The dispose grace of the node-pty backend (`disposeGraceMs`, default). */
const DISPOSE_GRACE_MS = 3000
const DAEMONS = /^sleep 100[1-6]$/

/** `sleep 100[1-6]` processes that are not in `baseline` (left by something else on this machine). */
function daemons(baseline: ReadonlySet<number>): ProcEntry[] {
  return processes().filter((entry) => DAEMONS.test(entry.cmdline) && entry.state !== 'Z' && !baseline.has(entry.pid))
}

function describeAll(entries: ProcEntry[]): string {
  return entries.map((entry) => `${entry.pid} ${entry.state} ppid=${entry.ppid} ${entry.cmdline}`).join('\n')
}

describe.each(MODES)('C8 daemons that escape the process tree (%s)', (mode) => {
  let harness: CaseHarness
  let baseline: Set<number>

  beforeAll(async () => {
    baseline = new Set(processes().filter((entry) => DAEMONS.test(entry.cmdline)).map((entry) => entry.pid))
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('stops background, nohup and setsid daemons and the foreground program, and says what it stopped', async () => {
    const sessionId = await harness.open()
    for (const command of ['sleep 1001 &', 'nohup sleep 1002 >/dev/null 2>&1 &', 'setsid sleep 1003 &', '(setsid sleep 1004 &)']) {
      const seen = await harness.send(sessionId, command)
      expect(seen.isError, seen.text).toBe(false)
    }
    await harness.sendBackground(sessionId, 'sleep 1005')
    let started: ProcEntry[] = []
    await until(() => {
      started = daemons(baseline)
      return new Set(started.map((entry) => entry.cmdline)).size === 5
    }, 10_000, 'sleep 1001…1005 to run', () => describeAll(daemons(baseline)))

    const closed = await harness.close(sessionId)
    expect(closed.isError, closed.text).toBe(false)

    let left: ProcEntry[] = []
    await until(() => {
      left = daemons(baseline)
      return left.length === 0
    }, DISPOSE_GRACE_MS, 'every sleep 100[1-5] to be gone').catch(() => undefined)
    expect(describeAll(left), 'left after close').toBe('')
    let zombies: ProcEntry[] = []
    await until(() => {
      zombies = zombieChildren()
      return zombies.length === 0
    }, DISPOSE_GRACE_MS, 'no zombie children').catch(() => undefined)
    expect(describeAll(zombies), 'zombie children of the test process').toBe('')

    // The close names what it stopped: every one of the five sleeps, by pid in its meta, counted in its text.
    const stopped = closed.meta.stopped as { pid: number; name: string }[]
    for (const entry of started) expect(stopped, `${entry.cmdline} (pid ${entry.pid}) in ${closed.text}`).toContainEqual({ pid: entry.pid, name: 'sleep' })
    expect(closed.meta.survivors).toEqual([])
    expect(closed.text).toMatch(/^\[closed: pty-\d+ — stopped \d+ processes: .*\bsleep ×5\b/)
    expect(harness.logged).toEqual([])
  }, 60_000)

  /** Opens a terminal, runs `commands` in it and closes it once `ready` runs; the close result and the `sleep 1007`/`1008` left at once. */
  async function closeWith(commands: string[], ready: string): Promise<{ closed: Seen; left: ProcEntry[] }> {
    const late = /^sleep 100[78]$/
    const before = new Set(processes().filter((entry) => late.test(entry.cmdline)).map((entry) => entry.pid))
    const sessionId = await harness.open()
    for (const command of commands) {
      const seen = await harness.send(sessionId, command)
      expect(seen.isError, seen.text).toBe(false)
    }
    await until(() => processes().some((entry) => entry.cmdline === ready && !before.has(entry.pid)), 10_000, `${ready} to run`)
    const closed = await harness.close(sessionId)
    expect(closed.isError, closed.text).toBe(false)
    // At once, not within a grace: the close returns only when the tree is gone.
    return { closed, left: processes().filter((entry) => late.test(entry.cmdline) && entry.state !== 'Z' && !before.has(entry.pid)) }
  }

  it('stops, before the close returns, a job that double-forks and setsids out while it handles the hangup', async () => {
    // On TERM or HUP the job starts `sleep 1007` in a new session from a subshell that exits at
    // once (so it is re-parented out of the tree during the close), writes its pid and exits.
    // Its `sleep 0.0517` runs only once the trap is set.
    const job = `bash -c 'trap "(setsid sleep 1007 & echo \\$! > escaped.pid); exit 0" TERM HUP; while :; do sleep 0.0517; done' &`
    const { closed, left } = await closeWith([job], 'sleep 0.0517')
    expect(describeAll(left), 'left when the close returned').toBe('')
    expect(closed.meta.survivors).toEqual([])
    if (mode === 'danger-full-access') {
      // Unconfined the escapee carries the session tag: the sweep after the shell finds it and
      // names it. (In the sandbox the namespace ends with its init, and the escapee with it.)
      const escaped = Number(readFileSync(path.join(harness.workspace, 'escaped.pid'), 'utf8'))
      expect((closed.meta.stopped as { pid: number }[]).map((entry) => entry.pid)).toContain(escaped)
    }
  }, 60_000)

  it("stops a daemon that cleared its environment and left the tree but kept the terminal's session", async () => {
    // `env -i` drops the session tag and the subshell's exit re-parents the sleep to init; it
    // never calls setsid, so its session id is still the shell's: the close sweeps that session.
    const { closed, left } = await closeWith(['(env -i sleep 1007 &)'], 'sleep 1007')
    expect(describeAll(left), 'left when the close returned').toBe('')
    expect(closed.meta.survivors).toEqual([])
    expect(closed.meta.stopped).toContainEqual(expect.objectContaining({ name: 'sleep' }))
  }, 60_000)

  it('KILLs a job that ignores TERM and HUP, and the close returns when it is gone', async () => {
    const { closed, left } = await closeWith([`bash -c 'trap "" TERM HUP; exec sleep 1008' &`], 'sleep 1008')
    expect(describeAll(left), 'left when the close returned').toBe('')
    expect(closed.meta.survivors).toEqual([])
    expect(closed.meta.stopped).toContainEqual(expect.objectContaining({ name: 'sleep' }))
  }, 60_000)
})

// Unconfined, this daemon escapes by design (see the comment at the top): only the sandbox's PID
// namespace can stop it, so it runs under workspace-write alone.
describe('C8 the environment-clearing daemon (workspace-write)', () => {
  let harness: CaseHarness
  let baseline: Set<number>

  beforeAll(async () => {
    baseline = new Set(processes().filter((entry) => DAEMONS.test(entry.cmdline)).map((entry) => entry.pid))
    harness = await bootCase({ mode: 'workspace-write' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('also stops a daemon that cleared its environment and left the session', async () => {
    const sessionId = await harness.open()
    let escaped: ProcEntry[] = []
    try {
      const seen = await harness.send(sessionId, 'env -i setsid sleep 1006 &')
      expect(seen.isError, seen.text).toBe(false)
      await until(() => {
        escaped = daemons(baseline).filter((entry) => entry.cmdline === 'sleep 1006')
        return escaped.length === 1
      }, 10_000, 'sleep 1006 to run')
      const closed = await harness.close(sessionId)
      expect(closed.isError, closed.text).toBe(false)
      let left: ProcEntry[] = []
      await until(() => {
        left = daemons(baseline)
        return left.length === 0
      }, DISPOSE_GRACE_MS, 'sleep 1006 to be gone').catch(() => undefined)
      expect(describeAll(left), 'left after close').toBe('')
    } finally {
      // Never leave the escapee running on a shared machine, whatever the outcome.
      for (const entry of escaped.filter(alive)) {
        try {
          process.kill(entry.pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
    }
  }, 30_000)
})
