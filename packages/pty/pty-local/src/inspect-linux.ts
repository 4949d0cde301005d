/**
 * The exact readiness tier on Linux: "is the foreground process group of this terminal blocked
 * reading this terminal?", answered from /proc (proc(5)); the rule is in the README
 * ("Readiness", /proc). Anything that cannot be read is a miss for that task, never a positive.
 */
import { parseProcStat, type ProcFs, type ProcStat } from '@conch/subprocess'
import { parseSyscallFile, type ReadSyscall, readSyscallTable, type SyscallState } from './syscalls.ts'
import { unreachable } from '@conch/session'

/** `ProcFs` plus the two reads the exact tier needs. Injectable so the logic runs on fixtures. */
export interface ProcReader extends ProcFs {
  /**
   * stat(2), following symlinks, so `/proc/<pid>/fd/<n>` describes the open file. Rejects when
   * the path cannot be stat'ed (ENOENT when the process or descriptor is gone).
   */
  stat(path: string): Promise<{ dev: number; rdev: number }>
  /**
   * Exactly `length` bytes of process `pid`'s memory at `address` (/proc/<pid>/mem, which needs
   * ptrace access to the process). Rejects when unreadable or short.
   */
  readMemory(pid: number, address: bigint, length: number): Promise<Buffer>
}

/** The PTY slave of one session. */
export interface TerminalIdentity {
  /** A process that has the terminal as its controlling terminal (the node-pty child). */
  pid: number
  /** Device number of the slave (`st_rdev`, in the encoding of stat(2) and proc(5) `tty_nr`). */
  rdev: number
  /**
   * The slave's devpts instance (`st_dev`). Both numbers must match: a sandbox with its own
   * devpts (bwrap(1) `--dev`) can open ptys there until one has the same `st_rdev`.
   */
  dev: number
  /** Display path, e.g. `/dev/pts/3`. */
  path: string
  /** Input arrives through a relay: a reader proves it took the input only by bytes read (`readBytes`). */
  relayed?: boolean
}

/** The terminal of `/proc/<pid>/fd/0` at startup; undefined (the exact tier off) when it is not a device. */
export async function identifyTerminal(options: { proc: ProcReader; pid: number }): Promise<TerminalIdentity | undefined> {
  const { proc, pid } = options
  try {
    const [{ dev, rdev }, path] = await Promise.all([proc.stat(`/proc/${pid}/fd/0`), proc.readlink(`/proc/${pid}/fd/0`)])
    return rdev > 0 ? { pid, dev, rdev, path } : undefined
  } catch {
    return undefined
  }
}

/** Device number of /dev/tty (major 5, minor 0; tty(4)), the synonym of a process's controlling terminal. */
const DEV_TTY_RDEV = (5 << 8) | 0

/** What one task of the foreground group was doing. */
export interface TaskObservation {
  pid: number
  tid: number
  /** The process's name (its stat `comm`). */
  name: string
  /** State letter from stat (`R` also when its syscall file says `running`); `?` unreadable; `-` not read. */
  state: string
  /** A read-class name, `#<nr>` for another syscall, `running`, `none` (blocked outside one), or `unreadable`. */
  syscall: string
  /** Voluntary plus non-voluntary context switches; undefined when unreadable. */
  switches: number | undefined
  /** Bytes the task has read in all (`rchar` of its io file); read on a relayed terminal only (`TerminalIdentity.relayed`). */
  readBytes?: number
  /** In a read-class syscall: its timeout argument in ms (the whole timeout, not what is left). */
  timeoutMs?: number
  /** Counters for wait-evidence.ts, read only when a read needs corroboration (sched needs CONFIG_SCHED_DEBUG). */
  wake?: WakeCounters
  /** Descriptors the task waits to read (decoded from its syscall). */
  fds: number[]
  /** The first of `fds` that is this terminal. */
  terminalFd?: number
  /** In a read-class syscall: what else can wake it without input (`wakeSources`). */
  sources?: string[]
}

/**
 * Per-task counters of proc(5):
 * - `voluntary`: `voluntary_ctxt_switches` of the task's status (how often it blocked);
 * - `execStartMs`: `se.exec_start` of its sched file, ms on the task clock of CPU `cpu` (field
 *   39 of stat): for a blocked task, when it entered its wait. CPU clocks differ (steal time);
 * - `execStartMonotonicMs`: the same on `performance.now()`, via `SchedulerClocks`;
 * - `rchar`, `syscr`: bytes read and read calls of its io file (recv(2) not counted).
 */
