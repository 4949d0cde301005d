/**
 * The macOS provider: sandbox-exec(1) with a generated Seatbelt (SBPL) profile. Paths reach the
 * profile as `-D NAME=value` parameters, so no path is ever spliced into profile text.
 */
import { realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { denyWritePaths, gitGuardScript, type ConfinePolicy, type ConfineResult, type SandboxPolicy, type SandboxProvider } from '@conch/sandbox'
import type { Config } from './config.ts'
import { runProbe, type ProbeRunner } from './probe.ts'

export type SandboxExecOptions = Pick<Config, 'network' | 'readWritePaths' | 'readOnlyPaths' | 'sandboxExecCommand' | 'homeDir' | 'denyRead'> &
  Partial<Pick<Config, 'denyWrite'>>

/** How many path parameters a profile refers to, and whether it denies the network. */
export interface SeatbeltShape {
  writable: number
  readOnly: number
  /** Protected paths (`ConfinePolicy.protectedPaths`): writes denied like `readOnly`. */
  protected?: number
  /** `denyRead` paths: reads (and writes) denied. */
  denyRead?: number
  /** Hidden paths (`ConfinePolicy.hiddenPaths`): reads and writes denied. */
  hidden?: number
  /** The policy's own writable paths inside a hidden path: readable and writable again. */
  revealed?: number
  network: boolean
}

/** What sandbox-exec leaves unenforced; reported as `gaps` with `enforcement: 'partial'`. */
export const SANDBOX_EXEC_GAPS = [
  'processes: no PID namespace — a daemonised child outlives the sandboxed process unless it is swept by its session tag',
  'temporary files: /private/tmp and /private/var/folders are writable and shared with the user’s other processes',
  'services: Mach and XPC services outside the sandbox stay reachable and may act on a sandboxed process’s behalf',
  'home: the real home directory is used (readable; writable only inside the workspace), there is no private home',
  'kernel: no seccomp filter and no namespaces; the kernel interfaces sandbox-exec allows by default stay reachable',
]

const params = (prefix: string, count: number): string[] =>
  Array.from({ length: count }, (_, index) => `(subpath (param "${prefix}_${index}"))`)

/**
 * The SBPL profile text. Seatbelt applies the *last* matching rule, so each later line narrows
 * or reopens the ones before it. Apple events are denied: they would let a sandboxed process
 * drive an unconfined application.
 */
export function seatbeltProfile(shape: SeatbeltShape): string {
  const lines = [
    '(version 1)',
    ';; conch: reads are allowed everywhere; writes only where listed below.',
    '(allow default)',
    '(deny file-write*)',
    '(allow file-write*',
    '  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper")',
    '  (literal "/dev/tty") (literal "/dev/ptmx") (regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/fd/[0-9]+$")',
    '  (subpath "/private/tmp") (subpath "/private/var/folders"))',
  ]
  if (shape.writable > 0) lines.push(`(allow file-write* ${params('WRITABLE', shape.writable).join(' ')})`)
  if ((shape.hidden ?? 0) > 0) lines.push(`(deny file-read* file-write* ${params('HIDDEN', shape.hidden ?? 0).join(' ')})`)
  if ((shape.revealed ?? 0) > 0) lines.push(`(allow file-read* file-write* ${params('REVEALED', shape.revealed ?? 0).join(' ')})`)
  if (shape.readOnly > 0) lines.push(`(deny file-write* ${params('READONLY', shape.readOnly).join(' ')})`)
  if ((shape.protected ?? 0) > 0) lines.push(`(deny file-write* ${params('PROTECTED', shape.protected ?? 0).join(' ')})`)
  if ((shape.denyRead ?? 0) > 0) lines.push(`(deny file-read* file-write* ${params('DENYREAD', shape.denyRead ?? 0).join(' ')})`)
  if (!shape.network) lines.push('(deny network*)')
  lines.push('(deny appleevent-send)')
  return `${lines.join('\n')}\n`
}

/**
 * The sandbox-exec argv: `sandbox-exec -p <profile> -D WRITABLE_0=… … -- /bin/sh -c '<git guard>
 * cd -- "$1" && shift && exec "$@"' sh <cwd> <argv…>`. sandbox-exec has no option for the working
 * directory, so a shell changes into it, sets git's neutralised keys (`gitGuardScript`) and execs
 * the argv. Writable: the workspace and `readWritePaths` under workspace-write, the policy's
 * `writablePaths` always; protected paths stay unwritable and `denyRead` (`~/` is `homeDir`)
 * unreadable. The network follows `policy.network`, else `options.network`.
 */
export function sandboxExecArgv(argv: readonly string[], policy: SandboxPolicy, options: SandboxExecOptions): [string, ...string[]] {
  const writable = [...(policy.mode === 'workspace-write' ? [policy.workspaceRoot, ...options.readWritePaths] : []), ...(policy.writablePaths ?? [])]
  const readOnly = options.readOnlyPaths
  const protectedPaths = (policy as Partial<ConfinePolicy>).protectedPaths ?? []
  const denyRead = options.denyRead.map((path) => (path.startsWith('~/') ? join(options.homeDir, path.slice(2)) : path))
  const own = policy.writablePaths ?? []
  const hidden = ((policy as Partial<ConfinePolicy>).hiddenPaths ?? []).filter((path) => !own.includes(path))
  const revealed = own.filter((path) => hidden.some((root) => path.startsWith(`${root}/`)))
  const profile = seatbeltProfile({
    writable: writable.length,
    readOnly: readOnly.length,
    protected: protectedPaths.length,
    denyRead: denyRead.length,
    hidden: hidden.length,
    revealed: revealed.length,
    network: policy.network ?? options.network,
  })
  return [
    options.sandboxExecCommand,
    '-p',
    profile,
    ...Object.entries({ WRITABLE: writable, READONLY: readOnly, PROTECTED: protectedPaths, DENYREAD: denyRead, HIDDEN: hidden, REVEALED: revealed })
      .flatMap(([name, paths]) => paths.flatMap((path, index) => ['-D', `${name}_${index}=${path}`])),
    '--',
    '/bin/sh',
    '-c',
    `${gitGuardScript()}cd -- "$1" && shift && exec "$@"`,
    'sh',
    policy.cwd ?? policy.workspaceRoot,
    ...argv,
  ]
}

/**
 * The sandbox-exec provider (`enforcement: 'partial'`, see `SANDBOX_EXEC_GAPS`). `probe` runs
 * the same argv shape once with `/usr/bin/true`, so a profile the system refuses to compile
 * fails the probe instead of every terminal.
 */
export function sandboxExecProvider(
  config: SandboxExecOptions & Pick<Config, 'probeTimeoutMs'>,
  run: ProbeRunner = runProbe,
): SandboxProvider {
  return {
    name: 'sandbox-exec',
    platforms: ['darwin'],
    network: config.network,
    readWritePaths: config.readWritePaths,
    probe: () => {
      const scratch = realpathSync(tmpdir())
      return run(sandboxExecArgv(['/usr/bin/true'], { mode: 'workspace-write', workspaceRoot: scratch }, config), config.probeTimeoutMs)
    },
    confine(argv, policy): ConfineResult {
      // The profile denies writes beneath a path whether or not it exists: no placeholders needed.
      const denied = denyWritePaths(policy, { denyWrite: config.denyWrite ?? [], readWritePaths: config.readWritePaths })
      const guarded = denied.length === 0 ? policy : { ...policy, protectedPaths: [...new Set([...policy.protectedPaths, ...denied])] }
      return { argv: sandboxExecArgv(argv, guarded, config), enforcement: 'partial', provider: 'sandbox-exec', gaps: [...SANDBOX_EXEC_GAPS] }
    },
  }
}
