/**
 * The teardown ladder shared by every package that starts processes: capture → TERM → grace →
 * rescan and freeze → KILL → verify. See `terminateTree` for the order and its reasons.
 */
import { setImmediate as nextTurn, setTimeout as delay } from 'node:timers/promises'
import { isEnded, signalIfSame, type SignalOutcome } from './signal.ts'
import { defaultProcessTable } from './table.ts'
import { treeOf } from './tree.ts'
import type {
  ProcessEntry,
  ProcessRecord,
  ProcessTable,
  SessionTag,
  TerminateReport,
  TerminateTreeOptions,
} from './types.ts'

const DEFAULT_POLL_MS = 5
const DEFAULT_KILL_WAIT_MS = 2000
/** Rescans after freezing; each round can only find processes forked before the previous STOP landed. */
const FREEZE_ROUNDS = 8
/** Empty tag sweeps in a row that end the last look (`finalSweep`). */
const FINAL_EMPTY_LOOKS = 3

interface Ladder {
  table: ProcessTable
  kill: (pid: number, signal: NodeJS.Signals) => void
  pollMs: number
  graceMs: number
  killWaitMs: number
  tag: SessionTag | undefined
  /** Look for the init of a PID namespace while walking (`discovery: 'namespace'`). */
  namespace: boolean
  rootExited: PromiseLike<unknown> | undefined
}

const keyOf = (identity: { pid: number; startTime: string }): string => `${identity.pid}@${identity.startTime}`
const recordOf = (entry: ProcessEntry): ProcessRecord => ({ pid: entry.pid, startTime: entry.startTime, comm: entry.comm })

/** One teardown run: what it captured (in capture order) and how it signals and waits. */
class Teardown {
  readonly captured = new Map<string, ProcessRecord>()
  /** Namespace inits the walk found (keys into `captured`): while one runs, its namespace may hold more. */
  readonly inits = new Set<string>()
  /** For each captured process below a namespace init, that init's key: it is gone once the init is. */
  private readonly within = new Map<string, string>()
  /** Settles once, when the root has exited; dropped after that so waits go back to polling. */
  private wake: Promise<void> | undefined
  /**
   * Host children the tag sweep passed over (ended, untagged, older than the root), never read
   * again: a process that keeps forking and leaving could otherwise stay ahead of the sweep.
   */
  private readonly passedOver = new Set<number>()
  /** Host children the tag sweep has read (not passed over unread): counts what a look saw. */
  private lookedAt = 0

  constructor(
    private readonly ladder: Ladder,
    /** Never captured through the tree or the tag: init, this process, its ancestors, and the root. */
    private readonly excluded: ReadonlySet<number>,
    /** Whether discovery lists every process rather than walking the children lists only. */
    public scanning: boolean,
    /** The root's start identity: no process that started before it can carry the tag. */
    private readonly since?: string,
    /** With `discovery: 'orphans'`: where a re-parented process can hang (init, this process, its ancestors). */
    private readonly hosts?: readonly number[],
    /** The root's pid when its session's members count as tagged (`TerminateTreeOptions.session`). */
    private readonly session?: number,
  ) {
    if (ladder.rootExited) {
      const clear = (): void => {
        if (this.wake === wake) this.wake = undefined
      }
      const wake: Promise<void> = Promise.resolve(ladder.rootExited).then(clear, clear)
      this.wake = wake
    }
  }

  /** Waits `ms`, or less when the root exits meanwhile. */
  private pause(ms: number): Promise<unknown> {
    return this.wake ? Promise.race([delay(ms), this.wake]) : delay(ms)
  }

  capture(entry: ProcessEntry, force = false): ProcessRecord | undefined {
    if (isEnded(entry.state)) return undefined
    if (!force && this.excluded.has(entry.pid)) return undefined
    const key = keyOf(entry)
    if (this.captured.has(key)) return undefined
    const record = recordOf(entry)
    this.captured.set(key, record)
    return record
  }

