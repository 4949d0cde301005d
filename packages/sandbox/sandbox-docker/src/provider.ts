/**
 * The Docker provider: one container per agent (`SandboxPolicy.agent.key`), each confined
 * process an exec in it started by the relay (relay.cjs) on its terminal or pipes. The README
 * ("How it works") gives its mounts, limits, labels, network and removal.
 */
import { createHash, randomBytes } from 'node:crypto'
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmdirSync, rmSync, statSync, unlinkSync, writeFileSync, type Stats } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { basename, dirname, isAbsolute, join, relative } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import Docker from 'dockerode'
import { agentHome, checkDenyWritePaths, currentOwner, denyWritePaths, namespaceInode, ownerEnded, ownerOfTag, gitGuardScript, NODE_PROXY_PRELOAD, placeholderContent, proxyEnvironment, SandboxError, UNDICI_FOLDER, symlinkBeneath, startEgressProxy, systemRootOf, type EgressProxy, type ExposedPort, type ConfinePolicy, type ConfineResult, type SandboxAgent, type SandboxOwner, type SandboxProvider, type SweptItem, type ProcessOwner } from '@conch/sandbox'
import type { Config } from './config.ts'
import { seccompProfile } from './seccomp.ts'
import { OWNED_FOLDER, ownedFolder, startNetRelay, type NetRelay } from './network.ts'

export const RELAY = fileURLToPath(new URL('./relay.cjs', import.meta.url))
const SHIM = fileURLToPath(new URL('./shim.cjs', import.meta.url))

/** Where the container sees the agent's `run` folder, read-only: `node`, `shim.cjs`, `<token>.sock`, `files/`. */
export const RUN_DIR = '/run/conch'

/** The PATH of processes in the container (Debian's default for root). */
const CONTAINER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/**
 * Capabilities of Docker's default set the container drops: MKNOD (device files host users could
 * open), SETFCAP (set-user-ID by another name), FSETID (set-ID bits kept on write or chown),
 * NET_RAW (raw packets), AUDIT_WRITE. Those left are what package managers and `su` use.
 */
export const DROPPED_CAPABILITIES = ['MKNOD', 'SETFCAP', 'FSETID', 'NET_RAW', 'AUDIT_WRITE']

export const LABEL = { agent: 'conch.agent', pid: 'conch.owner-pid', start: 'conch.owner-start', host: 'conch.owner-host', pidns: 'conch.owner-pidns', held: 'conch.held' } as const

/**
 * The conch a container's owner labels name: pid, start time and PID namespace (`pid:[inode]`;
 * none on an older container, judged as this namespace's). See `ownerEnded`.
 */
function labelledOwner(labels: Record<string, string>): ProcessOwner {
  const pidns = namespaceInode(labels[LABEL.pidns])
  return { ...(pidns !== undefined && { pidns }), pid: Number(labels[LABEL.pid]), startTime: labels[LABEL.start] ?? '' }
}

/** How the daemon is reached: dockerode's modem options from `host` or `DOCKER_HOST`. */
export function daemonOptions(host: string | undefined, env: NodeJS.ProcessEnv = process.env): Docker.DockerOptions {
  const address = host ?? env.DOCKER_HOST ?? 'unix:///var/run/docker.sock'
  if (address.startsWith('unix://')) return { socketPath: address.slice('unix://'.length) }
  const url = new URL(address.replace(/^tcp:/, env.DOCKER_TLS_VERIFY ? 'https:' : 'http:'))
  return { protocol: url.protocol.slice(0, -1) as 'http' | 'https', host: url.hostname, port: Number(url.port || 2375) }
}

interface Entry {
  key: string
  id: string
  mode: ConfinePolicy['mode']
  /** Deny-write paths that did not exist: the daemon made an empty folder on the host for each mount. */
  held: string[]
  /** The agent's private host folder seen at `RUN_DIR` in the container (a local daemon only). */
  folder: string | undefined
  /** Variables every process of the agent gets (network `allow`: the proxy's). */
  env: Record<string, string>
  /** Whether the container has the Node preload and undici (`nodeProxyMounts`): its processes get `NODE_OPTIONS` then. */
  nodeProxy: boolean
  /** The relay in the container's network namespace (network `allow`, `expose`), and the egress proxy. */
  net?: Promise<NetRelay>
  proxy?: EgressProxy
  owners: Set<SandboxOwner>
  disposers: Array<() => void>
  closing?: Promise<void>
}

