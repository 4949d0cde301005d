/**
 * `ctx.sandbox`: the registry of confinement providers. `confine` wraps an argv with the first
 * provider for this platform whose probe succeeds, and otherwise fails closed with
 * `SANDBOX_UNAVAILABLE` — it never hands back an argv that runs unconfined.
 */
import { lstatSync, realpathSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, resolve } from 'node:path'
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import { messageOf, registerListed } from '@conch/session'
import { protectedPathProblem, type ProtectedPath } from './protected.ts'
import {
  SandboxError,
  type AgentProvisions,
  type ConfinePolicy,
  type ConfineResult,
  type NetworkRefusal,
  type SandboxAgent,
  type SandboxPolicy,
  type SandboxProvider,
  type SandboxServiceApi,
  type SweptItem,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    sandbox: SandboxService
  }
}

const absolute = (field: string) =>
  z.string().refine((path) => isAbsolute(path), { message: `${field} must be an absolute path` })

const Policy = z.object({
  mode: z.enum(['read-only', 'workspace-write'], {
    error: (issue) =>
      issue.input === 'danger-full-access'
        ? 'mode danger-full-access is not confined: run the argv as it is instead of calling confine'
        : `unknown sandbox mode ${JSON.stringify(issue.input)} (expected read-only or workspace-write)`,
  }),
  workspaceRoot: absolute('workspaceRoot'),
  cwd: absolute('cwd').optional(),
  network: z.boolean({ error: 'network must be true or false' }).optional(),
  protectedPaths: z.array(absolute('protectedPaths')).optional(),
  writablePaths: z.array(absolute('writablePaths').refine((path) => path !== '/', { message: 'writablePaths must not hold / (that would make the whole filesystem writable)' })).optional(),
  hiddenPaths: z.array(absolute('hiddenPaths').refine((path) => path !== '/', { message: 'hiddenPaths must not hold /' })).optional(),
  agent: z
    .object(
      {
        key: z.string().min(1, 'agent.key must not be empty'),
        owner: z.custom<SandboxAgent['owner']>((owner) => typeof (owner as Partial<SandboxAgent['owner']>)?.onDispose === 'function'),
        network: z
          .discriminatedUnion('mode', [z.object({ mode: z.literal('none') }), z.object({ mode: z.literal('allow'), hosts: z.array(z.string().min(1)) }), z.object({ mode: z.literal('full') })], {
            error: 'agent.network must be {mode: none | allow | full}',
          })
          .optional(),
        expose: z.array(z.number().int().min(1).max(65535, 'agent.expose holds ports 1-65535')).optional(),
      },
      { error: 'agent must be {key, owner}' },
    )
    .optional(),
}).refine((policy) => !(policy.mode === 'workspace-write' && policy.workspaceRoot === '/'), {
  message:
    'a workspace root of / would make the whole filesystem writable under workspace-write; ' +
    'work in a project folder, or choose danger-full-access explicitly in cordis.yml',
  path: ['workspaceRoot'],
}).superRefine((policy, ctx) => {
  // `/` under read-only lets nothing be written: refused under workspace-write only (above).
  const problem = policy.workspaceRoot === '/' ? undefined : workspaceRootProblem(policy.workspaceRoot)
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem, path: ['workspaceRoot'] })
})

/**
 * A provider's config field: how many of an agent's ports it exposes on host listeners at once
 * (`SandboxPolicy.agent.expose`). Defined here once, for every provider that exposes ports.
 */
export const maxExposedPorts = z
  .number()
  .int()
  .min(0)
  .default(64)
  .describe("How many of an agent's ports may be exposed on host listeners at once (`expose`); more fail with AGENT_SANDBOX_FAILED.")

/**
 * The temporary roots every user shares (FHS 3.0 §3.18, §5.15; POSIX shared memory; macOS's
 * `/private`), refused as workspace roots even where not world-writable; a folder inside one is not.
 */
