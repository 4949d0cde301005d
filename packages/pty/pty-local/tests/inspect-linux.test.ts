import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pty from 'node-pty'
import { afterEach, describe, expect, it } from 'vitest'
import {
  contextSwitches,
  groupMembers,
  identifyTerminal,
  parseWakeCounters,
  probeTerminalReader,
  readerRanBetween,
  readForegroundGroup,
  SchedulerClocks,
  type ReadProbe,
  type TerminalIdentity,
  WALK_MAX_THREADS,
} from '../src/inspect-linux.ts'
import { isNewReadEvidence } from '../src/inspector.ts'
import { procFiles } from '../src/proc-files.ts'
import { OutputParser } from '../src/output.ts'
import { parseSyscallFile, READ_SYSCALLS } from '../src/syscalls.ts'
import { DEV_TTY, epollInfo, FakeProc, type FakeProcess, fdSet, HOST_DEVPTS, makedev, pollfds, PTS3, PTS4, syscall } from './fixtures/fake-proc.ts'

const TERMINAL: TerminalIdentity = { pid: 100, dev: HOST_DEVPTS, rdev: PTS3, path: '/dev/pts/3' }
const TTY = { rdev: PTS3, path: '/dev/pts/3' }
const STDIO = { 0: TTY, 1: TTY, 2: TTY }

/** bash (pid 100) holding the terminal, with `tpgid` as the foreground group, plus the group's processes. */
function tree(tpgid: number, members: FakeProcess[]): FakeProc {
  const shell: FakeProcess = {
    pid: 100,
    comm: 'bash',
    pgrp: 100,
    session: 100,
    tpgid,
    tasks: [{ tid: 100, state: 'S', syscall: syscall(61, 0xffffffffn), switches: [40, 2] }],
    fds: STDIO,
  }
  const stranger: FakeProcess = { pid: 50, comm: 'sshd', pgrp: 50, ttyNr: 0, tasks: [{ tid: 50, state: 'R', syscall: 'running', switches: [1, 1] }] }
  return new FakeProc([stranger, ...(tpgid === 100 ? [] : [shell]), ...members.map((m) => ({ session: 100, tpgid, ...m })), ...(tpgid === 100 ? [shell] : [])])
}

const probe = (proc: FakeProc, arch = 'x64') => probeTerminalReader({ proc, terminal: TERMINAL, arch })

/** Python at `>>>`: readline waits in pselect6(1, {0}, …). */
function python(overrides: Partial<FakeProcess> = {}, nr = 270): FakeProcess {
  return {
    pid: 200,
    comm: 'python3.11',
    pgrp: 200,
    tasks: [{ tid: 200, state: 'S', syscall: syscall(nr, 1n, 0x7000n), switches: [64, 3] }],
    fds: STDIO,
    memory: [{ address: 0x7000n, bytes: fdSet([0]) }],
    ...overrides,
  }
}

