/**
 * The managed worker with a real REPL of the generic kind (a shell loop that answers with the
 * sentinel framing): `conch pool-worker` under the supervisor gives the same answers as the
 * in-process pool, and hostile workers (real processes that break the protocol) are stopped —
 * their whole tree, a setsid daemon included — their invokes answered by the fallback, and a
 * new worker started.
 */
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { alive, carrying, tagOf } from '@conch/test-support/procs'
import { CONCH_BIN, tempDir } from '@conch/test-support/products'
import { until } from '@conch/test-support/wait'
import * as ptyPool from '../src/index.ts'
import { BUILTIN_KINDS, LineDecoder, loadPoolConfig, PtyPool, WorkerSupervisor, type InvokeResult, type PoolKey } from '../src/index.ts'
import { sentinelRepl } from './repl.ts'
import { subprocessContext, unconfinedTerminals } from './stack.ts'

const HOSTILE = resolve(import.meta.dirname, 'hostile-worker.mjs')

const dir = tempDir('pool-worker-')
const repl = sentinelRepl(dir)

const shared = subprocessContext()
const terminals = unconfinedTerminals()

const key: PoolKey = { owner: 'a', conversation: 'c', kind: 'generic', model: '', account: '', bare: false }

function makePool(name: string, overrides: Record<string, unknown> = {}) {
  const config = loadPoolConfig({
    // The supervisor and the protocol are under test here, with a bare terminal;
    // confined-worker.test.ts runs the worker's default conch terminals.
    terminal: 'unconfined',
    kinds: { generic: { command: repl, env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' } },
    stateDir: `${dir}/${name}/state`,
    cwd: dir,
    stallMs: 800,
    ...overrides,
  }, {}, BUILTIN_KINDS)
  return new PtyPool(config, { subprocess: shared.subprocess, terminals, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, fallback: async ({ prompt }) => `fresh: ${prompt}` })
}

const managed = (supervisor: Record<string, unknown> = {}) => ({ worker: 'managed', supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], ...supervisor } })

/** Pids of live processes whose argv is exactly `sleep <marker>`. */
function sleepers(marker: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'latin1') === `sleep\0${marker}\0` && alive(Number(entry))) found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}

describe('the worker protocol', () => {
  it('splits lines across chunks, keeps split UTF-8 intact, and stops at the first oversize or non-JSON line', () => {
    const decoder = new LineDecoder(32)
    const bytes = Buffer.from('{"a":"é"}\n{"b":2}\n', 'utf8')
    const values: unknown[] = []
    for (let at = 0; at < bytes.length; at++) values.push(...decoder.feed(bytes.subarray(at, at + 1)).values)
    expect(values).toEqual([{ a: 'é' }, { b: 2 }])
    const long = new LineDecoder(32)
    // Bounded before the line is complete: 33 bytes without a newline already break it.
    expect(long.feed(Buffer.from('x'.repeat(20))).violation).toBeUndefined()
    expect(long.feed(Buffer.from('x'.repeat(13))).violation?.message).toMatch(/longer than 32 bytes/)
    expect(long.feed(Buffer.from('{}\n')).values).toEqual([])
    expect(new LineDecoder(32).feed(Buffer.from('{"ok":1}\nnot json\n{"never":1}\n'))).toMatchObject({ values: [{ ok: 1 }], violation: { message: expect.stringMatching(/not JSON/) } })
  })
})

