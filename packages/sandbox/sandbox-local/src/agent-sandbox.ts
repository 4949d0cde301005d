/**
 * The agent's sandbox on Linux (the README's "The agent sandbox (Linux)"): what every process
 * confined for one agent shares — one /tmp and one loopback — made at its first confined process
 * and torn down when the last owner that confined a process for it ends.
 *
 * - /tmp: a private host folder `<runtimeDir>/conch-agents-<uid>/agent-<pidns>-<pid>-<start>-<n>`.
 * - loopback (as root: entering a namespace takes CAP_SYS_ADMIN over it): a **holder** under
 *   bubblewrap makes the agent's network namespace, **pinned** by a bind mount of
 *   `/proc/<holder>/ns/net` on `<pins>/pin-<maker>-<slot>`, checked against its inode. Later
 *   processes join it with `nsenter --net=<pin>` (busybox's static sh and applet when there are
 *   both, else /bin/sh and util-linux's): the pin names the namespace, not a process, so no reused
 *   pid can lend another.
 * - pins: a sandbox's mount namespace copies the host's, pins included, and bubblewrap fails when
 *   a copied mount goes before it remounts it (bubblewrap issue #650). So the pins folder is a
 *   private mount, and a pin's file is never removed while a namespace that copied it could be
 *   starting (removing a mount point unmounts it everywhere): only unmounted, removed a sweep later.
 * - teardown: the holder, then every process left in the namespace, is killed; the folder is
 *   removed through descriptors (`removeTree`): the agent may have planted links in its /tmp. A
 *   dead conch's folders are swept only by a conch of its PID namespace (elsewhere its pid names
 *   another process).
 */

