import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  createSessionTag,
  linuxProcessTable,
  signalIfSame,
  terminateTree,
  treeMembers,
  type ProcessEntry,
  type ProcessRecord,
  type ProcessTable,
  type SessionTag,
} from '../src/index.ts'
import { until } from '@conch/test-support/wait'
import { LineReader } from './lines.ts'

/** A process that keeps changing its pid (see the file). */
const HOPPER = fileURLToPath(new URL('./fixtures/hopper.py', import.meta.url))
/** A process whose main thread left while another runs on (see the file). */
const LEADERLESS = fileURLToPath(new URL('./fixtures/leaderless.py', import.meta.url))

const linux = process.platform === 'linux'
const table = linuxProcessTable()
let dir: string
const started: ChildProcess[] = []
const tags: SessionTag[] = []

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-terminate-'))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))
afterEach(async () => {
  const leftovers = started.splice(0).map((child) => -child.pid!)
  for (const tag of tags.splice(0)) leftovers.push(...(await tagged(tag)).map((e) => e.pid))
  for (const pid of leftovers) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
})

/** Starts `bash <file>` in its own process group, with an optional tag in its environment. */
function bash(script: string, tag?: SessionTag): { child: ChildProcess; out: LineReader; exited: Promise<unknown> } {
  const file = join(dir, `script-${started.length}-${Date.now()}.sh`)
  writeFileSync(file, script)
  const env: Record<string, string | undefined> = { ...process.env }
  if (tag) {
    env[tag.name] = tag.value
    tags.push(tag)
  }
  const child = spawn('bash', [file], { env, detached: true, stdio: ['ignore', 'pipe', 'ignore'] })
  started.push(child)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  return { child, out: new LineReader(child.stdout!), exited }
}

/** Whether the process with this identity still exists and is not a zombie. */
async function alive(record: { pid: number; startTime: string }): Promise<boolean> {
  const entry = await table.get(record.pid)
  return entry !== undefined && entry.startTime === record.startTime && entry.state !== 'Z'
}

async function identity(pid: number): Promise<ProcessRecord> {
  const entry = await table.get(pid)
  if (!entry) throw new Error(`process ${pid} is not running`)
  return { pid, startTime: entry.startTime, comm: entry.comm }
}

async function tagged(tag: SessionTag): Promise<ProcessEntry[]> {
  const entries = await table.snapshot()
  const values = await Promise.all(entries.map((e) => table.environ(e.pid, tag.name)))
  return entries.filter((e, i) => values[i] === tag.value && e.state !== 'Z')
}

/** Processes (not zombies) whose command line is exactly `argv`, read from /proc/<pid>/cmdline. */
async function running(...argv: string[]): Promise<ProcessEntry[]> {
  const wanted = argv.join('\0') + '\0'
  const entries = await table.snapshot()
  return entries.filter((entry) => {
    if (entry.state === 'Z') return false
    try {
      return readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8') === wanted
    } catch {
      return false
    }
  })
}

const recordingKill = (calls: Array<[number, NodeJS.Signals]>) => (pid: number, signal: NodeJS.Signals) => {
  calls.push([pid, signal])
  process.kill(pid, signal)
}

