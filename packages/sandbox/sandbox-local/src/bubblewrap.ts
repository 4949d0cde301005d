/**
 * The Linux provider: bubblewrap (bwrap(1)). The whole filesystem is mounted read-only, the
 * workspace (and configured paths) writable on top under workspace-write, with a fresh /dev and
 * /proc whose kernel-control files are read-only or masked, a private /tmp and home, masked
 * credentials, read-only protected paths, its own PID, IPC and UTS namespaces (and network,
 * unless allowed), no capabilities, and a seccomp filter.
 */
import { realpathSync, statSync } from 'node:fs'
import { delimiter, isAbsolute, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { checkDenyWritePaths, denyWritePaths, gitGuardScript, isWithin, NODE_PROXY_PRELOAD, SandboxError, UNDICI_FOLDER, type ConfinePolicy, type ConfineResult, type ExposedPort, type SandboxPolicy, type SandboxProvider } from '@conch/sandbox'
import { resolveExecutable, SYSTEM_FOLDERS, systemFolders } from '@conch/subprocess'
import type { Config } from './config.ts'
import { folderLedger, placeholders, type Placeholders } from './deny-write.ts'
import { KERNEL_MASKED_PATHS, KERNEL_READ_ONLY_PATHS } from './kernel-paths.ts'
import { runProbe, type ProbeRunner } from './probe.ts'
import { AgentSandboxes, agentsFolderPath, type StartEgressProxy } from './agent-sandbox.ts'
import { openRuntimeDir, runtimeDirPath, type RuntimeDir } from './runtime-dir.ts'
import { seccompArchOf, seccompProgram } from './seccomp.ts'
import { RUNTIME_DIRS, RUNTIME_FILES_KEPT, SERVICE_SOCKETS_MASKED } from './service-paths.ts'

export type BubblewrapOptions = Pick<
  Config,
  'network' | 'readWritePaths' | 'readOnlyPaths' | 'runnerCommand' | 'privateHome' | 'homeDir' | 'homeReadOnly' | 'denyRead'
> &
  Partial<Pick<Config, 'denyWrite'>>

/** What the argv needs from the host's filesystem, injectable for tests. */
export interface HostPaths {
  /** stat(2), following symlinks: `file` (anything but a directory), `directory`, or undefined when missing. */
  kind(path: string): 'file' | 'directory' | undefined
  /** realpath(3), or undefined when it cannot be resolved. */
  realpath(path: string): string | undefined
  /** The absolute folders of the PATH confined programs inherit (default: this process's PATH). */
  searchPath(): string[]
  /**
   * The folders host programs conch runs outside any sandbox are looked up in (default: the
   * `SYSTEM_FOLDERS` on this process's PATH, in its order).
   */
  programFolders(): string[]
}

export const nodeHostPaths: HostPaths = {
  kind(path) {
    try {
      return statSync(path).isDirectory() ? 'directory' : 'file'
    } catch {
      return undefined
    }
  },
  realpath(path) {
    try {
      return realpathSync(path)
    } catch {
      return undefined
    }
  },
  searchPath: () => (process.env['PATH'] ?? '').split(delimiter).filter((dir) => isAbsolute(dir)),
  programFolders: () => systemFolders(process.env['PATH'] ?? ''),
}

/** The host files the argv refers to (see runtime-dir.ts). */
export interface HostFiles {
  /** The compiled seccomp filter, opened on `SECCOMP_FD` by the argv's first process. */
  seccompFilter: string
  /** An empty read-only file and folder, bound over masked paths. */
  emptyFile: string
  emptyDir: string
  /** The folder that holds them; kept read-only in every sandbox. */
  runtimeDir: string
  /**
   * The folder of the agents' sandboxes (their /tmp and sockets), hidden in every sandbox where
   * the private /tmp or home does not cover it already; a process sees only its own through /tmp.
   */
  agentsFolder?: string
}

/** The descriptor the filter is opened on (a single digit, so any POSIX sh can redirect it). */
export const SECCOMP_FD = 9

/**
 * The program that opens the filter and becomes bubblewrap: `/bin/sh -c <this> conch-sandbox
 * <filter> <bwrap argv…>`. The redirection happens after any descriptor clean-up the caller's
 * own wrapper does, bubblewrap reads the filter from the descriptor and closes it before the
 * sandboxed command starts, and `exec` leaves no extra process. A filter that cannot be opened
 * ends the shell (a failed redirection of `exec` is fatal in a non-interactive sh) before
 * bubblewrap runs: nothing starts unfiltered. It also sets git's neutralised keys
 * (`gitGuardScript`, @conch/sandbox) in the environment bubblewrap passes on.
 */
export const SECCOMP_LAUNCHER = `${launcherStart()}exec "$@"`

/**
 * What every launcher does first: open the filter named by `$1` on `SECCOMP_FD`, set git's keys,
 * and append `nodeOptions` to the `NODE_OPTIONS` bubblewrap passes on (after a space, when set).
 */
function launcherStart(nodeOptions?: string): string {
  const node = nodeOptions === undefined ? '' : `export NODE_OPTIONS="\${NODE_OPTIONS:+\$NODE_OPTIONS }"${quote(nodeOptions)}; `
  return `exec ${SECCOMP_FD}<"$1" || exit 126; shift; ${gitGuardScript()}${node}`
}

const quote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`

/**
 * The programs that join an agent's network namespace: busybox's `sh` and `nsenter` applets when
 * its `busybox` has both (Debian's busybox-static: static, so neither exec loads a shared library
 * or a locale), else /bin/sh and util-linux's nsenter(1), each by absolute path.
 */
export type Nsenter = { busybox: string } | { utilLinux: string }

/**
 * The launcher of a process that joins its agent's network namespace, `[shell…, '-c', script]`:
 * `SECCOMP_LAUNCHER`'s work, then `nsenter --net=<pin> -- <runner>`. busybox's sh exports `SHLVL`
 * as one more than the caller's (1 for none), which the script takes back: a positive `SHLVL`
 * comes back, a missing, zero or malformed one stays unset. util-linux's nsenter runs in the C
 * locale, so that it loads no locale files, and bubblewrap's first options put the caller's
 * `LC_ALL` back (`--setenv`, or `--unsetenv` when it had none).
 */
export function joinLauncher(join: { nsenter: Nsenter; pin: string }, runner: string, nodeOptions?: string): [string, ...string[]] {
  const tail = `${quote(`--net=${join.pin}`)} -- ${quote(runner)} "$@"`
  if ('busybox' in join.nsenter) {
    const shlvl = 'case $SHLVL in 1) unset SHLVL;; *) SHLVL=$((SHLVL - 1));; esac; '
    return [join.nsenter.busybox, 'sh', '-c', `${launcherStart(nodeOptions)}${shlvl}exec ${quote(join.nsenter.busybox)} nsenter ${tail}`]
  }
  const restore = 'if [ "${LC_ALL+set}" ]; then set -- --setenv LC_ALL "$LC_ALL" "$@"; else set -- --unsetenv LC_ALL "$@"; fi; '
  return ['/bin/sh', '-c', `${launcherStart(nodeOptions)}${restore}LC_ALL=C exec ${quote(join.nsenter.utilLinux)} ${tail}`]
}

type Flag = '--bind' | '--ro-bind'

/** The program that holds an agent's network namespace (agent-sandbox.ts). */
const HOLDER = fileURLToPath(new URL('./holder.cjs', import.meta.url))

/** Where a process of an agent's sandbox is placed (agent-sandbox.ts). */
export interface AgentPlace {
  /** The agent's private host folder, bound as /tmp instead of a tmpfs. */
  tmp?: string
  /**
   * The agent's network namespace, joined when the process has no network: its pin (a file it is
   * bind-mounted on; agent-sandbox.ts) and the programs that enter it.
   */
  netns?: { pin: string; nsenter: Nsenter }
  /** A descriptor bubblewrap writes its `{"child-pid": …}` to (`--info-fd`). */
  infoFd?: number
  /**
   * Variables set inside (`--setenv`): the proxy's, under network `allow`; a `NODE_OPTIONS` among
   * them is appended to the process's own by the launcher, and the Node preload it names
   * (`NODE_PROXY_PRELOAD`) and undici's folder are kept readable and read-only as protected paths.
   */
  env?: Record<string, string>
  /**
   * The held folders (deny-write.ts) and what covers each, writable: the agent's own folder
   * (`source`), or a tmpfs of this process's own for a process of no agent.
   */
  held?: Array<{ target: string; source?: string }>
}

/**
 * The argv that runs `argv` under `policy`, in mount order (a later mount covers an earlier one;
 * the README's "Linux: bubblewrap" shows the whole). Rename fences bind each folder between a
 * writable path and a protected path inside it onto itself: a mount point cannot be renamed
 * away, so `mv conf conf.old; mkdir conf` cannot put a new file where the host reads the
 * protected one. No `--new-session`: an interactive shell needs its controlling terminal. In an
 * agent's sandbox (`place`), /tmp is the agent's and a process without network joins the agent's
 * namespace (`joinLauncher`) instead of `--unshare-net`.
 */
export function bubblewrapArgv(
  argv: readonly string[],
  policy: SandboxPolicy,
  options: BubblewrapOptions,
  files: HostFiles,
  host: HostPaths = nodeHostPaths,
  place: AgentPlace = {},
): [string, ...string[]] {
  const writableMode = policy.mode === 'workspace-write'
  const { NODE_OPTIONS: nodeOptions, ...setenv } = place.env ?? {}
  const preload = nodeOptions === undefined ? [] : [NODE_PROXY_PRELOAD, ...(UNDICI_FOLDER === undefined ? [] : [UNDICI_FOLDER])].map((path) => host.realpath(path) ?? path)
  const policyProtected = [...((policy as Partial<ConfinePolicy>).protectedPaths ?? []), ...preload]
  const own = policy.writablePaths ?? []
  const writable = [...(writableMode ? [policy.workspaceRoot, ...options.readWritePaths] : []), ...own]
  const visible: Array<[Flag, string]> = [
    ...[policy.workspaceRoot, ...options.readWritePaths].map((path): [Flag, string] => [writableMode ? '--bind' : '--ro-bind', path]),
    ...own.map((path): [Flag, string] => ['--bind', path]),
  ]
  const rootFlag: Flag = writable.includes('/') ? '--bind' : '--ro-bind'
  const out: string[] = [rootFlag, '/', '/', '--dev', '/dev', '--proc', '/proc', ...(place.tmp === undefined ? ['--tmpfs', '/tmp'] : ['--bind', place.tmp, '/tmp'])]

  // 2. The runtime folders: private and empty but for the files programs read through them.
  const runtimeDirs = [...new Set(RUNTIME_DIRS.filter((dir) => host.kind(dir) === 'directory').map((dir) => host.realpath(dir) ?? dir))]
  for (const dir of runtimeDirs) out.push('--tmpfs', dir)
  // $XDG_RUNTIME_DIR stays there, private and empty, for the sockets and locks programs keep in it.
  const userRuntime = host.realpath(join('/run/user', String(process.getuid?.() ?? 0)))
  if (userRuntime !== undefined && host.kind(userRuntime) === 'directory' && runtimeDirs.some((dir) => isWithin(userRuntime, dir))) {
    out.push('--perms', '0700', '--dir', userRuntime)
  }
  for (const path of RUNTIME_FILES_KEPT) {
    const real = host.kind(path) === 'file' ? host.realpath(path) : undefined
    if (real !== undefined && runtimeDirs.some((dir) => isWithin(real, dir))) out.push('--ro-bind', real, real)
  }

  // Resolved deny paths (real paths of those that exist), needed before the dotfiles.
  const home = options.homeDir
  const denied = options.denyRead
    .map((path) => (path.startsWith('~/') ? join(home, path.slice(2)) : path))
    .map((path) => ({ kind: host.kind(path), real: host.realpath(path) }))
    .filter((entry): entry is { kind: 'file' | 'directory'; real: string } => entry.kind !== undefined && entry.real !== undefined)
  const isDenied = (path: string) => denied.some((entry) => isWithin(path, entry.real))

  // 3. The private home.
  const realHome = options.privateHome && home !== '/' && host.kind(home) === 'directory' ? host.realpath(home) : undefined
  const ownMounts = ['/tmp', '/dev', '/proc', ...runtimeDirs, ...(realHome ? [realHome] : [])]
  if (realHome !== undefined && realHome !== '/') {
    out.push('--tmpfs', realHome)
    const onPath = host.searchPath().filter((dir) => isWithin(dir, realHome) && dir !== realHome).map((dir) => relative(realHome, dir))
    const bound: string[] = []
    for (const entry of [...options.homeReadOnly, ...onPath]) {
      const source = join(realHome, entry)
      if (bound.some((done) => isWithin(source, done))) continue
      const real = host.kind(source) === undefined ? undefined : host.realpath(source)
      if (real === undefined || isDenied(real) || isDenied(source)) continue
      out.push('--ro-bind', real, source)
      bound.push(source)
    }
  }

  // 4. Writable (or visible) paths.
  for (const [flag, path] of visible) if (path !== '/') out.push(flag, path, path)
  for (const { target, source } of place.held ?? []) out.push(...(source === undefined ? ['--tmpfs', target] : ['--bind', source, target]))

  // 5–6. Protected paths, with their rename fences.
  const protectedPaths = [...new Set([...policyProtected, files.runtimeDir])]
  // What to bind read-only again: a protected path inside a writable one, and a writable path
  // inside a protected one (binding the protected folder itself could cover /tmp, /proc or the
  // private home; outside the writable paths everything is read-only already).
  const guarded = new Set<string>()
  for (const path of protectedPaths) {
    for (const root of writable) {
      if (isWithin(path, root)) guarded.add(path)
      else if (isWithin(root, path) && root !== '/') guarded.add(root)
    }
  }
  // A protected path inside one of the sandbox's own mounts (the private /tmp, the private home)
  // and in no visible path would vanish under that mount: bind it back, read-only, so the files a
  // confined program runs from (an installation under /tmp or the home) stay there to be read.
  const visibleRoots = visible.map(([, path]) => path)
  for (const path of policyProtected) {
    const hidden = ownMounts.some(
      (mount) => mount !== '/dev' && mount !== '/proc' && isWithin(path, mount) && !visibleRoots.some((root) => isWithin(root, mount) && isWithin(path, root)),
    )
    if (hidden && !isDenied(path) && host.kind(path) !== undefined) guarded.add(path)
  }
  const fences = new Set<string>()
  for (const path of protectedPaths) {
    for (const root of writable) {
      if (path === root || !isWithin(path, root)) continue
      const parts = relative(root, path).split(sep).slice(0, -1)
      let folder = root
      for (const part of parts) {
        folder = join(folder, part)
        // Never re-bind a folder that holds one of the sandbox's own mounts (/tmp, the home), nor
        // one inside such a mount that the writable path does not bring back: either would put
        // the host's folder where the sandbox has its private one.
        if (ownMounts.some((mount) => isWithin(mount, folder) || (isWithin(folder, mount) && !isWithin(root, mount)))) continue
        fences.add(folder)
      }
    }
  }
  // Hidden paths that exist (outer ones first) and the policy's own writable paths inside one,
  // which stay visible (one that is the hidden path itself wins). Any other mount inside a hidden
  // path is left out: it would show what the hidden path covers.
  const agents = files.agentsFolder !== undefined && !ownMounts.some((mount) => isWithin(files.agentsFolder!, mount)) ? [files.agentsFolder] : []
  const hiddenPaths = [...((policy as Partial<ConfinePolicy>).hiddenPaths ?? []), ...agents]
    .filter((path) => !own.includes(path))
    .map((path) => ({ path, kind: host.kind(path) }))
    .filter((entry): entry is { path: string; kind: 'file' | 'directory' } => entry.kind !== undefined)
    .sort((a, b) => a.path.length - b.path.length)
  const revealed = own.filter((path) => hiddenPaths.some((entry) => entry.kind === 'directory' && isWithin(path, entry.path)))
  const covered = (path: string) => hiddenPaths.some((entry) => isWithin(path, entry.path)) && !revealed.some((root) => isWithin(path, root))
  for (const folder of fences) if (!covered(folder)) out.push('--bind', folder, folder)
  for (const path of options.readOnlyPaths) if (!covered(path)) out.push('--ro-bind', path, path)
  for (const path of guarded) if (!covered(path)) out.push('--ro-bind', path, path)

  // 7. Hidden paths: a folder becomes an empty tmpfs, read-only once the policy's own writable
  // paths inside it are bound back (with the fences and read-only paths inside those); a file is
  // covered by the empty file. One inside another is skipped, unless it lies in a path bound back.
  for (const entry of hiddenPaths) {
    const outer = hiddenPaths.some((other) => other !== entry && isWithin(entry.path, other.path))
    if (outer && !revealed.some((root) => isWithin(entry.path, root))) continue
    if (entry.kind === 'file') {
      out.push('--ro-bind', files.emptyFile, entry.path)
      continue
    }
    out.push('--tmpfs', entry.path)
    for (const root of revealed) {
      if (!isWithin(root, entry.path)) continue
      out.push('--bind', root, root)
      for (const folder of fences) if (isWithin(folder, root) && folder !== root) out.push('--bind', folder, folder)
      for (const path of [...options.readOnlyPaths, ...guarded]) if (isWithin(path, root)) out.push('--ro-bind', path, path)
    }
    out.push('--remount-ro', entry.path)
  }

  // 8. Denied paths.
  for (const entry of denied) if (!covered(entry.real)) out.push('--ro-bind', entry.kind === 'directory' ? files.emptyDir : files.emptyFile, entry.real)

  // 9. Kernel paths.
  for (const path of KERNEL_READ_ONLY_PATHS) out.push('--ro-bind-try', path, path)
  for (const path of [...KERNEL_MASKED_PATHS, ...SERVICE_SOCKETS_MASKED]) {
    const kind = host.kind(path)
    if (kind !== undefined) out.push('--ro-bind', kind === 'directory' ? files.emptyDir : files.emptyFile, path)
  }

  // 10. Namespaces, capabilities, network, seccomp.
  out.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--die-with-parent', '--cap-drop', 'ALL')
  const network = policy.network ?? options.network
  if (!network && place.netns === undefined) out.push('--unshare-net')
  if (place.infoFd !== undefined) out.push('--info-fd', String(place.infoFd))
  for (const [name, value] of Object.entries(setenv)) out.push('--setenv', name, value)
  out.push('--seccomp', String(SECCOMP_FD))
  out.push('--chdir', policy.cwd ?? policy.workspaceRoot, '--', ...argv)
  // The host runs the launcher's programs by absolute path, found in the system's folders only: a
  // relative PATH entry names the workspace, and others may be writable from a sandbox.
  const runner = resolveExecutable(options.runnerCommand, host.programFolders()) ?? options.runnerCommand
  if (network || place.netns === undefined) return ['/bin/sh', '-c', `${launcherStart(nodeOptions)}exec "$@"`, 'conch-sandbox', files.seccompFilter, runner, ...out]
  return [...joinLauncher(place.netns, runner, nodeOptions), 'conch-sandbox', files.seccompFilter, ...out]
}

/** Why `command` cannot be executed from `folders` (`resolveExecutable`), or undefined when it can. */
export function runnerProblem(command: string, folders: readonly string[]): string | undefined {
  if (resolveExecutable(command, folders) !== undefined) return undefined
  return command.includes('/') ? `${command} was not found` : `${command} was not found on PATH's system folders (${SYSTEM_FOLDERS.join(':')})`
}

