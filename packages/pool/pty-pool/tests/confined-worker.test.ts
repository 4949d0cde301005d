/**
 * The managed worker's own conch terminals, with a real REPL of the generic kind (a shell loop
 * that answers with the sentinel framing): `conch pool-worker` composes ctx.pty + pty-local +
 * bubblewrap from the config sections the main process sends, and opens each CLI only under the
 * policy the main process resolved for its owner. An invoke without one is refused, a policy
 * change replaces the session, and a config section the worker's providers reject fails the
 * worker's start naming the field.
 */
import { chmodSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { linuxProcessTable, treeOf } from '@conch/subprocess'
import { afterAll, describe, expect, it } from 'vitest'
import { CONCH_BIN, tempDir } from '@conch/test-support/products'
import { until } from '@conch/test-support/wait'
import { BUILTIN_KINDS, loadPoolConfig, PoolMetrics, PtyPool, WorkerSupervisor, type OwnerPolicy, type PoolKey } from '../src/index.ts'
import { subprocessContext } from './stack.ts'

const dir = tempDir('pool-confined-worker-')
const repl = `${dir}/repl.sh`
// Reads a line, answers between two sentinel lines; `WRITE <file>` writes the file first and
// answers with what the write said.
writeFileSync(repl, `#!/bin/sh
printf '> '
while IFS= read -r line; do
  case "$line" in
    WRITE*) out=$( { echo x > "\${line#WRITE }"; } 2>&1 && echo wrote) ;;
    *) out="echo: $line" ;;
  esac
  printf '%s\\n%s\\n%s\\n> ' "$POOL_SENTINEL" "$out" "$POOL_SENTINEL"
done
`)
chmodSync(repl, 0o755)
// Outside /tmp, which each sandbox replaces with a private one.
const workspace = realpathSync(mkdtempSync(path.join('/var/tmp', 'pool-confined-worker-ws-')))

const shared = subprocessContext()

afterAll(async () => {
  rmSync(workspace, { recursive: true, force: true })
})

const key: PoolKey = { owner: 'agent-1', conversation: 'c', kind: 'generic', model: '', account: '', bare: false }
const owner = { id: 'agent-1', session: { start: { workspaceRoot: workspace } } } as never

function config(name: string) {
  return loadPoolConfig({
    worker: 'managed',
    supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], backoffMs: 50 },
    kinds: { generic: { command: repl, env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' } },
    stateDir: `${dir}/${name}/state`,
    cwd: workspace,
    stallMs: 5000,
  }, {}, BUILTIN_KINDS)
}

describe('the managed worker’s conch terminals', { timeout: 90_000 }, () => {
  it('runs the CLI under bubblewrap with the owner’s policy, and replaces the session when that policy changes', async () => {
    let policy: OwnerPolicy = { mode: 'workspace-write', workspaceRoot: workspace, protectedPaths: [] }
    const pool = new PtyPool(config('policy'), {
      subprocess: shared.subprocess,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      owners: () => owner,
      policyOf: () => policy,
      fallback: async ({ prompt }) => `fresh: ${prompt}`,
    })
    try {
      expect(await pool.acquireAndInvoke(key, 'hello')).toMatchObject({ path: 'booted', text: 'echo: hello' })
      const [pid] = pool.pids()
      const tree = treeOf(await linuxProcessTable().snapshot(), pid!, { includeRoot: true })
      expect(tree.map((entry) => entry.comm)).toContain('bwrap')
      expect(await pool.acquireAndInvoke(key, `WRITE ${workspace}/one`)).toMatchObject({ path: 'warm', text: 'wrote' })
      expect(readFileSync(`${workspace}/one`, 'utf8')).toBe('x\n')
      // The owner's mode went down to read-only: the CLI that started writable is replaced.
      policy = { ...policy, mode: 'read-only' }
      const after = await pool.acquireAndInvoke(key, `WRITE ${workspace}/two`)
      expect(after.path).toBe('booted')
      expect(after.text).toMatch(/Read-only file system/)
      expect(pool.readFailures()).toEqual([])
    } finally {
      await pool.shutdown()
    }
  })

  it('refuses an invoke that comes without its owner’s policy', async () => {
    const metrics = new PoolMetrics()
    const supervisor = new WorkerSupervisor(config('no-policy'), { subprocess: shared.subprocess, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, metrics, warn: () => {}, terminal: { sandboxLocal: {}, ptyLocal: {} } })
    try {
      await expect(supervisor.invoke(key, 'hello', { capMs: 10_000, stallMs: 5000, cwd: workspace })).rejects.toMatchObject({ reason: 'spawn', message: expect.stringMatching(/without its owner's sandbox policy/) })
      expect(supervisor.state).toBe('ready')
    } finally {
      await supervisor.close()
    }
  })

  it('a config section the worker’s providers reject fails the worker’s start, naming the field', async () => {
    const warnings: string[] = []
    const supervisor = new WorkerSupervisor(config('bad-section'), { subprocess: shared.subprocess, env: {}, metrics: new PoolMetrics(), warn: (line) => warnings.push(line), terminal: { sandboxLocal: { network: 'yes' }, ptyLocal: {} } })
    try {
      await until(() => warnings.some((line) => line.includes('terminal.sandboxLocal.network')), 30_000, 'the worker to name the bad field')
      expect(supervisor.state).not.toBe('ready')
    } finally {
      await supervisor.close()
    }
  })
})