import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { basename, dirname, join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { promisify } from 'node:util'
import { currentOwner, ownerEnded, ownerOfTag, ownerTag, proxyEnvironment, SandboxError, type ExposedPort, type SandboxAgent, type SandboxOwner } from '@conch/sandbox'
import { beneath, BeneathError, ensurePrivateFolder, nodeBeneathFs, openFile, openFolder, removeTree, type OpenFolder } from '@conch/subprocess'
import type { AgentPlace, Nsenter } from './bubblewrap.ts'
import { uid } from './runtime-dir.ts'

export interface AgentSandboxOptions {
  /** Where the agents' folders are made (`runtimeDir`). */
  base: string
  /** Whether processes can enter the agent's network namespace (root). */
  shareNetwork: boolean
  /** The argv of a holder (holder.cjs with `spec`) that reports its pid on `infoFd` (`--info-fd`) and can write in `sockets`. */
  holderArgv(infoFd: number, spec: { egress?: string }, sockets: string): [string, ...string[]]
  /** The absolute path of a host program (`mount`, `umount`, `busybox`, `nsenter`) on PATH; undefined when there is none. */
  hostCommand(name: HostCommand): string | undefined
  /** Starts the host's egress proxy for an agent whose network is `allow`; absent, such an agent fails. */
  startEgressProxy?: StartEgressProxy
  /** Told each host an agent's proxy refused. */
  onRefused?(key: string, host: string): void
  /** How long the holder may take to start, and the teardown to empty the namespace, in ms. */
  timeoutMs: number
  /** Whether a holder that ended before it was ready only lost the host's mount-table race (its stderr): then it starts again. */
  lostRace?(stderr: string): boolean
  /** How many times the holder is started while it only loses that race (default 1). */
  startAttempts?: number
  /** How many ports one agent may expose (each a host listener until its end). */
  maxExposedPorts: number
  /** Told the held folders no agent's sandbox nor process being placed covers any more (their placeholders can go). */
  onHeldReleased?(paths: string[]): void
}

/** The programs the host runs for an agent's sandbox. */
type HostCommand = 'mount' | 'umount' | 'busybox' | 'nsenter'

/** The shape of `startEgressProxy` (egress-proxy.ts). */
export type StartEgressProxy = (options: { socketPath: string; allow: readonly string[]; onRefused?: (host: string) => void }) => Promise<{ close(): Promise<void> }>

interface Holder {
  child: ChildProcess
  /** The holder's stdout, one JSON object a line; `reading` is the last reader's turn. */
  lines: AsyncIterator<Record<string, unknown>>
  reading?: Promise<unknown>
  /** The holder's first process inside its namespaces, as the host sees it. */
  pid: number
  /** The inode of its network namespace when it started. */
  inode: number
  exited: Promise<void>
  /** The end of what it wrote on stderr (bubblewrap's errors). */
  stderr(): string
}

interface Entry {
  key: string
  /** The agent's folder: `tmp/` (its /tmp) and `sockets/` (the holder's and the proxy's). */
  folder: string
  tmp: string
  sockets: string
  network: 'none' | 'allow' | 'full'
  /** The pin of the agent's network namespace (`<pins>/pin-<maker>-<slot>`), its slot, the namespace's inode, and the programs that join it. */
  netns?: { pin: string; slot: number; inode: number; nsenter: Nsenter }
  holder?: Holder
  proxy?: { close(): Promise<void> }
  /** The port of the holder's relay to the proxy (network `allow`). */
  proxyPort?: number
  /** The exposed ports: host listener by agent port. */
  exposed: Map<number, Promise<{ server: Server; hostPort: number }>>
  connections: Set<Socket>
  /** The agent's own folder over each held folder: source by target. */
  held: Map<string, string>
  owners: Set<SandboxOwner>
  disposers: Array<() => void>
  closing?: Promise<void>
}

/**
 * An agent's folder name records the conch that made it (`ownerTag`, @conch/sandbox), then counts
 * its agents: `agent-<pidns>-<pid>-<start>-<n>`, unique without a random part, so that the unix
 * sockets in it stay within sun_path's 108 bytes under a long `runtimeDir`. A name of before the
 * namespace was kept, `agent-<pid>-<start>-<random>`, is judged as one of this namespace's.
 */
const MADE_BY = /^agent-(?:(\d+)-)?(\d+)-(\d+)-[0-9a-f]+$/
/** A pin's name: `pin-<pidns>-<pid>-<start>-<slot>`, its maker's tag then its slot. */
const PINNED_BY = /^pin-(\d+)-(\d+)-(\d+)-\d+$/
let maker: ReturnType<typeof currentOwner>
let agentsMade = 0

/** The folder the agents' /tmp folders are made in, under `base`. */
export const agentsFolderPath = (base: string): string => join(base, `conch-agents-${uid()}`)

/** The folder the agents' pins are made in, a private mount of its own (see the top of this file). */
export const pinsFolderPath = (base: string): string => join(agentsFolderPath(base), 'pins')

export class AgentSandboxes {
  private readonly entries = new Map<string, Promise<Entry>>()
  /** How many covers each held folder has: agents' sandboxes, processes being placed, `cover` calls. */
  private readonly covers = new Map<string, number>()
  /** The pin slots of this conch's live agents; a free one's file is used again. */
  private readonly slots = new Set<number>()
  /** The pins folder made a private mount (once per provider). */
  private pinsMounted: Promise<void> | undefined
  /** The programs later processes join through (`joinCommand`), found at the first agent's sandbox that pins. */
  private joining: Promise<Nsenter | undefined> | undefined

  constructor(private readonly options: AgentSandboxOptions) {}

  /**
   * Counts a cover of each of `targets` (held folders, deny-write.ts): `onHeldReleased` is told one
   * only once no cover is left. A process of no agent covers its held folders for good.
   */
  cover(targets: readonly string[]): void {
    for (const target of targets) this.covers.set(target, (this.covers.get(target) ?? 0) + 1)
  }

  /** Ends a cover of each of `targets`, and tells `onHeldReleased` those left with none. */
  private uncover(targets: readonly string[]): void {
    const released = targets.filter((target) => {
      const left = (this.covers.get(target) ?? 1) - 1
      if (left > 0) this.covers.set(target, left)
      else this.covers.delete(target)
      return left <= 0
    })
    if (released.length > 0) this.options.onHeldReleased?.(released)
  }

  /**
   * The place of a process of `agent` (with `network` or not): its /tmp, the agent's own folder
   * over each of `held` (deny-write.ts), and its network namespace to enter when it has no
   * network. Makes the agent's sandbox on its first process; registers the teardown with
   * `agent.owner` on its first process. Each of `held` is covered while the process is placed,
   * then for as long as the agent's sandbox lives: another agent's end leaves its placeholder.
   * @throws SandboxError `AGENT_SANDBOX_FAILED` when the holder cannot start or is gone; the owner's error when it is not live.
   */
  async place(agent: SandboxAgent, network: boolean, held: readonly string[] = []): Promise<AgentPlace & { exposed: ExposedPort[] }> {
    // Counted before anything is awaited: the caller holds these placeholders now.
    this.cover(held)
    try {
      return await this.placeIn(agent, network, held)
    } finally {
      this.uncover(held)
    }
  }

  private async placeIn(agent: SandboxAgent, network: boolean, held: readonly string[]): Promise<AgentPlace & { exposed: ExposedPort[] }> {
    let made = this.entries.get(agent.key)
    if (made === undefined) {
      made = this.make(agent.key, agent.network ?? { mode: 'none' })
      this.entries.set(agent.key, made)
      made.catch(() => this.entries.get(agent.key) === made && this.entries.delete(agent.key))
    }
    const entry = await made
    if (entry.closing !== undefined) {
      // Its last owner ended: this process belongs to the agent's next sandbox.
      await entry.closing.catch(() => undefined)
      return this.placeIn(agent, network, held)
    }
    if (!entry.owners.has(agent.owner)) {
      const owner = agent.owner
      try {
        entry.disposers.push(owner.onDispose(() => this.release(entry, owner)))
      } catch (error) {
        // The owner ended while the sandbox was being made: nobody else holds it, so it goes.
        if (entry.owners.size === 0) await this.close(entry)
        throw error
      }
      entry.owners.add(owner)
    }
    const exposed = await Promise.all([...new Set(agent.expose ?? [])].map((port) => this.expose(entry, port)))
    const own = { tmp: entry.tmp, held: held.map((target) => ({ target, source: this.heldFolder(entry, target) })), exposed }
    if (network || entry.netns === undefined) return own
    const child = entry.holder?.child
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
      throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `lost the process that holds its network (pid ${entry.holder?.pid} is gone)` })
    }
    const { pin, nsenter } = entry.netns
    return { ...own, netns: { pin, nsenter }, ...(entry.proxyPort !== undefined && { env: proxyEnvironment(entry.proxyPort) }) }
  }

  /**
   * The agent's own folder for the held folder `target`, `<folder>/held/<hash>` (made private on first use).
   * @throws SandboxError `RUNTIME_DIR_UNSAFE` when a folder on the way is not a private folder of this user's.
   */
  private heldFolder(entry: Entry, target: string): string {
    let source = entry.held.get(target)
    if (source !== undefined) return source
    source = join(entry.folder, 'held', createHash('sha256').update(target).digest('hex').slice(0, 32))
    privately(() => {
      for (const path of [dirname(source), source]) nodeBeneathFs.close(ensurePrivateFolder(path, { root: this.options.base }).fd)
    })
    entry.held.set(target, source)
    this.cover([target])
    return source
  }

  /**
   * Makes the agent's loopback `port` reachable on a host 127.0.0.1 port (once per port).
   * @throws SandboxError `AGENT_SANDBOX_FAILED` when the agent has no namespace to expose from, or exposes `maxExposedPorts` already.
   */
  private expose(entry: Entry, port: number): Promise<ExposedPort> {
    if (entry.network === 'full') return Promise.resolve({ port, hostPort: port })
    let listening = entry.exposed.get(port)
    if (listening === undefined) {
      const { holder } = entry
      if (holder === undefined) {
        return Promise.reject(new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `cannot expose port ${port}: its loopback is not shared (that takes root)` }))
      }
      if (entry.exposed.size >= this.options.maxExposedPorts) {
        return Promise.reject(new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `cannot expose port ${port}: the agent exposes ${entry.exposed.size} ports already (maxExposedPorts)` }))
      }
      const socket = join(entry.sockets, `expose-${port}.sock`)
      listening = (async () => {
        await untilLine(holder, (line) => line['exposed'] === port, entry.key, `${JSON.stringify({ port, socket })}\n`)
        const server = createServer((client) => {
          const inside = connect(socket)
          for (const [a, b] of [[client, inside], [inside, client]] as const) {
            entry.connections.add(a)
            a.on('close', () => entry.connections.delete(a))
            a.pipe(b).on('error', () => a.destroy())
            a.on('error', () => b.destroy()).on('close', () => b.destroy())
          }
        })
        // Host loopback only: never another address.
        await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
        return { server, hostPort: (server.address() as { port: number }).port }
      })()
      entry.exposed.set(port, listening)
      listening.catch(() => entry.exposed.get(port) === listening && entry.exposed.delete(port))
    }
    return listening.then(({ hostPort }) => ({ port, hostPort }))
  }

  /** Tears down every agent's sandbox (the provider is going). */
  async closeAll(): Promise<void> {
    const entries = await Promise.allSettled([...this.entries.values()])
    await Promise.all(entries.map((entry) => (entry.status === 'fulfilled' ? this.close(entry.value) : undefined)))
  }

  private async make(key: string, network: NonNullable<SandboxAgent['network']>): Promise<Entry> {
    maker ??= currentOwner()
    const folder = join(agentsFolderPath(this.options.base), `agent-${maker === undefined ? randomBytes(8).toString('hex') : `${ownerTag(maker)}-${++agentsMade}`}`)
    const entry: Entry = { key, folder, tmp: join(folder, 'tmp'), sockets: join(folder, 'sockets'), network: network.mode, exposed: new Map(), connections: new Set(), held: new Map(), owners: new Set(), disposers: [] }
    const pinning = network.mode !== 'full' && this.options.shareNetwork
    await privately(async () => {
      await this.sweep()
      for (const path of [folder, entry.tmp, entry.sockets]) nodeBeneathFs.close(ensurePrivateFolder(path, { root: this.options.base }).fd)
    })
    if (!pinning) {
      if (network.mode === 'allow') {
        removeTree(folder, { root: this.options.base })
        throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: 'cannot enforce network: allow, which needs its loopback shared with a relay to the proxy (that takes root); use network: none or full' })
      }
      return entry
    }
    const slot = this.takeSlot()
    try {
      // Found once: every later process is started through it.
      this.joining ??= this.joinCommand()
      const nsenter = await this.joining
      if (nsenter === undefined) {
        this.joining = undefined
        throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: 'nsenter was not found in a system folder of PATH, neither as an applet of a busybox that has sh too nor from util-linux; install busybox-static' })
      }
      await this.pinFile(key, slot)
      let egress: string | undefined
      if (network.mode === 'allow') {
        if (this.options.startEgressProxy === undefined) throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: 'cannot enforce network: allow: this provider has no egress proxy' })
        egress = join(entry.sockets, 'egress.sock')
        entry.proxy = await this.options.startEgressProxy({ socketPath: egress, allow: network.hosts, onRefused: (host) => this.options.onRefused?.(key, host) })
      }
      for (let attempt = 1; ; attempt++) {
        const [pinned, ready] = await this.startPinned(entry, egress, slot)
        if (pinned.status === 'fulfilled' && ready.status === 'fulfilled') {
          entry.netns = { ...pinned.value, slot, nsenter }
          if (typeof ready.value['proxyPort'] === 'number') entry.proxyPort = ready.value['proxyPort']
          break
        }
        // bubblewrap reports the holder's pid before it sets up its mounts, so the mount table's race
        // ends a holder that was reported: nothing ran in it yet, so it is started again.
        const failure = [pinned, ready].find((result) => result.status === 'rejected')!.reason as Error
        const stderr = entry.holder?.stderr() ?? failure.message
        if (attempt >= (this.options.startAttempts ?? 1) || !this.options.lostRace?.(stderr)) throw failure
        entry.holder?.child.kill('SIGKILL')
        await entry.holder?.exited
        delete entry.holder
        await this.unpin(this.pinPath(slot))
      }
    } catch (error) {
      entry.holder?.child.kill('SIGKILL')
      await entry.proxy?.close().catch(() => {})
      await this.unpin(this.pinPath(slot)).catch(() => {})
      this.slots.delete(slot)
      removeTree(folder, { root: this.options.base })
      throw error
    }
    return entry
  }

  /** Starts the agent's holder and pins its namespace in `slot`; both settled, so a failure is cleaned up after both. */
  private async startPinned(entry: Entry, egress: string | undefined, slot: number): Promise<[PromiseSettledResult<{ pin: string; inode: number }>, PromiseSettledResult<Record<string, unknown>>]> {
    let holder: Holder
    try {
      holder = entry.holder = await this.startHolder(entry.key, egress === undefined ? {} : { egress }, entry.sockets)
    } catch (error) {
      return [{ status: 'rejected', reason: error }, { status: 'rejected', reason: error }]
    }
    return Promise.allSettled([this.pin(entry.key, holder, slot), untilLine(holder, () => true, entry.key)])
  }

  /** The programs that join: busybox's when `busybox --list` has `sh` and `nsenter`, else util-linux's nsenter(1) (bubblewrap.ts, `Nsenter`); or undefined. */
  private async joinCommand(): Promise<Nsenter | undefined> {
    const busybox = this.options.hostCommand('busybox')
    if (busybox !== undefined) {
      const applets = await execFileAsync(busybox, ['--list'], { timeout: this.options.timeoutMs, killSignal: 'SIGKILL' }).then(
        ({ stdout }) => stdout.split('\n'),
        (): string[] => [],
      )
      if (applets.includes('sh') && applets.includes('nsenter')) return { busybox }
    }
    const utilLinux = this.options.hostCommand('nsenter')
    return utilLinux === undefined ? undefined : { utilLinux }
  }

  /** The path of this conch's pin in `slot`. */
  private pinPath(slot: number): string {
    return join(pinsFolderPath(this.options.base), `pin-${maker === undefined ? `x${process.pid}` : ownerTag(maker)}-${slot}`)
  }

  /** The lowest pin slot no live agent of this conch holds, now taken. */
  private takeSlot(): number {
    let slot = 0
    while (this.slots.has(slot)) slot++
    this.slots.add(slot)
    return slot
  }

  /**
   * Makes the pins folder a private mount of its own unless it is one already (see the top of this
   * file). It stays mounted: unmounting it would reach the sandboxes that copied it.
   */
  private ensurePinsMount(): Promise<void> {
    if (this.pinsMounted !== undefined) return this.pinsMounted
    // As mountinfo names it: `runtimeDir` may go through a link.
    const folder = realpathSync(pinsFolderPath(this.options.base))
    const mounting = mountPoints().includes(folder) ? Promise.resolve() : this.runHost('mount', ['--bind', '--make-private', folder, folder])
    this.pinsMounted = mounting
    // A failure is tried again at the next agent's sandbox.
    mounting.catch(() => this.pinsMounted === mounting && (this.pinsMounted = undefined))
    return mounting
  }

  /**
   * Makes the empty file of the pin in `slot` (or keeps an earlier agent's) in the pins folder.
   * @throws SandboxError `RUNTIME_DIR_UNSAFE` when a folder on the way is not a private folder of this user's, `AGENT_SANDBOX_FAILED` when the folder cannot be mounted.
   */
  private async pinFile(key: string, slot: number): Promise<void> {
    const name = basename(this.pinPath(slot))
    privately(() => {
      const pins = ensurePrivateFolder(pinsFolderPath(this.options.base), { root: this.options.base })
      try {
        nodeBeneathFs.close(openFile(pins, name, 'create'))
      } catch (error) {
        if (!(error instanceof BeneathError && error.code === 'PATH_EXISTS')) throw error
        nodeBeneathFs.close(openFile(pins, name, 'read'))
      } finally {
        nodeBeneathFs.close(pins.fd)
      }
    })
    try {
      await this.ensurePinsMount()
    } catch (error) {
      throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: `could not make its pins folder a mount of its own: ${(error as Error).message}` })
    }
  }

  /**
   * Bind-mounts the holder's network namespace on the pin in `slot` (an empty file), checked
   * against the inode the holder's namespace had when it reported its pid.
   */
  private async pin(key: string, holder: Holder, slot: number): Promise<{ pin: string; inode: number }> {
    const pin = this.pinPath(slot)
    try {
      await this.runHost('mount', ['--bind', `/proc/${holder.pid}/ns/net`, pin])
    } catch (error) {
      throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: `could not pin its network namespace: ${(error as Error).message}` })
    }
    if (statSync(pin).ino !== holder.inode) throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: `lost the process that holds its network (pid ${holder.pid} ended)` })
    return { pin, inode: holder.inode }
  }

  /** Unmounts `pin` when it is mounted (its file is on another device than its folder); whether it was. */
  private async unpin(pin: string): Promise<boolean> {
    let mounted: boolean
    try {
      mounted = lstatSync(pin).dev !== lstatSync(dirname(pin)).dev
    } catch {
      return false
    }
    // Detached at once, even while an nsenter that started before the teardown holds it open.
    if (mounted) await this.runHost('umount', ['--lazy', pin])
    return mounted
  }

  /**
   * Runs the host program `name`, found in a system folder of PATH (bubblewrap.ts,
   * `SYSTEM_FOLDERS`: never in one a sandbox may write); rejects with its
   * stderr when it fails or outlives `timeoutMs`.
   */
  private async runHost(name: 'mount' | 'umount', args: string[]): Promise<void> {
    const file = this.options.hostCommand(name)
    if (file === undefined) throw new Error(missing(name))
    try {
      await execFileAsync(file, args, { timeout: this.options.timeoutMs, killSignal: 'SIGKILL' })
    } catch (error) {
      const { stderr } = error as { stderr?: string }
      throw new Error(`${file} ${args.join(' ')}: ${stderr?.trim() || (error as Error).message}`)
    }
  }

  /**
   * Unpins and removes the agents' folders whose maker has ended (run before each agent's sandbox
   * is made, and by `conch gc`); resolves to the paths removed. A folder that cannot be removed
   * now (another conch sweeps it, or it is busy) stays for the next sweep.
   * @throws SandboxError `RUNTIME_DIR_UNSAFE` when the agents' folder is not a private folder of this user's.
   */
  async sweep(): Promise<string[]> {
    const agents = privately(() => ensurePrivateFolder(agentsFolderPath(this.options.base), { root: this.options.base }))
    let dead: string[]
    try {
      dead = this.deadFolders(agents)
    } finally {
      nodeBeneathFs.close(agents.fd)
    }
    const [removed] = await Promise.all([Promise.all(dead.map(async (path) => ((await this.removeDead(path)) ? [path] : []))), this.sweepPins()])
    return removed.flat()
  }

  /**
   * Unmounts the pins of conchs that have ended, and removes the files of those that were not
   * mounted any more (a pin unmounted now keeps its file until the next sweep).
   */
  private async sweepPins(): Promise<void> {
    const folder = pinsFolderPath(this.options.base)
    const pins = privately(() => openFolder(folder, { root: this.options.base, create: false }))
    if (pins === undefined) return
    try {
      for (const { name } of nodeBeneathFs.readdir(beneath(pins, '.'))) {
        const made = PINNED_BY.exec(name)
        if (made === null || !ownerEnded(ownerOfTag(made[1], made[2]!, made[3]!))) continue
        try {
          if (await this.unpin(join(folder, name))) continue
          nodeBeneathFs.unlink(beneath(pins, name))
        } catch {
          // another conch sweeps it: the next sweep retries
        }
      }
    } finally {
      nodeBeneathFs.close(pins.fd)
    }
  }

  /**
   * The agents' folders (in `agents`) whose maker has ended — a conch that was killed leaves its
   * agents' /tmp and pin behind, while bubblewrap's `--die-with-parent` ends their processes.
   */
  private deadFolders(agents: OpenFolder): string[] {
    return nodeBeneathFs
      .readdir(beneath(agents, '.'))
      .filter(({ name }) => {
        const made = MADE_BY.exec(name)
        return made !== null && ownerEnded(ownerOfTag(made[1], made[2]!, made[3]!))
      })
      .map(({ name }) => join(agents.path, name))
  }

  /** Unpins (a pin of before the pins folder: `<folder>/netns`) and removes a dead agent's folder; whether it did (one that cannot be removed now stays for the next sweep). */
  private async removeDead(folder: string): Promise<boolean> {
    try {
      await this.unpin(join(folder, 'netns'))
      removeTree(folder, { root: this.options.base })
      return true
    } catch {
      // another conch sweeps it, or it is busy: the next sweep retries
      return false
    }
  }

  /** Starts the holder and reads its namespace pid from bubblewrap's info descriptor (fd 3). */
  private startHolder(key: string, spec: { egress?: string }, sockets: string): Promise<Holder> {
    const argv = this.options.holderArgv(3, spec, sockets)
    const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe', 'pipe'] })
    const lines = jsonLines(child.stdout!)
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    let info = ''
    let stderr = ''
    child.stderr!.setEncoding('utf8').on('data', (text: string) => void (stderr = (stderr + text).slice(-2000)))
    const failed = (reason: string) => {
      child.kill('SIGKILL')
      return new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason })
    }
    return new Promise<Holder>((resolve, reject) => {
      const timer = setTimeout(() => reject(failed(`could not start the process that holds its network within ${this.options.timeoutMs} ms`)), this.options.timeoutMs)
      const info$ = child.stdio[3] as NodeJS.ReadableStream
      info$.setEncoding('utf8')
      info$.on('data', (text: string) => {
        info += text
        const pid = /"child-pid"\s*:\s*(\d+)/.exec(info)?.[1]
        if (pid === undefined) return
        clearTimeout(timer)
        try {
          resolve({ child, lines, pid: Number(pid), inode: statSync(`/proc/${pid}/ns/net`).ino, exited, stderr: () => stderr })
        } catch (error) {
          reject(failed(`could not read the namespace of its holder (${(error as Error).message})`))
        }
      })
      child.once('error', (error) => {
        clearTimeout(timer)
        reject(failed(`could not start the process that holds its network: ${error.message}`))
      })
      child.once('exit', (code, signal) => {
        clearTimeout(timer)
        reject(failed(`holder exited (${signal ?? `code ${code}`}) before it was ready${stderr.trim() ? `: ${stderr.trim()}` : ''}`))
      })
    })
  }

  private async release(entry: Entry, owner: SandboxOwner): Promise<void> {
    entry.owners.delete(owner)
    if (entry.owners.size === 0) await this.close(entry)
  }

  /**
   * Kills the holder, then every process left in the agent's network namespace until none is
   * (each found by its `/proc/<pid>/ns/net`; a pid recycled between that read and kill(2) cannot
   * be excluded without pidfds), and removes the /tmp folder.
   * @throws SandboxError `AGENT_SANDBOX_SURVIVORS` when processes are still there after `timeoutMs`.
   */
  private close(entry: Entry): Promise<void> {
    entry.closing ??= this.teardown(entry)
    return entry.closing
  }

  private async teardown(entry: Entry): Promise<void> {
    const current = this.entries.get(entry.key)
    if (current !== undefined && (await current.catch(() => undefined)) === entry && this.entries.get(entry.key) === current) this.entries.delete(entry.key)
    for (const dispose of entry.disposers.splice(0)) dispose()
    entry.owners.clear()
    const { holder, netns } = entry
    holder?.child.kill('SIGKILL')
    if (netns !== undefined) {
      const deadline = Date.now() + this.options.timeoutMs
      for (;;) {
        const pids = inNamespace(netns.inode)
        if (pids.length === 0) break
        if (Date.now() > deadline) throw new SandboxError('AGENT_SANDBOX_SURVIVORS', { agent: entry.key, pids })
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL')
          } catch {
            // gone already
          }
        }
        await delay(10)
      }
    }
    await holder?.exited
    for (const socket of entry.connections) socket.destroy()
    const servers = await Promise.allSettled(entry.exposed.values())
    await Promise.all(servers.map((listening) => listening.status === 'fulfilled' && new Promise((resolve) => listening.value.server.close(resolve))))
    await entry.proxy?.close()
    if (netns !== undefined) {
      // The file stays for this conch's next agent: removing it would unmount its copies.
      await this.unpin(netns.pin)
      this.slots.delete(netns.slot)
    }
    removeTree(entry.folder, { root: this.options.base })
    this.uncover([...entry.held.keys()])
  }
}