describe.runIf(linux)('terminateTree on real processes', () => {
  it('stops a tree with grandchildren and reports every member stopped', async () => {
    const { child, out } = bash(`
      bash -c 'sleep 301 & echo "grand $!"; wait' &
      echo "inner $!"
      sleep 300 &
      echo "child $!"
      wait
    `)
    const grand = await identity(Number((await out.line(/^grand (\d+)/))[1]))
    const inner = await identity(Number((await out.line(/^inner (\d+)/))[1]))
    const sleeper = await identity(Number((await out.line(/^child (\d+)/))[1]))
    const root = await identity(child.pid!)

    const report = await terminateTree({ rootPid: root.pid, includeRoot: true, graceMs: 10_000 })

    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid).sort()).toEqual([grand.pid, inner.pid, sleeper.pid, root.pid].sort())
    for (const record of [grand, inner, sleeper, root]) expect(await alive(record)).toBe(false)
  })

  it('KILLs a child that ignores SIGTERM after the grace and reports it stopped', async () => {
    const { child, out } = bash(`
      trap '' TERM
      sleep 302 &
      echo "stubborn $!"
      wait
    `)
    const stubborn = await identity(Number((await out.line(/^stubborn (\d+)/))[1]))
    const calls: Array<[number, NodeJS.Signals]> = []
    const report = await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 200, kill: recordingKill(calls) })

    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toContain(stubborn.pid)
    expect(calls).toContainEqual([stubborn.pid, 'SIGTERM'])
    expect(calls).toContainEqual([stubborn.pid, 'SIGKILL'])
    expect(await alive(stubborn)).toBe(false)
  })

  it('counts a zombie as gone: a child its parent never reaps is stopped without waiting for the grace', async () => {
    const { child, out } = bash(`
      exec python3 -c '
import os, time
pid = os.fork()
if pid == 0:
    os.execvp("sleep", ["sleep", "303"])
print("child", pid, flush=True)
time.sleep(300)
'
    `)
    const zombie = await identity(Number((await out.line(/^child (\d+)/))[1]))
    // A grace far longer than the test timeout: only the zombie rule lets this return.
    const report = await terminateTree({ rootPid: child.pid!, includeRoot: false, graceMs: 600_000 })

    expect(report.survivors).toEqual([])
    expect(report.stopped.map(({ pid, startTime }) => ({ pid, startTime }))).toEqual([{ pid: zombie.pid, startTime: zombie.startTime }])
    expect((await table.get(zombie.pid))?.state).toBe('Z')
    expect(await alive(await identity(child.pid!))).toBe(true)
  })

  it('returns as soon as everything is gone instead of waiting the full grace', async () => {
    const { child, out } = bash(`
      sleep 304 & sleep 305 &
      echo ready
      wait
    `)
    await out.line(/^ready/)
    const report = await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 600_000 })
    expect(report.survivors).toEqual([])
    // The two children may still be forked copies of bash that have not exec'd sleep yet.
    expect(report.stopped).toHaveLength(3)
    expect(report.stopped.at(-1)?.pid).toBe(child.pid)
  })

  it.each(['scan', 'orphans'] as const)('finds nohup and setsid daemons by the session tag after they re-parent away from the tree (discovery %s)', async (discovery) => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const { child, out, exited } = bash(
      `
      setsid sleep 306 &
      nohup sleep 307 >/dev/null 2>&1 &
      (setsid sleep 308 &)
      echo ready
    `,
      tag,
    )
    await out.line(/^ready/)
    await exited
    const daemons = await tagged(tag)
    expect(daemons).toHaveLength(3)
    expect(daemons.every((e) => e.ppid !== child.pid)).toBe(true)

    const scans: number[] = []
    const counting: ProcessTable = { ...table, snapshot: () => (scans.push(1), table.snapshot()) }
    const report = await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 5_000, tag, discovery, table: counting })
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid).sort()).toEqual(daemons.map((e) => e.pid).sort())
    expect(await tagged(tag)).toEqual([])
    expect(scans.length > 0).toBe(discovery === 'scan')
  })

  it.each(['scan', 'orphans'] as const)('catches a tagged descendant that double-forks and setsids out while it handles SIGTERM, by the sweep after the root (discovery %s)', async (discovery) => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const inner = join(dir, 'escaping.sh')
    // On TERM: a subshell starts a new session with a sleep and exits at once, so the sleep is
    // re-parented to init (out of every tree walk) before the teardown looks again.
    writeFileSync(inner, `trap '(setsid sleep 323 & echo "escaped $!"); exit 0' TERM\necho ready\nwhile :; do sleep 0.05; done\n`)
    const { child, out } = bash(`bash ${inner} & wait`, tag)
    await out.line(/^ready/)
    const root = await identity(child.pid!)
    const report = await terminateTree({ rootPid: root.pid, rootStartTime: root.startTime, includeRoot: true, graceMs: 5_000, tag, discovery })
    const escaped = Number((await out.line(/^escaped (\d+)/))[1])

    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toContain(escaped)
    expect(await running('sleep', '323')).toEqual([])
    expect(await tagged(tag)).toEqual([])
  }, 20_000)

  it('scans with the tag when discovery namespace finds no namespace holding the tree', async () => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const { child, out, exited } = bash('setsid sleep 333 & echo ready', tag)
    await out.line(/^ready/)
    await exited
    // The pid, not the name: the child may still be a forked bash that has not exec'd sleep yet.
    const daemons = await tagged(tag)
    expect(daemons).toHaveLength(1)
    const report = await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 5_000, tag, discovery: 'namespace' })
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toEqual([daemons[0]!.pid])
    expect(await tagged(tag)).toEqual([])
  })

  it('treeMembers finds what terminateTree would capture, a tagged daemon that left the tree included, and signals nothing', async () => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const { child, out } = bash('sleep 334 & echo "child $!"; setsid -f sleep 335; echo ready; wait', tag)
    const sleeper = await identity(Number((await out.line(/^child (\d+)/))[1]))
    await out.line(/^ready/)
    let daemons: ProcessEntry[] = []
    await until(async () => (daemons = await running('sleep', '335')).length === 1, 10_000, 'the setsid sleep')
    const root = await identity(child.pid!)
    expect(daemons[0]!.ppid).not.toBe(root.pid)
    const calls: Array<[number, NodeJS.Signals]> = []
    const options = { rootPid: root.pid, rootStartTime: root.startTime, includeRoot: true, graceMs: 5_000, tag, discovery: 'orphans' as const, kill: recordingKill(calls) }
    const members = await treeMembers(options)
    expect(calls).toEqual([])
    expect(members.map((r) => r.pid).sort()).toEqual([sleeper.pid, daemons[0]!.pid].sort())
    for (const record of [sleeper, root]) expect(await alive(record)).toBe(true)
    const report = await terminateTree(options)
    expect(report.stopped.map((r) => r.pid).sort()).toEqual([...members.map((r) => r.pid), root.pid].sort())
  })

  it('finds and stops a tagged daemon whose main thread left while another runs on (its leader reads Z)', async () => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const { child, out } = bash(`setsid -f python3 ${LEADERLESS}; wait`, tag)
    const pid = Number((await out.line(/^leaderless (\d+)/))[1])
    await until(async () => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z'), 10_000, 'the leader to leave')
    // Its leader is a zombie, yet the process lives: the table says so, and finds its tag.
    expect((await table.get(pid))?.state).not.toBe('Z')
    expect(await table.environ(pid, tag.name)).toBe(tag.value)
    const options = { rootPid: child.pid!, includeRoot: true, graceMs: 1_000, tag, discovery: 'orphans' as const }
    expect((await treeMembers(options)).map((record) => record.pid)).toContain(pid)
    const report = await terminateTree(options)
    expect(report.stopped.map((record) => record.pid)).toContain(pid)
    expect(report.survivors).toEqual([])
    await until(async () => (await table.get(pid))?.state === undefined || (await table.get(pid))?.state === 'Z', 10_000, 'the daemon to be gone')
  }, 30_000)

  it('stops a tagged process that keeps changing its pid (it forks, the parent leaves at once), unconfined', async () => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    // stdout is the test's pipe: its end is the proof that the hopper is gone (fixtures/hopper.py).
    const { child, out } = bash(`python3 ${HOPPER} & echo ready`, tag)
    const ended = new Promise<void>((resolve) => child.stdout!.once('end', () => resolve()))
    await out.line(/hopping/)
    const report = await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 1_000, tag, discovery: 'orphans' })
    expect(report.survivors).toEqual([])
    await ended
    expect(await tagged(tag)).toEqual([])
  }, 30_000)

  it("with session, stops a daemon that cleared its environment and double-forked but kept the root's session, and only with it", async () => {
    for (const session of [false, true]) {
      const tag = createSessionTag('CONCH_TEST_TAG')
      // `env -i` drops the tag; the daemon leaves the tree (its parent exits) and never calls setsid.
      const marker = `sid-orphan-${session}-${Date.now()}`
      const { child, out } = bash(`env -i perl -e 'exit if fork; $0 = "${marker}"; print "up\\n"; close STDOUT; sleep 300' & wait; echo ready; sleep 300`, tag)
      await out.line(/^up/)
      await out.line(/^ready/)
      const [daemon] = (await table.snapshot()).filter((entry) => {
        try {
          return entry.state !== 'Z' && readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8').startsWith(marker)
        } catch {
          return false
        }
      })
      expect(daemon, 'the daemon runs').toBeDefined()
      expect(daemon!.sid).toBe(child.pid)
      expect(await table.environ(daemon!.pid, tag.name)).toBeUndefined()
      const root = await identity(child.pid!)
      const report = await terminateTree({ rootPid: child.pid!, rootStartTime: root.startTime, includeRoot: true, graceMs: 1_000, tag, discovery: 'orphans', session })
      expect(report.survivors).toEqual([])
      expect(await alive(daemon!), `daemon alive after a teardown with session ${session}`).toBe(!session)
      if (!session) process.kill(daemon!.pid, 'SIGKILL')
    }
  }, 30_000)

  it.each([
    ['by rescanning before KILL', 'scan', 311],
    ['when walking the children lists', 'children', 316],
  ] as const)('catches children the root forks while it handles SIGTERM, %s', async (_how, discovery, seconds) => {
    const { child, out } = bash(`
      trap 'sleep ${seconds} & echo "forked $!"' TERM
      echo ready
      while :; do sleep 0.05; done
    `)
    await out.line(/^ready/)
    const teardown = terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 2_000, discovery })
    const forkedPid = Number((await out.line(/^forked (\d+)/))[1])
    const report = await teardown

    expect(report.survivors).toEqual([])
    // Found by its pid: it may still have been a forked bash, not yet sleep, when it was seen.
    const forked = report.stopped.find((r) => r.pid === forkedPid)
    expect(forked).toBeDefined()
    expect(await alive(forked!)).toBe(false)
  }, 20_000)

  it('catches children a descendant forks while it handles SIGTERM, and leaves the root running', async () => {
    const inner = join(dir, 'inner.sh')
    writeFileSync(inner, `trap 'sleep 312 & echo "forked $!"' TERM\necho ready\nwhile :; do sleep 0.05; done\n`)
    const { child, out } = bash(`bash ${inner} & wait; sleep 313`)
    await out.line(/^ready/)
    const teardown = terminateTree({ rootPid: child.pid!, includeRoot: false, graceMs: 2_000 })
    const forkedPid = Number((await out.line(/^forked (\d+)/))[1])
    const report = await teardown

    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toContain(forkedPid)
    expect(report.stopped.map((r) => r.pid)).not.toContain(child.pid)
    expect(await alive(await identity(child.pid!))).toBe(true)
  }, 20_000)

  it('walks the children lists instead of listing every process when asked to', async () => {
    const { child, out } = bash(`
      bash -c 'sleep 314 & echo "grand $!"; wait' &
      sleep 315 &
      echo "child $!"
      wait
    `)
    const grand = await identity(Number((await out.line(/^grand (\d+)/))[1]))
    const sleeper = await identity(Number((await out.line(/^child (\d+)/))[1]))
    const scans: number[] = []
    const counting: ProcessTable = { ...table, children: table.children!, snapshot: () => (scans.push(1), table.snapshot()) }

    const report = await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 10_000, discovery: 'children', table: counting })

    expect(scans).toEqual([])
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toEqual(expect.arrayContaining([grand.pid, sleeper.pid, child.pid!]))
    expect(report.stopped).toHaveLength(4)
    for (const record of [grand, sleeper]) expect(await alive(record)).toBe(false)
  })

  it('refuses a tag sweep with discovery children', async () => {
    await expect(
      terminateTree({ rootPid: process.pid, includeRoot: false, graceMs: 0, discovery: 'children', tag: createSessionTag('CONCH_TEST_TAG') }),
    ).rejects.toThrow(/sweeps no tag/)
  })

  it('reports nothing for a root that is already gone when there is no tag', async () => {
    const { child, exited } = bash('exit 0')
    await exited
    expect(await terminateTree({ rootPid: child.pid!, includeRoot: true, graceMs: 1_000 })).toEqual({ stopped: [], survivors: [] })
  })
})

