/**
 * The real Codex TUI (the pinned binary from .products/) warm in the pool, against the fake
 * model server's Responses stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { alive } from '@conch/test-support/procs'
import { codexEnv, codexKind, startModel, tempDir } from '@conch/test-support/products'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, type PoolKey } from '../src/index.ts'
import { unconfinedTerminals } from './stack.ts'

const terminals = unconfinedTerminals()

let model: FakeModelServer

function makePool(overrides: Record<string, unknown> = {}) {
  const dir = tempDir('pool-codex-')
  // The pool's own behaviour with a bare terminal; confined-claude.test.ts runs the default (conch terminals).
  const config = loadPoolConfig({ terminal: 'unconfined', kinds: { codex: codexKind(model) }, stateDir: `${dir}/state`, cwd: tempDir('pool-cwd-'), ...overrides }, {}, BUILTIN_KINDS)
  return new PtyPool(config, { terminals, env: codexEnv(), fallback: async ({ prompt }) => `fresh: ${prompt}` })
}

const key = (conversation: string): PoolKey => ({ owner: 'agent-1', conversation, kind: 'codex', model: '', account: '', bare: false })

beforeAll(async () => {
  model = await startModel()
})
afterAll(async () => {
  await model.close()
})

describe('codex in the pool', { timeout: 60_000 }, () => {
  it('answers five sequential prompts in one warm session, exactly', async () => {
    const pool = makePool()
    try {
      const results = []
      for (let n = 1; n <= 5; n++) results.push(await pool.acquireAndInvoke(key('c1'), `Q${n}: codex number ${n * 7}`))
      expect(results.map((result) => result.text)).toEqual([1, 2, 3, 4, 5].map((n) => `answer ${n}: codex number ${n * 7}`))
      expect(results.map((result) => result.path)).toEqual(['booted', 'warm', 'warm', 'warm', 'warm'])
      expect(pool.readFailures()).toEqual([])
    } finally {
      const pids = pool.pids()
      await pool.shutdown()
      expect(pids.filter(alive)).toEqual([])
    }
  })

  it('keeps conversations apart', async () => {
    const pool = makePool()
    try {
      expect((await pool.acquireAndInvoke(key('A'), 'REMEMBER fruit=plum')).text).toBe('noted')
      expect((await pool.acquireAndInvoke(key('B'), 'RECALL fruit')).text).toBe('unknown')
      expect((await pool.acquireAndInvoke(key('A'), 'RECALL fruit')).text).toBe('value plum')
    } finally {
      await pool.shutdown()
    }
  })

  it('a multi-line prompt arrives as one bracketed paste and is answered once', async () => {
    const pool = makePool()
    try {
      const result = await pool.acquireAndInvoke(key('m'), 'first line of context\nQ4: the question on line two')
      expect(result.text).toBe('answer 4: the question on line two')
      // One turn carried both lines (Codex's own title request quotes the prompt too).
      const turns = model.requests.filter((request) => request.userText.includes('first line of context') && !/task title/.test(request.userText))
      expect(turns).toHaveLength(1)
      expect(turns[0]!.userText).toContain('first line of context\nQ4: the question on line two')
    } finally {
      await pool.shutdown()
    }
  })
})
