/**
 * The exact readiness tier on Linux: "is the foreground process group of this terminal blocked
 * reading this terminal?", answered from /proc (proc(5)). The README ("Readiness", /proc) gives
 * the rule and why a descriptor is matched by the slave's device number together with its devpts
 * instance, not by path.
 *
 * One probe: the foreground group is field 8 (`tpgid`) of /proc/<pid>/stat of the process that
 * holds the terminal; every task of every member of that group is examined (state, syscall,
 * context switches); a task blocked in a read-class syscall (syscalls.ts) has its candidate
 * descriptors decoded (`candidateFds`), each resolved through /proc/<pid>/fd/<n> to a device
 * number. Anything that cannot be read is a miss for that task, never a positive.
 */
import { statSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { nodeProcFs, parseProcStat, type ProcFs, type ProcStat } from '@conch/subprocess'
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

/**
 * The real /proc: `nodeProcFs` of `@conch/subprocess` (synchronous reads of in-memory files),
 * plus stat(2) and process memory. Process memory is read asynchronously (`FileHandle.read` at a
 * position), since it takes the target's mmap lock.
 */
export const nodeProcReader: ProcReader = {
  ...nodeProcFs,
  async stat(path) {
    const { dev, rdev } = statSync(path)
    return { dev, rdev }
  },
  async readMemory(pid, address, length) {
    // FileHandle.read with a bigint position fails with EIO on Node 20 (measured here) while a
    // number works; user-space addresses on x86_64 and arm64 are below 2^53.
    if (address > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`address 0x${address.toString(16)} is beyond 2^53`)
    const handle = await open(`/proc/${pid}/mem`, 'r')
    try {
      const buffer = Buffer.alloc(length)
      const { bytesRead } = await handle.read(buffer, 0, length, Number(address))
      if (bytesRead !== length) throw new Error(`short read of /proc/${pid}/mem at 0x${address.toString(16)}: ${bytesRead} of ${length} bytes`)
      return buffer
    } finally {
      await handle.close()
    }
  },
}

/** The PTY slave of one session. */
export interface TerminalIdentity {
  /** A process that has the terminal as its controlling terminal (the node-pty child). */
  pid: number
  /** Device number of the slave (`st_rdev`, in the encoding of stat(2) and proc(5) `tty_nr`). */
  rdev: number
  /**
   * The devpts instance the slave lives in (`st_dev` of the slave). A descriptor is this terminal
   * only when both numbers match: a program in a sandbox with its own devpts (bwrap(1) `--dev`)
   * can open ptys there until one has the same `st_rdev`, and block reading that one.
   */
  dev: number
  /** Display path, e.g. `/dev/pts/3`. */
  path: string
  /**
   * The terminal's input arrives through a relay (a container's exec TTY, fed by a process on
   * this host): a write to our end is not yet in this terminal, so a reader proves it took the
   * input only by the bytes it read (`TaskObservation.readBytes`).
   */
  relayed?: boolean
}

/**
 * Identifies the terminal from `/proc/<pid>/fd/0` of the node-pty child, at startup (before the
 * child can have redirected it). Undefined when fd 0 cannot be resolved or is not a device: the
 * exact tier is then off for this session.
 */
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
  /**
   * State letter from the task's stat (`R`, `S`, `D`, `T`, …); `R` also when its syscall file
   * says `running`; `?` when unreadable; `-` when not read: the task is blocked in a syscall
   * that is not read-class (so it is not running, and its exact state decides nothing).
   */
  state: string
  /**
   * The syscall: a read-class name, `#<nr>` for another one, `running`, `none` (blocked outside
   * a syscall), or `unreadable`.
   */
  syscall: string
  /** Voluntary plus non-voluntary context switches; undefined when unreadable. */
  switches: number | undefined
  /** Bytes the task has read in all (`rchar` of its io file); read on a relayed terminal only (`TerminalIdentity.relayed`). */
  readBytes?: number
  /**
   * For a task in a read-class syscall: the wait's own timeout argument in ms (the whole
   * timeout given when the call began, not what is left of it); undefined when it has none or
   * it could not be read.
   */
  timeoutMs?: number
  /**
   * Counters that tell a task's own timer wake-ups from activity (see wait-evidence.ts), read
   * only for a `reading` probe whose wait holds other wake sources (`ReadProbe.sources`).
   * Each field is undefined when its file is unreadable (/proc/<pid>/task/<tid>/sched needs a
   * kernel with CONFIG_SCHED_DEBUG).
   */
  wake?: WakeCounters
  /** Descriptors the task waits to read (decoded from its syscall). */
  fds: number[]
  /** The first of `fds` that is this terminal. */
  terminalFd?: number
  /**
   * For a task in a read-class syscall: what else in its wait can wake it without input — other
   * descriptors that are not the program's own wake-ups, and a timeout due soon (see
   * `wakeSources`). Empty when the wait holds only the terminal and internal wake-ups.
   */
  sources?: string[]
}