// bubblewrap is what gives a tree its own PID namespace here (Debian package bubblewrap); without
// it there is no namespace to prove a walk complete with.
const bubblewrap = linux && spawnSync('bwrap', ['--dev-bind', '/', '/', '--unshare-pid', 'true']).status === 0

describe.runIf(bubblewrap)('terminateTree through a PID namespace (bubblewrap --unshare-pid)', () => {
  /** `bash <file>` as the first process of a new PID namespace, under bubblewrap's monitor and init. */
  function boxed(script: string, tag: SessionTag): { child: ChildProcess; out: LineReader } {
    const file = join(dir, `boxed-${started.length}-${Date.now()}.sh`)
    writeFileSync(file, script)
    tags.push(tag)
    const argv = ['--dev-bind', '/', '/', '--proc', '/proc', '--unshare-pid', '--die-with-parent', 'bash', file]
    const child = spawn('bwrap', argv, { env: { ...process.env, [tag.name]: tag.value }, detached: true, stdio: ['ignore', 'pipe', 'ignore'] })
    started.push(child)
    return { child, out: new LineReader(child.stdout!) }
  }

  it('finds the namespace init by NSpid, and only there', async () => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const { child, out } = boxed('echo ready; sleep 330', tag)
    await out.line(/^ready/)
    const [init] = (await table.children!(child.pid!)) ?? []
    expect(init).toBeDefined()
    expect(await table.namespaceInit!(init!)).toBe(true)
    expect(await table.namespaceInit!(child.pid!)).toBe(false)
    expect(await table.namespaceInit!(process.pid)).toBe(false)
  })

  it('walks to the init without listing every process, and nothing from inside outlives the teardown: not a TERM-ignoring process, not one that double-forks and setsids out during TERM', async () => {
    const tag = createSessionTag('CONCH_TEST_TAG')
    const inner = join(dir, 'boxed-escaping.sh')
    writeFileSync(inner, `trap '(setsid sleep 331 & echo "escaped $!"); exit 0' TERM\necho inner\nwhile :; do sleep 0.05; done\n`)
    const { child, out } = boxed(`bash -c "trap '' TERM HUP; exec sleep 332" & bash ${inner} & echo ready; wait`, tag)
    await out.line(/^ready/)
    await out.line(/^inner/)
    const scans: number[] = []
    const counting: ProcessTable = { ...table, snapshot: () => (scans.push(1), table.snapshot()) }
    const root = await identity(child.pid!)

    const report = await terminateTree({
      rootPid: root.pid,
      rootStartTime: root.startTime,
      includeRoot: true,
      graceMs: 5_000,
      tag,
      discovery: 'namespace',
      table: counting,
    })

    expect(scans).toEqual([])
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toContain(root.pid)
    // Checked at once: the namespace's init was gone, so everything inside was too.
    expect(await running('sleep', '331')).toEqual([])
    expect(await running('sleep', '332')).toEqual([])
    expect(await tagged(tag)).toEqual([])
  }, 20_000)
})

