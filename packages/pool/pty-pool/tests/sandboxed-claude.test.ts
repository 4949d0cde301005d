/**
 * The real Claude Code TUI pooled in a conch terminal: `ptyTerminals` opens it through ctx.pty
 * (pty-local) for an agent whose policy is workspace-write, so bubblewrap confines it. The
 * answers still arrive (the terminal keeps the network; the private home is writable inside the
 * sandbox and read from the host for the transcript), while the CLI's process runs in another
 * PID and mount namespace with `/` read-only and no host secret in its environment.
 */
import { mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import PtyService from '@conch/pty'
import { linuxProcessTable, treeOf } from '@conch/subprocess'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { alive } from '@conch/test-support/procs'
import { CLAUDE_BIN, claudeEnv, claudeKind, startModel, tempDir } from '@conch/test-support/products'
import { BUILTIN_KINDS, loadPoolConfig, ptyTerminals, PtyPool, type PoolKey } from '../src/index.ts'
import { terminalStack } from './stack.ts'

const HOST_SECRET = `host-db-password-${process.pid}-${Math.random().toString(36).slice(2)}`
let model: FakeModelServer
let workspace: string
let fibers: { dispose(): Promise<void> }[] = []

beforeAll(async () => {
  model = await startModel()
  process.env.POOL_TEST_DB_PASSWORD = HOST_SECRET
})
afterAll(async () => {
  delete process.env.POOL_TEST_DB_PASSWORD
  await model.close()
})
afterEach(async () => {
  for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
  rmSync(workspace, { recursive: true, force: true })
})

async function compose() {
  workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'pool-sandboxed-ws-')))
  const { root } = await terminalStack(fibers, { mode: 'workspace-write', workspaceRoot: workspace }, { subprocess: false })
  const agent = await root.agents.create()
  return { pty: root.pty as PtyService, agent, sandbox: root.sandbox }
}

const key: PoolKey = { owner: 'agent-1', conversation: 'c', kind: 'claude', model: '', account: '', bare: false }

/** The mount options of the mount at `target` in /proc/<pid>/mountinfo (proc(5)), the last one there winning. */
function mountOptions(pid: number, target: string): string[] | undefined {
  const lines = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').trim().split('\n')
  const found = lines.map((line) => line.split(' ')).filter((fields) => fields[4] === target)
  return found.at(-1)?.[5]?.split(',')
}

describe('claude pooled in a conch terminal, under the owner’s sandbox', { timeout: 60_000 }, () => {
  it('answers warm through ctx.pty while the CLI runs confined: other namespaces, / read-only, the workspace and its home writable, no host secret', async () => {
    const { pty, agent, sandbox } = await compose()
    const dir = tempDir('pool-sandboxed-')
    const config = loadPoolConfig(
      { kinds: { claude: claudeKind(model) }, stateDir: `${dir}/state`, cwd: workspace },
      {},
      BUILTIN_KINDS,
    )
    const pool = new PtyPool(config, {
      env: { ...claudeEnv(model), BILLING_KEY: 'sk-billing-0123456789abcdefghij' },
      terminals: ptyTerminals({ pty, owner: agent, sandbox }),
      fallback: async ({ prompt }) => {
        throw new Error(`the fresh-spawn path must not be needed: ${prompt}`)
      },
    })
    try {
      const first = await pool.acquireAndInvoke(key, 'Q1: from the sandbox')
      expect(first).toMatchObject({ path: 'booted', text: 'answer 1: from the sandbox' })
      const second = await pool.acquireAndInvoke(key, 'Q2: still warm')
      expect(second).toMatchObject({ path: 'warm', text: 'answer 2: still warm' })
      // The transcript is written inside the sandbox, in the private home, and read from the host.
      expect([first.source, second.source]).toContain('transcript')
      // A terminal of the agent's pool owner, not one of the agent's own.
      expect(pty.list(agent)).toEqual([])

      const [terminalPid] = pool.pids()
      const tree = treeOf(await linuxProcessTable().snapshot(), terminalPid!, { includeRoot: true })
      const cli = tree.find((entry) => {
        try {
          return readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8').split('\0')[0] === CLAUDE_BIN
        } catch {
          return false
        }
      })
      expect(cli, `claude among ${tree.map((entry) => entry.comm).join(', ')}`).toBeDefined()
      const pid = cli!.pid
      expect(tree.some((entry) => entry.comm === 'bwrap')).toBe(true)
      // Its own PID namespace (NSpid lists the pid in each namespace, proc(5)) and mount namespace.
      const nspid = /^NSpid:\s+(.+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!.trim().split(/\s+/)
      expect(nspid.length).toBeGreaterThan(1)
      expect(readlinkSync(`/proc/${pid}/ns/mnt`)).not.toBe(readlinkSync('/proc/self/ns/mnt'))
      // Outside the workspace and its home nothing is writable: / is a read-only bind.
      expect(mountOptions(pid, '/')).toContain('ro')
      expect(mountOptions(pid, workspace)).toContain('rw')
      const home = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((entry) => entry.startsWith('HOME='))!.slice('HOME='.length)
      expect(mountOptions(pid, home)).toContain('rw')
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8')
      expect(environ).not.toContain(HOST_SECRET)
      expect(environ).not.toContain('sk-billing-0123456789abcdefghij')
    } finally {
      await pool.shutdown()
    }
    expect(pool.pids().every((pid) => !alive(pid))).toBe(true)
  })
})