export interface WakeCounters {
  voluntary: number | undefined
  execStartMs: number | undefined
  cpu: number | undefined
  execStartMonotonicMs: number | undefined
  rchar: number | undefined
  syscr: number | undefined
}

/**
 * Each CPU's task clock (`se.exec_start`, ms) against this process's monotonic clock, measured
 * on the probing thread, whose own `se.exec_start` is its CPU's time now. An offset older than
 * `maxAgeMs` is not used (it drifts by steal and interrupt time).
 */
export class SchedulerClocks {
  private readonly offsets = new Map<number, { offsetMs: number; atMs: number }>()

  constructor(
    private readonly proc: ProcFs,
    private readonly now: () => number = () => performance.now(),
    private readonly maxAgeMs = 2000,
  ) {}

  /** Measures the offset of the CPU this thread runs on; a read that took over a millisecond is dropped. */
  async measure(): Promise<void> {
    try {
      const cpuBefore = processorOf(await this.proc.readFile('/proc/thread-self/stat'))
      const t0 = this.now()
      const sched = await this.proc.readFile('/proc/thread-self/sched')
      const t1 = this.now()
      const cpuAfter = processorOf(await this.proc.readFile('/proc/thread-self/stat'))
      const execStart = parseWakeCounters(undefined, sched, undefined).execStartMs
      if (cpuBefore === undefined || cpuBefore !== cpuAfter || execStart === undefined || t1 - t0 > 1) return
      this.offsets.set(cpuBefore, { offsetMs: execStart - (t0 + t1) / 2, atMs: t1 })
    } catch {
      // no /proc/thread-self/sched: tasks compare on one CPU only
    }
  }

  /** `execStartMs` of a task that last ran on `cpu`, on the monotonic clock; undefined without a recent offset. */
  toMonotonic(cpu: number | undefined, execStartMs: number | undefined): number | undefined {
    if (cpu === undefined || execStartMs === undefined) return undefined
    const entry = this.offsets.get(cpu)
    if (entry === undefined || this.now() - entry.atMs > this.maxAgeMs) return undefined
    return execStartMs - entry.offsetMs
  }
}

/** Field 39 (`processor`) of a stat file (proc(5)): the CPU the task last ran on. */
function processorOf(stat: string): number | undefined {
  const fields = stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/)
  const value = fields[39 - 3]
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined
}

/** The task found reading the terminal (the shape of `ReadinessEvidence.process`). */
export interface TerminalReader {
  name: string
  pid: number
  tid: number
  syscall: ReadSyscall
  fd: number
  path: string
}

export type ProbeVerdict = 'reading' | 'not_reading' | 'unknown'

/** The result of one probe. */
export interface ReadProbe {
  verdict: ProbeVerdict
  /** Foreground process group of the terminal; undefined when it could not be read. */
  tpgid: number | undefined
  /** Every task examined, ordered by pid then tid. */
  tasks: TaskObservation[]
  /** The reading task when `verdict` is `reading` (the first by pid, tid). */
  reader: TerminalReader | undefined
  /** One line for evidence and diagnostics, e.g. `python3[4121] pselect6 fd0 /dev/pts/3`. */
  detail: string
  /** When `reading`: what else could wake the group (`task 4122 read socket fd 9`); non-empty needs corroboration. */
  sources?: string[]
}

export interface ProbeOptions {
  proc: ProcReader
  terminal: TerminalIdentity
  /** Architecture whose syscall table applies (`process.arch` values). Default `process.arch`. */
  arch?: string
  /** Most descriptors decoded per task from a poll array or a select set in its memory. Default 4096. */
  maxPollFds?: number
  /** Most tasks one probe examines; a larger group is `unknown`. Default 4096. */
  maxTasks?: number
  /** The CPU clock offsets for `WakeCounters.execStartMonotonicMs`; without it that field stays undefined. */
  clocks?: SchedulerClocks
  /** Where the other end of each self-pipe was found last, so a later probe checks that descriptor first (see `SelfPipes`). */
  selfPipes?: SelfPipes
}

/**
 * Where each self-pipe's other descriptor was found, read first by a later probe (the same
 * answer, sooner). Past `maxEntries` it starts over.
 */
export class SelfPipes {
  private readonly other = new Map<string, number>()
  constructor(private readonly maxEntries = 256) {}
  get(pid: number, target: string): number | undefined {
    return this.other.get(`${pid} ${target}`)
  }
  set(pid: number, target: string, fd: number): void {
    if (this.other.size >= this.maxEntries) this.other.clear()
    this.other.set(`${pid} ${target}`, fd)
  }
}