export const SHARED_ROOTS: readonly string[] = ['/tmp', '/var/tmp', '/dev/shm', '/run/shm', '/run/lock', '/var/lock', '/private/tmp', '/private/var/tmp']

/**
 * The system's own folders (FHS 3.0 ch. 3 and 6; `/run` holds the host's service sockets),
 * refused as workspace roots with everything below them, as is `/`. `/lib*` is every top-level
 * folder named `lib…`. Exceptions below `/var` and `/run`: README "Workspace roots".
 */
export const SYSTEM_ROOTS: readonly string[] = ['/proc', '/sys', '/dev', '/etc', '/usr', '/boot', '/bin', '/sbin', '/lib*', '/var', '/run']

/** Folders that hold others' folders (FHS 3.0 §3.8, 3.10, 3.11, 3.13, 3.17): refused themselves, not what is below. */
export const HOLDING_ROOTS: readonly string[] = ['/home', '/opt', '/srv', '/mnt', '/media']

/**
 * Why `path` cannot be the workspace root of an agent, or undefined when it can. Judged on the
 * path as given and made canonical (realpath(3)) by the rules of README "Workspace roots", in
 * order: shared folders (unless `shared` is false), `/` and `SYSTEM_ROOTS`, `HOLDING_ROOTS`, a
 * home folder, a dot-folder in a home, conch's own folders (`own`, `inside`).
 */
export function workspaceRootProblem(path: string, options: { own?: readonly string[]; inside?: readonly string[]; shared?: boolean } = {}): string | undefined {
  const given = resolve(path)
  let canonical = given
  try {
    canonical = realpathSync(given)
  } catch {} // missing: judged by its name
  const named = canonical === given ? given : `${given} (${canonical})`
  let worldWritable = false
  try {
    const stats = statSync(canonical)
    worldWritable = stats.isDirectory() && (stats.mode & 0o002) !== 0
  } catch {} // missing: nothing to judge by
  if (options.shared !== false && (SHARED_ROOTS.includes(given) || SHARED_ROOTS.includes(canonical) || worldWritable)) {
    return (
      `${named} is a temporary folder every user shares${worldWritable ? ' (world-writable)' : ''}, not a workspace: a confined process there ` +
      'could read or change what other terminals and users keep in it. Work in a folder of your own inside it (e.g. `mktemp -d`), ' +
      'or choose danger-full-access explicitly in cordis.yml'
    )
  }
  const home = canonicalOf(homedir())
  for (const candidate of new Set([given, canonical])) {
    const system = systemRootOf(candidate)
    if (system === undefined) continue
    if ((system === '/var' && ownHome(home) && within(candidate, home, true)) || ((system === '/var' || system === '/run') && SHARED_ROOTS.some((root) => within(candidate, root, true)))) continue
    return (
      `${named} is ${system === '/' ? 'the root folder' : `${system === candidate ? '' : 'inside '}the system folder ${system}`}, not a workspace: ` +
      "an agent's terminals would write the host's own files there. Work in a project folder"
    )
  }
  for (const candidate of new Set([given, canonical])) {
    if (HOLDING_ROOTS.includes(candidate)) {
      return `${named} is ${candidate}, the folder that holds other users' or programs' folders, not a workspace. Work in a project folder inside it`
    }
    if (homesOf(candidate, home).includes(candidate)) {
      return (
        `${named} is ${candidate}, a home folder itself, not a workspace: its terminals would write the shell's start-up files ` +
        '(`.bashrc`, `.profile`) and `.ssh/authorized_keys`, run at the next login. Work in a project folder below it'
      )
    }
    const dotted = homeDotFolder(candidate, home)
    if (dotted !== undefined) {
      return (
        `${named} ${dotted === candidate ? 'is' : 'lies inside'} ${dotted}, a home's own dot-folder (keys, credentials and settings other programs run), ` +
        'not a workspace. Work in a project folder'
      )
    }
  }
  const own = (options.own ?? []).map(canonicalOf)
  const held =
    [...own, ...(options.inside ?? []).map(canonicalOf)].find((folder) => within(canonical, folder)) ?? own.find((folder) => within(folder, canonical))
  if (held === undefined) return undefined
  const where = held === canonical ? 'is' : within(canonical, held) ? 'lies inside' : 'holds'
  return (
    `${named} ${where} ${held}, a folder conch keeps its own state in (session logs, private homes, sandbox files), not a workspace: ` +
    "an agent's terminals there could rewrite the history and state conch trusts. Work in a project folder"
  )
}