/** A process table over a mutable fixture, for the races that need exact ordering. */
function fixtureTable(entries: Map<number, ProcessEntry>): ProcessTable {
  return {
    snapshot: async () => [...entries.values()],
    get: async (pid) => entries.get(pid),
    environ: async () => undefined,
  }
}

/** A fixture table with children lists (and `environ`, else none set) that fails if a teardown lists every process. */
function walkOnlyTable(entries: Map<number, ProcessEntry>, children: (pid: number) => number[], environ?: ProcessTable['environ']): ProcessTable {
  return {
    ...fixtureTable(entries),
    snapshot: async () => {
      throw new Error('no scan expected')
    },
    children: async (pid) => children(pid),
    ...(environ !== undefined && { environ }),
  }
}

/** A kill that records each pid in `calls` and takes the process out of `entries` (it is gone at once). */
function removingKill(entries: Map<number, ProcessEntry>, calls: number[]): (pid: number) => void {
  return (pid) => {
    calls.push(pid)
    entries.delete(pid)
  }
}

const fixture = (pid: number, ppid: number, startTime: string, state = 'S'): ProcessEntry => ({
  pid, ppid, pgid: pid, sid: pid, tpgid: -1, state, comm: `p${pid}`, startTime,
})

describe('the identity fence', () => {
  it('signalIfSame sends only to the same process and tells gone from recycled', async () => {
    const entries = new Map([
      [100, fixture(100, 1, '500')],
      [101, fixture(101, 100, '600', 'Z')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals) => void calls.push([pid, signal])
    const fence = fixtureTable(entries)

    expect(await signalIfSame(fence, { pid: 100, startTime: '499' }, 'SIGTERM', { kill })).toBe('recycled')
    expect(await signalIfSame(fence, { pid: 101, startTime: '600' }, 'SIGTERM', { kill })).toBe('gone')
    expect(await signalIfSame(fence, { pid: 102, startTime: '1' }, 'SIGTERM', { kill })).toBe('gone')
    expect(calls).toEqual([])
    expect(await signalIfSame(fence, { pid: 100, startTime: '500' }, 'SIGTERM', { kill })).toBe('sent')
    expect(calls).toEqual([[100, 'SIGTERM']])
  })

  it('signalIfSame treats ESRCH as gone and rethrows any other kill error', async () => {
    const fence = fixtureTable(new Map([[100, fixture(100, 1, '500')]]))
    const failing = (code: string) => () => {
      throw Object.assign(new Error(code), { code })
    }
    expect(await signalIfSame(fence, { pid: 100, startTime: '500' }, 'SIGKILL', { kill: failing('ESRCH') })).toBe('gone')
    await expect(signalIfSame(fence, { pid: 100, startTime: '500' }, 'SIGKILL', { kill: failing('EPERM') })).rejects.toThrow('EPERM')
  })

  it('signals leaves before their parents and the root last', async () => {
    const entries = new Map([
      [500, fixture(500, 1, '1')],
      [501, fixture(501, 500, '2')],
      [502, fixture(502, 501, '3')],
      [503, fixture(503, 500, '4')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      entries.delete(pid)
    }
    const report = await terminateTree({ rootPid: 500, includeRoot: true, graceMs: 1_000, pollMs: 5, table: fixtureTable(entries), kill })
    const order = calls.map(([pid]) => pid)
    expect(order.indexOf(502)).toBeLessThan(order.indexOf(501))
    expect(order.at(-1)).toBe(500)
    expect(calls.every(([, signal]) => signal === 'SIGTERM')).toBe(true)
    expect(report.stopped.map((r) => r.pid).sort()).toEqual([500, 501, 502, 503])
  })

  it('continues a stopped process after TERM so the signal is delivered, and lets signalFor choose per process', async () => {
    const entries = new Map([
      [600, fixture(600, 1, '1')],
      [601, fixture(601, 600, '2', 'T')],
      [602, fixture(602, 600, '3')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      if ((pid === 601 && signal === 'SIGCONT') || (pid === 602 && signal === 'SIGHUP')) entries.delete(pid)
    }
    const report = await terminateTree({
      rootPid: 600, includeRoot: false, graceMs: 200, pollMs: 5, table: fixtureTable(entries), kill,
      signalFor: (record) => (record.pid === 602 ? 'SIGHUP' : undefined),
    })
    expect(calls).toContainEqual([601, 'SIGTERM'])
    expect(calls).toContainEqual([602, 'SIGHUP'])
    expect(calls.findIndex(([pid, signal]) => pid === 601 && signal === 'SIGCONT')).toBeGreaterThan(calls.findIndex(([pid, signal]) => pid === 601 && signal === 'SIGTERM'))
    expect(calls).not.toContainEqual([602, 'SIGCONT'])
    expect(calls.some(([, signal]) => signal === 'SIGKILL')).toBe(false)
    expect(report.survivors).toEqual([])
  })

  it('never KILLs a pid that was recycled during the grace', async () => {
    const entries = new Map([
      [200, fixture(200, 1, '700')],
      [201, fixture(201, 200, '800')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      // 201 ignores TERM, exits later and its pid is reused by an unrelated process.
      if (pid === 201 && signal === 'SIGTERM') setImmediate(() => entries.set(201, fixture(201, 1, '900')))
      if (pid === 200 && signal === 'SIGTERM') entries.delete(200)
    }
    const report = await terminateTree({ rootPid: 200, includeRoot: true, graceMs: 200, pollMs: 5, table: fixtureTable(entries), kill })

    expect(calls).toEqual([
      [201, 'SIGTERM'],
      [200, 'SIGTERM'],
    ])
    expect(report.survivors).toEqual([])
    expect(report.stopped).toEqual([
      { pid: 201, startTime: '800', comm: 'p201' },
      { pid: 200, startTime: '700', comm: 'p200' },
    ])
  })

  it('never signals this process or its ancestors, even when they appear inside the tree', async () => {
    const entries = new Map([
      [300, fixture(300, 1, '1')],
      [process.ppid, fixture(process.ppid, 300, '2')],
      [process.pid, fixture(process.pid, process.ppid, '3')],
      [301, fixture(301, process.pid, '4')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      if (pid === 301) entries.delete(301)
    }
    await terminateTree({ rootPid: 300, includeRoot: false, graceMs: 50, pollMs: 5, table: fixtureTable(entries), kill })
    expect(calls.map(([pid]) => pid)).toEqual([301])
  })

  it("looks again as soon as the root's exit is reported instead of waiting for the next poll", async () => {
    const entries = new Map([[700, fixture(700, 1, '1')]])
    let exited!: () => void
    const rootExited = new Promise<void>((resolve) => (exited = resolve))
    const kill = (pid: number): void => {
      // The root goes a little after the signal, and its reaping is reported.
      setTimeout(() => {
        entries.delete(pid)
        exited()
      }, 20)
    }
    // Poll interval and grace beyond the test's timeout: only the exit report ends the wait.
    const report = await terminateTree({ rootPid: 700, includeRoot: true, graceMs: 600_000, pollMs: 600_000, table: fixtureTable(entries), kill, rootExited })
    expect(report).toEqual({ stopped: [{ pid: 700, startTime: '1', comm: 'p700' }], survivors: [] })
  })

  it('walks children lists of a fixture, skipping a listed pid that now has another parent', async () => {
    const entries = new Map([
      [800, fixture(800, 1, '1')],
      [801, fixture(801, 800, '2')],
      [802, fixture(802, 801, '3')],
      // Listed under 800, but recycled by an unrelated process before its stat was read.
      [803, fixture(803, 1, '4')],
    ])
    const lists = new Map([[800, [801, 803]], [801, [802]]])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      entries.delete(pid)
    }
    const walked: ProcessTable = {
      ...fixtureTable(entries),
      snapshot: async () => {
        throw new Error('no scan expected')
      },
      children: async (pid) => (entries.has(pid) ? (lists.get(pid) ?? []) : []),
    }
    const report = await terminateTree({ rootPid: 800, includeRoot: true, graceMs: 1_000, pollMs: 5, table: walked, kill, discovery: 'children' })
    expect(calls).toEqual([
      [802, 'SIGTERM'],
      [801, 'SIGTERM'],
      [800, 'SIGTERM'],
    ])
    expect(report.survivors).toEqual([])
  })

  it('a root KILLed first gets no grace: it is KILLed once and waited for until it is gone', async () => {
    const entries = new Map([[810, fixture(810, 1, '1')]])
    const calls: Array<[number, NodeJS.Signals]> = []
    // The kill leaves the root a zombie, as the kernel does once it has ended it.
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      entries.set(pid, fixture(pid, 1, '1', 'Z'))
    }
    const walked: ProcessTable = { ...fixtureTable(entries), children: async () => [] }
    // A grace beyond the test's timeout: only the KILL without one ends the teardown.
    const report = await terminateTree({ rootPid: 810, includeRoot: true, rootSignal: 'SIGKILL', graceMs: 600_000, pollMs: 5, table: walked, kill, discovery: 'children' })
    expect(calls).toEqual([[810, 'SIGKILL']])
    expect(report).toEqual({ stopped: [{ pid: 810, startTime: '1', comm: 'p810' }], survivors: [] })
  })

  it('a child forked after the capture and before the KILL of the root is found after it, KILLed, and the root waited for', async () => {
    const entries = new Map([[820, fixture(820, 1, '1')]])
    const lists = new Map<number, number[]>([[820, []]])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      if (pid === 820) {
        // The child appeared between the capture and this kill; the root then exits (a zombie).
        entries.set(821, fixture(821, 820, '2'))
        lists.set(820, [821])
        entries.set(820, fixture(820, 1, '1', 'Z'))
      } else {
        entries.delete(pid)
      }
    }
    const walked: ProcessTable = { ...fixtureTable(entries), children: async (pid) => lists.get(pid) ?? [] }
    const report = await terminateTree({ rootPid: 820, includeRoot: true, rootSignal: 'SIGKILL', graceMs: 600_000, pollMs: 5, table: walked, kill, discovery: 'children' })
    expect(calls).toEqual([
      [820, 'SIGKILL'],
      [821, 'SIGKILL'],
    ])
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((record) => record.pid).sort()).toEqual([820, 821])
  })

  it('never signals a root whose pid now has another start time, and reads no environment older than the root', async () => {
    const entries = new Map([
      // The caller's root started at tick 50; pid 900 now belongs to a stranger.
      [900, fixture(900, 1, '70')],
      [901, fixture(901, 900, '71')],
      [902, fixture(902, 1, '10')],
      [903, fixture(903, 1, '60')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const read: number[] = []
    const tag = { name: 'CONCH_TEST_TAG', value: 'abc' }
    const kill = (pid: number, signal: NodeJS.Signals): void => {
      calls.push([pid, signal])
      entries.delete(pid)
    }
    const fenced: ProcessTable = {
      ...fixtureTable(entries),
      environ: async (pid) => (read.push(pid), pid === 903 ? 'abc' : undefined),
    }
    const report = await terminateTree({ rootPid: 900, rootStartTime: '50', includeRoot: true, graceMs: 1_000, pollMs: 5, table: fenced, kill, tag })
    expect(calls).toEqual([[903, 'SIGTERM']])
    expect(report).toEqual({ stopped: [{ pid: 903, startTime: '60', comm: 'p903' }], survivors: [] })
    expect(read).not.toContain(902)
  })

  it('proves a walk complete by the namespace init it reaches, and scans with the tag when it reaches none', async () => {
    const tree = () =>
      new Map([
        [950, fixture(950, 1, '1')],
        [951, fixture(951, 950, '2')],
        [952, fixture(952, 951, '3')],
        [953, fixture(953, 952, '4')],
        // Re-parented away from the tree, carrying the tag.
        [960, fixture(960, 1, '5')],
      ])
    const run = async (inits: number[]) => {
      const entries = tree()
      const calls: Array<[number, NodeJS.Signals]> = []
      const scans: number[] = []
      const lists = new Map([[950, [951]], [951, [952]], [952, [953]]])
      const kill = (pid: number, signal: NodeJS.Signals): void => {
        calls.push([pid, signal])
        entries.delete(pid)
      }
      const walked: ProcessTable = {
        ...fixtureTable(entries),
        snapshot: async () => (scans.push(1), [...entries.values()]),
        children: async (pid) => (entries.has(pid) ? (lists.get(pid) ?? []) : []),
        namespaceInit: async (pid) => inits.includes(pid),
        environ: async (pid) => (pid === 960 ? 'abc' : undefined),
      }
      const tag = { name: 'CONCH_TEST_TAG', value: 'abc' }
      const report = await terminateTree({ rootPid: 950, includeRoot: true, graceMs: 1_000, pollMs: 5, table: walked, kill, tag, discovery: 'namespace' })
      return { calls: calls.map(([pid]) => pid), scans: scans.length, report }
    }

    const boxed = await run([952])
    expect(boxed.scans).toBe(0)
    expect(boxed.calls).toEqual([953, 952, 951, 950])
    expect(boxed.report.survivors).toEqual([])

    const bare = await run([])
    expect(bare.scans).toBeGreaterThan(0)
    expect(bare.calls).toContain(960)
    expect(bare.report.stopped.map((r) => r.pid).sort()).toEqual([950, 951, 952, 953, 960])
  })

  it('reads only the namespace init while it waits, and takes its namespace as gone with it', async () => {
    const entries = new Map([
      [970, fixture(970, 1, '1')],
      [971, fixture(971, 970, '2')],
      [972, fixture(972, 971, '3')],
      [973, fixture(973, 972, '4')],
    ])
    const lists = new Map([[970, [971]], [971, [972]], [972, [973]]])
    const reads: number[] = []
    let signalled = false
    const kill = (pid: number): void => {
      // The launcher outside the namespace goes at once.
      if (pid === 971) entries.delete(971)
      if (signalled || pid === 970) return
      signalled = true
      // The namespace's init goes a little later; the fixture keeps its members listed, so
      // only the rule (gone with the init) can end the wait.
      setTimeout(() => entries.delete(972), 20)
    }
    const walked: ProcessTable = {
      ...fixtureTable(entries),
      get: async (pid) => (reads.push(pid), entries.get(pid)),
      snapshot: async () => {
        throw new Error('no scan expected')
      },
      children: async (pid) => (entries.has(pid) ? (lists.get(pid) ?? []) : []),
      namespaceInit: async (pid) => pid === 972,
    }
    const report = await terminateTree({ rootPid: 970, includeRoot: false, graceMs: 10_000, pollMs: 5, table: walked, kill, discovery: 'namespace' })
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid).sort()).toEqual([971, 972, 973])
    // 973 is read by the walk and the fence of its signal, never by the wait or the report.
    expect(reads.filter((pid) => pid === 973).length).toBeLessThanOrEqual(3)
    expect(reads.filter((pid) => pid === 972).length).toBeGreaterThan(3)
  })

  it('sweeps the tag over the children of init, skipping older and recycled ones, and takes what hangs below a tagged one', async () => {
    const entries = new Map([
      [980, fixture(980, process.pid, '50')],
      // Children of init: a tagged daemon started after the root, with a child of its own that
      // dropped the tag; an older process; a pid listed under init that now has another parent.
      [981, fixture(981, 1, '60')],
      [982, fixture(982, 981, '61')],
      [983, fixture(983, 1, '10')],
      [984, fixture(984, 77, '62')],
    ])
    const lists = new Map([[1, [981, 983, 984]], [981, [982]]])
    const read: number[] = []
    const calls: number[] = []
    const kill = removingKill(entries, calls)
    const hosted = walkOnlyTable(entries, (pid) => lists.get(pid) ?? [], async (pid) => (read.push(pid), pid === 981 || pid === 983 || pid === 984 ? 'abc' : undefined))
    const tag = { name: 'CONCH_TEST_TAG', value: 'abc' }
    const report = await terminateTree({ rootPid: 980, rootStartTime: '50', includeRoot: true, graceMs: 1_000, pollMs: 5, table: hosted, kill, tag, discovery: 'orphans' })
    expect(report.survivors).toEqual([])
    expect(calls).toEqual([982, 981, 980])
    expect(read).toEqual([981])
  })

  it("takes the root's session members as tagged, but not once the root's pid leads another session", async () => {
    const run = async (leader: ProcessEntry | undefined) => {
      const entries = new Map<number, ProcessEntry>([
        // The root, in its own session; an orphan of its session under init that started after it
        // and carries no tag; an older member of the session (cannot be the root's); a stranger.
        [990, fixture(990, process.pid, '50')],
        [991, { ...fixture(991, 1, '60'), sid: 990, pgid: 991 }],
        [992, { ...fixture(992, 1, '40'), sid: 990, pgid: 992 }],
        [993, fixture(993, 1, '61')],
      ])
      if (leader === undefined) entries.delete(990)
      else entries.set(990, leader)
      const calls: number[] = []
      const kill = removingKill(entries, calls)
      const hosted = walkOnlyTable(entries, (pid) => (pid === 1 ? [991, 992, 993] : []))
      const tag = { name: 'CONCH_TEST_TAG', value: 'abc' }
      await terminateTree({ rootPid: 990, rootStartTime: '50', includeRoot: true, graceMs: 1_000, pollMs: 5, table: hosted, kill, tag, discovery: 'orphans', session: true })
      return calls
    }
    // The root still runs: its session's younger member goes, then the root.
    expect(await run(fixture(990, process.pid, '50'))).toEqual([991, 990])
    // The root is gone: its session's member still goes.
    expect(await run(undefined)).toEqual([991])
    // The root's pid now leads another session (recycled): nothing of that session is taken.
    expect(await run(fixture(990, 1, '70'))).toEqual([])
  })

  it('reports a process that outlives KILL as a survivor, and a retry tries again', async () => {
    const entries = new Map([
      [400, fixture(400, 1, '1')],
      [401, fixture(401, 400, '2', 'D')],
    ])
    const calls: Array<[number, NodeJS.Signals]> = []
    const kill = (pid: number, signal: NodeJS.Signals): void => void calls.push([pid, signal])
    const options = { rootPid: 400, includeRoot: false, graceMs: 20, killWaitMs: 20, pollMs: 5, table: fixtureTable(entries), kill }

    const first = await terminateTree(options)
    expect(first).toEqual({ stopped: [], survivors: [{ pid: 401, startTime: '2', comm: 'p401' }] })
    expect(calls).toEqual([
      [401, 'SIGTERM'],
      [401, 'SIGSTOP'],
      [401, 'SIGKILL'],
    ])
    entries.delete(401)
    expect(await terminateTree(options)).toEqual({ stopped: [], survivors: [] })
  })
})