/**
 * Per-task counters of proc(5), read together:
 * - `voluntary`: `voluntary_ctxt_switches` of /proc/<pid>/task/<tid>/status — how often the
 *   task blocked; a task that sleeps in one wait and wakes from it once adds one;
 * - `execStartMs`: `se.exec_start` of /proc/<pid>/task/<tid>/sched, in ms of the scheduler's
 *   task clock — updated whenever the task stops running, so for a blocked task it is when it
 *   entered its current wait;
 * - `cpu`: the CPU the task last ran on (field 39, `processor`, of its stat): `execStartMs`
 *   is on that CPU's clock. The task clocks of two CPUs differ (each leaves out its own steal
 *   and interrupt time), so two values compare directly only on one CPU;
 * - `execStartMonotonicMs`: `execStartMs` on the monotonic clock of the probing process
 *   (`performance.now()`), through that CPU's offset as `SchedulerClocks` last measured it;
 *   undefined when no recent offset is known for the CPU;
 * - `rchar`, `syscr`: bytes read and read calls (read(2), readv(2), pread(2)) of
 *   /proc/<pid>/task/<tid>/io — recv(2) on a socket is not counted there.
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
 * The offset of each CPU's scheduler task clock (`se.exec_start` in /proc/<pid>/sched, ms)
 * against the monotonic clock of this process, measured on the probing thread itself: while it
 * runs, its own `se.exec_start` is the current time of the CPU it runs on
 * (/proc/thread-self/sched, with `processor` of /proc/thread-self/stat before and after). Each
 * probe measures the CPU it happens to run on; an offset older than `maxAgeMs` is not used (it
 * drifts by the CPU's steal and interrupt time).
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
  /**
   * When `reading`: what else could wake the group without input — the reader's other wait
   * sources and other tasks of the group waiting on sources (`task 4122 read socket fd 9`). Empty
   * means the read is proof on its own; otherwise it needs corroboration (send.ts).
   */
  sources?: string[]
}

export interface ProbeOptions {
  proc: ProcReader
  terminal: TerminalIdentity
  /** Architecture whose syscall table applies (`process.arch` values). Default `process.arch`. */
  arch?: string
  /** Most descriptors decoded per task from a poll array or a select set in its memory. Default 4096. */
  maxPollFds?: number
  /**
   * Most tasks one probe examines (all members of the group together). A larger group is
   * `unknown`: its readiness falls to the silence and timeout tiers. Default 4096.
   */
  maxTasks?: number
  /** The CPU clock offsets for `WakeCounters.execStartMonotonicMs`; without it that field stays undefined. */
  clocks?: SchedulerClocks
  /** Where the other end of each self-pipe was found last, so a later probe checks that descriptor first (see `SelfPipes`). */
  selfPipes?: SelfPipes
}

/**
 * Where a process's self-pipes were found: for a pipe (`pipe:[inode]`) that a wait holds at one
 * descriptor, the other descriptor of the same process that held the same pipe. A later probe
 * reads that one link first instead of every descriptor of the process; the answer is the same
 * (the link is read now, and a pipe inode at two descriptors is a self-pipe), only found sooner.
 * Bounded: past `maxEntries` it starts over.
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

/** Default of `ProbeOptions.maxTasks`. */
export const DEFAULT_MAX_TASKS = 4096