  /**
   * Captures what is new: descendants of each anchor that still has its identity (a recycled
   * anchor's children are strangers), and, with `sweep`, every tagged process and its
   * descendants. Returns the new records, children first within each tree.
   */
  async discover(anchors: readonly ProcessRecord[], sweep: boolean, listed?: ProcessEntry[]): Promise<ProcessRecord[]> {
    const sweeping = sweep && this.sweeps()
    const tag = this.ladder.tag
    if (listed === undefined && !(this.scanning && sweeping)) {
      const walked = await this.walk(anchors)
      if (walked !== undefined) {
        if (sweeping) walked.push(...(await this.sweepHosts(tag)))
        return walked
      }
    }
    const entries = listed ?? (await this.ladder.table.snapshot())
    const byPid = new Map(entries.map((entry) => [entry.pid, entry]))
    const found: ProcessRecord[] = []
    const add = (entry: ProcessEntry): void => {
      const record = this.capture(entry)
      if (record) found.push(record)
    }
    for (const anchor of anchors) {
      const entry = byPid.get(anchor.pid)
      if (entry === undefined || entry.startTime !== anchor.startTime) continue
      for (const descendant of treeOf(entries, anchor.pid, { includeRoot: false })) add(descendant)
    }
    if (sweeping) {
      const since = this.since
      const candidates = entries.filter(
        (entry) =>
          !isEnded(entry.state) &&
          !this.excluded.has(entry.pid) &&
          !this.captured.has(keyOf(entry)) &&
          (since === undefined || !startedBefore(entry.startTime, since)),
      )
      const session = this.sessionOf(byPid.get(this.session ?? -1))
      const taken = await Promise.all(
        candidates.map(async (entry) => entry.sid === session || (tag !== undefined && (await this.ladder.table.environ(entry.pid, tag.name)) === tag.value)),
      )
      candidates.forEach((entry, index) => {
        if (!taken[index]) return
        for (const member of treeOf(entries, entry.pid, { includeRoot: true })) add(member)
      })
    }
    return found
  }

  /**
   * `discover` through the children lists, depth-first, children before parents. An anchor's
   * identity is checked before and after its list is read, so the list is its own; a listed pid
   * whose stat names another parent was recycled and is skipped. With `namespace`, the first
   * PID namespace init on each path goes to `inits`. Undefined when the table cannot list children.
   */
  private async walk(anchors: readonly ProcessRecord[]): Promise<ProcessRecord[] | undefined> {
    const table = this.ladder.table
    if (table.children === undefined) return undefined
    const lookForInit = this.ladder.namespace && table.namespaceInit !== undefined
    const found: ProcessRecord[] = []
    const seen = new Set<number>()
    /** `inside`: the key of the namespace init above `pid`, if any. */
    const visit = async (pid: number, kids: readonly number[], inside: string | undefined): Promise<void> => {
      for (const kid of kids) {
        if (seen.has(kid)) continue
        seen.add(kid)
        const entry = await table.get(kid)
        if (entry === undefined || entry.ppid !== pid) continue
        const init = inside === undefined && lookForInit && !isEnded(entry.state) && (await table.namespaceInit!(kid))
        await visit(kid, (await table.children!(kid)) ?? [], init ? keyOf(entry) : inside)
        const record = this.capture(entry)
        if (record) found.push(record)
        if (init) this.inits.add(keyOf(entry))
        else if (inside !== undefined) this.within.set(keyOf(entry), inside)
      }
    }
    for (const anchor of anchors) {
      seen.add(anchor.pid)
      const same = async () => (await table.get(anchor.pid))?.startTime === anchor.startTime
      if (!(await same())) continue
      const kids = await table.children(anchor.pid)
      if (kids === undefined) return undefined
      if (!(await same())) continue
      await visit(anchor.pid, kids, this.within.get(keyOf(anchor)) ?? (this.inits.has(keyOf(anchor)) ? keyOf(anchor) : undefined))
    }
    return found
  }