/**
 * Examines the terminal's foreground process group once.
 *
 * Verdict `reading` when a task of the group is blocked (`S`) in a read-class syscall on this
 * terminal **and** no task runs (a running task may still print or consume input). `not_reading`
 * otherwise; `unknown` when the group could not be examined.
 */
export async function probeTerminalReader(options: ProbeOptions): Promise<ReadProbe> {
  const { proc, terminal } = options
  const arch = options.arch ?? process.arch
  const maxPollFds = options.maxPollFds ?? 4096
  const table = readSyscallTable(arch)
  const unknown = (tpgid: number | undefined, detail: string): ReadProbe => ({ verdict: 'unknown', tpgid, tasks: [], reader: undefined, detail })
  if (table === undefined) return unknown(undefined, `no read-syscall table for architecture ${arch}`)

  const holder = await readStat(proc, `/proc/${terminal.pid}/stat`)
  if (holder === undefined) return unknown(undefined, `terminal process ${terminal.pid} is gone`)
  const tpgid = holder.tpgid
  if (tpgid <= 0) return unknown(undefined, `${terminal.path} has no foreground process group`)

  const members = await groupMembers(proc, tpgid, terminal.pid)
  if (members.length === 0) return unknown(tpgid, `foreground process group ${tpgid} has no processes`)

  const context: TaskContext = { proc, terminal, table, maxPollFds, ...(options.selfPipes !== undefined && { selfPipes: options.selfPipes }) }
  const maxTasks = options.maxTasks ?? 4096
  const tidsOf = await Promise.all(members.map((member) => taskIds(proc, member.pid)))
  const taskCount = tidsOf.reduce((sum, tids) => sum + tids.length, 0)
  if (taskCount > maxTasks) {
    // A verdict needs every task (one running task vetoes), and a partial look proves nothing.
    return unknown(tpgid, `foreground process group ${tpgid} has ${taskCount} tasks, more than the ${maxTasks} one probe examines`)
  }
  const perMember = await Promise.all(members.map((member, index) => Promise.all(tidsOf[index]!.map((tid) => examineTask(context, member, tid)))))
  const tasks = perMember.flat().sort((a, b) => a.pid - b.pid || a.tid - b.tid)
  if (terminal.relayed === true) {
    await Promise.all(
      tasks.map(async (task) => {
        const readBytes = await taskReadBytes(proc, task.pid, task.tid)
        if (readBytes !== undefined) task.readBytes = readBytes
      }),
    )
  }
  const running = tasks.find((task) => task.state === 'R' || task.syscall === 'running')
  const readerTask = tasks.find((task) => task.terminalFd !== undefined)
  const leader = members.find((member) => member.pid === tpgid) ?? members[0]
  const group = `foreground group ${tpgid} (${leader?.comm ?? '?'})`

  if (readerTask?.terminalFd !== undefined && running === undefined) {
    const fd = readerTask.terminalFd
    const path = await proc.readlink(`/proc/${readerTask.pid}/fd/${fd}`).catch(() => terminal.path)
    const { name, pid, tid } = readerTask
    const reader: TerminalReader = { name, pid, tid, syscall: readerTask.syscall as ReadSyscall, fd, path }
    const sources = [...(readerTask.sources ?? [])]
    for (const task of tasks) {
      if (task === readerTask || task.terminalFd !== undefined) continue
      if (ownTimerThread(task, readerTask)) continue
      for (const source of task.sources ?? []) sources.push(`task ${task.tid} ${task.syscall} ${source}`)
    }
    // A read judged over a window needs every task's counters.
    if (sources.length > 0) {
      await options.clocks?.measure()
      await Promise.all(tasks.map((task) => addWakeCounters(proc, task, task === readerTask, options.clocks)))
    }
    return { verdict: 'reading', tpgid, tasks, reader, detail: `${reader.name}[${reader.pid}] ${reader.syscall} fd${fd} ${path}`, sources }
  }
  const why = running !== undefined
    ? `${running.name}[${running.pid}] task ${running.tid} is running`
    : `no task is reading ${terminal.path}`
  return { verdict: 'not_reading', tpgid, tasks, reader: undefined, detail: `${group}: ${why}` }
}

/**
 * Whether the main task of `pid` is blocked (`S`) in a read-class syscall on this terminal.
 * Undefined when it cannot be told (no syscall table, the process is gone).
 */