export interface DockerProvider extends SandboxProvider {
  /**
   * Whether the daemon answers and has the image, as the first confined process finds out.
   * @throws SandboxError `CONTAINER_ENGINE_UNAVAILABLE`, `CONTAINER_IMAGE_MISSING`.
   */
  check(): Promise<void>
  /** Removes every agent's container (the plugin's end). */
  close(): Promise<void>
}

export interface DockerProviderOptions {
  /** The environment `DOCKER_HOST` is read from (default `process.env`). */
  env?: NodeJS.ProcessEnv
  /** Told each host an agent's egress proxy refused. */
  onRefused?(key: string, host: string): void
  /** Starts the egress proxy (default `@conch/sandbox`'s `startEgressProxy`; tests give one with a `resolve`). */
  startEgressProxy?: typeof startEgressProxy
}

export function dockerProvider(config: Config, options: DockerProviderOptions = {}): DockerProvider {
  const daemon = daemonOptions(config.host, options.env)
  const startProxy = options.startEgressProxy ?? startEgressProxy
  const docker = new Docker(daemon)
  const entries = new Map<string, Promise<Entry>>()
  let swept: Promise<void> | undefined

  const engineError = (error: unknown): SandboxError => {
    const { code, statusCode } = error as { code?: string; statusCode?: number }
    const where = 'socketPath' in daemon ? daemon.socketPath! : `${daemon.host}:${daemon.port}`
    const reason =
      code === 'ENOENT' || code === 'ECONNREFUSED'
        ? `nothing answers at ${where} (${code}); start dockerd (\`systemctl start docker\`, or scripts/start-dockerd.sh) or set host in the sandbox-docker entry of cordis.yml (or DOCKER_HOST)`
        : code === 'EACCES' || code === 'EPERM'
          ? `permission denied on ${where} (${code}); run conch as a user in the docker group (\`usermod -aG docker $USER\`, then log in again) or as root`
          : `${where} answered ${statusCode ?? code ?? 'an error'}: ${(error as Error).message}; check the daemon (\`docker info\`)`
    return new SandboxError('CONTAINER_ENGINE_UNAVAILABLE', { engine: 'Docker', reason }, { cause: error })
  }

  /** Removes the containers and private folders of conch processes on this host that are gone; returns them. */
  async function sweep(): Promise<SweptItem[]> {
    const removed: SweptItem[] = []
    for (const name of readdirSync(tmpdir())) {
      const made = OWNED_FOLDER.exec(name)
      if (made === null || !ownerEnded(ownerOfTag(made[1], made[2]!, made[3]!))) continue
      const path = join(tmpdir(), name)
      if (!ownFolder(path)) continue
      rmSync(path, { recursive: true, force: true })
      removed.push({ kind: 'folder', name: path })
    }
    const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL.host}=${hostname()}`] } })
    await Promise.all(
      containers
        .filter((info) => ownerEnded(labelledOwner(info.Labels)))
        .map(async (info) => {
          // Another sweep may have removed it meanwhile: only this one's removals are reported.
          const gone = await docker
            .getContainer(info.Id)
            .remove({ force: true })
            .then(() => true, () => false)
          if (gone) removed.push({ kind: 'container', name: info.Id })
          // The empty folders the daemon made for its held deny-write entries (`conch.held`).
          for (const path of heldOf(info.Labels[LABEL.held])) if (removeEmptyFolder(path)) removed.push({ kind: 'folder', name: path })
        }),
    )
    return removed
  }

  /** The daemon answers and has the image (the first time, containers of gone conchs are removed on the way). */
  async function check(): Promise<void> {
    try {
      await (swept ??= sweep().then(() => undefined))
      await docker.getImage(config.image).inspect()
    } catch (error) {
      swept = undefined
      if ((error as { statusCode?: number }).statusCode === 404) throw new SandboxError('CONTAINER_IMAGE_MISSING', { image: config.image })
      throw engineError(error)
    }
  }

  async function make(agent: SandboxAgent, policy: ConfinePolicy): Promise<Entry> {
    await check()
    const network = agent.network?.mode ?? 'none'
    const held: string[] = []
    const Mounts = mounts(policy, config.denyWrite, held)
    // What each bind beneath the workspace is now (no link on its way), to be found in the started container.
    const bound = Mounts.flatMap((mount) => (mount.Type === 'bind' && mount.Source!.startsWith(`${policy.workspaceRoot}/`) ? [{ path: mount.Target!, stat: lstatSync(mount.Source!) }] : []))
    const owner = currentOwner()
    Mounts.push(...provisioned(policy, agent.key))
    const nodeProxy = network === 'allow' ? nodeProxyMounts(policy) : undefined
    Mounts.push(...(nodeProxy ?? []))
    // Programs without a terminal get their channel and files from this host: a local daemon only.
    const folder = 'socketPath' in daemon ? runFolder() : undefined
    if (folder !== undefined) {
      Mounts.push({ Type: 'bind', Source: folder, Target: RUN_DIR, ReadOnly: true }, { Type: 'bind', Source: process.execPath, Target: `${RUN_DIR}/node`, ReadOnly: true })
    }
    const container = await docker
      .createContainer({
        Image: config.image,
        Cmd: ['sleep', 'infinity'],
        Labels: {
          [LABEL.agent]: agent.key,
          [LABEL.pid]: String(process.pid),
          [LABEL.start]: owner?.startTime ?? '',
          [LABEL.host]: hostname(),
          [LABEL.pidns]: owner === undefined ? '' : `pid:[${owner.pidns}]`,
          [LABEL.held]: JSON.stringify(held),
        },
        WorkingDir: config.workingDir ?? policy.workspaceRoot,
        HostConfig: {
          Init: true,
          NetworkMode: network === 'full' ? 'bridge' : 'none',
          Memory: config.memoryMb * 2 ** 20,
          MemorySwap: config.memoryMb * 2 ** 20,
          PidsLimit: config.pids,
          NanoCpus: Math.round(config.cpus * 1e9),
          ReadonlyRootfs: policy.mode === 'read-only' || !config.writableRoot,
          SecurityOpt: ['no-new-privileges', `seccomp=${JSON.stringify(seccompProfile())}`],
          CapDrop: DROPPED_CAPABILITIES,
          Tmpfs: { '/tmp': 'rw,nosuid,nodev,exec,mode=1777' },
          Mounts,
        },
      })
      .catch((error) => {
        if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
        for (const path of held) removeEmptyFolder(path)
        throw engineError(error)
      })
    const entry: Entry = { key: agent.key, id: container.id, mode: policy.mode, held, folder, env: {}, nodeProxy: nodeProxy !== undefined, owners: new Set(), disposers: [] }
    try {
      await container.start()
      await mountedAsChecked(entry, bound)
      if (agent.network?.mode === 'allow') await egress(entry, agent.network.hosts)
    } catch (error) {
      await remove(entry)
      if (error instanceof SandboxError) throw error
      throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: agent.key, reason: `cannot start its container: ${(error as Error).message}` }, { cause: error })
    }
    return entry
  }

  /**
   * The daemon resolves each bind's source after `mounts` checked it, following a link swapped in
   * meanwhile: before anything runs, each bind must be what was checked (device and inode, through
   * the container's root). Only where the container's root is readable (a local daemon, as root).
   */
  async function mountedAsChecked(entry: Entry, bound: Array<{ path: string; stat: Stats }>): Promise<void> {
    if (bound.length === 0) return
    const { State } = await docker.getContainer(entry.id).inspect()
    if (!inThisHost(State.Pid, entry.id)) return
    for (const { path, stat } of bound) {
      let now: Stats | undefined
      try {
        now = statSync(`/proc/${State.Pid}/root${path}`)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EACCES') return
      }
      if (now?.dev === stat.dev && now.ino === stat.ino) continue
      throw new SandboxError('PROTECTED_PATH_SYMLINK', {
        reason:
          `cannot confine: the container of agent ${entry.key} did not get ${path} of the workspace at ${path}: it was replaced (a symbolic link swapped in?) between conch's check and the daemon's mounts, ` +
          `and the daemon follows links on the host. The container was removed before anything ran in it; find what rewrites the workspace, put the folder or file itself there, and start again`,
      })
    }
  }

  /** The agent's network relay, started on the first need (a local daemon only: it enters the container's network namespace). */
  function netRelay(entry: Entry, need: string): Promise<NetRelay> {
    entry.net ??= (async () => {
      const { State } = await docker.getContainer(entry.id).inspect()
      if (!inThisHost(State.Pid, entry.id)) {
        throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `cannot be given ${need}: its container runs on a daemon whose processes this host cannot see (it needs a local daemon)` })
      }
      return startNetRelay(State.Pid, config.startTimeoutMs)
    })()
    return entry.net
  }

  /** Network `allow`: the egress proxy on the host, and the relay's port to it on the container's loopback. */
  async function egress(entry: Entry, hosts: readonly string[]): Promise<void> {
    const net = await netRelay(entry, 'network allow')
    const socketPath = join(net.folder, 'egress.sock')
    entry.proxy = await startProxy({ socketPath, allow: hosts, onRefused: (host) => options.onRefused?.(entry.key, host) })
    entry.env = proxyEnvironment(await net.egress(socketPath), entry.nodeProxy)
  }

  /** One of the agent's ports on a host listener, at most `maxExposedPorts` of them. */
  async function expose(entry: Entry, port: number): Promise<ExposedPort> {
    const exposed = (await netRelay(entry, `port ${port} exposed`)).expose(port, config.maxExposedPorts)
    if (exposed !== undefined) return exposed
    throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `cannot expose port ${port}: it exposes ${config.maxExposedPorts} ports already (maxExposedPorts)` })
  }

  async function remove(entry: Entry): Promise<void> {
    await (await entry.net?.catch(() => undefined))?.close()
    await entry.proxy?.close()
    const container = docker.getContainer(entry.id)
    await container.remove({ force: true }).catch((error: { statusCode?: number }) => {
      if (error.statusCode !== 404 && error.statusCode !== 409) throw error
    })
    // Proof: the daemon no longer knows it (a removal already under way answers 409 first).
    for (const deadline = Date.now() + config.startTimeoutMs; ; ) {
      try {
        await container.inspect()
      } catch (error) {
        if ((error as { statusCode?: number }).statusCode !== 404) throw error
        for (const path of entry.held) removeEmptyFolder(path)
        if (entry.folder !== undefined) rmSync(entry.folder, { recursive: true, force: true })
        return
      }
      if (Date.now() > deadline) {
        throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `was not removed: the daemon still shows its container ${entry.id.slice(0, 12)} ${config.startTimeoutMs} ms after its removal (docker rm -f ${entry.id.slice(0, 12)})` })
      }
      await delay(20)
    }
  }

  function close(entry: Entry): Promise<void> {
    entry.closing ??= (async () => {
      for (const dispose of entry.disposers.splice(0)) dispose()
      await remove(entry)
    })()
    return entry.closing
  }

  async function place(agent: SandboxAgent, policy: ConfinePolicy): Promise<Entry> {
    let made = entries.get(agent.key)
    if (made === undefined) {
      made = make(agent, policy)
      entries.set(agent.key, made)
      made.catch(() => entries.get(agent.key) === made && entries.delete(agent.key))
    }
    const entry = await made
    if (entry.closing !== undefined) {
      await entry.closing.catch(() => undefined)
      if (entries.get(agent.key) === made) entries.delete(agent.key)
      return place(agent, policy)
    }
    if (entry.mode !== policy.mode) throw new SandboxError('AGENT_SANDBOX_MODE_FIXED', { agent: agent.key, mode: entry.mode, asked: policy.mode })
    const owner = agent.owner
    if (!entry.owners.has(owner)) {
      entry.owners.add(owner)
      const leave = async (): Promise<void> => {
        entry.owners.delete(owner)
        if (entry.owners.size > 0) return
        if (entries.get(agent.key) === made) entries.delete(agent.key)
        await close(entry)
      }
      try {
        entry.disposers.push(owner.onDispose(leave))
      } catch (error) {
        await leave()
        throw error
      }
    }
    return entry
  }

  /** The host pid of the exec whose `$0` is `token`, once it runs; undefined when this host's /proc does not show it. */
  async function relayedPid(entry: Entry, token: string, signal: AbortSignal): Promise<number | undefined> {
    const container = docker.getContainer(entry.id)
    for (const deadline = Date.now() + config.startTimeoutMs; ; ) {
      if (signal.aborted) throw signal.reason
      const { ExecIDs } = await container.inspect()
      for (const id of ExecIDs ?? []) {
        const exec = await docker
          .getExec(id)
          .inspect()
          .catch(() => undefined)
        if (exec?.ProcessConfig.arguments[2] !== token) continue
        if (exec.Running && exec.Pid > 0) return inThisHost(exec.Pid, entry.id) ? exec.Pid : undefined
        if (!exec.Running && exec.ExitCode !== null) {
          throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `could not start a process in its container (exit ${exec.ExitCode})` })
        }
      }
      if (Date.now() > deadline) {
        throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: entry.key, reason: `did not start a process in its container within ${config.startTimeoutMs} ms` })
      }
      await delay(5)
    }
  }

  return {
    name: 'docker',
    platforms: ['linux'],
    sharesLoopback: true,
    fixedMounts: true,
    rootWritable: config.writableRoot,
    async probe() {
      return true
    },
    async confine(argv, policy): Promise<ConfineResult> {
      const agent = policy.agent
      if (agent === undefined) {
        throw new SandboxError('INVALID_POLICY', { reason: 'the Docker provider confines the processes of an agent only (SandboxPolicy.agent)' })
      }
      // One network namespace holds the agent's processes: a process asking for the network gets the agent's way out, its allowlist included.
      if (policy.network === true && (agent.network?.mode ?? 'none') === 'none') {
        throw new SandboxError('AGENT_SANDBOX_FAILED', {
          agent: agent.key,
          reason: "cannot give one process the network: its container's network is the agent's, none (in sandbox-policy, allow the hosts it needs with network allow, or set network full)",
        })
      }
      const entry = await place(agent, policy)
      const exposed = await Promise.all((agent.expose ?? []).map((port) => expose(entry, port)))
      const token = `conch-${randomBytes(12).toString('hex')}`
      // A process that asks for the workspace root (a terminal opened without a cwd) starts in `workingDir` when it is set.
      const cwd = policy.cwd === undefined || policy.cwd === policy.workspaceRoot ? (config.workingDir ?? policy.workspaceRoot) : policy.cwd
      const spec = { daemon, container: entry.id, token, cwd, path: CONTAINER_PATH, guard: gitGuardScript(), env: entry.env, folder: entry.folder, runDir: RUN_DIR }
      return {
        argv: [process.execPath, RELAY, JSON.stringify(spec), ...argv.map((arg) => inContainer(entry, policy, arg))],
        enforcement: 'full',
        provider: 'docker',
        relayed: { pid: (signal) => relayedPid(entry, token, signal) },
        ...(exposed.length > 0 && { exposed }),
      }
    },
    check,
    sweep: async () => {
      try {
        return await sweep()
      } catch (error) {
        throw engineError(error)
      }
    },
    async close() {
      const all = await Promise.allSettled([...entries.values()])
      entries.clear()
      await Promise.all(all.flatMap((made) => (made.status === 'fulfilled' ? [close(made.value)] : [])))
    },
  }
}

/**
 * The agent's `run` folder (private, mode 0700), with the shim and the mount point of the host's
 * node made in it: the container's `RUN_DIR` is read-only.
 */
function runFolder(): string {
  const folder = ownedFolder('run')
  copyFileSync(SHIM, join(folder, 'shim.cjs'))
  writeFileSync(join(folder, 'node'), '')
  mkdirSync(join(folder, 'files'))
  return folder
}

/**
 * How the container names an argument: a provisioned program's file by its canonical path; the
 * host's node as `RUN_DIR/node`; a protected file outside the workspace by its copy in the
 * agent's folder (one per content); anything else as it is.
 */
function inContainer(entry: Entry, policy: ConfinePolicy, arg: string): string {
  if (entry.folder !== undefined && arg === process.execPath) return `${RUN_DIR}/node`
  if (!isAbsolute(arg) || arg === policy.workspaceRoot || arg.startsWith(`${policy.workspaceRoot}/`)) return arg
  let path: string
  try {
    path = realpathSync(arg)
  } catch {
    return arg
  }
  if (programFolders(policy).some((folder) => path === folder || path.startsWith(`${folder}/`))) return path
  if (entry.folder === undefined) return arg
  try {
    const hidden = (policy.hiddenPaths ?? []).some((folder) => path === folder || path.startsWith(`${folder}/`))
    if (hidden || !policy.protectedPaths.includes(path) || !statSync(path).isFile()) return arg
  } catch {
    return arg
  }
  const bytes = readFileSync(path)
  const name = `${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}-${basename(path)}`
  if (!existsSync(join(entry.folder, 'files', name))) writeFileSync(join(entry.folder, 'files', name), bytes, { mode: 0o444 })
  return `${RUN_DIR}/files/${name}`
}

/**
 * The container's mounts: the workspace, then what stays read-only or hidden inside it. Each
 * folder between a writable root and a read-only path is bound onto itself (a rename fence: a
 * mount point cannot be renamed, so `mv .git .git-old; mkdir -p .git/hooks` plants no hooks).
 * The daemon follows links on the host: a mount reached through one is `PROTECTED_PATH_SYMLINK`.
 */
function mounts(policy: ConfinePolicy, denyWrite: readonly string[], held: string[]): Docker.MountSettings[] {
  const root = policy.workspaceRoot
  // Recorded canonical, so that their removal can refuse any link on the way.
  const canonical = realpathSync(root)
  const hold = (path: string) => held.push(join(canonical, relative(root, path)))
  const within = (path: string, folder: string) => path === folder || (path.startsWith(`${folder}/`) && !relative(folder, path).startsWith('..'))
  const list: Docker.MountSettings[] = [{ Type: 'bind', Source: root, Target: root, ReadOnly: policy.mode === 'read-only' }]
  const writable = [...(policy.mode === 'workspace-write' ? [root] : []), ...(policy.writablePaths ?? [])]
  for (const path of policy.writablePaths ?? []) list.push({ Type: 'bind', Source: path, Target: path, ReadOnly: false })
  const guarded: Docker.MountSettings[] = []
  if (policy.mode === 'workspace-write') {
    const paths = denyWritePaths(policy, { denyWrite })
    checkDenyWritePaths(paths, [root])
    const unplaced: string[] = []
    for (const path of paths) {
      if (present(path)) guarded.push({ Type: 'bind', Source: path, Target: path, ReadOnly: true })
      else if (placeholderContent(path) !== undefined && isFolder(dirname(path))) {
        // A folder would stop the host's git: a file with neutral content, made here, bound read-only.
        writeFileSync(path, placeholderContent(path)!, { flag: 'wx', mode: 0o644 })
        guarded.push({ Type: 'bind', Source: path, Target: path, ReadOnly: true })
        hold(path)
      } else if (isFolder(dirname(path))) {
        // Held by an empty read-only folder while the container lives, so it cannot be created.
        guarded.push({ Type: 'tmpfs', Source: '', Target: path, ReadOnly: true })
        hold(path)
      } else unplaced.push(path)
    }
    for (const path of unplaced) {
      // Its folder is missing too: the topmost missing folder is a writable tmpfs of the container's
      // own, so what is made beneath it (`git init`, a hook) never reaches the host.
      let top = dirname(path)
      while (!present(dirname(top))) top = dirname(top)
      if (present(top) || !isFolder(dirname(top)) || guarded.some((mount) => mount.Target === top)) continue // a file on the way (a gitfile), or held already
      guarded.push({ Type: 'tmpfs', Source: '', Target: top, ReadOnly: false })
      hold(top)
    }
  }
  for (const path of policy.protectedPaths.filter((path) => within(path, root))) guarded.push({ Type: 'bind', Source: path, Target: path, ReadOnly: true })
  const fences = new Set<string>()
  for (const { Target: path } of guarded) {
    for (const folder of writable.filter((folder) => path !== folder && within(path, folder))) {
      let fence = folder
      for (const part of relative(folder, path!).split('/').slice(0, -1)) {
        fence = join(fence, part)
        if (!writable.includes(fence)) fences.add(fence)
      }
    }
  }
  for (const fence of fences) list.push({ Type: 'bind', Source: fence, Target: fence, ReadOnly: false })
  list.push(...guarded)
  for (const path of (policy.hiddenPaths ?? []).filter((path) => within(path, root))) {
    if (isFolder(path)) list.push({ Type: 'tmpfs', Source: '', Target: path, ReadOnly: true })
  }
  // The daemon resolves a bind's source on the host: no mount beneath the workspace may go through a link.
  for (const { Target: path } of list) {
    const found = path === root || !within(path!, root) ? undefined : symlinkBeneath(path!, root)
    if (found === undefined) continue
    throw new SandboxError('PROTECTED_PATH_SYMLINK', {
      reason:
        `cannot confine: ${found.link} is a symbolic link (-> ${found.target}) inside the workspace ${root}, and the container mounts ${path} through it: ` +
        `the Docker daemon would follow the link on the host. Put the folder or file itself in place of the link`,
    })
  }
  return list
}

/** The provisioned mounts: each program folder read-only, the agent's own folder of each homes folder (made here, 0700) writable. */
function provisioned(policy: ConfinePolicy, key: string): Docker.MountSettings[] {
  const programs = programFolders(policy).map((path): Docker.MountSettings => ({ Type: 'bind', Source: path, Target: path, ReadOnly: true }))
  const homes = (policy.provisions?.homes ?? []).filter((path) => !overlaps(path, policy.workspaceRoot)).map((folder): Docker.MountSettings => {
    const home = agentHome(folder, key)
    mkdirSync(home, { recursive: true, mode: 0o700 })
    if (!ownFolder(home)) throw new SandboxError('AGENT_SANDBOX_FAILED', { agent: key, reason: `cannot be given its home folder ${home}: it is not a folder of this user's` })
    return { Type: 'bind', Source: home, Target: home, ReadOnly: false }
  })
  return [...programs, ...homes]
}