  /** Whether discovery sweeps for processes that left the tree: a tag or a session to sweep, and a scan or hosts to look at. */
  private sweeps(): boolean {
    return (this.ladder.tag !== undefined || this.session !== undefined) && (this.scanning || this.hosts !== undefined)
  }

  /**
   * The tag sweep of `discovery: 'orphans'`: each tagged child of a host that started no earlier
   * than the root, with everything below it. An orphan is re-parented to the nearest child
   * subreaper, else to init (prctl(2), PR_SET_CHILD_SUBREAPER), so it hangs from a host.
   */
  private async sweepHosts(tag: SessionTag | undefined): Promise<ProcessRecord[]> {
    const table = this.ladder.table
    const found: ProcessRecord[] = []
    const session = this.session === undefined ? undefined : this.sessionOf(await table.get(this.session))
    for (const host of this.hosts ?? []) {
      // Newest first: a child re-parented last is the likeliest to be still running by the time it is read.
      for (const kid of ((await (table.adoptedChildren ?? table.children)!.call(table, host)) ?? []).slice().reverse()) {
        if (this.excluded.has(kid) || this.passedOver.has(kid)) continue
        this.lookedAt++
        const entry = await table.get(kid)
        // A pid listed under the host whose stat names another parent was recycled meanwhile.
        if (entry === undefined || entry.ppid !== host) continue
        if (isEnded(entry.state) || (this.since !== undefined && startedBefore(entry.startTime, this.since))) {
          this.passedOver.add(kid)
          continue
        }
        if (this.captured.has(keyOf(entry))) continue
        if (entry.sid !== session && (tag === undefined || (await table.environ(kid, tag.name)) !== tag.value)) {
          this.passedOver.add(kid)
          continue
        }
        found.push(...((await this.walk([recordOf(entry)])) ?? []))
        const record = this.capture(entry)
        if (record) found.push(record)
      }
    }
    return found
  }

  /**
   * The session id whose members count as tagged, given what runs on the session's pid now:
   * undefined when the root's session is not swept, or when that pid leads another session
   * (the root is gone and its pid was recycled by a process that called setsid).
   */
  private sessionOf(leader: ProcessEntry | undefined): number | undefined {
    if (this.session === undefined) return undefined
    if (leader !== undefined && leader.startTime !== this.since && leader.sid === leader.pid) return undefined
    return this.session
  }

  async isAlive(record: ProcessRecord): Promise<boolean> {
    const entry = await this.ladder.table.get(record.pid)
    return entry !== undefined && entry.startTime === record.startTime && !isEnded(entry.state)
  }

  /**
   * The records still alive. Once a namespace's init is gone, so is every process of its
   * namespace (pid_namespaces(7)), unread. With `settled` false the look stops at the first
   * record alive, keeping the rest unread, and members of a running init's namespace count alive.
   */
  async aliveOf(records: readonly ProcessRecord[], settled = true): Promise<ProcessRecord[]> {
    const initAlive = new Map<string, boolean>()
    const initRuns = async (key: string): Promise<boolean> => {
      let runs = initAlive.get(key)
      if (runs === undefined) {
        runs = await this.isAlive(this.captured.get(key)!)
        initAlive.set(key, runs)
      }
      return runs
    }
    for (const record of records) {
      const key = keyOf(record)
      if (this.inits.has(key)) await initRuns(key)
    }
    const alive: ProcessRecord[] = []
    for (const [index, record] of records.entries()) {
      const key = keyOf(record)
      const init = this.inits.has(key) ? key : this.within.get(key)
      const runs = init === undefined ? undefined : await initRuns(init)
      let isAlive: boolean
      if (runs === false) isAlive = false
      else if (init === key || (runs === true && !settled)) isAlive = true
      else isAlive = await this.isAlive(record)
      if (!isAlive) continue
      if (!settled) return [record, ...records.slice(index + 1)]
      alive.push(record)
    }
    return alive
  }

