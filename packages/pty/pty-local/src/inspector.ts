/**
 * What a local session asks the operating system about its terminal. On Linux the answers come
 * from /proc (the exact tier, inspect-linux.ts); on macOS from `ps` (no exact tier). Sessions
 * talk to this interface only, so every readiness rule is testable with a fake.
 */
import type { ProcessTable } from '@conch/subprocess'
import { listProcessGroupMacos, processName, processNameMacos, readForegroundGroupMacos } from './inspect-macos.ts'
import { procFiles } from './proc-files.ts'
import type { SecretRedactor } from '@conch/pty'
import { contextSwitches, foregroundGroupOf, groupMembers, mainTaskReadsTerminal, probeTerminalReader, readerRanBetween, SchedulerClocks, SelfPipes, stoppedWithoutChildren, taskReadBytes, type ProcReader, type ReadProbe, type TerminalIdentity } from './inspect-linux.ts'
import { unreachable } from '@conch/session'

export type { ReadProbe } from './inspect-linux.ts'

export interface TerminalInspector {
  /** Whether `probe` can prove a read (Linux /proc); false means only the other tiers apply. */
  readonly exact: boolean
  /**
   * Whether this host sees the terminal's processes at all. False for a relayed process this
   * host's /proc does not show (a remote container daemon's exec): no tier but the controlled
   * prompt's marker (nonce checked, no kernel check) and silence can settle a send.
   */
  readonly observable: boolean
  /**
   * Whether input reaches the terminal's reader through a relay (a container's exec TTY): a write
   * is in the relay's terminal, not yet in the reader's, so a read proves the input was taken only
   * by the bytes the reader read since (`isNewReadEvidence`).
   */
  readonly relayed: boolean
  /** The terminal's foreground process group, or undefined when unknown. */
  foregroundGroup(): Promise<number | undefined>
  /** One look at the foreground group (verdict `unknown` when there is no exact tier). */
  probe(): Promise<ReadProbe>
  /** Name of a process, or undefined when it is gone. */
  processName(pid: number): Promise<string | undefined>
  /** Name of a process group: its leader's, or (the leader gone) its first member's; undefined when empty. */
  groupName(pgid: number): Promise<string | undefined>
  /** Context switches of a process's main task, for a cheap baseline; undefined when unknown. */
  taskSwitches(pid: number): Promise<number | undefined>
  /** Bytes task `tid` of process `pid` has read in all (proc(5) `rchar`); undefined when unknown. */
  readBytes(pid: number, tid: number): Promise<number | undefined>
  /**
   * Whether a process's main task is blocked (state S) in a read-class syscall on this terminal
   * — for a shell at its prompt: it waits for input, and its input queue is empty, so
   * everything written to it was consumed. Undefined when it cannot be told (no exact tier,
   * unreadable).
   */
  blockedInRead(pid: number): Promise<boolean | undefined>
  /**
   * Whether a process is stopped with no child left (the wrapper once its shell exited, see
   * prompt.ts). Undefined when it cannot be told (no /proc, the process is gone).
   */
  stoppedWithoutChildren(pid: number): Promise<boolean | undefined>
  /** The program a process runs (/proc/<pid>/exe), or undefined when unknown. */
  executable(pid: number): Promise<string | undefined>
}

/**
 * `inspector` with every text it takes from the terminal's processes passed through
 * `rule.redactProcessText` (redact.ts) before it is returned: process and group names, and in a
 * probe each task's name, the reading task's name and descriptor path, the other wake sources (a
 * descriptor's path among them) and the detail line built from them. The processes are the program's: what it names them and what
 * it opens is text it chooses, and evidence, signal and close results carry it (a session wraps
 * its inspector once, session.ts). The rule is applied at every call, so a value registered
 * later applies from then on; while it has no value (`active` false) nothing is copied.
 * `executable` stays as it is: it is compared, never shown.
 */
