/**
 * The real Claude Code TUI (the pinned binary from .products/) warm in the pool, against the
 * fake model server on 127.0.0.1.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { alive } from '@conch/test-support/procs'
import { claudeEnv, claudeKind, startModel, tempDir } from '@conch/test-support/products'
import { until } from '@conch/test-support/wait'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, PoolError, poolNote, type PoolKey } from '../src/index.ts'
import { unconfinedTerminals } from './stack.ts'

const terminals = unconfinedTerminals()

let model: FakeModelServer
const fallbackCalls: Array<{ prompt: string; conversation: string }> = []

function makePool(overrides: Record<string, unknown> = {}) {
  const dir = tempDir('pool-claude-')
  // The pool's own behaviour with a bare terminal; confined-claude.test.ts runs the default (conch terminals).
  const config = loadPoolConfig({ terminal: 'unconfined', kinds: { claude: claudeKind(model) }, stateDir: `${dir}/state`, cwd: tempDir('pool-cwd-'), ...overrides }, {}, BUILTIN_KINDS)
  return new PtyPool(config, {
    terminals,
    env: { ...claudeEnv(model), BILLING_KEY: 'sk-billing-0123456789abcdefghij' },
    // The fresh-spawn path is the one-shot provider's job; here it records what reached it.
    fallback: async ({ prompt, key }) => {
      fallbackCalls.push({ prompt, conversation: key.conversation })
      return `fresh: ${prompt}`
    },
  })
}

/** Files named `name` below `dir`. */
function findFiles(dir: string, name: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter((entry) => entry.isFile() && entry.name === name).map((entry) => join(entry.parentPath, entry.name))
}

const key = (conversation: string): PoolKey => ({ owner: 'agent-1', conversation, kind: 'claude', model: '', account: '', bare: false })

beforeAll(async () => {
  model = await startModel()
})
afterAll(async () => {
  await model.close()
})