export async function mainTaskReadsTerminal(options: { proc: ProcReader; terminal: TerminalIdentity; pid: number; arch?: string }): Promise<boolean | undefined> {
  const { proc, terminal, pid } = options
  const table = readSyscallTable(options.arch ?? process.arch)
  if (table === undefined) return undefined
  const member = await readStat(proc, `/proc/${pid}/stat`)
  if (member === undefined) return undefined
  const task = await examineTask({ proc, terminal, table, maxPollFds: 4096 }, member, pid, true)
  if (task.syscall === 'unreadable') return undefined
  return task.state === 'S' && task.terminalFd !== undefined
}

/** Whether `pid` is stopped (`T`) with no child left: the wrapper after its shell exited. Undefined: gone. */
export async function stoppedWithoutChildren(proc: ProcFs, pid: number): Promise<boolean | undefined> {
  const stat = await readStat(proc, `/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  if (stat.state !== 'T' && stat.state !== 't') return false
  return proc.readFile(`/proc/${pid}/task/${pid}/children`).then((children) => children.trim() === '', () => undefined)
}

/**
 * Whether the task `after` found reading provably ran since `before` (its wait is new): the
 * group changed, the task is new or was not reading the terminal then, or its switches moved.
 */
export function readerRanBetween(before: ReadProbe, after: ReadProbe): boolean {
  const reader = after.reader
  if (after.verdict !== 'reading' || reader === undefined) return false
  if (before.tpgid === undefined) return false
  if (before.tpgid !== after.tpgid) return true
  const was = before.tasks.find((task) => task.pid === reader.pid && task.tid === reader.tid)
  if (was === undefined) return true
  if (was.terminalFd === undefined || was.state !== 'S' || was.syscall !== reader.syscall) return true
  const now = after.tasks.find((task) => task.pid === reader.pid && task.tid === reader.tid)
  return was.switches !== undefined && now?.switches !== undefined && now.switches !== was.switches
}

/** The terminal's foreground process group, as needed to signal it. */
export interface ForegroundGroup {
  /** Foreground process group id (signal it with `process.kill(-tpgid, signal)`). */
  tpgid: number
  /** Name of the group leader (`comm`), undefined when the leader has exited. */
  leader: string | undefined
  /** Whether the shell's own group is the foreground group (the shell is at its prompt or running a builtin). */
  shellIsForeground: boolean
}

/** The foreground group of the terminal held by `pid` (stat field 8); undefined when gone or none. */
export async function foregroundGroupOf(proc: ProcFs, pid: number): Promise<number | undefined> {
  const tpgid = (await readStat(proc, `/proc/${pid}/stat`))?.tpgid
  return tpgid !== undefined && tpgid > 0 ? tpgid : undefined
}

/** `foregroundGroupOf`, its leader, and whether `shellPid`'s group (default `pid`'s) is it. */
export async function readForegroundGroup(options: { proc: ProcFs; pid: number; shellPid?: number }): Promise<ForegroundGroup | undefined> {
  const { proc, pid } = options
  const holder = await readStat(proc, `/proc/${pid}/stat`)
  if (holder === undefined || holder.tpgid <= 0) return undefined
  const shell = options.shellPid === undefined || options.shellPid === pid ? holder : await readStat(proc, `/proc/${options.shellPid}/stat`)
  const leader = await readStat(proc, `/proc/${holder.tpgid}/stat`)
  return { tpgid: holder.tpgid, leader: leader?.comm, shellIsForeground: shell?.pgrp === holder.tpgid }
}

// ─── internals ────────────────────────────────────────────────────────────────────

interface TaskContext {
  proc: ProcReader
  terminal: TerminalIdentity
  table: ReadonlyMap<number, ReadSyscall>
  maxPollFds: number
  selfPipes?: SelfPipes
}

/** `TaskObservation.state` of a task whose state was not read (see there). */
const NOT_READ = '-'

const POLLIN = 0x1
const EPOLLIN = 0x1

function readStat(proc: ProcFs, path: string): Promise<ProcStat | undefined> {
  return proc.readFile(path).then(parseProcStat).catch(() => undefined)
}

/**
 * Every process of group `pgid`, found by walking `root`'s descendants (a handful of reads),
 * else, when the walk cannot tell (see `descendants`) or finds none, by listing /proc.
 */
export async function groupMembers(proc: ProcFs, pgid: number, root: number): Promise<ProcStat[]> {
  const walked = await descendants(proc, root, (stat) => stat.pgrp === pgid)
  if (walked !== undefined && walked.length > 0) return walked
  const entries = await proc.readdir('/proc')
  const pids = entries.filter((name) => /^\d+$/.test(name))
  const stats = await Promise.all(pids.map((pid) => readStat(proc, `/proc/${pid}/stat`)))
  return stats.filter((s): s is ProcStat => s !== undefined && s.pgrp === pgid)
}

/** A job the shell keeps stopped: its process group, its leader's name, and how long ago (ms) the leader started. */
export interface StoppedGroup {
  pgid: number
  name: string
  ageMs: number
}

/** Clock ticks per second of proc(5) times (`USER_HZ`, 100 on every Linux architecture Node runs on). */
const USER_HZ = 100

/**
 * The process groups among `shell`'s descendants, other than its own, whose every member is
 * stopped (`T`, proc(5); not `t`, a tracing stop): the jobs bash lists as `Stopped`. Ages are
 * against /proc/uptime, the clock of the start times (10 ms steps). Undefined when the walk
 * cannot tell (see `descendants`).
 */
export async function stoppedJobs(proc: ProcFs, shell: number): Promise<StoppedGroup[] | undefined> {
  const [all, uptime] = await Promise.all([descendants(proc, shell, () => true), proc.readFile('/proc/uptime')])
  const nowTicks = Math.round(Number.parseFloat(uptime) * USER_HZ)
  if (all === undefined || !Number.isFinite(nowTicks)) return undefined
  const own = all.find((stat) => stat.pid === shell)?.pgrp ?? shell
  const groups = new Map<number, ProcStat[]>()
  for (const stat of all) if (stat.pgrp !== own) groups.set(stat.pgrp, [...(groups.get(stat.pgrp) ?? []), stat])
  const jobs: StoppedGroup[] = []
  for (const [pgid, members] of groups) {
    if (!members.every((member) => member.state === 'T')) continue
    const leader = members.find((member) => member.pid === pgid) ?? members[0]!
    jobs.push({ pgid, name: leader.comm, ageMs: Math.max(0, (nowTicks - Number(leader.startTime)) * (1000 / USER_HZ)) })
  }
  return jobs
}

/** Above this many threads in one descendant, `descendants` gives up (`groupMembers` then lists every process). */
export const WALK_MAX_THREADS = 64

/**
 * `root` and its descendants that `keep` accepts; undefined when the children files cannot be
 * read or a descendant has more than `WALK_MAX_THREADS` threads.
 */
async function descendants(proc: ProcFs, root: number, keep: (stat: ProcStat) => boolean): Promise<ProcStat[] | undefined> {
  const kept: ProcStat[] = []
  const seen = new Set<number>()
  const queue = [root]
  while (queue.length > 0) {
    const pid = queue.shift()!
    if (seen.has(pid)) continue
    seen.add(pid)
    const stat = await readStat(proc, `/proc/${pid}/stat`)
    if (stat === undefined) continue // it exited while we walked
    if (keep(stat)) kept.push(stat)
    if (stat.threads > WALK_MAX_THREADS) return undefined
    for (const tid of await taskIds(proc, pid)) {
      let children: string
      try {
        children = await proc.readFile(`/proc/${pid}/task/${tid}/children`)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT' && tid === pid && pid === root) return undefined
        continue
      }
      for (const child of children.split(/\s+/)) if (/^\d+$/.test(child)) queue.push(Number(child))
    }
  }
  return kept
}

/** The task ids of a process; none when it vanished. */
function taskIds(proc: ProcFs, pid: number): Promise<number[]> {
  return proc.readdir(`/proc/${pid}/task`).then((names) => names.filter((name) => /^\d+$/.test(name)).map(Number), () => [])
}

/**
 * One task of `member`, whose stat was just read (its main task's state is `member`'s).
 * `readOnly`: only whether it reads the terminal (`mainTaskReadsTerminal`).
 */
async function examineTask(context: TaskContext, member: ProcStat, tid: number, readOnly = false): Promise<TaskObservation> {
  const { proc } = context
  const base = `/proc/${member.pid}/task/${tid}`
  // Only what the verdict needs, for programs with many threads: the syscall always; the state
  // and switches only in a read-class syscall.
  const reused = tid === member.pid
  const observation: TaskObservation = {
    pid: member.pid,
    tid,
    name: member.comm,
    state: reused ? member.state : '?',
    syscall: 'unreadable',
    switches: undefined,
    fds: [],
  }
  if (reused && member.state === 'R') {
    observation.syscall = 'running'
    return observation
  }
  const syscallText = await proc.readFile(`${base}/syscall`).catch(() => undefined)
  const syscall = syscallText === undefined ? undefined : parseSyscallFile(syscallText)
  if (syscall === undefined) {
    // A task whose files vanished since its process's stat was read: its state is not known either.
    observation.state = '?'
    return observation
  }
  observation.syscall = describe(syscall, context.table)
  if (syscall.kind === 'running') observation.state = 'R'
  else if (!reused) observation.state = NOT_READ
  if (syscall.kind !== 'syscall') return observation
  const name = context.table.get(syscall.nr)
  if (name === undefined) return observation
  if (!reused) {
    const stat = await readStat(proc, `${base}/stat`)
    observation.state = stat?.state ?? '?'
  }
  if (observation.state !== 'S') return observation
  if (!readOnly) {
    const status = await proc.readFile(`${base}/status`).catch(() => undefined)
    observation.switches = status === undefined ? undefined : contextSwitches(status)
  }
  // A select with nfds 1 (readline) names only fd 0: look it up while the set is read.
  const reading = candidateFds(context, member.pid, name, syscall.args)
  const fd0 = (name === 'select' || name === 'pselect6') && syscall.args[0] === 1n ? isTerminal(context, member, 0) : undefined
  observation.fds = await reading
  const others: number[] = []
  for (const fd of observation.fds) {
    if (observation.terminalFd === undefined && (await (fd === 0 && fd0 !== undefined ? fd0 : isTerminal(context, member, fd)))) {
      observation.terminalFd = fd
      if (readOnly) return observation
    } else others.push(fd)
  }
  if (readOnly) return observation
  const timeoutMs = await waitTimeoutMs(context, member.pid, name, syscall.args)
  if (timeoutMs !== undefined) observation.timeoutMs = timeoutMs
  observation.sources = wakeSources(await wakeFds(context, member.pid, others), timeoutMs)
  return observation
}

/** Fills in what a corroboration window compares: every task's switches, the reader's wake counters. */
async function addWakeCounters(proc: ProcFs, task: TaskObservation, reader: boolean, clocks: SchedulerClocks | undefined): Promise<void> {
  if (task.switches !== undefined && !reader) return
  const base = `/proc/${task.pid}/task/${task.tid}`
  const read = (name: string) => proc.readFile(`${base}/${name}`).catch(() => undefined)
  const status = await read('status')
  if (status !== undefined) task.switches ??= contextSwitches(status)
  if (!reader) return
  const stat = await read('stat')
  const wake = parseWakeCounters(status, await read('sched'), await read('io'))
  wake.cpu = stat === undefined ? undefined : processorOf(stat)
  wake.execStartMonotonicMs = clocks?.toMonotonic(wake.cpu, wake.execStartMs)
  task.wake = wake
}

/** The counters of `WakeCounters` from the status, sched and io files of one task; each missing one undefined (`cpu` and the monotonic time are filled in by the caller). */
export function parseWakeCounters(status: string | undefined, sched: string | undefined, io: string | undefined): WakeCounters {
  const field = (text: string | undefined, pattern: RegExp): number | undefined => {
    const value = text === undefined ? undefined : pattern.exec(text)?.[1]
    return value === undefined ? undefined : Number(value)
  }
  return {
    voluntary: field(status, /^voluntary_ctxt_switches:\s*(\d+)/m),
    execStartMs: field(sched, /^se\.exec_start\s*:\s*(\d+(?:\.\d+)?)/m),
    cpu: undefined,
    execStartMonotonicMs: undefined,
    rchar: field(io, /^rchar:\s*(\d+)/m),
    syscr: field(io, /^syscr:\s*(\d+)/m),
  }
}

function describe(syscall: SyscallState, table: ReadonlyMap<number, ReadSyscall>): string {
  switch (syscall.kind) {
    case 'running':
      return 'running'
    case 'blocked':
      return 'none'
    case 'syscall':
      return table.get(syscall.nr) ?? `#${syscall.nr}`
    default:
      return unreachable(syscall, 'syscall state')
  }
}

