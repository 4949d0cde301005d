/**
 * The built-in `claude` and `codex` kinds run the binaries the sub-agent providers run (the one
 * search of @conch/subagent: `.products/`, then PATH), and a kind whose binary is nowhere falls
 * back saying so: in the note the model reads, once in the warnings, and in the failure log in the
 * state folder — never in the server's working directory. Real Claude Code and Codex TUIs against
 * the fake model.
 */
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { CLAUDE_BIN, CODEX_BIN, claudeEnv, codexEnv, codexKind, requireProduct, startModel, tempDir } from '@conch/test-support/products'
import { BUILTIN_KINDS, loadPoolConfig, poolNote, PtyPool, type PoolKey } from '../src/index.ts'
import { unconfinedTerminals } from './stack.ts'

const terminals = unconfinedTerminals()

let model: FakeModelServer
beforeAll(async () => {
  model = await startModel()
})
afterAll(async () => {
  await model.close()
})

/** The products folder (`.products/`) the pinned binaries are in. */
const products = path.resolve(requireProduct(CLAUDE_BIN), '../../../..')
const keyOf = (kind: string): PoolKey => ({ owner: 'a', conversation: 'c', kind, model: '', account: '', bare: false })
// A PATH without either CLI.
const PATH = '/usr/sbin:/usr/bin:/sbin:/bin'

describe('the built-in CLI kinds', { timeout: 90_000 }, () => {
  it('run the claude and codex binaries from .products/, as the sub-agent providers do', async () => {
    requireProduct(CODEX_BIN)
    const dir = tempDir('pool-products-')
    const { command: _, ...codex } = codexKind(model)
    const config = loadPoolConfig({ terminal: 'unconfined', kinds: { codex }, stateDir: `${dir}/state`, cwd: dir }, { PATH, CONCH_PRODUCTS_DIR: products }, BUILTIN_KINDS)
    expect(config.kinds.claude!.command).toBe(CLAUDE_BIN)
    expect(config.kinds.codex!.command).toBe(CODEX_BIN)
    const pool = new PtyPool(config, { terminals, env: { ...claudeEnv(model), ...codexEnv(), PATH }, fallback: async () => 'fresh' })
    try {
      expect(await pool.acquireAndInvoke(keyOf('claude'), 'Q1: the products claude')).toMatchObject({ path: 'booted', text: 'answer 1: the products claude' })
      expect(await pool.acquireAndInvoke(keyOf('codex'), 'Q2: the products codex')).toMatchObject({ path: 'booted', text: 'answer 2: the products codex' })
      expect(pool.readFailures()).toEqual([])
    } finally {
      await pool.shutdown()
    }
  })

  it('fall back when the binary is nowhere, saying why in the note, once in the warnings, and in the state folder’s log', async () => {
    const dir = tempDir('pool-products-none-')
    const checkout = path.join(dir, 'checkout')
    const empty = path.join(dir, 'no-products')
    mkdirSync(checkout)
    mkdirSync(empty)
    const serverLog = path.join(process.cwd(), '.conch', 'pool-failures.jsonl')
    const serverLogBefore = existsSync(serverLog) ? statSync(serverLog).size : undefined
    const warnings: string[] = []
    const pool = new PtyPool(loadPoolConfig({ terminal: 'unconfined', stateDir: `${dir}/state`, cwd: checkout }, { PATH, CONCH_PRODUCTS_DIR: empty }, BUILTIN_KINDS), {
      env: { PATH },
      fallback: async ({ prompt }) => `fresh: ${prompt}`,
      warn: (message) => warnings.push(message),
    })
    try {
      const note = '[pool: fell back to a fresh spawn — claude was not found on PATH or in .products/]'
      for (const prompt of ['one', 'two']) {
        const result = await pool.acquireAndInvoke(keyOf('claude'), prompt)
        expect(result).toMatchObject({ text: `fresh: ${prompt}`, fallback: { reason: 'spawn' } })
        expect(poolNote(result)).toBe(note)
      }
      expect(warnings).toEqual([`${note}; every fallback is logged in ${path.join(pool.stateDir, 'pool-failures.jsonl')}`])
      expect(pool.failuresFile()).toBe(path.join(pool.stateDir, 'pool-failures.jsonl'))
      expect(pool.readFailures()).toMatchObject([{ reason: 'spawn', detail: 'claude was not found on PATH or in .products/' }, { reason: 'spawn' }])
      expect(readdirSync(checkout)).toEqual([])
      expect(existsSync(serverLog) ? statSync(serverLog).size : undefined).toBe(serverLogBefore)
    } finally {
      await pool.shutdown()
    }
  })
})