describe('the /proc probe on fixtures', () => {
  it('finds Python blocked in pselect6 on fd 0', async () => {
    const result = await probe(tree(200, [python()]))
    expect(result.verdict).toBe('reading')
    expect(result.reader).toEqual({ name: 'python3.11', pid: 200, tid: 200, syscall: 'pselect6', fd: 0, path: '/dev/pts/3' })
    expect(result.detail).toBe('python3.11[200] pselect6 fd0 /dev/pts/3')
    expect(result.tpgid).toBe(200)
  })

  it('finds less reading the terminal on fd 3, which it opened as /dev/tty', async () => {
    const less: FakeProcess = {
      pid: 300,
      comm: 'less',
      pgrp: 300,
      tasks: [{ tid: 300, state: 'S', syscall: syscall(0, 3n, 0x7ffe0000n, 1n), switches: [9, 0] }],
      fds: { ...STDIO, 0: { rdev: 0, path: 'pipe:[1234]' }, 3: { rdev: PTS3, path: '/dev/pts/3' } },
    }
    expect((await probe(tree(300, [less]))).reader).toMatchObject({ name: 'less', syscall: 'read', fd: 3 })
  })

  it('accepts a descriptor on /dev/tty itself when the process’s controlling terminal is this one', async () => {
    const less = (ttyNr: number): FakeProcess => ({
      pid: 300,
      comm: 'less',
      pgrp: 300,
      ttyNr,
      tasks: [{ tid: 300, state: 'S', syscall: syscall(0, 3n), switches: [9, 0] }],
      fds: { 3: { rdev: DEV_TTY, path: '/dev/tty' } },
    })
    expect((await probe(tree(300, [less(PTS3)]))).verdict).toBe('reading')
    expect((await probe(tree(300, [less(PTS4)]))).verdict).toBe('not_reading')
  })

  it('finds the Node REPL main thread in epoll_pwait on a re-opened tty at fd 20 while workers sit in futex', async () => {
    const node: FakeProcess = {
      pid: 400,
      comm: 'node',
      pgrp: 400,
      tasks: [
        { tid: 400, state: 'S', syscall: syscall(281, 5n, 0x7ffe0000n, 1024n, 0xffffffffn), switches: [120, 7] },
        ...[401, 402, 403, 404].map((tid) => ({ tid, state: 'S', syscall: syscall(202, 0x55550000n, 0x80n), switches: [2, 0] as [number, number] })),
      ],
      fds: { ...STDIO, 5: { rdev: 0, path: 'anon_inode:[eventpoll]' }, 14: { rdev: 0, path: 'pipe:[88]' }, 20: { rdev: PTS3, path: '/dev/pts/3' } },
      fdinfo: { 5: epollInfo([[14, 0x19], [20, 0x19]]) },
    }
    const result = await probe(tree(400, [node]))
    expect(result.verdict).toBe('reading')
    expect(result.reader).toEqual({ name: 'node', pid: 400, tid: 400, syscall: 'epoll_pwait', fd: 20, path: '/dev/pts/3' })
    expect(result.tasks.filter((t) => t.syscall === '#202')).toHaveLength(4)
    expect(result.tasks[0]?.fds).toEqual([14, 20])
  })

  it('does not count a terminal in an epoll set that waits only for output', async () => {
    const node: FakeProcess = {
      pid: 400,
      comm: 'node',
      pgrp: 400,
      tasks: [{ tid: 400, state: 'S', syscall: syscall(232, 5n), switches: [1, 0] }],
      fds: { 20: TTY },
      fdinfo: { 5: epollInfo([[20, 0x4]]) },
    }
    expect((await probe(tree(400, [node]))).verdict).toBe('not_reading')
  })

  it('finds the reader in a pipeline whose other member is blocked writing a pipe', async () => {
    const seq: FakeProcess = { pid: 500, comm: 'seq', pgrp: 500, tasks: [{ tid: 500, state: 'S', syscall: syscall(1, 1n), switches: [3, 0] }], fds: { 1: { rdev: 0, path: 'pipe:[9]' } } }
    const less: FakeProcess = { pid: 501, comm: 'less', pgrp: 500, tasks: [{ tid: 501, state: 'S', syscall: syscall(0, 3n), switches: [5, 0] }], fds: { 3: TTY } }
    const result = await probe(tree(500, [seq, less]))
    expect(result.verdict).toBe('reading')
    expect(result.reader).toMatchObject({ name: 'less', pid: 501 })
    expect(result.tasks.map((t) => t.pid)).toEqual([500, 501])
  })

  it('says not reading while another member of the pipeline is running', async () => {
    const cat: FakeProcess = { pid: 500, comm: 'cat', pgrp: 500, tasks: [{ tid: 500, state: 'R', syscall: 'running', switches: [3, 9] }] }
    const less: FakeProcess = { pid: 501, comm: 'less', pgrp: 500, tasks: [{ tid: 501, state: 'S', syscall: syscall(0, 3n), switches: [5, 0] }], fds: { 3: TTY } }
    const result = await probe(tree(500, [cat, less]))
    expect(result.verdict).toBe('not_reading')
    expect(result.detail).toBe('foreground group 500 (cat): cat[500] task 500 is running')
  })

  it('finds a read done by a thread that is not the leader', async () => {
    const app: FakeProcess = {
      pid: 600,
      comm: 'app',
      pgrp: 600,
      tasks: [
        { tid: 600, state: 'S', syscall: syscall(202, 0x1000n), switches: [4, 0] },
        { tid: 607, state: 'S', syscall: syscall(0, 0n), switches: [8, 1] },
      ],
      fds: STDIO,
    }
    expect((await probe(tree(600, [app]))).reader).toMatchObject({ pid: 600, tid: 607, syscall: 'read', fd: 0 })
  })

  it('misses a process reading a different pty', async () => {
    const other: FakeProcess = { pid: 700, comm: 'cat', pgrp: 700, tasks: [{ tid: 700, state: 'S', syscall: syscall(0, 0n), switches: [1, 0] }], fds: { 0: { rdev: PTS4, path: '/dev/pts/4' } } }
    const result = await probe(tree(700, [other]))
    expect(result.verdict).toBe('not_reading')
    expect(result.tasks[0]).toMatchObject({ syscall: 'read', fds: [0] })
    expect(result.tasks[0]?.terminalFd).toBeUndefined()
  })

  it('misses a process reading a pty with the terminal’s device number in another devpts instance (a sandbox’s own /dev/pts)', async () => {
    const fake: FakeProcess = { pid: 710, comm: 'python3', pgrp: 710, tasks: [{ tid: 710, state: 'S', syscall: syscall(0, 4n), switches: [1, 0] }], fds: { ...STDIO, 4: { dev: makedev(0, 52), rdev: PTS3, path: '/dev/pts/3' } } }
    const result = await probe(tree(710, [fake]))
    expect(result.verdict).toBe('not_reading')
    expect(result.tasks[0]).toMatchObject({ syscall: 'read', fds: [4] })
    expect(result.tasks[0]?.terminalFd).toBeUndefined()
  })

  it('says not reading for a task in the running state', async () => {
    const busy = python({ tasks: [{ tid: 200, state: 'R', syscall: 'running', switches: [1, 50] }] })
    expect((await probe(tree(200, [busy]))).verdict).toBe('not_reading')
  })

  it('lets a running thread veto a reading one in the same process', async () => {
    const mixed = python({
      tasks: [
        { tid: 200, state: 'S', syscall: syscall(270, 1n, 0x7000n), switches: [64, 3] },
        { tid: 201, state: 'R', syscall: 'running', switches: [1, 50] },
      ],
    })
    expect((await probe(tree(200, [mixed]))).verdict).toBe('not_reading')
  })

  it('does not count a task that is not in interruptible sleep, even inside read', async () => {
    for (const state of ['D', 'T', 't']) {
      const stopped = python({ tasks: [{ tid: 200, state, syscall: syscall(0, 0n), switches: [1, 0] }] })
      expect((await probe(tree(200, [stopped]))).verdict, state).toBe('not_reading')
    }
  })

  it('misses an unknown syscall number and a task blocked outside a syscall', async () => {
    for (const text of [syscall(35, 0x7000n), syscall(999, 0n), syscall(0x40000000, 0n), '-1 0x7ffc0000 0x7f0000001234\n']) {
      const result = await probe(tree(200, [python({ tasks: [{ tid: 200, state: 'S', syscall: text, switches: [1, 0] }] })]))
      expect(result.verdict, text).toBe('not_reading')
    }
    const result = await probe(tree(200, [python({ tasks: [{ tid: 200, state: 'S', syscall: syscall(35), switches: [1, 0] }] })]))
    expect(result.tasks[0]?.syscall).toBe('#35')
  })

  it('misses when the select set or poll array cannot be read from memory', async () => {
    expect((await probe(tree(200, [python({ memory: [] })]))).verdict).toBe('not_reading')
    const poller = python({ tasks: [{ tid: 200, state: 'S', syscall: syscall(7, 0x9000n, 2n), switches: [1, 0] }], memory: [] })
    expect((await probe(tree(200, [poller]))).verdict).toBe('not_reading')
  })

  it('misses when the epoll fdinfo cannot be read', async () => {
    const node: FakeProcess = { pid: 400, comm: 'node', pgrp: 400, tasks: [{ tid: 400, state: 'S', syscall: syscall(281, 5n), switches: [1, 0] }], fds: { 20: TTY } }
    expect((await probe(tree(400, [node]))).verdict).toBe('not_reading')
  })

  it('decodes poll and ppoll arrays, taking only descriptors waited on with POLLIN', async () => {
    const poller = (nr: number, entries: Array<[number, number]>) =>
      python({
        tasks: [{ tid: 200, state: 'S', syscall: syscall(nr, 0x9000n, BigInt(entries.length)), switches: [1, 0] }],
        fds: { 0: TTY, 7: { rdev: 0, path: 'socket:[5]' } },
        memory: [{ address: 0x9000n, bytes: pollfds(entries) }],
      })
    expect((await probe(tree(200, [poller(7, [[7, 0x4], [0, 0x1]])]))).reader).toMatchObject({ syscall: 'poll', fd: 0 })
    expect((await probe(tree(200, [poller(271, [[7, 0x1], [0, 0x1]])]))).reader).toMatchObject({ syscall: 'ppoll', fd: 0 })
    expect((await probe(tree(200, [poller(271, [[0, 0x4], [-1, 0x1]])]))).verdict).toBe('not_reading')
  })

  it('a select over descriptor 0 alone reads the terminal only when 0 is in its read set', async () => {
    // fd 0 is looked up while the set is read from memory; the set still decides.
    expect((await probe(tree(200, [python({ memory: [{ address: 0x7000n, bytes: fdSet([]) }] })]))).verdict).toBe('not_reading')
    expect((await probe(tree(200, [python({ fds: { 0: { rdev: 0, path: '/dev/null' } } })]))).verdict).toBe('not_reading')
    expect((await probe(tree(200, [python()]))).reader).toMatchObject({ syscall: 'pselect6', fd: 0 })
  })

  it('decodes a select read set beyond the first long', async () => {
    const selector = python({
      tasks: [{ tid: 200, state: 'S', syscall: syscall(23, 70n, 0x7000n), switches: [1, 0] }],
      fds: { 65: TTY },
      memory: [{ address: 0x7000n, bytes: fdSet([3, 65], 2) }],
    })
    const result = await probe(tree(200, [selector]))
    expect(result.reader).toMatchObject({ syscall: 'select', fd: 65 })
    expect(result.tasks[0]?.fds).toEqual([3, 65])
  })

  it('treats a task that vanished mid-probe as a miss, not a failure', async () => {
    const vanishing = python({ tasks: [{ tid: 200, state: 'S', syscall: '', gone: true }] })
    const result = await probe(tree(200, [vanishing]))
    expect(result.verdict).toBe('not_reading')
    expect(result.tasks[0]).toMatchObject({ tid: 200, state: '?', syscall: 'unreadable', switches: undefined })
    const withReader = python({
      tasks: [
        { tid: 200, state: 'S', syscall: syscall(270, 1n, 0x7000n), switches: [1, 0] },
        { tid: 201, state: 'S', syscall: '', gone: true },
      ],
    })
    expect((await probe(tree(200, [withReader]))).verdict).toBe('reading')
    const goneProcess: FakeProcess = { pid: 201, comm: 'gone', pgrp: 200, tasks: [], gone: true }
    expect((await probe(tree(200, [python(), goneProcess]))).verdict).toBe('reading')
  })

  it('reads arm64 numbers with the arm64 table', async () => {
    expect((await probe(tree(200, [python({}, 72)]), 'arm64')).reader).toMatchObject({ syscall: 'pselect6', fd: 0 })
    const result = await probe(tree(200, [python({}, 270)]), 'arm64')
    expect(result.verdict).toBe('not_reading')
    expect(result.tasks[0]?.syscall).toBe('#270')
  })

  it('is off on an architecture without a table', async () => {
    const result = await probe(tree(200, [python()]), 'ia32')
    expect(result).toEqual({ verdict: 'unknown', tpgid: undefined, tasks: [], reader: undefined, detail: 'no read-syscall table for architecture ia32' })
  })

  it('says unknown, examining no task, for a group with more tasks than one probe examines', async () => {
    const workers = Array.from({ length: 8 }, (_, i) => ({ tid: 201 + i, state: 'S', syscall: syscall(202, 0n), switches: [1, 1] as [number, number] }))
    const proc = tree(200, [python({ tasks: [...python().tasks, ...workers] })])
    const bounded = await probeTerminalReader({ proc, terminal: TERMINAL, arch: 'x64', maxTasks: 8 })
    expect(bounded).toMatchObject({ verdict: 'unknown', tpgid: 200, tasks: [] })
    expect(bounded.detail).toBe('foreground process group 200 has 9 tasks, more than the 8 one probe examines')
    expect((await probeTerminalReader({ proc, terminal: TERMINAL, arch: 'x64', maxTasks: 9 })).verdict).toBe('reading')
  })

  it('parses a process name containing spaces and parentheses', async () => {
    const result = await probe(tree(200, [python({ comm: 'my (odd) name) x' })]))
    expect(result.reader?.name).toBe('my (odd) name) x')
    expect(result.detail).toBe('my (odd) name) x[200] pselect6 fd0 /dev/pts/3')
  })

  it('says unknown when the terminal process is gone, there is no foreground group, or the group is empty', async () => {
    expect((await probeTerminalReader({ proc: new FakeProc([]), terminal: TERMINAL, arch: 'x64' })).detail).toBe('terminal process 100 is gone')
    expect((await probe(tree(-1, []))).verdict).toBe('unknown')
    const empty = await probe(tree(900, []))
    expect(empty).toMatchObject({ verdict: 'unknown', tpgid: 900, detail: 'foreground process group 900 has no processes' })
  })

  it('sees bash itself reading at its prompt when the shell is the foreground group', async () => {
    const proc = new FakeProc([{ pid: 100, comm: 'bash', pgrp: 100, tpgid: 100, tasks: [{ tid: 100, state: 'S', syscall: syscall(0, 0n, 0x7ffe0000n, 1n), switches: [40, 2] }], fds: STDIO }])
    expect((await probe(proc)).reader).toMatchObject({ name: 'bash', syscall: 'read', fd: 0 })
  })
})