  /** The records that are stopped now (state T or t, same identity). */
  async stoppedOf(records: readonly ProcessRecord[]): Promise<ProcessRecord[]> {
    const entries = await Promise.all(records.map((record) => this.ladder.table.get(record.pid)))
    return records.filter((record, index) => {
      const entry = entries[index]
      return entry !== undefined && entry.startTime === record.startTime && (entry.state === 'T' || entry.state === 't')
    })
  }

  /**
   * Polls until every record is gone (zombies count) or `ms` passed; returns those still alive.
   * Looks at once, on the next turn, then after 1 ms doubling up to `pollMs`: a signalled
   * process usually dies within a millisecond.
   */
  async waitGone(records: readonly ProcessRecord[], ms: number): Promise<ProcessRecord[]> {
    const deadline = Date.now() + ms
    let pending = [...records]
    let interval = 0
    while (true) {
      pending = await this.aliveOf(pending, false)
      const left = deadline - Date.now()
      if (pending.length === 0) return pending
      if (left <= 0) return this.aliveOf(pending)
      if (interval === 0) {
        await nextTurn()
        interval = Math.min(1, this.ladder.pollMs)
      } else {
        await this.pause(Math.min(interval, left))
        interval = Math.min(interval * 2, this.ladder.pollMs)
      }
    }
  }

  /** Polls until every record is stopped (state T or t) or gone, or `ms` passed. */
  async waitStopped(records: readonly ProcessRecord[], ms: number): Promise<void> {
    const deadline = Date.now() + ms
    let pending = [...records]
    while (pending.length > 0 && Date.now() < deadline) {
      const entries = await Promise.all(pending.map((record) => this.ladder.table.get(record.pid)))
      pending = pending.filter((record, index) => {
        const entry = entries[index]
        if (entry === undefined || entry.startTime !== record.startTime || isEnded(entry.state)) return false
        return entry.state !== 'T' && entry.state !== 't'
      })
      if (pending.length > 0) await this.pause(Math.min(this.ladder.pollMs, Math.max(0, deadline - Date.now())))
    }
  }

  /** Signals each record in order, identity-fenced; a refused signal (EPERM) leaves a survivor. */
  async send(records: readonly ProcessRecord[], signal: NodeJS.Signals | ((record: ProcessRecord) => NodeJS.Signals)): Promise<void> {
    for (const record of records) {
      try {
        await signalIfSame(this.ladder.table, record, typeof signal === 'function' ? signal(record) : signal, { kill: this.ladder.kill })
      } catch {}
    }
  }

  /**
   * One rung for `members`: `signal`, wait up to the grace, rescan for processes forked
   * meanwhile; freeze what is left with SIGSTOP (so it cannot fork while looked at), rescan
   * until nothing new appears, and KILL. `sweep` may be false only when a later rung sweeps.
   */
  async stage(
    members: readonly ProcessRecord[],
    signal: NodeJS.Signals | ((record: ProcessRecord) => NodeJS.Signals),
    anchors: readonly ProcessRecord[],
    sweep: boolean,
  ): Promise<void> {
    if (members.length === 0) return
    await this.send(members, signal)
    // A stopped process (job control, SIGTSTP) keeps the signal pending until it continues.
    await this.send(await this.stoppedOf(members), 'SIGCONT')
    const alive = await this.waitGone(members, this.ladder.graceMs)
    const forked = await this.discover([...anchors, ...alive], sweep)
    if (alive.length === 0 && forked.length === 0) return

    const frozen = [...forked, ...alive]
    await this.send(frozen, 'SIGSTOP')
    for (let round = 0; round < FREEZE_ROUNDS; round++) {
      await this.waitStopped(frozen, this.ladder.killWaitMs)
      const more = await this.discover([...anchors, ...frozen], true)
      if (more.length === 0) break
      await this.send(more, 'SIGSTOP')
      frozen.push(...more)
    }
    await this.send(frozen, 'SIGKILL')
    await this.waitGone(frozen, this.ladder.killWaitMs)
  }

