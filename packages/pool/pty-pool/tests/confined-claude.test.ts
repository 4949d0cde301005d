/**
 * The default path, in both worker modes: the pool mounted as a plugin in a composition with
 * ctx.agents, ctx.pty + pty-local and bubblewrap runs each owner's real Claude Code TUI as a
 * conch terminal under that owner's sandbox policy. Two owners with different workspaces
 * (workspace-write) get different confinement: each CLI runs in its own PID and mount namespace
 * with `/` read-only, its own workspace writable and the other's not (tried from inside its mount
 * namespace), and no host secret in its environment. In managed mode the worker composes those
 * terminals itself from the main process's config sections, and a worker killed with SIGKILL
 * leaves none of its CLIs behind.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { Agent } from '@conch/agent'
import type { Context } from 'cordis'
import PtyService from '@conch/pty'
import * as toolPty from '@conch/tool-pty'
import { linuxProcessTable, treeOf } from '@conch/subprocess'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { alive, carrying, tagOf } from '@conch/test-support/procs'
import { CLAUDE_BIN, CODEX_BIN, CONCH_BIN, claudeEnv, claudeKind, codexEnv, codexKind, startModel, tempDir } from '@conch/test-support/products'
import { until } from '@conch/test-support/wait'
import * as ptyPool from '../src/index.ts'
import type { PtyPool, WorkerSupervisor } from '../src/index.ts'
import { terminalStack } from './stack.ts'

const HOST_SECRET = `host-db-password-${process.pid}-${Math.random().toString(36).slice(2)}`
let model: FakeModelServer
let fibers: { dispose(): Promise<void> }[] = []
const saved: Record<string, string | undefined> = {}

beforeAll(async () => {
  model = await startModel()
  // The plugin reads the server's environment: the CLI's variables, and a secret it must not pass on.
  for (const [name, value] of Object.entries({ ...claudeEnv(model), ...codexEnv(), POOL_TEST_DB_PASSWORD: HOST_SECRET })) {
    saved[name] = process.env[name]
    process.env[name] = value
  }
})
afterAll(async () => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
  await model.close()
})
const made: string[] = []
afterEach(async () => {
  for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

// Outside /tmp (which each sandbox replaces with a private one), so the other owner's workspace is
// there to see, read-only.
const workspace = (name: string) => realpathSync(mkdtempSync(path.join('/var/tmp', `pool-confined-${name}-`)))

/** The composition of a server: agents, the sandbox, conch terminals, the pool (its config as given). */
async function compose(poolConfig: Record<string, unknown>) {
  const wsA = workspace('a')
  const wsB = workspace('b')
  made.push(wsA, wsB)
  const { root, load } = await terminalStack(fibers, { mode: 'workspace-write', workspaceRoot: wsA })
  const dir = tempDir('pool-confined-')
  await load(ptyPool, { kinds: { claude: claudeKind(model) }, stateDir: `${dir}/state`, ...poolConfig })
  await load(toolPty, toolPty.Config.parse({}))
  const a = await root.agents.create({ workspaceRoot: wsA })
  const b = await root.agents.create({ workspaceRoot: wsB })
  return { root, pool: root.ptyPool.pool as PtyPool, pty: root.pty as PtyService, a, b, wsA, wsB }
}

/** What the owner's model gets from its terminal tools (it acts as the owner agent). */
async function tool(root: Context, agent: Agent, name: string, input: Record<string, unknown>): Promise<{ text: string; isError: boolean }> {
  const result = await root.tools.execute(name, input, { agent, signal: new AbortController().signal, callId: `call-${name}` })
  return { text: result.content.map((item) => item.text).join('\n'), isError: result.isError === true }
}

/**
 * The owner's model tries to reach its pooled CLI with its terminal tools: the list shows none, and
 * typing into, reading, interrupting or closing it by every id the service has given out is
 * refused; the model's own first terminal is `pty-1`, as if no CLI ran. The CLI answers afterwards
 * as before.
 */
async function expectUnreachable(root: Context, agent: Agent) {
  expect(await tool(root, agent, 'terminal_list', {})).toMatchObject({ isError: false, text: expect.not.stringMatching(/(pty|pool)-\d/) })
  for (const sessionId of ['pty-1', 'pty-2', 'pool-1', 'pool-2']) {
    for (const [name, input] of [['terminal_send', { text: '/exit' }], ['terminal_read', {}], ['terminal_signal', { signal: 'SIGINT' }], ['terminal_close', {}]] as const) {
      const result = await tool(root, agent, name, { sessionId, ...input })
      expect(result.isError, `${name} ${sessionId}: ${result.text}`).toBe(true)
    }
  }
  const opened = await tool(root, agent, 'terminal_open', { type: 'shell' })
  const own = /pty-\d+/.exec(opened.text)![0]
  expect(own).toBe('pty-1')
  expect((await tool(root, agent, 'terminal_list', {})).text.match(/(pty|pool)-\d+/g)).toEqual([own])
  expect(await tool(root, agent, 'terminal_close', { sessionId: own })).toMatchObject({ isError: false })
}

