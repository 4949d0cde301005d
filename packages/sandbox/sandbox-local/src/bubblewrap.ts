/**
 * The Linux provider: bubblewrap (bwrap(1)). The whole filesystem is mounted read-only, the
 * workspace (and configured paths) writable on top under workspace-write, with a fresh /dev
 * and /proc, a private /tmp, its own PID and IPC namespaces and no capabilities.
 */
import type { ConfineResult, SandboxPolicy, SandboxProvider } from '@conch/sandbox'
import type { Config } from './config.ts'
import { runProbe, type ProbeRunner } from './probe.ts'

export type BubblewrapOptions = Pick<Config, 'network' | 'readWritePaths' | 'readOnlyPaths' | 'runnerCommand'>

/**
 * The bwrap argv for `argv` under `policy`, in mount order (later mounts cover earlier ones):
 *
 * - `--ro-bind / /` — everything readable, nothing writable (the root itself is bound
 *   writable only when a writable path is `/`);
 * - `--dev /dev`, `--proc /proc` — a fresh /dev (null, zero, tty, a private devpts, and the
 *   inherited terminal as /dev/console) and a /proc that shows only the sandbox's processes;
 * - `--tmpfs /tmp` — a private, writable /tmp that disappears with the sandbox;
 * - the workspace root: `--bind` under workspace-write, `--ro-bind` under read-only (so a
 *   workspace under /tmp stays visible); the same for `readWritePaths`;
 * - `--ro-bind` for each of `readOnlyPaths`, last, so they stay read-only inside writable paths;
 * - `--unshare-pid` (the sandbox's first process is PID 1 of its own namespace: when it ends,
 *   the kernel ends everything inside, daemons included), `--unshare-ipc`, `--die-with-parent`;
 * - `--cap-drop ALL` — without it, root inside the sandbox keeps CAP_SYS_ADMIN and can remount
 *   `/` writable;
 * - `--unshare-net` when `network` is false (only a loopback interface inside);
 * - `--chdir <cwd>` and `--` before the argv. No `--new-session`: an interactive shell needs
 *   the controlling terminal it inherited for job control.
 */
export function bubblewrapArgv(argv: readonly string[], policy: SandboxPolicy, options: BubblewrapOptions): [string, ...string[]] {
  const writable = policy.mode === 'workspace-write' ? '--bind' : '--ro-bind'
  const binds: Array<['--bind' | '--ro-bind', string]> = [
    [writable, policy.workspaceRoot],
    ...options.readWritePaths.map((path): ['--bind' | '--ro-bind', string] => [writable, path]),
    ...options.readOnlyPaths.map((path): ['--bind' | '--ro-bind', string] => ['--ro-bind', path]),
  ]
  const rootFlag = binds.filter(([, path]) => path === '/').at(-1)?.[0] ?? '--ro-bind'
  const out: [string, ...string[]] = [options.runnerCommand, rootFlag, '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp']
  for (const [flag, path] of binds) {
    if (path !== '/') out.push(flag, path, path)
  }
  out.push('--unshare-pid', '--unshare-ipc', '--die-with-parent', '--cap-drop', 'ALL')
  if (!options.network) out.push('--unshare-net')
  out.push('--chdir', policy.cwd ?? policy.workspaceRoot, '--', ...argv)
  return out
}

/**
 * The bubblewrap provider. `probe` runs the runner once with every flag conch uses (on a
 * policy rooted at `/`) and `true` as the command, so a runner that cannot create the
 * namespaces here — an unprivileged container, a missing binary — fails the probe rather
 * than the first terminal.
 */
export function bubblewrapProvider(
  config: BubblewrapOptions & Pick<Config, 'probeTimeoutMs'>,
  run: ProbeRunner = runProbe,
): SandboxProvider {
  return {
    name: 'bubblewrap',
    platforms: ['linux'],
    network: config.network,
    probe: () => run(bubblewrapArgv(['true'], { mode: 'read-only', workspaceRoot: '/' }, config), config.probeTimeoutMs),
    confine(argv, policy): ConfineResult {
      return { argv: bubblewrapArgv(argv, policy, config), enforcement: 'full', provider: 'bubblewrap' }
    },
  }
}
