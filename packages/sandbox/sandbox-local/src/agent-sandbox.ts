/**
 * The agent's sandbox on Linux: what every process confined for one agent (`SandboxPolicy.agent`,
 * keyed by its session id) shares — one /tmp and one loopback — made at its first confined process
 * and torn down when the last owner that confined a process for it ends.
 *
 * - /tmp: a private host folder `<runtimeDir>/conch-agents-<uid>/agent-<random>` (mode 0700, made
 *   beneath the base without following a link), bound as each process's /tmp.
 * - loopback: a **holder**, a small node program under bubblewrap with its own network and PID
 *   namespaces (`--unshare-net`, `--die-with-parent`), keeps the agent's network namespace; each
 *   later process without network enters it with `nsenter --net=/proc/<holder>/ns/net` and keeps
 *   a PID namespace of its own, so closing one terminal ends that terminal's tree only. Entering a
 *   namespace takes CAP_SYS_ADMIN over it: as root (conch's CI and containers) the loopback is
 *   shared; as another user bubblewrap's namespaces belong to its own user namespace, no holder
 *   is made and each process keeps a loopback of its own (the /tmp is still shared).
 * - teardown: the holder is killed, then every process still in the agent's network namespace
 *   (a terminal's daemon included), until none is left, and the /tmp folder is removed.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync, readlinkSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { SandboxError, type SandboxAgent, type SandboxOwner } from '@conch/sandbox'
import { BeneathError, ensurePrivateFolder, nodeBeneathFs } from '@conch/subprocess'
import type { AgentPlace } from './bubblewrap.ts'

export interface AgentSandboxOptions {
  /** Where the agents' folders are made (`runtimeDir`). */
  base: string
  /** Whether processes can enter the holder's network namespace (root). */
  shareNetwork: boolean
  /** The argv of a holder that reports its namespace pid on `infoFd` (bubblewrap's `--info-fd`). */
  holderArgv(infoFd: number): [string, ...string[]]
  /** How long the holder may take to start, and the teardown to empty the namespace, in ms. */
  timeoutMs: number
}

interface Holder {
  child: ChildProcess
  /** The holder's first process inside its namespaces, as the host sees it. */
  pid: number
  /** `/proc/<pid>/ns/net`, and that namespace's inode when the holder started. */
  netns: string
  inode: number
  exited: Promise<void>
}

interface Entry {
  key: string
  tmp: string
  holder?: Holder
  owners: Set<SandboxOwner>
  disposers: Array<() => void>
  closing?: Promise<void>
}

const uid = (): number => (typeof process.getuid === 'function' ? process.getuid() : 0)

/** The folder the agents' /tmp folders are made in, under `base`. */
export const agentsFolderPath = (base: string): string => join(base, `conch-agents-${uid()}`)

export class AgentSandboxes {
  private readonly entries = new Map<string, Promise<Entry>>()

  constructor(private readonly options: AgentSandboxOptions) {}

  /**
   * The place of a process of `agent` (with `network` or not): its /tmp, and its network
   * namespace to enter when it has no network. Makes the agent's sandbox on its first process;
   * registers the teardown with `agent.owner` on its first process.
   * @throws SandboxError `AGENT_SANDBOX_FAILED` when the holder cannot start or is gone; the owner's error when it is not live.
   */
  async place(agent: SandboxAgent, network: boolean): Promise<AgentPlace> {
    let made = this.entries.get(agent.key)
    if (made === undefined) {
      made = this.make(agent.key)
      this.entries.set(agent.key, made)
      made.catch(() => this.entries.get(agent.key) === made && this.entries.delete(agent.key))
    }
    const entry = await made
    if (!entry.owners.has(agent.owner)) {
      const owner = agent.owner
      entry.disposers.push(owner.onDispose(() => this.release(entry, owner)))
      entry.owners.add(owner)
    }
    if (network || entry.holder === undefined) return { tmp: entry.tmp }
    const { holder } = entry
    let inode: number | undefined
    try {
      inode = holder.child.exitCode === null && holder.child.signalCode === null ? statSync(holder.netns).ino : undefined
    } catch {
      inode = undefined
    }
    if (inode !== holder.inode) throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `lost the process that holds its network (pid ${holder.pid} is gone)` })
    return { tmp: entry.tmp, netns: holder.netns }
  }

  /** Tears down every agent's sandbox (the provider is going). */
  async closeAll(): Promise<void> {
    const entries = await Promise.allSettled([...this.entries.values()])
    await Promise.all(entries.map((entry) => (entry.status === 'fulfilled' ? this.close(entry.value) : undefined)))
  }

  private async make(key: string): Promise<Entry> {
    const base = agentsFolderPath(this.options.base)
    const tmp = join(base, `agent-${randomBytes(8).toString('hex')}`)
    try {
      for (const folder of [base, tmp]) nodeBeneathFs.close(ensurePrivateFolder(folder, { root: this.options.base }).fd)
    } catch (error) {
      if (!(error instanceof BeneathError)) throw error
      throw new SandboxError('RUNTIME_DIR_UNSAFE', { path: error.path, uid: uid() })
    }
    const entry: Entry = { key, tmp, owners: new Set(), disposers: [] }
    if (!this.options.shareNetwork) return entry
    try {
      entry.holder = await this.startHolder(key)
    } catch (error) {
      rmSync(tmp, { recursive: true, force: true })
      throw error
    }
    return entry
  }

  /** Starts the holder and reads its namespace pid from bubblewrap's info descriptor (fd 3). */
  private startHolder(key: string): Promise<Holder> {
    const argv = this.options.holderArgv(3)
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] })
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
        const netns = `/proc/${pid}/ns/net`
        try {
          resolve({ child, pid: Number(pid), netns, inode: statSync(netns).ino, exited })
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
    const { holder } = entry
    if (holder !== undefined) {
      holder.child.kill('SIGKILL')
      const deadline = Date.now() + this.options.timeoutMs
      for (;;) {
        const pids = inNamespace(holder.inode)
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
      await holder.exited
    }
    rmSync(entry.tmp, { recursive: true, force: true, maxRetries: 5 })
  }
}

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