const overlaps = (path: string, other: string) => path === other || path.startsWith(`${other}/`) || other.startsWith(`${path}/`)

/**
 * The provisioned program folders the container binds: outside the workspace (inside it they are
 * there already), none of the system's folders (`/usr/bin/python3` is the image's own), none by a hidden path.
 */
function programFolders(policy: ConfinePolicy): string[] {
  return (policy.provisions?.programs ?? []).filter(
    (path) => !overlaps(path, policy.workspaceRoot) && systemRootOf(path) === undefined && !(policy.hiddenPaths ?? []).some((hidden) => overlaps(path, hidden)),
  )
}

/**
 * Network `allow`: the Node preload that routes fetch (`NODE_PROXY_PRELOAD` of @conch/sandbox) and
 * the undici it loads, read-only at their own paths (none for what a provisioned folder holds
 * already); undefined when the container cannot have them by `programFolders`' rule (one lies in
 * the workspace, a system folder or a hidden path) or undici is not installed.
 */
function nodeProxyMounts(policy: ConfinePolicy): Docker.MountSettings[] | undefined {
  if (UNDICI_FOLDER === undefined) return undefined
  const bound = programFolders(policy)
  const fresh = [realpathSync(NODE_PROXY_PRELOAD), UNDICI_FOLDER].filter((path) => !bound.some((folder) => path === folder || path.startsWith(`${folder}/`)))
  if (programFolders({ ...policy, provisions: { programs: fresh, homes: [] } }).length < fresh.length) return undefined
  return fresh.map((path): Docker.MountSettings => ({ Type: 'bind', Source: path, Target: path, ReadOnly: true }))
}