/** Bytes task `tid` of `pid` has read in all (`rchar` of its io file, proc(5)); undefined when unreadable. */
export function taskReadBytes(proc: ProcFs, pid: number, tid: number): Promise<number | undefined> {
  return proc.readFile(`/proc/${pid}/task/${tid}/io`).then((io) => parseWakeCounters(undefined, undefined, io).rchar, () => undefined)
}

/** Sum of the two context-switch counters of a status file (proc(5)); undefined when either is missing. */
export function contextSwitches(status: string): number | undefined {
  const voluntary = /^voluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1]
  const involuntary = /^nonvoluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1]
  if (voluntary === undefined || involuntary === undefined) return undefined
  return Number(voluntary) + Number(involuntary)
}

/** A descriptor number from an argument register (C `int`). */
function fdOf(value: bigint): number {
  return Number(BigInt.asIntN(32, value))
}

/**
 * The descriptors a task blocked in `name` waits to read: read(2) argument 0; poll(2) `struct
 * pollfd`s with POLLIN; select(2) the read `fd_set`; epoll the EPOLLIN `tfd:` lines of fdinfo.
 */
async function candidateFds(context: TaskContext, pid: number, name: ReadSyscall, args: readonly bigint[]): Promise<number[]> {
  const [a0 = 0n, a1 = 0n] = args
  try {
    switch (name) {
      case 'read':
      case 'readv':
        return fdOf(a0) >= 0 ? [fdOf(a0)] : []
      case 'poll':
      case 'ppoll': {
        const count = a1 > BigInt(context.maxPollFds) ? context.maxPollFds : Number(a1)
        if (count === 0 || a0 === 0n) return []
        const memory = await context.proc.readMemory(pid, a0, count * 8)
        const fds: number[] = []
        for (let i = 0; i < count; i++) {
          const fd = memory.readInt32LE(i * 8)
          const events = memory.readInt16LE(i * 8 + 4)
          if (fd >= 0 && (events & POLLIN) !== 0) fds.push(fd)
        }
        return fds
      }
      case 'select':
      case 'pselect6': {
        const nfds = Math.min(Number(BigInt.asIntN(32, a0)), context.maxPollFds)
        if (nfds <= 0 || a1 === 0n) return []
        const bytes = Math.ceil(nfds / 64) * 8
        const bits = await context.proc.readMemory(pid, a1, bytes)
        const fds: number[] = []
        for (let fd = 0; fd < nfds; fd++) if (((bits[fd >> 3] ?? 0) >> (fd & 7)) & 1) fds.push(fd)
        return fds
      }
      case 'epoll_wait':
      case 'epoll_pwait':
      case 'epoll_pwait2': {
        const info = await context.proc.readFile(`/proc/${pid}/fdinfo/${fdOf(a0)}`)
        const fds: number[] = []
        for (const match of info.matchAll(/^tfd:\s*(\d+)\s+events:\s*([0-9a-fA-F]+)/gm)) {
          if ((Number.parseInt(match[2] ?? '0', 16) & EPOLLIN) !== 0) fds.push(Number(match[1]))
        }
        return fds
      }
      default:
        return unreachable(name, 'read syscall')
    }
  } catch {
    return [] // unreadable memory or fdinfo: a miss
  }
}

