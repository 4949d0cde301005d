/**
 * What a session asks the OS about its terminal: /proc on Linux (inspect-linux.ts), `ps` on
 * macOS. Behind this interface every readiness rule is testable with a fake.
 */
import type { ProcessTable } from '@conch/subprocess'
import { listProcessGroupMacos, processName, processNameMacos, readForegroundGroupMacos } from './inspect-macos.ts'
import { procFiles } from './proc-files.ts'
import type { SecretRedactor } from '@conch/pty'
import { contextSwitches, foregroundGroupOf, groupMembers, mainTaskReadsTerminal, probeTerminalReader, readerRanBetween, SchedulerClocks, SelfPipes, stoppedJobs, stoppedWithoutChildren, taskReadBytes, type ProcReader, type ReadProbe, type StoppedGroup, type TerminalIdentity } from './inspect-linux.ts'
import { unreachable } from '@conch/session'

export type { ReadProbe, StoppedGroup } from './inspect-linux.ts'

export interface TerminalInspector {
  /** Whether `probe` can prove a read (Linux /proc); false means only the other tiers apply. */
  readonly exact: boolean
  /** Whether this host sees the terminal's processes (false: a remote container's); else only marker and silence. */
  readonly observable: boolean
  /** Whether input reaches the reader through a relay: a read proves it only by bytes read (`isNewReadEvidence`). */
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
  /** Whether a process's main task is blocked (S) in a read-class syscall on this terminal; undefined: unknown. */
  blockedInRead(pid: number): Promise<boolean | undefined>
  /** Whether a process is stopped with no child left (the wrapper, prompt.ts); undefined: unknown. */
  stoppedWithoutChildren(pid: number): Promise<boolean | undefined>
  /** The shell's jobs whose processes are all stopped (`T`); undefined: unknown. */
  stoppedJobs(shell: number): Promise<StoppedGroup[] | undefined>
  /** The program a process runs (/proc/<pid>/exe), or undefined when unknown. */
  executable(pid: number): Promise<string | undefined>
}

/**
 * `inspector` with every text from the terminal's processes (names, paths, wake sources, the
 * probe's detail) passed through `rule.redactProcessText` (redact.ts): a program chooses those
 * texts, and results carry them. Applied at every call; `executable` is compared, never shown.
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
    stoppedJobs: async (shell) => (await inspector.stoppedJobs(shell))?.map((job) => ({ ...job, name: clean(job.name) })),
    executable: (pid) => inspector.executable(pid),
  }
}

function mapDefined(text: string | undefined, clean: (text: string) => string): string | undefined {
  return text === undefined ? undefined : clean(text)
}

/**
 * `probe` with its process texts cleaned, or itself when none changed. Each changed text is
 * replaced in the detail line too, the longest first (a name inside a longer one is then gone).
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
 * The foreground group just before a send's input was written: a full probe, or, with the shell
 * at its prompt, its main task's counter (its pid is its pgid) and, relayed, the bytes it read.
 */
export type Baseline =
  | { kind: 'probe'; probe: ReadProbe }
  | { kind: 'shell'; pgid: number; switches: number; readBytes?: number }
  | { kind: 'none' }

/**
 * Whether `after` is new evidence that the foreground group waits for input (README,
 * "Readiness"): the reading task provably ran since the baseline (`readerRanBetween`).
 * `inputBytes`, relayed: the bytes written since; the input may still be in the relay, so the
 * same task counts only once it read that many (proc(5) `rchar`).
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
 * The /proc inspector of a terminal (`identity.rdev` not positive turns the exact tier off).
 * `proc` defaults to the descriptors this process keeps open (proc-files.ts).
 */
export function linuxInspector(identity: TerminalIdentity, proc: ProcReader = procFiles): TerminalInspector {
  const pid = identity.pid
  const terminal: TerminalIdentity | undefined = identity.rdev > 0 ? identity : undefined
  const clocks = new SchedulerClocks(proc)
  const selfPipes = new SelfPipes()
  const readStatComm = (target: number): Promise<string | undefined> =>
    proc.readFile(`/proc/${target}/stat`).then((text) => text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')), () => undefined)
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
    taskSwitches: (target) => proc.readFile(`/proc/${target}/task/${target}/status`).then(contextSwitches, () => undefined),
    readBytes: (target, tid) => taskReadBytes(proc, target, tid),
    executable: (target) => proc.readlink(`/proc/${target}/exe`).catch(() => undefined),
    async blockedInRead(target) {
      if (terminal === undefined) return undefined
      return mainTaskReadsTerminal({ proc, terminal, pid: target })
    },
    stoppedWithoutChildren: (target) => stoppedWithoutChildren(proc, target),
    stoppedJobs: (shell) => stoppedJobs(proc, shell),
  }
}

/** The macOS inspector: ps(1), no exact tier (no per-task syscall view). */
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
    stoppedJobs: async () => undefined,
    executable: async () => undefined,
  }
}