/** The `conch.held` label: a JSON array of absolute paths (anything else reads as none). */
function heldOf(label: string | undefined): string[] {
  try {
    const paths: unknown = JSON.parse(label ?? '[]')
    return Array.isArray(paths) ? paths.filter((path): path is string => typeof path === 'string' && path.startsWith('/')) : []
  } catch {
    return []
  }
}

/** lstat(2) of `path`, undefined when it cannot be read. */
function lstatOf(path: string): Stats | undefined {
  try {
    return lstatSync(path)
  } catch {
    return undefined
  }
}

/** Whether anything is at `path`, a link included (not followed). */
const present = (path: string): boolean => lstatOf(path) !== undefined
const isFolder = (path: string): boolean => lstatOf(path)?.isDirectory() === true

/** Whether host pid `pid` is a process of container `id` (its cgroup names the container): false for a remote daemon's pid. */
function inThisHost(pid: number, id: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(id)
  } catch {
    return false
  }
}

/** Whether `path` is a folder (not a link) of this user's. */
function ownFolder(path: string): boolean {
  const stat = lstatOf(path)
  return stat?.isDirectory() === true && stat.uid === process.getuid?.()
}

/**
 * Removes `path` when it is an empty folder, or a file with its placeholder's content, with no
 * symbolic link on the way from `/` (held paths are recorded canonical: a link there was swapped
 * in since): what the daemon or conch made for a held deny-write entry. Whether it did.
 */
function removeEmptyFolder(path: string): boolean {
  try {
    if (symlinkBeneath(path, '/') !== undefined) return false
    const stat = lstatSync(path)
    if (stat.isFile() && stat.nlink === 1 && placeholderContent(path) !== undefined && readFileSync(path, 'utf8') === placeholderContent(path)) {
      unlinkSync(path)
      return true
    }
    if (!stat.isDirectory() || readdirSync(path).length > 0) return false
    rmdirSync(path)
    return true
  } catch {
    return false // gone already
  }
}