describe('claude in the pool', { timeout: 60_000 }, () => {
  it('answers five sequential prompts in one warm session, exactly, and reports them in /metrics', async () => {
    const pool = makePool()
    try {
      const results = []
      for (let n = 1; n <= 5; n++) results.push(await pool.acquireAndInvoke(key('c1'), `Q${n}: say the number ${n * 11}`))
      expect(results.map((result) => result.text)).toEqual([1, 2, 3, 4, 5].map((n) => `answer ${n}: say the number ${n * 11}`))
      expect(results.map((result) => result.path)).toEqual(['booted', 'warm', 'warm', 'warm', 'warm'])
      expect(poolNote(results[1]!)).toBe('[pool: warm session reused]')
      expect(results.some((result) => result.source === 'transcript')).toBe(true)
      const snapshot = await pool.metrics.snapshot()
      expect(snapshot).toMatchObject({ acquires_cache_hit_total: 4, acquires_spawn_total: 1, invokes_ok_total: 5 })
    } finally {
      await pool.shutdown()
    }
  })

  it('takes each answer from the Stop hook\'s record of its turn, one record a turn in the private home', async () => {
    const pool = makePool()
    try {
      const results = []
      for (let n = 1; n <= 3; n++) results.push(await pool.acquireAndInvoke(key('stop'), `Q${n}: recorded at the turn's end`))
      expect(results.map((result) => [result.text, result.source])).toEqual([1, 2, 3].map((n) => [`answer ${n}: recorded at the turn's end`, 'transcript']))
      // Taken from the record, before any sentinel pair was read from the screen.
      expect(results.map((result) => result.phases?.settle)).toEqual([0, 0, 0])
      const records = findFiles(pool.stateDir, 'stop.jsonl').flatMap((file) => readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== ''))
      expect(records.map((line) => JSON.parse(line))).toMatchObject([1, 2, 3].map((n) => ({ hook_event_name: 'Stop', last_assistant_message: expect.stringContaining(`answer ${n}: recorded at the turn's end`) })))
    } finally {
      await pool.shutdown()
    }
  })

  it('bare mode is its own session, started with the kind\'s bareArgs (Claude Code --bare), and answers the same', async () => {
    const pool = makePool()
    try {
      const bare = { ...key('b'), bare: true }
      expect(await pool.acquireAndInvoke(bare, 'Q1: in bare mode')).toMatchObject({ path: 'booted', text: 'answer 1: in bare mode' })
      expect(await pool.acquireAndInvoke(key('b'), 'Q2: not bare')).toMatchObject({ path: 'booted', text: 'answer 2: not bare' })
      const argvOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      const sessions = pool.sessionStates()
      const pids = new Map(sessions.map((session) => [session.key.bare, session.pid!]))
      expect(argvOf(pids.get(true)!)).toContain('--bare')
      expect(argvOf(pids.get(false)!)).not.toContain('--bare')
    } finally {
      await pool.shutdown()
    }
  })

  it('keeps conversations apart: B never learns what A told its CLI, A does', async () => {
    const pool = makePool()
    try {
      expect((await pool.acquireAndInvoke(key('A'), 'REMEMBER color=teal')).text).toBe('noted')
      expect((await pool.acquireAndInvoke(key('B'), 'RECALL color')).text).toBe('unknown')
      expect((await pool.acquireAndInvoke(key('A'), 'RECALL color')).text).toBe('value teal')
      expect(pool.sessionStates()).toHaveLength(2)
      expect(new Set(pool.pids()).size).toBe(2)
    } finally {
      await pool.shutdown()
    }
  })

  it('a stall falls back to the fresh-spawn path with a failure line, and the session is replaced', async () => {
    // 5 s: short enough for a test, long enough that the next invoke's boot of a new Claude Code
    // on a loaded machine is not itself taken for a stall.
    const pool = makePool({ stallMs: 5000 })
    try {
      const before = fallbackCalls.length
      const result = await pool.acquireAndInvoke(key('s'), 'STALL now please')
      expect(result).toMatchObject({ path: 'fresh-spawn', text: 'fresh: STALL now please', fallback: { reason: 'stall', midTask: true } })
      expect(poolNote(result)).toBe('[pool: fell back to a fresh spawn — stall after 5 s]')
      expect(fallbackCalls.length).toBe(before + 1)
      const lines = pool.readFailures()
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatchObject({ reason: 'stall', midTask: true, fallback: 'ok', key: { owner: 'agent-1', conversation: 's', kind: 'claude' } })
      expect(lines[0]!.durations.poolMs).toBeGreaterThanOrEqual(5000)
      model.release()
      const next = await pool.acquireAndInvoke(key('s'), 'Q9: after the stall')
      expect(next).toMatchObject({ path: 'booted', text: 'answer 9: after the stall' })
      expect(await pool.metrics.fallbacksByReason()).toMatchObject({ stall: 1 })
    } finally {
      await pool.shutdown()
    }
  })

  it('cancel marks the session unhealthy; the next acquire boots a new one', async () => {
    const pool = makePool()
    try {
      await pool.acquireAndInvoke(key('x'), 'Q1: warm up')
      const [first] = pool.pids()
      const controller = new AbortController()
      const pending = pool.acquireAndInvoke(key('x'), 'SLOW please', { signal: controller.signal })
      await model.waitFor((requests) => requests.some((request) => request.userText.includes('SLOW') && request.chunksSent >= 2))
      controller.abort()
      await expect(pending).rejects.toMatchObject({ code: 'INVOKE_CANCELLED' } satisfies Partial<PoolError>)
      // The cancelled session is closed before the cancel is reported.
      expect(pool.sessionStates()).toEqual([])
      expect(alive(first!)).toBe(false)
      const next = await pool.acquireAndInvoke(key('x'), 'Q2: after cancel')
      expect(next).toMatchObject({ path: 'booted', text: 'answer 2: after cancel' })
      expect(await pool.metrics.snapshot()).toMatchObject({ acquires_spawn_total: 2, evicted_unhealthy_total: 1 })
    } finally {
      await pool.shutdown()
    }
  })

  it('a CLI killed mid-invoke falls back, and nothing is left running', async () => {
    const pool = makePool()
    try {
      await pool.acquireAndInvoke(key('k'), 'Q1: warm up')
      const [pid] = pool.pids()
      const pending = pool.acquireAndInvoke(key('k'), 'SLOW and then killed')
      await model.waitFor((requests) => requests.some((request) => request.userText.includes('SLOW and then killed') && request.chunksSent >= 1))
      process.kill(pid!, 'SIGKILL')
      const result = await pending
      expect(result).toMatchObject({ path: 'fresh-spawn', fallback: { reason: 'unhealthy', midTask: true } })
      expect(pool.readFailures()[0]).toMatchObject({ reason: 'unhealthy', midTask: true })
      await until(() => pool.pids().length === 0, 5000, 'the dead session to be evicted')
      expect(alive(pid!)).toBe(false)
    } finally {
      await pool.shutdown()
    }
  })

  it('evicts idle sessions on the tick, and shutdown leaves no CLI', async () => {
    const pool = makePool({ idleEvictMs: 300 })
    await pool.acquireAndInvoke(key('i'), 'Q1: then idle')
    const [pid] = pool.pids()
    pool.setEvictEvery(100)
    await until(() => pool.sessionStates().length === 0, 5000, 'idle eviction')
    await until(() => !alive(pid!), 5000, 'the evicted CLI to exit')
    expect(await pool.metrics.snapshot()).toMatchObject({ evicted_idle_total: 1 })
    await pool.acquireAndInvoke(key('i'), 'Q2: again')
    const [second] = pool.pids()
    await pool.shutdown()
    expect(alive(second!)).toBe(false)
    expect(await pool.metrics.snapshot()).toMatchObject({ evicted_shutdown_total: 1 })
    await expect(pool.acquireAndInvoke(key('i'), 'Q3: closed')).rejects.toMatchObject({ code: 'POOL_CLOSED' })
  })

  it('routes by agent: fresh-spawn by default, the kill switch bypasses the pool, an API-key account takes a one-shot PTY run', async () => {
    const pool = makePool({
      accounts: { billing: { type: 'api-key', env: { ANTHROPIC_API_KEY: 'BILLING_KEY' } }, personal: { type: 'oauth' } },
      agents: { keyed: { runtime: 'pty-pool', kind: 'claude', account: 'billing' }, warm: { runtime: 'pty-pool', kind: 'claude', account: 'personal' }, broken: { runtime: 42 } },
    })
    try {
      expect(await pool.invokeForAgent('unrouted', 'c', 'Q1: default')).toMatchObject({ path: 'fresh-spawn', bypass: 'fresh-spawn-route', text: 'fresh: Q1: default' })
      expect(await pool.invokeForAgent('broken', 'c', 'Q1: malformed')).toMatchObject({ path: 'fresh-spawn', bypass: 'fresh-spawn-route' })
      const oneShot = await pool.invokeForAgent('keyed', 'c', 'Q3: one shot')
      expect(oneShot).toMatchObject({ path: 'one-shot-pty' })
      expect(oneShot.text).toContain('answer 3: one shot')
      expect(pool.pids()).toEqual([])
      expect(await pool.invokeForAgent('warm', 'c', 'Q4: warm')).toMatchObject({ path: 'booted', text: 'answer 4: warm' })
      pool.setKillSwitch(true)
      const spawnsBefore = (await pool.metrics.snapshot()).acquires_spawn_total
      const off = await pool.invokeForAgent('warm', 'c', 'Q5: switched off')
      expect(off).toMatchObject({ path: 'fresh-spawn', bypass: 'kill-switch', text: 'fresh: Q5: switched off' })
      expect(poolNote(off)).toBe('[pool: off (kill switch) — fresh spawn]')
      expect((await pool.metrics.snapshot()).acquires_spawn_total).toBe(spawnsBefore)
      pool.setKillSwitch(false)
      expect(await pool.invokeForAgent('warm', 'c', 'Q6: back on')).toMatchObject({ path: 'warm', text: 'answer 6: back on' })
    } finally {
      await pool.shutdown()
    }
  })
})