/**
 * Whether `task` is a thread of the reader's process waiting on timers alone: it can act only
 * through the process's own wake-ups, so its timer is no source (V8's delayed-task thread after
 * every Node REPL preview would otherwise make each send wait out a corroboration window).
 */
function ownTimerThread(task: TaskObservation, reader: TaskObservation): boolean {
  if (task.pid !== reader.pid) return false
  const sources = task.sources ?? []
  return sources.length > 0 && sources.every((source) => /^timer in \d+ ms$/.test(source))
}

/** A wait whose timeout ends within this many ms can wake the program without input. */
export const NEAR_TIMEOUT_MS = 1000

/** Most descriptors of a process resolved to find the other end of a pipe. */
const MAX_OWN_FDS = 1024

/** `fdSources` (`wakeFds`) and the wait's timeout when it ends within NEAR_TIMEOUT_MS. */
function wakeSources(fdSources: string[], timeoutMs: number | undefined): string[] {
  if (timeoutMs !== undefined && timeoutMs <= NEAR_TIMEOUT_MS) return [...fdSources, `timer in ${Math.max(0, Math.round(timeoutMs))} ms`]
  return fdSources
}

/**
 * The descriptors of a wait that can wake it without input: all but the program's own wake-ups
 * (an eventfd, a signalfd, a self-pipe as libuv and gdb use). An unreadable one counts.
 */