const keyOf = (agent: Agent, kind = 'claude') => ({ owner: agent.id, conversation: agent.session.id, kind, model: '', account: '', bare: false })

/** The CLI process (`bin`) of the owner's pooled terminal (found from the host, in the terminal's tree). */
async function cliOf(pool: PtyPool, owner: Agent, bin = CLAUDE_BIN): Promise<number> {
  const session = pool.sessionStates().find((entry) => entry.key.owner === owner.id)
  expect(session?.pid, `a session of ${owner.id}`).toBeDefined()
  const tree = treeOf(await linuxProcessTable().snapshot(), session!.pid!, { includeRoot: true })
  expect(tree.some((entry) => entry.comm === 'bwrap'), `bwrap among ${tree.map((entry) => entry.comm).join(', ')}`).toBe(true)
  const cli = tree.find((entry) => {
    try {
      return readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8').split('\0')[0] === bin
    } catch {
      return false
    }
  })
  expect(cli, `${path.basename(bin)} among ${tree.map((entry) => entry.comm).join(', ')}`).toBeDefined()
  return cli!.pid
}

/** The mount options of the mount at `target` in /proc/<pid>/mountinfo (proc(5)), the last one there winning. */
function mountOptions(pid: number, target: string): string[] | undefined {
  const lines = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').trim().split('\n')
  return lines.map((line) => line.split(' ')).filter((fields) => fields[4] === target).at(-1)?.[5]?.split(',')
}

/** Writes `file` from inside the mount namespace of `pid` (nsenter(1): setns(2) moves root and cwd into it). */
function writeInside(pid: number, file: string): { ok: boolean; stderr: string } {
  const result = spawnSync('nsenter', ['-t', String(pid), '-m', '--', '/bin/sh', '-c', 'echo written > "$1"', 'sh', file], { encoding: 'utf8' })
  return { ok: result.status === 0, stderr: result.stderr }
}