/** The entry of `SYSTEM_ROOTS` (or `/`, or the `/lib…` folder) that `path` (absolute, normalized) is or lies below. */
export function systemRootOf(path: string): string | undefined {
  if (path === '/') return '/'
  const top = `/${path.split('/')[1]}`
  if (top.startsWith('/lib')) return top
  return SYSTEM_ROOTS.find((root) => root === top)
}

/** The home folders `path` may be or lie in: `home` (the running user's), `/root` and `/home/<name>`. */
function homesOf(path: string, home: string): string[] {
  return [home, '/root', `/home/${path.split('/')[2] ?? ''}`].filter((folder) => folder !== '/' && folder !== '/home/')
}

/** Whether `home` below `/var` is a home of its own (`/var/lib/jenkins`), not `/var` or a folder directly in it. */
function ownHome(home: string): boolean {
  return home.split('/').length > 3
}

/** The dot-folder directly inside a home folder (`home`, `/root`, `/home/<name>`) that `path` is or lies in. */
function homeDotFolder(path: string, home: string): string | undefined {
  for (const folder of homesOf(path, home)) {
    if (!within(path, folder) || path === folder) continue
    const name = path.slice(folder.length + 1).split('/')[0]!
    if (name.startsWith('.')) return `${folder}/${name}`
  }
  return undefined
}

