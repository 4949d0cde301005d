/**
 * The real Claude Code TUI warm in a managed worker (`conch pool-worker` under the
 * supervisor, spawned through ctx.subprocess), against the fake model server on 127.0.0.1.
 */
import { readdirSync } from 'node:fs'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { alive, carrying, tagOf } from '@conch/test-support/procs'
import { CONCH_BIN, claudeEnv, claudeKind, startModel, tempDir } from '@conch/test-support/products'
import { until } from '@conch/test-support/wait'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, type PoolKey, type WorkerSupervisor } from '../src/index.ts'
import { subprocessContext } from './stack.ts'

let model: FakeModelServer
const shared = subprocessContext()

beforeAll(async () => {
  model = await startModel()
})
afterAll(async () => {
  await model.close()
})

function makePool(overrides: Record<string, unknown> = {}) {
  const dir = tempDir('pool-managed-claude-')
  const config = loadPoolConfig({
    // The worker's lifecycle with a bare terminal; confined-claude.test.ts runs the default.
    terminal: 'unconfined',
    worker: 'managed',
    supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], backoffMs: 50 },
    kinds: { claude: claudeKind(model) },
    stateDir: `${dir}/state`,
    cwd: tempDir('pool-cwd-'),
    ...overrides,
  }, {}, BUILTIN_KINDS)
  const pool = new PtyPool(config, { subprocess: shared.subprocess, env: claudeEnv(model), fallback: async ({ prompt }) => `fresh: ${prompt}` })
  return { pool, supervisor: pool.backend as WorkerSupervisor }
}

const key = (conversation: string): PoolKey => ({ owner: 'agent-1', conversation, kind: 'claude', model: '', account: '', bare: false })

describe('claude in a managed worker', { timeout: 90_000 }, () => {
  it('answers warm turns; killed with SIGKILL, the worker is restarted, its CLI stopped, and the next invoke succeeds', async () => {
    const { pool, supervisor } = makePool()
    try {
      expect(await pool.acquireAndInvoke(key('k'), 'Q1: before the kill')).toMatchObject({ path: 'booted', text: 'answer 1: before the kill' })
      expect(await pool.acquireAndInvoke(key('k'), 'Q2: still warm')).toMatchObject({ path: 'warm', text: 'answer 2: still warm' })
      const workerPid = supervisor.workerPid()!
      const tag = tagOf(workerPid)
      const [cli] = pool.pids()
      // The CLI carries the worker's tag, so the supervisor finds it after the worker is gone.
      expect(carrying(tag)).toEqual(expect.arrayContaining([workerPid, cli]))
      process.kill(workerPid, 'SIGKILL')
      await until(() => carrying(tag).length === 0, 15_000, 'the killed worker\'s tree to be gone')
      await until(async () => (await pool.metrics.snapshot()).worker_restarts_total === 1 && supervisor.state === 'ready', 20_000, 'the restarted worker')
      expect(alive(cli!)).toBe(false)
      const next = await pool.acquireAndInvoke(key('k'), 'Q3: after the restart')
      expect(next).toMatchObject({ path: 'booted', text: 'answer 3: after the restart' })
      expect(supervisor.workerPid()).not.toBe(workerPid)
      expect(await pool.metrics.snapshot()).toMatchObject({ worker_restarts_total: 1, acquires_spawn_total: 2, acquires_cache_hit_total: 1, invokes_ok_total: 3 })
      expect(pool.readFailures()).toEqual([])
    } finally {
      await pool.shutdown()
    }
  })

  it('graceful shutdown lets the invoke in flight finish, then leaves no worker, no CLI and no zombie', async () => {
    const { pool, supervisor } = makePool()
    await pool.acquireAndInvoke(key('g'), 'Q1: warm up')
    const workerPid = supervisor.workerPid()!
    const tag = tagOf(workerPid)
    const [cli] = pool.pids()
    const inFlight = pool.acquireAndInvoke(key('g'), 'SLOW during shutdown')
    await model.waitFor((requests) => requests.some((request) => request.userText.includes('SLOW during shutdown') && request.chunksSent >= 1))
    const stopping = pool.shutdown()
    // Admission stops at once.
    await expect(pool.acquireAndInvoke(key('g'), 'Q2: too late')).rejects.toMatchObject({ code: 'POOL_CLOSED' })
    expect(await inFlight).toMatchObject({ path: 'warm', text: 'a slow answer with many words to say' })
    expect(alive(workerPid)).toBe(true)
    await stopping
    expect(supervisor.state).toBe('stopped')
    // No process with the worker's tag is left — the worker, the CLI and anything they started —
    // and none of them is a zombie (`alive` reads the state from /proc/<pid>/stat).
    expect(carrying(tag)).toEqual([])
    expect(alive(workerPid)).toBe(false)
    expect(alive(cli!)).toBe(false)
    expect(readdirSync('/proc').filter((entry) => entry === String(workerPid) || entry === String(cli))).toEqual([])
    expect(await pool.metrics.snapshot()).toMatchObject({ evicted_shutdown_total: 1, invokes_ok_total: 2 })
    expect((await pool.metrics.managedWorkerActive.get()).values[0]!.value).toBe(0)
  })
})