async function wakeFds(context: TaskContext, pid: number, fds: readonly number[]): Promise<string[]> {
  const sources: string[] = []
  let names: Promise<string[]> | undefined
  const allNames = () => (names ??= fdNames(context.proc, pid))
  for (const fd of fds) {
    const target = await context.proc.readlink(`/proc/${pid}/fd/${fd}`).catch(() => undefined)
    if (target === undefined) sources.push(`fd ${fd} (unreadable)`)
    else if (target === 'anon_inode:[eventfd]' || target === 'anon_inode:[signalfd]') continue
    else if (target.startsWith('pipe:[')) {
      if (!(await selfPipe(context, pid, fd, target, allNames))) sources.push(`pipe fd ${fd}`)
    } else if (target.startsWith('socket:[')) sources.push(`socket fd ${fd}`)
    else if (target === 'anon_inode:inotify' || target === 'anon_inode:[inotify]') sources.push(`inotify fd ${fd}`)
    else if (target === 'anon_inode:[timerfd]') sources.push(`timer fd ${fd}`)
    else sources.push(`${target} fd ${fd}`)
  }
  return sources
}

/** The descriptor numbers of `pid` (/proc/<pid>/fd), at most MAX_OWN_FDS; none when unreadable. */
function fdNames(proc: ProcFs, pid: number): Promise<string[]> {
  return proc.readdir(`/proc/${pid}/fd`).then((names) => names.slice(0, MAX_OWN_FDS), () => [])
}