/** realpath(3) of `path`, or `path` when it cannot be resolved. */
function canonicalOf(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

/** What users are told when nothing can confine a process here. */
const INSTALL_HINT =
  'Install a sandbox (Debian/Ubuntu: `apt-get install bubblewrap`; macOS ships sandbox-exec) and load ' +
  '@conch/sandbox-local, or run unconfined on purpose by setting `mode: danger-full-access` in the ' +
  'sandbox-policy entry of cordis.yml.'

/** A provider's probe failure: `install` unless it threw a `SandboxError`, which names a setting to fix. */
interface ProbeFailure {
  reason: string
  install: boolean
}

/** `SANDBOX_UNAVAILABLE`: each provider's failure, with the install hint when one is a missing mechanism. */
function unavailable(candidates: number, failures: readonly ProbeFailure[]): SandboxError {
  const reasons =
    candidates === 0
      ? `no sandbox provider is registered for ${process.platform}`
      : `no sandbox provider works on this machine (${failures.map((failure) => failure.reason).join('; ')})`
  const hint = candidates === 0 || failures.some((failure) => failure.install) ? ` ${INSTALL_HINT}` : ''
  return new SandboxError('SANDBOX_UNAVAILABLE', { reason: `cannot start a confined process: ${reasons}.${hint}` })
}

class SandboxService extends Service implements SandboxServiceApi {
  static Config = z.strictObject({}).prefault({})

  private readonly providers: SandboxProvider[] = []
  /** One entry per `protect` call (each path as given and made canonical), in registration order. */
  private readonly protections: Array<{ paths: ProtectedPath[]; code: boolean }> = []
  /** One entry per `hide` call (canonical paths with their identity then), in registration order. */
  private readonly hidings: HiddenPath[][] = []
  /** One entry per `provision` call (canonical paths), in registration order. */
  private readonly provisioned: AgentProvisions[] = []
  /** One probe per registered provider object; failures are cached too. */
  private readonly verdicts = new Map<SandboxProvider, Promise<true | ProbeFailure>>()
  private readonly refusals = new Set<(refusal: NetworkRefusal) => void>()

  constructor(ctx: Context, public config: SandboxService.Config) {
    super(ctx, 'sandbox')
  }

  register(provider: SandboxProvider): () => void {
    if (this.providers.some((other) => other.name === provider.name)) {
      throw new SandboxError('DUPLICATE_PROVIDER', { provider: provider.name })
    }
    return this.ctx.effect(() => {
      this.providers.push(provider)
      return () => {
        const index = this.providers.indexOf(provider)
        if (index >= 0) this.providers.splice(index, 1)
        this.verdicts.delete(provider)
      }
    }, 'sandbox.register')
  }

  /** The providers registered for this platform, in registration order. */
  private here(): SandboxProvider[] {
    return this.providers.filter((provider) => provider.platforms.includes(process.platform))
  }

  async confine(argv: [string, ...string[]], policy: SandboxPolicy): Promise<ConfineResult> {
    const parsed = Policy.safeParse(policy)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new SandboxError('INVALID_POLICY', { reason: `invalid sandbox policy: ${issue?.message ?? 'malformed'}` })
    }
    if (!Array.isArray(argv) || argv.length === 0 || typeof argv[0] !== 'string' || argv[0] === '') {
      throw new SandboxError('INVALID_POLICY', { reason: 'cannot confine an empty argv' })
    }
    const requested = protectedEntries(parsed.data.protectedPaths ?? [])
    const valid: ConfinePolicy = {
      mode: parsed.data.mode,
      workspaceRoot: parsed.data.workspaceRoot,
      protectedPaths: unique([...this.protectedPaths(), ...requested.map((path) => path.canonical)]),
    }
    if (parsed.data.cwd !== undefined) valid.cwd = parsed.data.cwd
    if (parsed.data.network !== undefined) valid.network = parsed.data.network
    // The caller's object: the owner's identity counts.
    if (policy.agent !== undefined) valid.agent = policy.agent
    if (parsed.data.writablePaths !== undefined && parsed.data.writablePaths.length > 0) valid.writablePaths = canonicalPaths(parsed.data.writablePaths)
    this.checkHidden()
    const hidden = unique([...this.hiddenPaths(), ...canonicalPaths(parsed.data.hiddenPaths ?? [])])
    if (hidden.length > 0) valid.hiddenPaths = hidden
    const programs = unique(this.provisioned.flatMap((entry) => entry.programs))
    const homes = unique(this.provisioned.flatMap((entry) => entry.homes))
    if (programs.length + homes.length > 0) valid.provisions = { programs, homes }

    const candidates = this.here()
    const failures: ProbeFailure[] = []
    for (const provider of candidates) {
      const verdict = await this.verdict(provider)
      if (verdict !== true) {
        failures.push({ ...verdict, reason: `${provider.name}: ${verdict.reason}` })
        continue
      }
      // A protected file with another name, or reached through a link, in a path this sandbox
      // may write is not protected by a read-only mount of it: refuse (see protected.ts).
      const writable = canonicalPaths([
        ...(valid.mode === 'workspace-write' ? [valid.workspaceRoot, ...(provider.readWritePaths ?? [])] : []),
        ...(valid.writablePaths ?? []),
      ])
      const problem = protectedPathProblem([...this.protections.flatMap((entry) => entry.paths), ...requested], writable)
      if (problem !== undefined) throw new SandboxError(problem.code, { reason: problem.message })
      const registered = this.protections.filter((entry) => entry.code).flatMap((entry) => entry.paths.map((path) => path.canonical))
      const code = writableCode(registered, writable)
      if (code !== undefined) throw new SandboxError('PROTECTED_CODE_WRITABLE', { reason: code })
      const result = await provider.confine(argv, valid)
      if (result.argv.length <= argv.length) {
        // A provider that hands the argv back unchanged would run it unconfined: fail closed.
        failures.push({ reason: `${provider.name}: returned an argv that adds no confinement`, install: true })
        continue
      }
      return result
    }
    throw unavailable(candidates.length, failures)
  }

  async probe(): Promise<boolean> {
    const candidates = this.here()
    const failures: ProbeFailure[] = []
    for (const provider of candidates) {
      const verdict = await this.verdict(provider)
      if (verdict === true) return true
      failures.push({ ...verdict, reason: `${provider.name}: ${verdict.reason}` })
    }
    if (candidates.length === 0) return false
    throw unavailable(candidates.length, failures)
  }

  protect(paths: readonly string[], options: { code?: boolean } = {}): () => void {
    checkAbsolute(paths, 'protected', false)
    const entry = { paths: protectedEntries(paths), code: options.code === true }
    return registerListed(this.ctx, this.protections, entry, 'sandbox.protect')
  }

  protectedPaths(): string[] {
    return unique(this.protections.flatMap((entry) => entry.paths.map((path) => path.canonical)))
  }

  hide(paths: readonly string[]): () => void {
    checkAbsolute(paths, 'hidden', true)
    const entry = canonicalPaths(paths)
      .filter((path) => path !== '/')
      .flatMap((path): HiddenPath[] => {
        const identity = identityOf(path)
        return identity === undefined ? [] : [{ path, ...identity }]
      })
    return registerListed(this.ctx, this.hidings, entry, 'sandbox.hide')
  }

  hiddenPaths(): string[] {
    return unique(this.hidings.flat().map((hidden) => hidden.path))
  }

  /**
   * Declares what later programs of every agent need in its sandbox (see `SandboxServiceApi.provision`):
   * made canonical now, missing ones ignored.
   * @throws SandboxError `INVALID_POLICY` naming a relative path, or `/`.
   */
  provision(provisions: Partial<AgentProvisions>): () => void {
    checkAbsolute([...(provisions.programs ?? []), ...(provisions.homes ?? [])], 'provisioned', true)
    const entry: AgentProvisions = { programs: canonicalPaths(provisions.programs ?? []), homes: canonicalPaths(provisions.homes ?? []) }
    return registerListed(this.ctx, this.provisioned, entry, 'sandbox.provision')
  }

  fixedMounts(): boolean | undefined {
    return this.here()[0]?.fixedMounts
  }

  /** @throws SandboxError `HIDDEN_PATH_MOVED` for a hidden path that is gone or another file now. */
  private checkHidden(): void {
    for (const hidden of this.hidings.flat()) {
      const now = identityOf(hidden.path)
      if (now === undefined || now.dev !== hidden.dev || now.ino !== hidden.ino) {
        throw new SandboxError('HIDDEN_PATH_MOVED', { path: hidden.path })
      }
    }
  }

  readWritePaths(): string[] {
    return unique(canonicalPaths(this.here().flatMap((provider) => provider.readWritePaths ?? [])))
  }

  ownFolders(): string[] {
    return unique([...this.hiddenPaths(), ...canonicalPaths(this.providers.flatMap((provider) => provider.ownPaths ?? []))])
  }

  onRefused(listener: (refusal: NetworkRefusal) => void): () => void {
    return this.ctx.effect(() => {
      this.refusals.add(listener)
      return () => void this.refusals.delete(listener)
    }, 'sandbox.onRefused')
  }

  refused(refusal: NetworkRefusal): void {
    for (const listener of this.refusals) listener(refusal)
  }

  sharesLoopback(): boolean | undefined {
    return this.here()[0]?.sharesLoopback
  }

  async sweep(): Promise<{ swept: string[]; removed: Array<SweptItem & { provider: string }> }> {
    const swept: string[] = []
    const removed: Array<SweptItem & { provider: string }> = []
    for (const provider of this.here()) {
      if (provider.sweep === undefined) continue
      swept.push(provider.name)
      for (const item of await provider.sweep()) removed.push({ provider: provider.name, ...item })
    }
    return { swept, removed }
  }

  rootWritable(): boolean | undefined {
    return this.here()[0]?.rootWritable
  }

  networkAllowed(): boolean | undefined {
    return this.here()[0]?.network
  }

  private verdict(provider: SandboxProvider): Promise<true | ProbeFailure> {
    let verdict = this.verdicts.get(provider)
    if (verdict === undefined) {
      verdict = Promise.resolve()
        .then(() => provider.probe())
        .then(
          (result): true | ProbeFailure => (result === true ? true : { reason: result, install: true }),
          (error: unknown): ProbeFailure =>
            error instanceof SandboxError ? { reason: error.message, install: false } : { reason: `probe failed: ${messageOf(error)}`, install: true },
        )
      this.verdicts.set(provider, verdict)
    }
    return verdict
  }
}