// Recorded from full ipython idle at its prompt (Linux 6.18, x86_64).
const SCHED = 'ipython3 (30644, #threads: 3)\n-------------------------------------------------------------------\nse.exec_start                                :      10249227.027533\nse.vruntime                                  :          5015.296237\nse.sum_exec_runtime                          :           943.462249\nse.nr_migrations                             :                    5\nnr_switches                                  :                  258\nnr_voluntary_switches                        :                   84\n'
const IO = 'rchar: 12807282\nwchar: 52011\nsyscr: 1498\nsyscw: 310\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n'

describe('what a window of probes compares', () => {
  /** prompt_toolkit: epoll_wait(5, …, 2, 500) on the terminal and asyncio's socketpair, beside a futex thread. */
  const ipython = (): FakeProcess => ({
    pid: 300,
    comm: 'ipython3',
    pgrp: 300,
    tasks: [
      { tid: 300, state: 'S', syscall: syscall(232, 5n, 0x7000n, 2n, 500n), switches: [84, 174], files: { sched: SCHED, io: IO } },
      { tid: 301, state: 'S', syscall: syscall(202, 0x5000n, 0x189n) },
    ],
    fds: { ...STDIO, 5: { rdev: 0, path: 'anon_inode:[eventpoll]' }, 6: { rdev: 0, path: 'socket:[984895]' }, 7: { rdev: 0, path: 'socket:[984896]' } },
    fdinfo: { 5: epollInfo([[6, 0x19], [0, 0x19]]) },
  })

  it('reads the reader’s wake counters and every task’s switch count when the wait holds other sources', async () => {
    const proc = tree(300, [ipython()])
    // The futex thread's status is readable only from here on: the probe reads it for the window.
    proc.addFile('/proc/300/task/301/status', 'Name:\tipython3\nvoluntary_ctxt_switches:\t16\nnonvoluntary_ctxt_switches:\t0\n')
    const result = await probe(proc)
    expect(result.verdict).toBe('reading')
    expect(result.sources).toEqual(['socket fd 6', 'timer in 500 ms'])
    const [reader, futex] = result.tasks
    expect(reader).toMatchObject({ tid: 300, timeoutMs: 500, switches: 258 })
    expect(reader?.wake).toEqual({ voluntary: 84, execStartMs: 10249227.027533, cpu: 0, execStartMonotonicMs: undefined, rchar: 12807282, syscr: 1498 })
    expect(futex).toMatchObject({ tid: 301, switches: 16 })
    expect(futex?.wake).toBeUndefined()
  })

  it('reads none of them for a wait that is proof on its own (the Node REPL and its self-pipe)', async () => {
    const node: FakeProcess = {
      pid: 400,
      comm: 'node',
      pgrp: 400,
      tasks: [
        { tid: 400, state: 'S', syscall: syscall(281, 5n, 0x7ffe0000n, 1024n, 0xffffffffn), switches: [120, 7], files: { sched: SCHED, io: IO } },
        { tid: 401, state: 'S', syscall: syscall(202, 0x55550000n, 0x80n), switches: [2, 0] },
      ],
      fds: { ...STDIO, 5: { rdev: 0, path: 'anon_inode:[eventpoll]' }, 14: { rdev: 0, path: 'pipe:[88]' }, 15: { rdev: 0, path: 'pipe:[88]' }, 20: TTY },
      fdinfo: { 5: epollInfo([[14, 0x19], [20, 0x19]]) },
    }
    const proc = tree(400, [node])
    const result = await probe(proc)
    expect(result).toMatchObject({ verdict: 'reading', sources: [] })
    expect(result.tasks[0]?.wake).toBeUndefined()
    expect(proc.reads.filter((path) => path.endsWith('/sched') || path.endsWith('/io'))).toEqual([])
  })

  it('parses the counters of the status, sched and io files, each missing one undefined', () => {
    expect(parseWakeCounters('voluntary_ctxt_switches:\t84\nnonvoluntary_ctxt_switches:\t174\n', SCHED, IO)).toEqual({ voluntary: 84, execStartMs: 10249227.027533, cpu: undefined, execStartMonotonicMs: undefined, rchar: 12807282, syscr: 1498 })
    expect(parseWakeCounters(undefined, undefined, undefined)).toEqual({ voluntary: undefined, execStartMs: undefined, cpu: undefined, execStartMonotonicMs: undefined, rchar: undefined, syscr: undefined })
  })

  it('puts a CPU’s task clock on the monotonic clock through the offset measured on the probing thread, while it is recent', async () => {
    let now = 5000
    const files = new Map<string, string>([
      ['/proc/thread-self/stat', `77 (node) R 1 77 77 0 -1 ${Array.from({ length: 30 }, () => '0').join(' ')} 1 0 0\n`],
      ['/proc/thread-self/sched', 'node (77, #threads: 11)\nse.exec_start                                :      10249000.500000\n'],
    ])
    const proc = { readFile: async (path: string) => files.get(path) ?? Promise.reject(new Error(`ENOENT ${path}`)), readdir: async () => [], readlink: async () => '' }
    const clocks = new SchedulerClocks(proc, () => now, 2000)
    expect(clocks.toMonotonic(1, 10249227.027533)).toBeUndefined()
    await clocks.measure()
    // CPU 1 (field 39 of the stat line) reads 10249000.5 at monotonic 5000.
    expect(clocks.toMonotonic(1, 10249227.027533)).toBeCloseTo(5226.527533, 6)
    expect(clocks.toMonotonic(0, 10249227.027533)).toBeUndefined()
    now += 2001
    expect(clocks.toMonotonic(1, 10249227.027533)).toBeUndefined()
  })
})