  /**
   * The root's rung when its signal is SIGKILL: its children are read again at once, before its
   * exit re-parents them. After kill(2) returns no thread of it can complete a fork (copy_process
   * refuses with a fatal signal pending, kernel/fork.c), so this finds every child forked after
   * the capture; they are KILLed as in `stage`, then the root is waited for.
   */
  async killRoot(root: ProcessRecord): Promise<void> {
    let outcome: SignalOutcome
    try {
      outcome = await signalIfSame(this.ladder.table, root, 'SIGKILL', { kill: this.ladder.kill })
    } catch {
      return // EPERM: reported as a survivor
    }
    if (outcome === 'sent') {
      const forked = await this.discover([root], true)
      if (forked.length > 0) await this.stage(forked, 'SIGKILL', [root], true)
    }
    await this.waitGone([root], this.ladder.killWaitMs)
  }

  /**
   * The last tag sweep: a tagged process that keeps changing its pid (forking, the parent
   * leaving) can escape each rung. What a look finds is KILLed at once, until FINAL_EMPTY_LOOKS
   * looks a millisecond apart find nothing and read no new pid (a look can miss a process
   * between two pids), or `killWaitMs` has passed; what still runs is then a survivor.
   */
  async finalSweep(): Promise<void> {
    if (!this.sweeps()) return
    const until = Date.now() + this.ladder.killWaitMs
    let empty = 0
    while (empty < FINAL_EMPTY_LOOKS && Date.now() < until) {
      const before = this.lookedAt
      const late = await this.discover([], true)
      if (late.length === 0 && (this.hosts === undefined || this.lookedAt === before)) {
        empty++
        if (empty < FINAL_EMPTY_LOOKS) await this.pause(1)
        continue
      }
      empty = 0
      if (late.length > 0) await this.send(late, 'SIGKILL')
    }
  }

  async report(): Promise<TerminateReport> {
    const all = [...this.captured.values()]
    const survivors = await this.aliveOf(all)
    const surviving = new Set(survivors.map(keyOf))
    return { stopped: all.filter((record) => !surviving.has(keyOf(record))), survivors }
  }
}

/**
 * Whether start identity `a` is earlier than `b`: both Linux start times (clock ticks since
 * boot, decimal). False when either is another platform's text, whose order is not read here.
 */
function startedBefore(a: string, b: string): boolean {
  return /^\d+$/.test(a) && /^\d+$/.test(b) && BigInt(a) < BigInt(b)
}

/** Pids a teardown never signals on its own: the kernel's roots, init, this process and its ancestors. */
async function protectedPids(table: ProcessTable, entries?: readonly ProcessEntry[]): Promise<Set<number>> {
  const excluded = new Set<number>([0, 1, process.pid])
  const byPid = entries && new Map(entries.map((entry) => [entry.pid, entry]))
  let pid = process.ppid
  while (pid > 1 && !excluded.has(pid)) {
    excluded.add(pid)
    pid = (byPid ? byPid.get(pid) : await table.get(pid))?.ppid ?? 0
  }
  return excluded
}

/**
 * Stops the process tree under `rootPid` and proves it is gone: capture before any signal → TERM
 * children-first, SIGCONT the stopped → wait up to `graceMs` → rescan, freeze (SIGSTOP), rescan
 * until nothing new → KILL → verify; with `includeRoot`, the same for the root (`rootSignal`).
 * README: "The teardown ladder". Resolves with every captured process as `stopped` or `survivors`
 * (a failed teardown, e.g. EPERM: call again to retry). Init, this process and its ancestors are
 * never signalled.
 * @throws whatever the process table throws when it cannot list processes at all.
 */