/**
 * Examines the terminal's foreground process group once.
 *
 * Verdict `reading` when at least one task of the group is blocked (state `S`) in a read-class
 * syscall on a descriptor that resolves to this terminal's slave **and** no task of the group
 * is running (state `R`, or its syscall file says `running`). Not every task must read: a
 * multi-threaded program such as the Node REPL keeps worker threads parked in futex while its
 * main thread waits in epoll, and in a pipeline (`seq 500 | less`) other members read pipes or
 * have finished; but a running task may still print or consume input, so it vetoes.
 * `not_reading` otherwise; `unknown` when the group could not be examined (no syscall table for
 * the architecture, the terminal's process is gone, no foreground group, or no member found).
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
  const maxTasks = options.maxTasks ?? DEFAULT_MAX_TASKS
  const tidsOf = await Promise.all(members.map((member) => taskIds(proc, member.pid)))
  const taskCount = tidsOf.reduce((sum, tids) => sum + tids.length, 0)
  if (taskCount > maxTasks) {
    // A verdict needs every task (one running task vetoes), and a partial look proves nothing.
    return unknown(tpgid, `foreground process group ${tpgid} has ${taskCount} tasks, more than the ${maxTasks} one probe examines`)
  }
  const perMember = await Promise.all(members.map((member, index) => Promise.all(tidsOf[index]!.map((tid) => examineTask(context, member, tid, true)))))
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
    const reader: TerminalReader = {
      name: readerTask.name,
      pid: readerTask.pid,
      tid: readerTask.tid,
      syscall: readerTask.syscall as ReadSyscall,
      fd,
      path,
    }
    const sources = [...(readerTask.sources ?? [])]
    for (const task of tasks) {
      if (task === readerTask || task.terminalFd !== undefined) continue
      if (ownTimerThread(task, readerTask)) continue
      for (const source of task.sources ?? []) sources.push(`task ${task.tid} ${task.syscall} ${source}`)
    }
    // A read that needs corroboration is judged over a window of probes: every task's counters
    // are needed then — the reader's wake counters, and whether any other task ran.
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
 * Whether the main task of process `pid` is blocked (state `S`) in a read-class syscall on a
 * descriptor that is this terminal — for a shell at its prompt: it waits for input on the
 * terminal, and its input queue is empty. Undefined when it cannot be told (no syscall table,
 * the process is gone); false when it runs, waits for anything else, or reads something else.
 */
export async function mainTaskReadsTerminal(options: { proc: ProcReader; terminal: TerminalIdentity; pid: number; arch?: string }): Promise<boolean | undefined> {
  const { proc, terminal, pid } = options
  const table = readSyscallTable(options.arch ?? process.arch)
  if (table === undefined) return undefined
  const member = await readStat(proc, `/proc/${pid}/stat`)
  if (member === undefined) return undefined
  const task = await examineTask({ proc, terminal, table, maxPollFds: 4096 }, member, pid, true, true)
  if (task.syscall === 'unreadable') return undefined
  return task.state === 'S' && task.terminalFd !== undefined
}

/**
 * Whether process `pid` is stopped (stat state `T`, proc(5)) and has no child left
 * (/proc/<pid>/task/<pid>/children is empty) — the wrapper after its shell exited, waiting for
 * its acknowledgement. Undefined when it cannot be read (the process is gone).
 */