describe('comparing probes', () => {
  const at = async (switches: [number, number], options: { tpgid?: number; state?: string; tid?: number } = {}): Promise<ReadProbe> => {
    const tid = options.tid ?? 200
    const p = python({ pgrp: options.tpgid ?? 200, pid: 200, tasks: [{ tid, state: options.state ?? 'S', syscall: syscall(270, 1n, 0x7000n), switches }] })
    return probe(tree(options.tpgid ?? 200, [p]))
  }

  it('proves the reader ran when its context-switch count moved', async () => {
    expect(readerRanBetween(await at([64, 3]), await at([65, 3]))).toBe(true)
    expect(readerRanBetween(await at([64, 3]), await at([64, 4]))).toBe(true)
  })

  it('does not count the same wait with the same count as new evidence', async () => {
    expect(readerRanBetween(await at([64, 3]), await at([64, 3]))).toBe(false)
  })

  it('counts a change of foreground group, a new task, and a task that was not reading before', async () => {
    expect(readerRanBetween(await at([1, 0], { tpgid: 300 }), await at([1, 0]))).toBe(true)
    expect(readerRanBetween(await at([1, 0], { tid: 201 }), await at([1, 0]))).toBe(true)
    expect(readerRanBetween(await at([1, 0], { state: 'R' }), await at([1, 0]))).toBe(true)
  })

  it('on a relayed terminal, counts the same task only once it read the bytes written since the baseline', async () => {
    const relayed = async (options: { switches: [number, number]; rchar?: number; state?: string; tpgid?: number }): Promise<ReadProbe> => {
      const files = options.rchar === undefined ? {} : { io: `rchar: ${options.rchar}\nwchar: 0\nsyscr: 9\n` }
      const task = { tid: 200, state: options.state ?? 'S', syscall: syscall(270, 1n, 0x7000n), switches: options.switches, files }
      return probeTerminalReader({ proc: tree(options.tpgid ?? 200, [python({ pgrp: options.tpgid ?? 200, tasks: [task] })]), terminal: { ...TERMINAL, relayed: true }, arch: 'x64' })
    }
    const before = await relayed({ switches: [64, 3], rchar: 500 })
    expect(before.tasks.find((task) => task.tid === 200)?.readBytes).toBe(500)
    const baseline = { kind: 'probe' as const, probe: before }
    // It ran (an earlier step's bytes, a signal) but read 3 of the 4 bytes written: still on their way.
    expect(isNewReadEvidence(baseline, await relayed({ switches: [66, 3], rchar: 503 }), 4)).toBe(false)
    expect(isNewReadEvidence(baseline, await relayed({ switches: [66, 3], rchar: 503 }))).toBe(true)
    expect(isNewReadEvidence(baseline, await relayed({ switches: [67, 3], rchar: 504 }), 4)).toBe(true)
    // Busy at the baseline: its count then is the measure too.
    const busy = { kind: 'probe' as const, probe: await relayed({ switches: [64, 3], rchar: 500, state: 'R' }) }
    expect(isNewReadEvidence(busy, await relayed({ switches: [64, 3], rchar: 500 }), 4)).toBe(false)
    expect(isNewReadEvidence(busy, await relayed({ switches: [64, 3], rchar: 504 }), 4)).toBe(true)
    // Counts unreadable: no proof. Another group in front took the input already.
    expect(isNewReadEvidence(baseline, await relayed({ switches: [67, 3] }), 4)).toBe(false)
    expect(isNewReadEvidence({ kind: 'probe', probe: await relayed({ switches: [1, 0], rchar: 9, tpgid: 300 }) }, await relayed({ switches: [67, 3], rchar: 500 }), 4)).toBe(true)
    // The shell's baseline carries its count alike.
    const shell = { kind: 'shell' as const, pgid: 200, switches: 67, readBytes: 500 }
    expect(isNewReadEvidence(shell, await relayed({ switches: [68, 3], rchar: 503 }), 4)).toBe(false)
    expect(isNewReadEvidence(shell, await relayed({ switches: [68, 3], rchar: 504 }), 4)).toBe(true)
  })

  it('proves nothing without a readable baseline, a readable count, or a reader now', async () => {
    const unknown: ReadProbe = { verdict: 'unknown', tpgid: undefined, tasks: [], reader: undefined, detail: 'x' }
    expect(readerRanBetween(unknown, await at([1, 0]))).toBe(false)
    const blind = await probe(tree(200, [python({ tasks: [{ tid: 200, state: 'S', syscall: syscall(270, 1n, 0x7000n) }] })]))
    expect(readerRanBetween(blind, blind)).toBe(false)
    expect(readerRanBetween(await at([1, 0]), await at([2, 0], { state: 'R' }))).toBe(false)
  })
})