/** What each owner's CLI is confined to, checked from the host. */
function expectConfined(pid: number, own: string, other: string) {
  const nspid = /^NSpid:\s+(.+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!.trim().split(/\s+/)
  expect(nspid.length).toBeGreaterThan(1)
  expect(readlinkSync(`/proc/${pid}/ns/pid`)).not.toBe(readlinkSync('/proc/self/ns/pid'))
  expect(readlinkSync(`/proc/${pid}/ns/mnt`)).not.toBe(readlinkSync('/proc/self/ns/mnt'))
  expect(mountOptions(pid, '/')).toContain('ro')
  expect(mountOptions(pid, own)).toContain('rw')
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8')
  expect(environ).not.toContain(HOST_SECRET)
  expect(environ).not.toContain('POOL_TEST_DB_PASSWORD')
  // The owner's own workspace takes a write; the other owner's refuses it (a read-only bind).
  const mine = path.join(own, `from-${pid}`)
  expect(writeInside(pid, mine)).toMatchObject({ ok: true })
  expect(readFileSync(mine, 'utf8')).toBe('written\n')
  const theirs = path.join(other, `from-${pid}`)
  const refused = writeInside(pid, theirs)
  expect(refused.ok).toBe(false)
  expect(refused.stderr).toMatch(/Read-only file system/)
  expect(existsSync(theirs)).toBe(false)
}

describe('claude pooled by default as conch terminals of its owner', { timeout: 120_000 }, () => {
  it('in-process: each owner’s CLI is its own ctx.pty terminal, confined to its own workspace', async () => {
    const { root, pool, pty, a, b, wsA, wsB } = await compose({ cwd: tmpdir() })
    expect(await pool.acquireAndInvoke(keyOf(a), 'Q1: for a', { owner: a })).toMatchObject({ path: 'booted', text: 'answer 1: for a' })
    // The owner is found by id in ctx.agents when the invoke names none.
    expect(await pool.acquireAndInvoke(keyOf(b), 'Q2: for b')).toMatchObject({ path: 'booted', text: 'answer 2: for b' })
    expect(await pool.acquireAndInvoke(keyOf(a), 'Q3: a again', { owner: a })).toMatchObject({ path: 'warm', text: 'answer 3: a again' })
    // The CLIs are not among the owners' own terminals.
    expect(pty.list(a)).toEqual([])
    expect(pty.list(b)).toEqual([])
    const cliA = await cliOf(pool, a)
    const cliB = await cliOf(pool, b)
    expectConfined(cliA, wsA, wsB)
    expectConfined(cliB, wsB, wsA)
    // Each works in its owner's workspace (the pool's configured cwd is another folder).
    expect(readlinkSync(`/proc/${cliA}/cwd`)).toBe(wsA)
    expect(readlinkSync(`/proc/${cliB}/cwd`)).toBe(wsB)
    await expectUnreachable(root, a)
    expect(await pool.acquireAndInvoke(keyOf(a), 'Q5: a after the tools', { owner: a })).toMatchObject({ path: 'warm', text: 'answer 5: a after the tools' })
    expect(readlinkSync(`/proc/${cliA}/ns/mnt`)).not.toBe(readlinkSync(`/proc/${cliB}/ns/mnt`))
    // Another agent's id with someone else's owner object is refused before anything runs.
    await expect(pool.acquireAndInvoke(keyOf(a), 'Q4: as b', { owner: b })).rejects.toMatchObject({ code: 'INVOKE_FAILED' })
    expect(pool.readFailures()).toEqual([])
    // A CLI keeps the sandbox it started under: while it is open the owner's mode cannot change
    // (the terminals' fence), as for any of the owner's terminals.
    expect(() => root.sandboxPolicy.setMode(a.session, 'danger-full-access')).toThrow(expect.objectContaining({ code: 'MODE_CHANGE_REFUSED' }))
    // Disposing an owner closes its terminals, its pooled CLI among them; the pool's session of it
    // is then unhealthy and the tick evicts it.
    await root.agents.dispose(b)
    expect(alive(cliB)).toBe(false)
    await until(() => pool.sessionStates().find((entry) => entry.key.owner === b.id)?.state === 'unhealthy', 10_000, 'b\'s session to be unhealthy')
    await pool.evictTick()
    expect(pool.sessionStates().map((entry) => entry.key.owner)).toEqual([a.id])
    await pool.shutdown()
    expect([cliA, cliB].filter(alive)).toEqual([])
  })

  it('managed: the worker runs each owner’s CLI under the policy the main process resolved, and a worker killed with SIGKILL leaves none behind', async () => {
    const { root, pool, a, b, wsA, wsB } = await compose({ cwd: tmpdir(), worker: 'managed', supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], backoffMs: 50 } })
    const supervisor = pool.backend as WorkerSupervisor
    expect(await pool.acquireAndInvoke(keyOf(a), 'Q1: for a in the worker', { owner: a })).toMatchObject({ path: 'booted', text: 'answer 1: for a in the worker' })
    expect(await pool.acquireAndInvoke(keyOf(b), 'Q2: for b in the worker', { owner: b })).toMatchObject({ path: 'booted', text: 'answer 2: for b in the worker' })
    expect(await pool.acquireAndInvoke(keyOf(a), 'Q3: a warm', { owner: a })).toMatchObject({ path: 'warm', text: 'answer 3: a warm' })
    const cliA = await cliOf(pool, a)
    const cliB = await cliOf(pool, b)
    expectConfined(cliA, wsA, wsB)
    expectConfined(cliB, wsB, wsA)
    expect(readlinkSync(`/proc/${cliA}/cwd`)).toBe(wsA)
    expect(readlinkSync(`/proc/${cliB}/cwd`)).toBe(wsB)
    await expectUnreachable(root, a)
    expect(pool.readFailures()).toEqual([])

    const workerPid = supervisor.workerPid()!
    const entry = tagOf(workerPid)
    expect(carrying(entry)).toEqual(expect.arrayContaining([workerPid, cliA, cliB]))
    process.kill(workerPid, 'SIGKILL')
    await until(() => carrying(entry).length === 0, 15_000, 'the killed worker\'s CLIs to be gone')
    // A process in the middle of its exit already shows an empty environ while its state is not
    // yet Z (proc(5)): wait for the exit itself; a CLI that survived keeps this from settling.
    await until(() => [cliA, cliB].every((pid) => !alive(pid)), 10_000, 'both CLIs to have exited')
    await until(async () => (await pool.metrics.snapshot()).worker_restarts_total === 1 && supervisor.state === 'ready', 30_000, 'the restarted worker')
    expect(await pool.acquireAndInvoke(keyOf(a), 'Q4: after the restart', { owner: a })).toMatchObject({ path: 'booted', text: 'answer 4: after the restart' })
    expectConfined(await cliOf(pool, a), wsA, wsB)
    await pool.shutdown()
  })

  it('managed: the real Codex TUI runs confined the same way', async () => {
    const { pool, a, wsA, wsB } = await compose({ cwd: tmpdir(), kinds: { codex: codexKind(model) }, worker: 'managed', supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'] } })
    expect(await pool.acquireAndInvoke(keyOf(a, 'codex'), 'Q1: codex in the worker', { owner: a })).toMatchObject({ path: 'booted', text: 'answer 1: codex in the worker' })
    expect(await pool.acquireAndInvoke(keyOf(a, 'codex'), 'Q2: codex warm', { owner: a })).toMatchObject({ path: 'warm', text: 'answer 2: codex warm' })
    expectConfined(await cliOf(pool, a, CODEX_BIN), wsA, wsB)
    expect(pool.readFailures()).toEqual([])
    await pool.shutdown()
  })
})