export async function terminateTree(options: TerminateTreeOptions): Promise<TerminateReport> {
  const { teardown, members, anchors, rootEntry, protectedSet } = await capture(options)
  const rootRung = options.includeRoot && anchors.length > 0 && !protectedSet.has(options.rootPid)
  const signalFor = options.signalFor
  await teardown.stage(members, signalFor ? (record) => signalFor(record) ?? 'SIGTERM' : 'SIGTERM', anchors, !rootRung)

  if (rootRung) {
    const root = teardown.capture(rootEntry!, true)
    if (root && options.rootSignal === 'SIGKILL') await teardown.killRoot(root)
    else if (root) await teardown.stage([root], options.rootSignal ?? 'SIGTERM', [], true)
  }
  await teardown.finalSweep()
  return teardown.report()
}

/**
 * What `terminateTree(options)` would capture before its first signal, without signalling: the
 * root's descendants and, where it sweeps, the tagged processes and session members that left the
 * tree (the root itself is not among them). A look at one moment: a process forked later is not in it.
 * @throws whatever the process table throws when it cannot list processes at all.
 */
export async function treeMembers(options: TerminateTreeOptions): Promise<ProcessRecord[]> {
  return (await capture(options)).members
}

/** The first look of a teardown: its ladder, the root as listed, and every member found. */
async function capture(options: TerminateTreeOptions) {
  if (options.discovery === 'children' && (options.tag || options.session)) {
    throw new TypeError(`terminateTree: discovery 'children' sweeps no ${options.tag ? 'tag' : 'session'}; use 'scan' or 'orphans'`)
  }
  const table = options.table ?? defaultProcessTable()
  const ladder: Ladder = {
    namespace: options.discovery === 'namespace',
    rootExited: options.rootExited,
    table,
    kill: options.kill ?? ((pid, signal) => process.kill(pid, signal)),
    pollMs: options.pollMs ?? DEFAULT_POLL_MS,
    graceMs: options.graceMs,
    killWaitMs: options.killWaitMs ?? DEFAULT_KILL_WAIT_MS,
    tag: options.tag,
  }
  const walking = options.discovery !== undefined && options.discovery !== 'scan' && table.children !== undefined
  // A walk reads only the root, its members and this process's ancestors; a scan lists everything once.
  let entries = walking ? undefined : await table.snapshot()
  const listedRoot = entries ? entries.find((entry) => entry.pid === options.rootPid) : await table.get(options.rootPid)
  // No descendant of this process's own child can be an ancestor of this process.
  const ownChild = walking && options.discovery === 'children' && listedRoot?.ppid === process.pid
  const protectedSet = ownChild ? new Set([0, 1, process.pid]) : await protectedPids(table, entries)
  const excluded = new Set(protectedSet).add(options.rootPid)

  // A root with another start identity than the caller's is a stranger on a recycled pid.
  const rootEntry = options.rootStartTime === undefined || listedRoot?.startTime === options.rootStartTime ? listedRoot : undefined
  // Where a re-parented process can hang from: init, this process and its ancestors.
  const hosts = options.discovery === 'orphans' && walking ? [...protectedSet].filter((pid) => pid > 0) : undefined
  // The root's session counts as tagged when its start identity is known and it, if running, leads
  // it. Linux allocates no pid in use as a session id (kernel/pid.c); `sessionOf` handles reuse.
  const session = options.session && options.rootStartTime !== undefined && (rootEntry === undefined || rootEntry.sid === rootEntry.pid) ? options.rootPid : undefined
  const teardown = new Teardown(ladder, excluded, !walking, options.rootStartTime, hosts, session)
  const anchors = rootEntry && !isEnded(rootEntry.state) ? [recordOf(rootEntry)] : []
  const members = await teardown.discover(anchors, true, entries)
  if (options.discovery === 'namespace' && walking && teardown.inits.size === 0) {
    // No namespace holds the tree: nothing proves the walk complete, so scan.
    teardown.scanning = true
    entries = await table.snapshot()
    members.push(...(await teardown.discover(anchors, true, entries)))
  }
  return { teardown, members, anchors, rootEntry, protectedSet }
}