describe('terminal identity and foreground group on fixtures', () => {
  it('identifies the terminal by fd 0 of the holder and refuses a non-device', async () => {
    const proc = tree(100, [])
    expect(await identifyTerminal({ proc, pid: 100 })).toEqual(TERMINAL)
    expect(await identifyTerminal({ proc, pid: 999 })).toBeUndefined()
    const piped = new FakeProc([{ pid: 100, comm: 'bash', pgrp: 100, tasks: [], fds: { 0: { rdev: 0, path: 'pipe:[1]' } } }])
    expect(await identifyTerminal({ proc: piped, pid: 100 })).toBeUndefined()
  })

  it('reports the foreground group, its leader and whether the shell is in front', async () => {
    const proc = tree(200, [python()])
    expect(await readForegroundGroup({ proc, pid: 100 })).toEqual({ tpgid: 200, leader: 'python3.11', shellIsForeground: false })
    expect(await readForegroundGroup({ proc: tree(100, []), pid: 100 })).toEqual({ tpgid: 100, leader: 'bash', shellIsForeground: true })
    expect(await readForegroundGroup({ proc: tree(777, []), pid: 100 })).toEqual({ tpgid: 777, leader: undefined, shellIsForeground: false })
    expect(await readForegroundGroup({ proc: tree(-1, []), pid: 100 })).toBeUndefined()
  })
})