const execFileAsync = promisify(execFile)

/** The mount points of this process's mount namespace (proc(5) mountinfo, field 5, octal escapes undone). */
function mountPoints(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((point): point is string => point !== undefined)
    .map((point) => point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8))))
}

/**
 * `run()`, with a BeneathError (a folder on the way is not a private folder of this user's) as
 * SandboxError `RUNTIME_DIR_UNSAFE`; a promise's rejection too.
 */
function privately<T>(run: () => T): T {
  const unsafe = (error: unknown): never => {
    if (!(error instanceof BeneathError)) throw error
    throw new SandboxError('RUNTIME_DIR_UNSAFE', { path: error.details.path, uid: uid() })
  }
  try {
    const result = run()
    return (result instanceof Promise ? result.catch(unsafe) : result) as T
  } catch (error) {
    return unsafe(error)
  }
}

const missing = (name: 'mount' | 'umount'): string => `${name} (util-linux) was not found in a system folder of PATH; install it`

/** The pids of the processes in the network namespace with `inode` (proc(5) `ns/net` links read `net:[<inode>]`). */
export function inNamespace(inode: number): number[] {
  const link = `net:[${inode}]`
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (readlinkSync(`/proc/${name}/ns/net`) === link) pids.push(Number(name))
    } catch {
      // gone, or not ours to read
    }
  }
  return pids
}

/** The JSON objects `stream` carries, one a line. */
async function* jsonLines(stream: NodeJS.ReadableStream): AsyncGenerator<Record<string, unknown>> {
  let pending = ''
  stream.setEncoding('utf8')
  for await (const chunk of stream) {
    pending += chunk as string
    let newline: number
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline)
      pending = pending.slice(newline + 1)
      yield JSON.parse(line) as Record<string, unknown>
    }
  }
}

/** Writes `request` (if any) to the holder and reads its lines until one satisfies `wanted`; one request at a time. */
function untilLine(holder: Holder, wanted: (line: Record<string, unknown>) => boolean, key: string, request?: string): Promise<Record<string, unknown>> {
  const read = async (): Promise<Record<string, unknown>> => {
    if (request !== undefined) holder.child.stdin!.write(request)
    for (;;) {
      const next = await holder.lines.next()
      if (next.done) throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: `lost the process that holds its network (pid ${holder.pid} ended)` })
      if (wanted(next.value)) return next.value
    }
  }
  const turn = (holder.reading ?? Promise.resolve()).then(read, read)
  holder.reading = turn.catch(() => undefined)
  return turn
}