describe('the managed worker', { timeout: 60_000 }, () => {
  it('conch pool-worker started by hand, without its channel on fd 3, says so and exits 1', () => {
    const run = spawnSync(process.execPath, [CONCH_BIN, 'pool-worker'], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 30_000 })
    expect(run.status).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toMatch(/fd 3 is not an open socket/)
  })

  it('gives the same answers, paths, fallbacks and counters as the in-process pool', async () => {
    const script = async (pool: PtyPool) => {
      const results: InvokeResult[] = []
      try {
        for (let n = 1; n <= 3; n++) results.push(await pool.acquireAndInvoke(key, `hello ${n}`))
        results.push(await pool.acquireAndInvoke({ ...key, conversation: 'other' }, 'another conversation'))
        results.push(await pool.acquireAndInvoke(key, 'STALL here'))
        results.push(await pool.acquireAndInvoke(key, 'after the stall'))
        const seen = results.map((result) => ({ text: result.text, path: result.path, fallback: result.fallback?.reason }))
        const counters = await pool.metrics.snapshot()
        const failures = pool.readFailures().map((line) => ({ reason: line.reason, midTask: line.midTask, key: line.key }))
        const sessions = pool.sessionStates().map((session) => ({ key: session.key, state: session.state, turns: session.turns }))
        return { seen, counters, failures, sessions }
      } finally {
        await pool.shutdown()
      }
    }
    const inProcess = await script(makePool('same-in'))
    const pool = makePool('same-managed', managed())
    expect(await pool.metrics.managedWorkerActive.get()).toMatchObject({ values: [{ value: 0 }] })
    const supervisor = pool.backend as WorkerSupervisor
    await until(() => supervisor.state === 'ready', 20_000, 'the worker to be ready')
    expect((await pool.metrics.managedWorkerActive.get()).values[0]!.value).toBe(1)
    const workerPid = supervisor.workerPid()!
    const viaWorker = await script(pool)
    expect(inProcess.seen.map((entry) => entry.text)).toEqual(['echo: hello 1', 'echo: hello 2', 'echo: hello 3', 'echo: another conversation', 'fresh: STALL here', 'echo: after the stall'])
    expect(viaWorker.seen).toEqual(inProcess.seen)
    expect({ ...viaWorker.counters, worker_restarts_total: 0 }).toEqual(inProcess.counters)
    expect(viaWorker.failures).toEqual(inProcess.failures)
    expect(viaWorker.sessions).toEqual(inProcess.sessions)
    expect(inProcess.sessions).toHaveLength(2)
    expect(pool.sessionStates()).toEqual([])
    expect(supervisor.state).toBe('stopped')
    expect(alive(workerPid)).toBe(false)
    expect((await pool.metrics.managedWorkerActive.get()).values[0]!.value).toBe(0)
  })

  const violations: Array<[mode: string, detail: RegExp]> = [
    ['oversize', /broke the protocol: the peer sent a line longer than 4096 bytes/],
    ['forged', /broke the protocol: a result for invoke \d+, which is not waiting for one/],
    ['bad-shape', /broke the protocol: a message of no known shape/],
    ['bad-counter', /broke the protocol: a message of no known shape \(name:/],
    ['crash', /the pool worker exited with code 3/],
    ['mute', /missed 2 health pings in a row/],
  ]
  violations.forEach(([mode, detail], index) => {
    it(`a worker that ${mode === 'crash' ? 'crashes mid-invoke' : mode === 'mute' ? 'stops answering pings' : `sends a ${mode} message`} is stopped with its whole tree, the invoke falls back, and a new worker starts`, async () => {
      const marker = `${7100 + index}.${process.pid % 1000}`
      const pool = makePool(`hostile-${mode}`, {
        worker: 'managed',
        supervisor: { command: [process.execPath, HOSTILE, mode, marker], maxMessageBytes: 4096, pingEveryMs: 100, pingTimeoutMs: 150, maxMisses: 2, backoffMs: 50 },
      })
      const supervisor = pool.backend as WorkerSupervisor
      try {
        await until(() => supervisor.state === 'ready', 20_000, 'the hostile worker to be ready')
        await until(() => sleepers(marker).length === 1, 5000, 'the hostile worker\'s daemon')
        const result = await pool.acquireAndInvoke(key, 'hello')
        expect(result).toMatchObject({ path: 'fresh-spawn', text: 'fresh: hello', fallback: { reason: 'unhealthy', midTask: true } })
        expect(result.fallback!.detail).toMatch(detail)
        expect(pool.readFailures()).toMatchObject([{ reason: 'unhealthy', detail: expect.stringMatching(detail) }])
        // The first worker's daemon is gone; the restarted worker started its own.
        await until(async () => (await pool.metrics.snapshot()).worker_restarts_total! >= 1 && supervisor.state === 'ready', 20_000, 'the restart')
        await until(() => sleepers(marker).length === 1, 5000, 'one daemon: the new worker\'s')
        if (mode === 'mute') expect((await pool.metrics.snapshot()).worker_health_misses_total).toBeGreaterThanOrEqual(2)
      } finally {
        await pool.shutdown(0)
      }
      expect(sleepers(marker)).toEqual([])
    })
  })

  it('shutdown KILLs a worker that ignores SIGTERM after the grace, and its daemon with it', async () => {
    const marker = `7199.${process.pid % 1000}`
    const pool = makePool('stubborn', { worker: 'managed', supervisor: { command: [process.execPath, HOSTILE, 'stubborn', marker], termGraceMs: 300 } })
    const supervisor = pool.backend as WorkerSupervisor
    await until(() => supervisor.state === 'ready', 20_000, 'the stubborn worker to be ready')
    await until(() => sleepers(marker).length === 1, 5000, 'the stubborn worker\'s daemon')
    const workerPid = supervisor.workerPid()!
    await pool.shutdown()
    expect(supervisor.state).toBe('stopped')
    expect(alive(workerPid)).toBe(false)
    expect(sleepers(marker)).toEqual([])
  })

  it('a cancelled invoke closes its session inside the worker before the cancel is reported; the next acquire boots a new one', async () => {
    const pool = makePool('cancel', { ...managed(), stallMs: 60_000 })
    const supervisor = pool.backend as WorkerSupervisor
    try {
      await pool.acquireAndInvoke(key, 'warm up')
      const [cli] = pool.pids()
      const controller = new AbortController()
      const pending = pool.acquireAndInvoke(key, 'STALL until cancelled', { signal: controller.signal })
      await until(() => pool.sessionStates().some((session) => session.state === 'busy'), 10_000, 'the invoke to be under way')
      controller.abort()
      await expect(pending).rejects.toMatchObject({ code: 'INVOKE_CANCELLED' })
      expect(alive(cli!)).toBe(false)
      expect(await pool.acquireAndInvoke(key, 'after the cancel')).toMatchObject({ path: 'booted', text: 'echo: after the cancel' })
      expect(await pool.metrics.snapshot()).toMatchObject({ evicted_unhealthy_total: 1, acquires_spawn_total: 2, worker_restarts_total: 0 })
      expect(supervisor.state).toBe('ready')
    } finally {
      await pool.shutdown()
    }
  })

  it('a worker that does not confirm a cancel within cancelGraceMs is stopped; the cancel is reported and a new worker starts', async () => {
    const marker = `7198.${process.pid % 1000}`
    const pool = makePool('deaf', { worker: 'managed', supervisor: { command: [process.execPath, HOSTILE, 'deaf', marker], cancelGraceMs: 300, backoffMs: 50 } })
    const supervisor = pool.backend as WorkerSupervisor
    try {
      await until(() => supervisor.state === 'ready', 20_000, 'the deaf worker to be ready')
      const controller = new AbortController()
      const pending = pool.acquireAndInvoke(key, 'never answered', { signal: controller.signal })
      controller.abort()
      await expect(pending).rejects.toMatchObject({ code: 'INVOKE_CANCELLED' })
      await until(async () => (await pool.metrics.snapshot()).worker_restarts_total === 1 && supervisor.state === 'ready', 20_000, 'the restart')
      await until(() => sleepers(marker).length === 1, 5000, 'only the new worker\'s daemon')
    } finally {
      await pool.shutdown(0)
    }
    expect(sleepers(marker)).toEqual([])
  })

  it('mounted as a plugin with worker: managed, the pool answers through the worker, and disposing the plugin stops it', async () => {
    const fiber = await shared.ctx.plugin(ptyPool, {
      ...managed(),
      terminal: 'unconfined',
      kinds: { generic: { command: repl, env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' } },
      stateDir: `${dir}/plugin/state`,
      cwd: dir,
    })
    const service = shared.ctx.get('ptyPool')!
    const supervisor = service.pool.backend as WorkerSupervisor
    expect(await service.pool.acquireAndInvoke(key, 'through the plugin')).toMatchObject({ path: 'booted', text: 'echo: through the plugin' })
    const workerPid = supervisor.workerPid()!
    const tag = tagOf(workerPid)
    await fiber.dispose()
    expect(supervisor.state).toBe('stopped')
    expect(carrying(tag)).toEqual([])
  })

  it('a worker killed with SIGKILL is restarted, its CLI is stopped, and the next invoke is answered by a new session', async () => {
    const pool = makePool('kill9', managed({ backoffMs: 50 }))
    const supervisor = pool.backend as WorkerSupervisor
    try {
      expect(await pool.acquireAndInvoke(key, 'before')).toMatchObject({ path: 'booted', text: 'echo: before' })
      const workerPid = supervisor.workerPid()!
      const tag = tagOf(workerPid)
      const [cli] = pool.pids()
      expect(carrying(tag)).toContain(cli)
      process.kill(workerPid, 'SIGKILL')
      await until(() => carrying(tag).length === 0, 10_000, 'the dead worker\'s CLI to be stopped')
      await until(async () => (await pool.metrics.snapshot()).worker_restarts_total === 1 && supervisor.state === 'ready', 20_000, 'the restarted worker')
      expect(await pool.acquireAndInvoke(key, 'after')).toMatchObject({ path: 'booted', text: 'echo: after' })
      expect(supervisor.workerPid()).not.toBe(workerPid)
      expect(await pool.metrics.snapshot()).toMatchObject({ worker_restarts_total: 1, acquires_spawn_total: 2 })
    } finally {
      await pool.shutdown()
    }
  })
})