/** @throws SandboxError `INVALID_POLICY` naming a path that is not absolute (or is `/`, with `notRoot`). */
function checkAbsolute(paths: readonly string[], kind: string, notRoot: boolean): void {
  for (const path of paths) {
    if (typeof path === 'string' && isAbsolute(path) && !(notRoot && path === '/')) continue
    throw new SandboxError('INVALID_POLICY', { reason: `a ${kind} path must be absolute${notRoot ? ' and not /' : ''}: ${JSON.stringify(path)}` })
  }
}

/** realpath(3) of each path; paths that do not exist (nothing to protect) are left out. */
function canonicalPaths(paths: readonly string[]): string[] {
  return paths.flatMap((path) => {
    try {
      return [realpathSync(path)]
    } catch {
      return []
    }
  })
}

/**
 * The refusal for the first writable path that holds code registered with `{code: true}` (the
 * code path inside it, or the writable path inside a code folder), or undefined when none does.
 */
function writableCode(code: readonly string[], writable: readonly string[]): string | undefined {
  for (const root of writable) {
    const named = codeHeldBy(code, root)
    if (named === undefined) continue
    return (
      `cannot confine a process that may write ${root}: it holds code this conch runs outside its installation (${named}), ` +
      'which a confined process could rewrite or shadow for the next boot (a file Node would resolve first, a module imported later, another hard link). ' +
      "Keep the composition's local plugins and what they import outside the workspace, or give the terminal another workspace (--cwd)"
    )
  }
  return undefined
}