/**
 * bubblewrap's failure when a mount under `/` goes (a container stops) between its recursive bind
 * of `/` and the read-only remount of each mount in it (bubblewrap issue #650): a race with the
 * host's mount table, not a sandbox that cannot work. conch's own pins never go that way
 * (agent-sandbox.ts).
 */
const MOUNT_TABLE_RACE = /Unable to apply mount flags: remount /

/** How many times the probe, and an agent's holder, run while they fail only that race. */
const START_ATTEMPTS = 3

/**
 * The bubblewrap provider. `probe` writes the host files and runs `true` once with every flag
 * conch uses, so a runner that cannot create the namespaces or load the filter here (an
 * unprivileged container, a kernel without seccomp filters) fails the probe rather than the
 * first terminal. Each `confine` checks the filter file again.
 */
export function bubblewrapProvider(
  config: BubblewrapOptions & Pick<Config, 'probeTimeoutMs' | 'runtimeDir' | 'maxExposedPorts'>,
  run: ProbeRunner = runProbe,
  host: HostPaths = nodeHostPaths,
  arch: string = process.arch,
  placeholdersMade?: Placeholders,
  egress: { startEgressProxy?: StartEgressProxy; onRefused?: (key: string, host: string) => void } = {},
): SandboxProvider & { close(): Promise<void>; release(): string[] } {
  let runtime: RuntimeDir | undefined
  const seccompArch = seccompArchOf(arch)
  const program = seccompArch && seccompProgram({ arch: seccompArch })
  const files = (): HostFiles => {
    if (!program) throw new Error(`no seccomp syscall table for ${arch} (conch has tables for x86_64 and aarch64)`)
    runtime ??= openRuntimeDir(config.runtimeDir)
    return { seccompFilter: runtime.filter(program), emptyFile: runtime.emptyFile(), emptyDir: runtime.emptyDir(), runtimeDir: runtime.path, agentsFolder: agentsFolderPath(config.runtimeDir) }
  }
  const held = placeholdersMade ?? placeholders({ ledger: folderLedger(() => join(runtimeDirPath(config.runtimeDir), 'placeholders')) })
  // Entering another process's network namespace takes CAP_SYS_ADMIN over it: root.
  const shareNetwork = process.getuid?.() === 0
  // A process's own choice, else its agent's network (full or not), else the configured default.
  const network = (policy: SandboxPolicy): boolean => policy.network ?? (policy.agent?.network === undefined ? config.network : policy.agent.network.mode === 'full')
  const agents = new AgentSandboxes({
    base: config.runtimeDir,
    shareNetwork,
    timeoutMs: config.probeTimeoutMs,
    maxExposedPorts: config.maxExposedPorts,
    lostRace: (stderr) => MOUNT_TABLE_RACE.test(stderr),
    startAttempts: START_ATTEMPTS,
    onHeldReleased: (paths) => void held.release(paths),
    // The holder idles in its own namespaces until it is killed, or conch goes (--die-with-parent).
    ...(egress.startEgressProxy !== undefined && { startEgressProxy: egress.startEgressProxy }),
    ...(egress.onRefused !== undefined && { onRefused: egress.onRefused }),
    hostCommand: (name) => resolveExecutable(name, host.programFolders()),
    holderArgv: (infoFd, spec, sockets) =>
      bubblewrapArgv(
        [process.execPath, HOLDER, JSON.stringify(spec)],
        { mode: 'read-only', workspaceRoot: '/', network: false, protectedPaths: [process.execPath, HOLDER], writablePaths: [sockets] },
        config,
        files(),
        host,
        { infoFd },
      ),
  })
  return {
    name: 'bubblewrap',
    platforms: ['linux'],
    network: config.network,
    sharesLoopback: shareNetwork,
    readWritePaths: config.readWritePaths,
    ownPaths: [runtimeDirPath(config.runtimeDir), agentsFolderPath(config.runtimeDir)],
    probe: () => {
      const problem = runnerProblem(config.runnerCommand, host.programFolders())
      if (problem !== undefined) return Promise.resolve(problem)
      let prepared: HostFiles
      try {
        prepared = files()
      } catch (error) {
        // An unsafe runtimeDir is a setting to fix, not a missing sandbox.
        if (error instanceof SandboxError) return Promise.reject(error)
        return Promise.resolve(`cannot prepare the sandbox files: ${(error as Error).message}`)
      }
      const argv = bubblewrapArgv(['true'], { mode: 'read-only', workspaceRoot: '/' }, config, prepared, host)
      // The verdict is kept for the provider's life: a failure of the mount table's race is tried again.
      const attempt = async (left: number): Promise<true | string> => {
        const verdict = await run(argv, config.probeTimeoutMs)
        return verdict !== true && left > 1 && MOUNT_TABLE_RACE.test(verdict) ? attempt(left - 1) : verdict
      }
      // The launcher execs the runner, so a failure is the runner's: name it, not /bin/sh.
      return attempt(START_ATTEMPTS).then((verdict) =>
        verdict === true || !verdict.startsWith(`${argv[0]} `) ? verdict : `${config.runnerCommand}${verdict.slice(argv[0].length)}`,
      )
    },
    confine(argv, policy): ConfineResult | Promise<ConfineResult> {
      const prepared = files() // first: the placeholders' ledger lives in the runtime folder
      const { policy: guarded, held: heldFolders } = withDenyWrite(policy, config, held, host)
      const wrap = (place: AgentPlace & { exposed?: ExposedPort[] }): ConfineResult => ({
        argv: bubblewrapArgv(argv, { ...guarded, network: network(policy) }, config, prepared, host, place),
        enforcement: 'full',
        provider: 'bubblewrap',
        ...(place.exposed !== undefined && place.exposed.length > 0 && { exposed: place.exposed }),
      })
      if (policy.agent !== undefined) return agents.place(policy.agent, network(policy), heldFolders).then(wrap)
      // A process of no agent covers each held folder with a tmpfs of its own, and keeps its placeholder to the provider's end.
      agents.cover(heldFolders)
      return wrap({ held: heldFolders.map((target) => ({ target })) })
    },
    sweep: async () => (await agents.sweep()).map((name) => ({ kind: 'folder' as const, name })),
    close: () => agents.closeAll(),
    release: () => held.release(),
  }
}

/**
 * `policy` with the deny-write paths (`denyWritePaths` of `@conch/sandbox`) among its protected
 * paths: checked, the missing ones held by placeholders, and those that exist then added (none
 * inside a held folder, which the sandbox covers with its own); and the held folders.
 */
function withDenyWrite(policy: ConfinePolicy, config: BubblewrapOptions, placeholders: Placeholders, host: HostPaths): { policy: ConfinePolicy; held: string[] } {
  const paths = denyWritePaths(policy, { denyWrite: config.denyWrite ?? [], readWritePaths: config.readWritePaths })
  if (paths.length === 0) return { policy, held: [] }
  const roots = [policy.workspaceRoot, ...config.readWritePaths]
  checkDenyWritePaths(paths, roots)
  const held = placeholders.hold(paths, roots)
  const present = paths.filter((path) => host.kind(path) !== undefined && !held.some((folder) => isWithin(path, folder)))
  return { policy: { ...policy, protectedPaths: [...new Set([...policy.protectedPaths, ...present])] }, held }
}