export function cleanProcessText(inspector: TerminalInspector, rule: Pick<SecretRedactor, 'active' | 'redactProcessText'>): TerminalInspector {
  const clean = (text: string): string => rule.redactProcessText(text)
  return {
    get exact() {
      return inspector.exact
    },
    get observable() {
      return inspector.observable
    },
    get relayed() {
      return inspector.relayed
    },
    foregroundGroup: () => inspector.foregroundGroup(),
    probe: async () => {
      const probe = await inspector.probe()
      return rule.active ? cleanProbe(probe, clean) : probe
    },
    processName: async (pid) => mapDefined(await inspector.processName(pid), clean),
    groupName: async (pgid) => mapDefined(await inspector.groupName(pgid), clean),
    taskSwitches: (pid) => inspector.taskSwitches(pid),
    readBytes: (pid, tid) => inspector.readBytes(pid, tid),
    blockedInRead: (pid) => inspector.blockedInRead(pid),
    stoppedWithoutChildren: (pid) => inspector.stoppedWithoutChildren(pid),
    executable: (pid) => inspector.executable(pid),
  }
}

function mapDefined(text: string | undefined, clean: (text: string) => string): string | undefined {
  return text === undefined ? undefined : clean(text)
}

/**
 * `probe` with its process texts cleaned (`cleanProcessText`); the probe itself when none
 * changed. The detail line is built from the same texts (inspect-linux.ts), so each changed one
 * is replaced where it occurs in it, the longest first (a name inside a longer one is then
 * already gone).
 */
export function cleanProbe(probe: ReadProbe, clean: (text: string) => string): ReadProbe {
  const changed = new Map<string, string>()
  const take = (text: string): string => {
    const cleaned = clean(text)
    if (cleaned !== text) changed.set(text, cleaned)
    return cleaned
  }
  const tasks = probe.tasks.map((task) => {
    const name = take(task.name)
    const sources = task.sources?.map(take)
    if (name === task.name && (sources ?? []).every((source, index) => source === task.sources![index])) return task
    return { ...task, name, ...(sources !== undefined && { sources }) }
  })
  const reader = probe.reader === undefined ? undefined : { ...probe.reader, name: take(probe.reader.name), path: take(probe.reader.path) }
  const sources = probe.sources?.map(take)
  if (changed.size === 0) return probe
  let detail = probe.detail
  for (const [text, cleaned] of [...changed].sort(([a], [b]) => b.length - a.length)) detail = detail.split(text).join(cleaned)
  return { ...probe, tasks, reader, detail, ...(sources !== undefined && { sources }) }
}

/**
 * What was known about the foreground group just before a send's input was written: a full
 * probe, or — when the shell sat at its own controlled prompt — only the shell's main task
 * counter (the shell is its group's leader, so its pid is its pgid and its main tid), and on a
 * relayed terminal the bytes it had read.
 */
export type Baseline =
  | { kind: 'probe'; probe: ReadProbe }
  | { kind: 'shell'; pgid: number; switches: number; readBytes?: number }
  | { kind: 'none' }

/**
 * Whether `after` is new evidence that the foreground group waits for input. Evidence from
 * before the write never counts (README, "Readiness"): a wait by the same group counts only when the
 * reading task provably ran since the baseline — a different group, a task not in the
 * baseline, a task that was not waiting then, or a context-switch counter that moved
 * (`readerRanBetween`). Without a baseline nothing counts.
 *
 * `inputBytes`, on a relayed terminal (`TerminalInspector.relayed`): the bytes written since the
 * baseline. The input may still be on its way through the relay while the reader, woken by
 * something else (an earlier step's bytes, a signal), waits again: the same task reading counts
 * only once it has read at least that many bytes since the baseline (proc(5) `rchar`, which
 * the probe reads for every task of a relayed terminal; a line discipline that drops bytes — an
 * erase character — leaves the send to silence). A different group or a task that
 * did not exist at the baseline took the input already: only a program that read it runs another.
 */
export function isNewReadEvidence(baseline: Baseline, after: ReadProbe, inputBytes?: number): boolean {
  const reader = after.reader
  if (after.verdict !== 'reading' || reader === undefined) return false
  switch (baseline.kind) {
    case 'probe': {
      if (!readerRanBetween(baseline.probe, after)) return false
      if (inputBytes === undefined || baseline.probe.tpgid !== after.tpgid) return true
      const was = baseline.probe.tasks.find((task) => task.pid === reader.pid && task.tid === reader.tid)
      const now = after.tasks.find((task) => task.pid === reader.pid && task.tid === reader.tid)
      return was === undefined || readAtLeast(was.readBytes, now?.readBytes, inputBytes)
    }
    case 'shell': {
      if (after.tpgid !== baseline.pgid || reader.tid !== baseline.pgid) return true
      const task = after.tasks.find((candidate) => candidate.tid === reader.tid)
      if (task?.switches === undefined || task.switches === baseline.switches) return false
      return inputBytes === undefined || readAtLeast(baseline.readBytes, task.readBytes, inputBytes)
    }
    case 'none':
      return false
    default:
      return unreachable(baseline, 'baseline')
  }
}