export async function stoppedWithoutChildren(proc: ProcFs, pid: number): Promise<boolean | undefined> {
  const stat = await readStat(proc, `/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  if (stat.state !== 'T' && stat.state !== 't') return false
  try {
    return (await proc.readFile(`/proc/${pid}/task/${pid}/children`)).trim() === ''
  } catch {
    return undefined
  }
}

/**
 * Whether the task `after` found reading provably ran since probe `before` was taken (so its
 * wait is new evidence, not the wait that was there before the write). True when the
 * foreground group changed, or the reading task did not exist at `before`, or it was not
 * blocked reading the terminal then (it entered the wait since), or its context-switch count
 * moved. False when `after` is not `reading`, when `before` could not see the group, or when
 * nothing proves the task ran (same wait, same count, or counts unreadable).
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

/**
 * The foreground process group of the terminal held by `pid` (field 8, `tpgid`, of its stat):
 * one read. Undefined when `pid` is gone or the terminal has no foreground group.
 */
export async function foregroundGroupOf(proc: ProcFs, pid: number): Promise<number | undefined> {
  const tpgid = (await readStat(proc, `/proc/${pid}/stat`))?.tpgid
  return tpgid !== undefined && tpgid > 0 ? tpgid : undefined
}

/**
 * Reads the foreground group of the terminal held by `pid` (field 8 of its stat) and whether
 * `shellPid`'s group (field 5; default `pid`) is that group. Undefined when `pid` is gone or
 * the terminal has no foreground group.
 */
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

async function readStat(proc: ProcFs, path: string): Promise<ProcStat | undefined> {
  try {
    return parseProcStat(await proc.readFile(path))
  } catch {
    return undefined
  }
}

/**
 * Every process whose process group is `pgid`; processes that vanish while listing are skipped.
 * The terminal's foreground group lives in the session of `root` (the node-pty child), so its
 * members are found by walking `root`'s descendants through /proc/<pid>/task/<tid>/children
 * (proc(5)) — a handful of reads instead of one per process on the machine. When that file is
 * unavailable, the walk finds no member (an orphaned group), or a descendant has more than
 * `WALK_MAX_THREADS` threads (each has a children file, and a program with thousands of them
 * would make the walk cost more than listing), every process is listed.
 */
export async function groupMembers(proc: ProcFs, pgid: number, root: number): Promise<ProcStat[]> {
  const walked = await descendantsInGroup(proc, pgid, root)
  if (walked !== undefined && walked.length > 0) return walked
  const entries = await proc.readdir('/proc')
  const pids = entries.filter((name) => /^\d+$/.test(name))
  const stats = await Promise.all(pids.map((pid) => readStat(proc, `/proc/${pid}/stat`)))
  return stats.filter((s): s is ProcStat => s !== undefined && s.pgrp === pgid)
}

/** Above this many threads in one descendant, `groupMembers` lists every process instead of walking. */
export const WALK_MAX_THREADS = 64

/**
 * Members of `pgid` among `root` and its descendants; undefined when the children files cannot
 * be read or a descendant has more than `WALK_MAX_THREADS` threads.
 */
async function descendantsInGroup(proc: ProcFs, pgid: number, root: number): Promise<ProcStat[] | undefined> {
  const members: ProcStat[] = []
  const seen = new Set<number>()
  const queue = [root]
  while (queue.length > 0) {
    const pid = queue.shift()!
    if (seen.has(pid)) continue
    seen.add(pid)
    const stat = await readStat(proc, `/proc/${pid}/stat`)
    if (stat === undefined) continue // it exited while we walked
    if (stat.pgrp === pgid) members.push(stat)
    if (stat.threads > WALK_MAX_THREADS) return undefined
    let tids: string[]
    try {
      tids = await proc.readdir(`/proc/${pid}/task`)
    } catch {
      continue
    }
    for (const tid of tids) {
      let children: string
      try {
        children = await proc.readFile(`/proc/${pid}/task/${tid}/children`)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT' && tid === String(pid) && pid === root) return undefined
        continue
      }
      for (const child of children.split(/\s+/)) if (/^\d+$/.test(child)) queue.push(Number(child))
    }
  }
  return members
}

/** The task ids of a process; none when it vanished. */
async function taskIds(proc: ProcFs, pid: number): Promise<number[]> {
  try {
    return (await proc.readdir(`/proc/${pid}/task`)).filter((name) => /^\d+$/.test(name)).map(Number)
  } catch {
    return []
  }
}

/**
 * One task of `member`. `memberFresh`: `member` was read just now (its main task's state is
 * taken from it). `readOnly`: only whether it reads the terminal is asked — its counters,
 * timeout and other wake sources are left out (`mainTaskReadsTerminal`).
 */
async function examineTask(context: TaskContext, member: ProcStat, tid: number, memberFresh = false, readOnly = false): Promise<TaskObservation> {
  const { proc } = context
  const base = `/proc/${member.pid}/task/${tid}`
  // Reads only what the verdict needs, so the cost per task stays small for programs with many
  // threads: the syscall always — `running` for a task that runs or is runnable (state R), else
  // where it is blocked (proc(5)); the state only of a task in a read-class syscall (only an
  // interruptible wait, S, is a read); the context-switch counters (which only the reading
  // task's evidence uses) of a task in a read-class syscall. The state of a process's main task
  // is the state in its own stat: when `member` was read just now (`memberFresh`), it is used.
  const reused = memberFresh && tid === member.pid
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
  // A select over one descriptor (nfds 1: bash's and Python's readline) can name only fd 0: its
  // identity is looked up while the set is read from memory on the thread pool.
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

/**
 * Fills in what a corroboration window compares: for every task its context-switch count (read
 * here when `examineTask` skipped it: a task outside a read-class syscall), and for the reader
 * its wake counters.
 */
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
export async function taskReadBytes(proc: ProcFs, pid: number, tid: number): Promise<number | undefined> {
  try {
    return parseWakeCounters(undefined, undefined, await proc.readFile(`/proc/${pid}/task/${tid}/io`)).rchar
  } catch {
    return undefined
  }
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
 * The descriptors a task blocked in `name` waits to read: read(2)/readv(2) argument 0; poll(2):
 * argument 1 `struct pollfd` (int fd, short events, short revents) at argument 0, with POLLIN;
 * select(2): the read `fd_set` at argument 1 (bit n of little-endian longs) for the first
 * argument-0 descriptors; epoll: the `tfd: N events: X` lines of the instance's fdinfo, EPOLLIN.
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
 * Whether `task` is a thread of the reader's own process that waits only on the process's own
 * wake-ups and a timer (its sources are timers alone). Such a thread can make the program act
 * only through those internal wake-ups — an eventfd or self-pipe, which `wakeFds` already counts
 * as the program's own for the reader too — so its timer is not a source of its own: V8's
 * delayed-task thread keeps one armed after every Node REPL preview (a 333 ms evaluation
 * timeout), and counting it would make each Node REPL send wait out a corroboration window. A
 * timer in another process of the group, or a thread that also waits on a socket, pipe or other
 * descriptor, still counts.
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

/**
 * What in a task's wait can wake it without input, besides the terminal (`fdSources`, from
 * `wakeFds`) and the wait's own timeout when it ends within NEAR_TIMEOUT_MS.
 */
function wakeSources(fdSources: string[], timeoutMs: number | undefined): string[] {
  if (timeoutMs !== undefined && timeoutMs <= NEAR_TIMEOUT_MS) return [...fdSources, `timer in ${Math.max(0, Math.round(timeoutMs))} ms`]
  return fdSources
}

/**
 * The descriptors of a task's wait that can wake it without input, besides the terminal:
 * - descriptors of the wait set that are not the program's own wake-ups — an eventfd or signalfd
 *   (anon_inode:[eventfd], [signalfd]) or a pipe whose other end the same process holds (a
 *   self-pipe: the same pipe inode twice among its descriptors, as libuv and gdb use) is
 *   internal; a socket, another pipe, inotify, a timerfd or another terminal is a source.
 * An unreadable descriptor counts as a source (a miss is never proof).
 */
async function wakeFds(context: TaskContext, pid: number, fds: readonly number[]): Promise<string[]> {
  const sources: string[] = []
  let names: Promise<string[]> | undefined
  const allNames = () => (names ??= fdNames(context.proc, pid))
  for (const fd of fds) {
    let target: string
    try {
      target = await context.proc.readlink(`/proc/${pid}/fd/${fd}`)
    } catch {
      sources.push(`fd ${fd} (unreadable)`)
      continue
    }
    if (target === 'anon_inode:[eventfd]' || target === 'anon_inode:[signalfd]') continue
    if (target.startsWith('pipe:[')) {
      if (await selfPipe(context, pid, fd, target, allNames)) continue
      sources.push(`pipe fd ${fd}`)
      continue
    }
    if (target.startsWith('socket:[')) sources.push(`socket fd ${fd}`)
    else if (target === 'anon_inode:inotify' || target === 'anon_inode:[inotify]') sources.push(`inotify fd ${fd}`)
    else if (target === 'anon_inode:[timerfd]') sources.push(`timer fd ${fd}`)
    else sources.push(`${target} fd ${fd}`)
  }
  return sources
}

/** The descriptor numbers of `pid` (/proc/<pid>/fd), at most MAX_OWN_FDS; none when unreadable. */
async function fdNames(proc: ProcFs, pid: number): Promise<string[]> {
  try {
    return (await proc.readdir(`/proc/${pid}/fd`)).slice(0, MAX_OWN_FDS)
  } catch {
    return []
  }
}

/**
 * Whether another descriptor of `pid` than `fd` refers to pipe `target` (the same `pipe:[inode]`
 * twice: a self-pipe). The descriptor where the other end was found last (`SelfPipes`) is read
 * first; otherwise the descriptors (`names`, listed only then) are read in order until one matches.
 */
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
 * The timeout of a read-class wait in ms: epoll_wait/epoll_pwait and poll take an int of ms in
 * argument 3 resp. 2, −1 for none; ppoll, pselect6, select and epoll_pwait2 a pointer to a
 * timespec/timeval, NULL for none, read from memory (epoll_wait(2), poll(2), select(2)).
 * Undefined when it has none (or it cannot be read: then no near deadline is claimed).
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
 * Whether descriptor `fd` of `member` is this terminal: the file it refers to (stat(2) of
 * /proc/<pid>/fd/<n>, which follows to the open file) has the slave's device number *and* lives
 * in the slave's devpts instance (`st_dev`) — the same device number in another instance is
 * another terminal — or it is /dev/tty (tty(4)) and the process's controlling terminal (stat
 * field 7) is the slave: a member of the foreground group is in the terminal's session, whose
 * controlling terminal this is.
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