/** Whether another descriptor of `pid` refers to pipe `target` (a self-pipe); `SelfPipes`' hint first. */
async function selfPipe(context: TaskContext, pid: number, fd: number, target: string, names: () => Promise<string[]>): Promise<boolean> {
  const link = async (other: number | string): Promise<string | undefined> => context.proc.readlink(`/proc/${pid}/fd/${other}`).catch(() => undefined)
  const known = context.selfPipes?.get(pid, target)
  if (known !== undefined && known !== fd && (await link(known)) === target) return true
  for (const name of await names()) {
    if (name === String(fd) || name === String(known)) continue
    if ((await link(name)) === target) {
      context.selfPipes?.set(pid, target, Number(name))
      return true
    }
  }
  return false
}

/**
 * The timeout of a read-class wait in ms: an int of ms (poll, epoll_wait), or a timespec/timeval
 * in memory (epoll_wait(2), poll(2), select(2)). Undefined when none or unreadable.
 */
async function waitTimeoutMs(context: TaskContext, pid: number, name: ReadSyscall, args: readonly bigint[]): Promise<number | undefined> {
  const asInt = (value: bigint | undefined) => (value === undefined ? -1 : Number(BigInt.asIntN(32, value)))
  const fromMemory = async (pointer: bigint | undefined, microseconds: boolean): Promise<number | undefined> => {
    if (pointer === undefined || pointer === 0n) return undefined
    try {
      const memory = await context.proc.readMemory(pid, pointer, 16)
      const seconds = Number(memory.readBigInt64LE(0))
      const fraction = Number(memory.readBigInt64LE(8))
      return seconds * 1000 + (microseconds ? fraction / 1e3 : fraction / 1e6)
    } catch {
      return undefined
    }
  }
  switch (name) {
    case 'read':
    case 'readv':
      return undefined
    case 'poll':
      return asInt(args[2]) < 0 ? undefined : asInt(args[2])
    case 'epoll_wait':
    case 'epoll_pwait':
      return asInt(args[3]) < 0 ? undefined : asInt(args[3])
    case 'ppoll':
      return fromMemory(args[2], false)
    case 'epoll_pwait2':
      return fromMemory(args[3], false)
    case 'select':
      return fromMemory(args[4], true)
    case 'pselect6':
      return fromMemory(args[4], false)
    default:
      return unreachable(name, 'read syscall')
  }
}

/**
 * Whether descriptor `fd` of `member` is this terminal: the slave's `st_rdev` *and* `st_dev`
 * (another devpts instance is another terminal), or /dev/tty (tty(4)) with the slave as the
 * process's controlling terminal (stat field 7).
 */
async function isTerminal(context: TaskContext, member: ProcStat, fd: number): Promise<boolean> {
  try {
    const { dev, rdev } = await context.proc.stat(`/proc/${member.pid}/fd/${fd}`)
    if (rdev === context.terminal.rdev) return dev === context.terminal.dev
    return rdev === DEV_TTY_RDEV && member.ttyNr === context.terminal.rdev
  } catch {
    return false
  }
}