/** Whether a read counter went from `before` to `after` by `bytes` at least (false when either is unknown). */
function readAtLeast(before: number | undefined, after: number | undefined, bytes: number): boolean {
  return before !== undefined && after !== undefined && after - before >= bytes
}

/**
 * The /proc inspector of a terminal: `terminal.pid` is the node-pty child (any process whose
 * controlling terminal is the PTY), `terminal.rdev` the slave's device number (stat(2)
 * `st_rdev`, read from the slave when the PTY was opened; negative when unknown, which turns
 * the exact tier off). `proc` defaults to the descriptors this process keeps open (proc-files.ts).
 */
export function linuxInspector(identity: TerminalIdentity, proc: ProcReader = procFiles): TerminalInspector {
  const pid = identity.pid
  const terminal: TerminalIdentity | undefined = identity.rdev > 0 ? identity : undefined
  const clocks = new SchedulerClocks(proc)
  const selfPipes = new SelfPipes()
  const readStatComm = async (target: number): Promise<string | undefined> => {
    try {
      const text = await proc.readFile(`/proc/${target}/stat`)
      return text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'))
    } catch {
      return undefined
    }
  }
  return {
    exact: terminal !== undefined,
    observable: pid > 0,
    relayed: identity.relayed === true,
    foregroundGroup: () => foregroundGroupOf(proc, pid),
    async probe() {
      if (terminal === undefined) return { verdict: 'unknown', tpgid: undefined, tasks: [], reader: undefined, detail: 'the terminal could not be identified' }
      return probeTerminalReader({ proc, terminal, clocks, selfPipes })
    },
    processName: readStatComm,
    async groupName(pgid) {
      return (await readStatComm(pgid)) ?? (await groupMembers(proc, pgid, pid))[0]?.comm
    },
    async taskSwitches(target) {
      try {
        return contextSwitches(await proc.readFile(`/proc/${target}/task/${target}/status`))
      } catch {
        return undefined
      }
    },
    readBytes: (target, tid) => taskReadBytes(proc, target, tid),
    async executable(target) {
      try {
        return await proc.readlink(`/proc/${target}/exe`)
      } catch {
        return undefined
      }
    },
    async blockedInRead(target) {
      if (terminal === undefined) return undefined
      return mainTaskReadsTerminal({ proc, terminal, pid: target })
    },
    stoppedWithoutChildren: (target) => stoppedWithoutChildren(proc, target),
  }
}

/**
 * The macOS inspector: the foreground group and process names come from ps(1); there is no
 * exact tier (no per-task syscall view), so sends settle on the controlled prompt, silence or
 * the timeout.
 */
export function macosInspector(pid: number, table?: ProcessTable): TerminalInspector {
  const options = table === undefined ? {} : { table }
  return {
    exact: false,
    observable: true,
    relayed: false,
    async foregroundGroup() {
      return (await readForegroundGroupMacos({ ...options, pid }))?.tpgid
    },
    async probe() {
      return { verdict: 'unknown', tpgid: undefined, tasks: [], reader: undefined, detail: 'no exact readiness tier on macOS' }
    },
    processName: (target) => processNameMacos({ ...options, pid: target }),
    async groupName(pgid) {
      const leader = await processNameMacos({ ...options, pid: pgid })
      if (leader !== undefined) return leader
      const [first] = await listProcessGroupMacos({ ...options, pgid })
      return first === undefined ? undefined : processName(first.comm)
    },
    taskSwitches: async () => undefined,
    readBytes: async () => undefined,
    blockedInRead: async () => undefined,
    stoppedWithoutChildren: async () => undefined,
    executable: async () => undefined,
  }
}