describe('/proc text formats', () => {
  it('parses the three forms of the syscall file', () => {
    expect(parseSyscallFile('running\n')).toEqual({ kind: 'running' })
    expect(parseSyscallFile('-1 0x7ffc 0x7f00\n')).toEqual({ kind: 'blocked' })
    expect(parseSyscallFile('270 0x1 0x7ffd7d3503d0 0x0 0x0 0x0 0x0 0x7ffd7d350340 0x7f49e9d1c954\n')).toEqual({
      kind: 'syscall',
      nr: 270,
      args: [1n, 0x7ffd7d3503d0n, 0n, 0n, 0n, 0n],
    })
    for (const bad of ['', 'sleeping', '270 0x1', '270 1 2 3 4 5 6 7 8', '-1 0x1', '-2 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8']) {
      expect(parseSyscallFile(bad), bad).toBeUndefined()
    }
  })

  it('sums voluntary and non-voluntary context switches from a status file', () => {
    expect(contextSwitches('Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n')).toBe(15)
    expect(contextSwitches('Name:\tx\n')).toBeUndefined()
  })

  const header = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8') : undefined)
  const numbersIn = (text: string) => new Map([...text.matchAll(/^#define __NR_(\w+)\s+(\d+)\s*$/gm)].map((m) => [m[1] ?? '', Number(m[2])]))

  // The UAPI headers come from the linux-libc-dev package; without them there is nothing to compare against.
  const x64Header = header('/usr/include/x86_64-linux-gnu/asm/unistd_64.h')
  it.skipIf(x64Header === undefined)('matches every x86_64 number to the installed UAPI header', () => {
    const numbers = numbersIn(x64Header ?? '')
    for (const [nr, name] of READ_SYSCALLS.x64) expect(numbers.get(name), name).toBe(nr)
  })

  const genericHeader = header('/usr/include/asm-generic/unistd.h')
  it.skipIf(genericHeader === undefined)('matches every arm64 number to the generic UAPI table', () => {
    const numbers = numbersIn(genericHeader ?? '')
    for (const [nr, name] of READ_SYSCALLS.arm64) expect(numbers.get(name), name).toBe(nr)
    expect(numbers.has('poll') || numbers.has('select') || numbers.has('epoll_wait')).toBe(false)
  })
})

// ─── real processes ────────────────────────────────────────────────────────────────

interface Shell {
  pid: number
  terminal: TerminalIdentity
  write(text: string): void
  /** Resolves when `token` appears in the normalised output after the last `write`. */
  waitFor(token: string): Promise<void>
  probe(): Promise<ReadProbe>
}

const started: pty.IPty[] = []

afterEach(async () => {
  for (const child of started.splice(0)) {
    const exited = new Promise<void>((resolve) => child.onExit(() => resolve()))
    const group = await readForegroundGroup({ proc: procFiles, pid: child.pid })
    if (group !== undefined && group.tpgid !== child.pid) {
      try {
        process.kill(-group.tpgid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    child.kill('SIGKILL')
    await exited
  }
})

async function startShell(): Promise<Shell> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', TERM: 'xterm', PS1: 'READY> ', LANG: 'C.UTF-8' }
  if (process.env.PYENV_ROOT !== undefined) env.PYENV_ROOT = process.env.PYENV_ROOT
  const child = pty.spawn('/bin/bash', ['--noprofile', '--norc', '-i'], { encoding: null, cols: 120, rows: 30, env })
  started.push(child)
  const parser = new OutputParser()
  let seen = ''
  let waiters: Array<{ token: string; resolve: () => void }> = []
  const check = () => {
    const text = `${seen}\n${parser.partial}`
    waiters = waiters.filter((w) => (text.includes(w.token) ? (w.resolve(), false) : true))
  }
  parser.onLine((line) => {
    seen += `${line}\n`
  })
  child.onData((data) => {
    parser.feed(data as unknown as Buffer)
    check()
  })
  const shell: Shell = {
    pid: child.pid,
    terminal: { pid: child.pid, dev: 0, rdev: 0, path: '' },
    write(text) {
      seen = ''
      child.write(text)
    },
    waitFor(token) {
      return new Promise((resolve) => {
        waiters.push({ token, resolve })
        check()
      })
    },
    probe: () => probeTerminalReader({ proc: procFiles, terminal: shell.terminal }),
  }
  await shell.waitFor('READY> ')
  const terminal = await identifyTerminal({ proc: procFiles, pid: child.pid })
  if (terminal === undefined) throw new Error(`cannot identify the terminal of bash ${child.pid}`)
  shell.terminal = terminal
  return shell
}

/** Probes until `accept` holds (the kernel state settles after the program's output), returning that probe. */
async function probeUntil(shell: Shell, accept: (probe: ReadProbe) => boolean): Promise<ReadProbe> {
  let last: ReadProbe | undefined
  await expect
    .poll(async () => {
      last = await shell.probe()
      return accept(last)
    }, { timeout: 20_000, interval: 50 })
    .toBe(true)
  if (last === undefined) throw new Error('no probe ran')
  return last
}

const onLinux = process.platform === 'linux' && existsSync('/proc/self/syscall')

// These need /proc/<pid>/syscall and /proc/<pid>/mem of the children, which Linux grants to their parent's user.
describe.skipIf(!onLinux)('the /proc probe on real programs', () => {
  it('says reading for bash at its own prompt', async () => {
    const shell = await startShell()
    const result = await probeUntil(shell, (p) => p.verdict === 'reading')
    expect(result.reader).toMatchObject({ name: 'bash', pid: shell.pid, fd: 0, path: shell.terminal.path })
  })

  it('says reading for python3 at >>>, and proves a later wait is new after input', async () => {
    const shell = await startShell()
    shell.write('python3 -q\r')
    await shell.waitFor('>>> ')
    const before = await probeUntil(shell, (p) => p.verdict === 'reading' && p.reader?.name.startsWith('python') === true)
    expect(before.reader).toMatchObject({ fd: 0 })
    expect(readerRanBetween(before, await shell.probe())).toBe(false)
    shell.write('6*7\r')
    await shell.waitFor('42')
    const after = await probeUntil(shell, (p) => p.verdict === 'reading' && readerRanBetween(before, p))
    expect(after.reader?.name).toMatch(/^python/)
  })

  it('says reading for the Node REPL, found through its epoll set rather than fd 0', async () => {
    const shell = await startShell()
    shell.write('node\r')
    await shell.waitFor('Welcome to Node.js')
    const result = await probeUntil(shell, (p) => p.verdict === 'reading' && p.reader?.name === 'node')
    expect(result.reader?.syscall).toMatch(/^epoll_/)
    expect(result.reader?.fd).not.toBe(0)
    expect(result.tasks.length).toBeGreaterThan(1)
  })

  it('says reading for less paging a file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-inspect-'))
    try {
      writeFileSync(join(dir, 'lines.txt'), Array.from({ length: 200 }, (_, i) => `row-${i + 1}`).join('\n'))
      const shell = await startShell()
      shell.write(`less ${join(dir, 'lines.txt')}\r`)
      await shell.waitFor('row-20')
      const result = await probeUntil(shell, (p) => p.verdict === 'reading' && p.reader?.name === 'less')
      expect(result.reader?.path).toBe(shell.terminal.path)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('says reading for cat waiting on the terminal', async () => {
    const shell = await startShell()
    shell.write('cat\r')
    const result = await probeUntil(shell, (p) => p.verdict === 'reading' && p.reader?.name === 'cat')
    expect(result.reader).toMatchObject({ syscall: 'read', fd: 0 })
  })

  it('says not reading for sleep in the foreground', async () => {
    const shell = await startShell()
    shell.write('sleep 5\r')
    const result = await probeUntil(shell, (p) => p.tpgid !== shell.pid && p.tasks.some((t) => t.name === 'sleep'))
    expect(result.verdict).toBe('not_reading')
    expect(result.reader).toBeUndefined()
  })

  it('says not reading for a busy loop in the foreground', async () => {
    const shell = await startShell()
    shell.write("sh -c 'while :; do :; done'\r")
    const result = await probeUntil(shell, (p) => p.tpgid !== shell.pid && p.tasks.some((t) => t.name === 'sh' && t.state === 'R'))
    expect(result.verdict).toBe('not_reading')
  })
})

describe('groupMembers', () => {
  const idle = syscall(61, 0xffffffffn)
  /** bash (100) → python3 (200, group 200, `threads` tasks) → its child 300 (group 200). */
  const walkTree = (threads: number): FakeProc =>
    new FakeProc([
      { pid: 100, comm: 'bash', pgrp: 100, tasks: [{ tid: 100, state: 'S', syscall: idle, files: { children: '200' } }] },
      {
        pid: 200,
        comm: 'python3',
        pgrp: 200,
        ppid: 100,
        session: 100,
        tasks: Array.from({ length: threads }, (_, i) => ({ tid: 200 + i * 1000, state: 'S', syscall: idle, files: { children: i === 0 ? '300' : '' } })),
      },
      { pid: 300, comm: 'sleep', pgrp: 200, ppid: 200, session: 100, tasks: [{ tid: 300, state: 'S', syscall: idle, files: { children: '' } }] },
      { pid: 400, comm: 'sshd', pgrp: 400, tasks: [{ tid: 400, state: 'S', syscall: idle, files: { children: '' } }] },
    ])
  const childrenReads = (proc: FakeProc): string[] => proc.reads.filter((path) => path.startsWith('/proc/200/task/') && path.endsWith('/children'))

  it("walks the shell's descendants through each thread's children file", async () => {
    const proc = walkTree(3)
    expect((await groupMembers(proc, 200, 100)).map((member) => member.pid).sort()).toEqual([200, 300])
    expect(childrenReads(proc)).toHaveLength(3)
  })

  it('lists every process instead when a descendant has more threads than a walk should read', async () => {
    const proc = walkTree(WALK_MAX_THREADS + 1)
    expect((await groupMembers(proc, 200, 100)).map((member) => member.pid).sort()).toEqual([200, 300])
    expect(childrenReads(proc)).toEqual([])
    expect(proc.reads).toContain('/proc')
  })
})