/**
 * The code paths (canonical) that the folder `root` (canonical) holds, or that hold it, named as
 * a refusal names them (the first three, then how many more); undefined when there are none.
 */
export function codeHeldBy(code: readonly string[], root: string): string | undefined {
  const held = code.filter((path) => within(path, root) || within(root, path))
  if (held.length === 0) return undefined
  return held.slice(0, 3).join(', ') + (held.length > 3 ? ` and ${held.length - 3} more` : '')
}

/** Whether `path` is `root` or lies below it (strictly below with `below`). */
function within(path: string, root: string, below = false): boolean {
  if (root === '/') return !below || path !== '/'
  return (!below && path === root) || path.startsWith(`${root}/`)
}

function protectedEntries(paths: readonly string[]): ProtectedPath[] {
  return paths.flatMap((given) => canonicalPaths([given]).map((canonical) => ({ given, canonical })))
}

const unique = (paths: readonly string[]): string[] => [...new Set(paths)]

interface HiddenPath {
  path: string
  dev: bigint
  ino: bigint
}

/** Device and inode of `path` itself (lstat(2): a symbolic link put in its place is another file); undefined when it is missing. */
function identityOf(path: string): { dev: bigint; ino: bigint } | undefined {
  try {
    const stat = lstatSync(path, { bigint: true })
    return { dev: stat.dev, ino: stat.ino }
  } catch {
    return undefined
  }
}

namespace SandboxService {
  export type Config = z.output<typeof SandboxService.Config>
}

export default SandboxService
