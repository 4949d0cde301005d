/**
 * The confinement contract behind `ctx.sandbox`: turn an argv into one that runs under a
 * policy, or refuse. conch fails closed — when no registered provider can enforce a policy,
 * `confine` throws `SANDBOX_UNAVAILABLE`; it never returns the argv unconfined.
 */
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { type DetailsOf, errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'

/**
 * - `read-only`: the whole filesystem is readable, nothing is writable except a private /tmp.
 * - `workspace-write`: as read-only, plus the workspace root is writable.
 * - `danger-full-access`: no confinement; callers skip `confine` entirely.
 */
export type SandboxMode = 'read-only' | 'workspace-write' | 'danger-full-access'

export const SANDBOX_MODES = ['read-only', 'workspace-write', 'danger-full-access'] as const satisfies readonly SandboxMode[]

/** What a caller asks `confine` for. */
export interface SandboxPolicy {
  mode: Exclude<SandboxMode, 'danger-full-access'>
  /** Absolute, canonical path. */
  workspaceRoot: string
  /** Working directory inside the sandbox; defaults to `workspaceRoot`. */
  cwd?: string
  /** Network access for this one confinement, overriding the provider's default (a sub-agent calling its API). */
  network?: boolean
  /** Extra absolute paths writable inside this one sandbox, in either mode; protected paths inside stay read-only. */
  writablePaths?: string[]
  /** Extra absolute paths read-only inside this sandbox whatever the mode (added to those of `protect`). */
  protectedPaths?: string[]
  /** Extra absolute paths hidden inside this sandbox (added to those of `SandboxServiceApi.hide`). */
  hiddenPaths?: string[]
  /**
   * The agent the process belongs to: every process confined for one `key` shares its sandbox
   * (one loopback, one /tmp), made at the first and torn down when each owner that confined a
   * process for it has ended. Without it the process has a sandbox of its own. `network: true`
   * leaves such a process the host's network, with the agent's /tmp.
   */
  agent?: SandboxAgent
}

/**
 * An agent's network: `none` (loopback only, shared by its processes), `allow` (outbound HTTP and
 * HTTPS through a proxy on the host that lets only `hosts` through: `example.com` exactly, or
 * `*.example.com` for its subdomains), or `full` (the host's network).
 */
export type AgentNetwork = { mode: 'none' } | { mode: 'allow'; hosts: string[] } | { mode: 'full' }

/** The agent a confined process belongs to (`SandboxPolicy.agent`). */
export interface SandboxAgent {
  /** Processes confined with the same key share one sandbox: the agent's session id. */
  key: string
  /** The agent's network, fixed when its sandbox is made; default `{mode: 'none'}`. */
  network?: AgentNetwork
  /** Ports of the agent's loopback made reachable on host loopback ports (fixed when its sandbox is made). */
  expose?: number[]
  /** The owner the process is started for (an Agent, a pool's owner): the sandbox ends with the last one. */
  owner: SandboxOwner
}

/** What the sandbox needs of an owner: a cleanup awaited when it ends (throws when it is no longer live). */
export interface SandboxOwner {
  onDispose(cleanup: () => void | Promise<void>): () => void
}

/**
 * The policy a provider receives from `confine`: validated, `protectedPaths` the canonical union of
 * the registered and requested ones, each of which must stay read-only (even inside a writable
 * path) and in its place (not renamed away).
 */
export interface ConfinePolicy extends SandboxPolicy {
  protectedPaths: string[]
  /**
   * The canonical union of the registered and requested hidden paths that exist (absent when none):
   * each covered by something empty, except the policy's own `writablePaths` inside one.
   */
  hiddenPaths?: string[]
  /** What programs started later in an agent's sandbox need there (`SandboxServiceApi.provision`); absent when nothing is declared. */
  provisions?: AgentProvisions
}

/**
 * What programs started later in an agent's sandbox need there (a pool's CLIs): `programs`, host
 * folders (canonical) read-only at their own paths; `homes`, host folders (canonical) in each of
 * which every agent gets its own writable folder (`agentHome(folder, key)`), seeing no other's.
 */
export interface AgentProvisions {
  programs: string[]
  homes: string[]
}

/** The folder of agent `key` in a provisioned `homes` folder: `agent-<24 hex digits of its SHA-256>`. */
export function agentHome(folder: string, key: string): string {
  return join(folder, `agent-${createHash('sha256').update(key).digest('hex').slice(0, 24)}`)
}

/** A port of an agent's loopback reachable from the host: `127.0.0.1:<hostPort>` on the host. */
export interface ExposedPort {
  port: number
  hostPort: number
}

export interface ConfineResult {
  argv: [string, ...string[]]
  /** The agent's ports asked for in `SandboxPolicy.agent.expose`, as reachable from the host now. */
  exposed?: ExposedPort[]
  /** `full` when files, processes and (if configured) network are enforced; `partial` when some part is not. */
  enforcement: 'full' | 'partial'
  /** Provider that wrapped the argv, e.g. `bubblewrap`. */
  provider: string
  /** What is not enforced, for `partial`. */
  gaps?: string[]
  /**
   * Set when `argv` is a relay to a process that runs elsewhere (a container's exec), no
   * descendant of the relay on this host: readiness, the foreground group and the teardown
   * belong to the relayed process; without a terminal, its processes are found by a tag.
   */
  relayed?: RelayedProcess
}

/** The process behind a relay (`ConfineResult.relayed`). */
export interface RelayedProcess {
  /**
   * The relayed process's pid as this host's /proc shows it, once started (on a terminal it leads
   * its own); undefined when this host cannot see it (a remote daemon). It carries the relay's environment.
   * @throws SandboxError `AGENT_SANDBOX_FAILED` when it did not start; `signal.reason` on abort.
   */
  pid(signal: AbortSignal): Promise<number | undefined>
}

export interface SandboxProvider {
  /** e.g. `bubblewrap`, `sandbox-exec`. */
  readonly name: string
  /** Platforms it can serve (`process.platform` values). */
  readonly platforms: readonly NodeJS.Platform[]
  /** Whether confined processes may use the network (as configured), when the provider knows. */
  readonly network?: boolean
  /** Whether the processes of one agent share its loopback here (bubblewrap: only as root), when the provider knows. */
  readonly sharesLoopback?: boolean
  /** Whether workspace-write may write the system's files outside the workspace (a container's copy). Default false. */
  readonly rootWritable?: boolean
  /** Host folders it makes writable under workspace-write besides the workspace root (for `confine`'s checks). */
  readonly readWritePaths?: readonly string[]
  /** Host folders it keeps its own files in (bubblewrap: its runtime folder), which no workspace may lie in. */
  readonly ownPaths?: readonly string[]
  /**
   * Whether an agent's sandbox is made at its first process with its mounts fixed (a container):
   * a later program finds there only what was provisioned (`provision`). Default false.
   */
  readonly fixedMounts?: boolean
  /**
   * Whether the mechanism works on this machine (called once; cached): `true`, or a reason it
   * cannot run (shown with the install hint); rejects with a `SandboxError` for a setting to fix.
   */
  probe(): Promise<true | string>
  /** Wraps `argv`; a provider that makes the agent's sandbox at its first process (`policy.agent`) answers asynchronously. */
  confine(argv: [string, ...string[]], policy: ConfinePolicy): ConfineResult | Promise<ConfineResult>
  /** Removes what conch processes that are gone (killed) left of their agents' sandboxes; resolves to what it removed. */
  sweep?(): Promise<SweptItem[]>
}

/** One thing a sandbox sweep removed: what it is, and its name (a container id, a path). */
export interface SweptItem {
  kind: 'container' | 'folder'
  name: string
}

/**
 * The codes of `SandboxError`, each with its details and its message. The codes whose refusals
 * differ in shape carry the sentence that names the path or provider and the fix (`reason`).
 */
const SANDBOX_ERRORS = {
  SANDBOX_UNAVAILABLE: (d: { reason: string }) => d.reason,
  DUPLICATE_PROVIDER: (d: { provider: string }) => `a sandbox provider named ${d.provider} is already registered`,
  INVALID_POLICY: (d: { reason: string }) => d.reason,
  HIDDEN_PATH_MOVED: (d: { path: string }) =>
    `cannot confine: the hidden folder ${d.path} was moved or replaced since it was hidden (a confined process can rename it or a folder above it); nothing is confined until it is back where it was`,
  PROTECTED_PATH_LINKED: (d: { reason: string }) => d.reason,
  PROTECTED_PATH_SYMLINK: (d: { reason: string }) => d.reason,
  PROTECTED_CODE_WRITABLE: (d: { reason: string }) => d.reason,
  /** A provider's runtime folder is not a folder of this user's with mode 0700, or changed while opened. */
  RUNTIME_DIR_UNSAFE: (d: { path: string; uid: number }) => `${d.path} is not a private directory of uid ${d.uid} (mode 0700); remove it, or set runtimeDir to another folder`,
  /** The process that holds an agent's namespaces could not start, or is gone while the agent lives. */
  AGENT_SANDBOX_FAILED: (d: { agent: string; reason: string }) => `the sandbox of agent ${d.agent} ${d.reason}; end the agent and start it again`,
  /** Processes of an agent's sandbox outlived its teardown. */
  AGENT_SANDBOX_SURVIVORS: (d: { agent: string; pids: number[] }) =>
    `the sandbox of agent ${d.agent} was torn down but processes ${d.pids.join(', ')} are still in it; kill them (kill -9) and check the host`,
  /** A container engine's daemon cannot be reached or refuses conch (`@conch/sandbox-docker`). */
  CONTAINER_ENGINE_UNAVAILABLE: (d: { engine: string; reason: string }) => `cannot reach the ${d.engine} daemon: ${d.reason}`,
  /** The image an agent's container is made from is not on the daemon. */
  CONTAINER_IMAGE_MISSING: (d: { image: string }) =>
    `the image ${d.image} is not on the Docker daemon; build or pull it (\`docker pull ${d.image}\`, \`docker import\`) or set image in the sandbox-docker entry of cordis.yml`,
  /** A process asks for another mode than the one its agent's sandbox was made with (mounts are fixed when a container starts). */
  AGENT_SANDBOX_MODE_FIXED: (d: { agent: string; mode: string; asked: string }) =>
    `the sandbox of agent ${d.agent} was made ${d.mode} and its mounts cannot change; a ${d.asked} process needs a new agent (end this one, or start a sub-agent with that mode)`,
  /** The folder of an egress proxy's socket is not a directory of this user's closed to others. */
  EGRESS_SOCKET_UNSAFE: (d: { path: string; uid: number }) =>
    `cannot listen on ${d.path}: its folder is not a private directory of uid ${d.uid} (mode 0700, not a symbolic link); put the socket in one`,
} satisfies ErrorMessages

export type SandboxErrorCode = keyof typeof SANDBOX_ERRORS
export type SandboxErrorDetails<C extends SandboxErrorCode = SandboxErrorCode> = DetailsOf<typeof SANDBOX_ERRORS, C>
export const SandboxError = errorClass('SandboxError', SANDBOX_ERRORS)
export type SandboxError<C extends SandboxErrorCode = SandboxErrorCode> = ErrorOf<typeof SANDBOX_ERRORS, C>

/** The public surface of `ctx.sandbox` (implemented by the default-exported `SandboxService`). */
export interface SandboxServiceApi {
  /**
   * Registers a provider (tried in registration order); the disposer, tied to the caller's plugin
   * scope, removes it and forgets its probe verdict.
   * @throws SandboxError `DUPLICATE_PROVIDER` when a provider of the same name is registered.
   */
  register(provider: SandboxProvider): () => void
  /**
   * Wraps `argv` with the first registered provider for this platform whose probe succeeds (each
   * provider is probed at most once; the verdict is cached).
   * @throws SandboxError `INVALID_POLICY` (a relative path, `danger-full-access`, an unknown mode,
   * an empty argv); `SANDBOX_UNAVAILABLE` naming each provider's probe failure and the fix;
   * `PROTECTED_PATH_LINKED` (a protected file with another hard link on a writable device),
   * `PROTECTED_PATH_SYMLINK` (a protected path through a symbolic link in a writable path) and
   * `PROTECTED_CODE_WRITABLE` (a writable path holding code registered with `{code: true}`).
   */
  confine(argv: [string, ...string[]], policy: SandboxPolicy): Promise<ConfineResult>
  /**
   * Probes the registered providers for this platform now (the verdicts `confine` reuses).
   * @returns true when one works; false when none is registered for this platform.
   * @throws SandboxError `SANDBOX_UNAVAILABLE` with the message `confine` would give, when every one fails.
   */
  probe?(): Promise<boolean>
  /**
   * Keeps `paths` read-only inside every sandbox confined from now on, whatever the mode and the
   * workspace, so a confined process cannot rewrite the configuration that confines it. Paths are
   * made canonical (missing ones ignored) and also kept as given for `confine`'s link checks. The
   * disposer, tied to the caller's plugin scope, removes them.
   *
   * With `code: true` the paths are code the host runs from outside its installation: none may
   * lie inside a writable path either (`PROTECTED_CODE_WRITABLE`), since Node's resolution may
   * pick up new files there that no read-only mount covers.
   * @throws SandboxError `INVALID_POLICY` for a relative path.
   */
  protect?(paths: readonly string[], options?: { code?: boolean }): () => void
  /** The canonical paths registered with `protect`, in registration order, without duplicates. */
  protectedPaths?(): string[]
  /**
   * Hides `paths` inside every sandbox confined from now on: a confined process can neither read
   * nor write them (a folder looks empty and read-only), except a confinement's own
   * `writablePaths` inside one. Paths are made canonical (missing ones ignored); the disposer,
   * tied to the caller's plugin scope, removes them. Each one's identity (lstat(2)) is kept: one
   * moved or replaced since makes every later `confine` fail with `HIDDEN_PATH_MOVED`.
   * @throws SandboxError `INVALID_POLICY` for a relative path, or `/`.
   */
  hide?(paths: readonly string[]): () => void
  /** The canonical paths registered with `hide`, in registration order, without duplicates. */
  hiddenPaths?(): string[]
  /**
   * Declares what programs started later in an agent's sandbox need there (`AgentProvisions`), for
   * every agent sandbox made from now on (bound by `fixedMounts` providers). Paths are made
   * canonical (missing ones ignored); the disposer, tied to the caller's plugin scope, removes them.
   * @throws SandboxError `INVALID_POLICY` for a relative path, or `/`.
   */
  provision?(provisions: Partial<AgentProvisions>): () => void
  /** The `fixedMounts` of the first registered provider for `process.platform`. */
  fixedMounts?(): boolean | undefined
  /**
   * The canonical `readWritePaths` of the providers for `process.platform`: host folders an agent
   * may write besides its workspace root, which no program conch runs outside a sandbox is taken from.
   */
  readWritePaths?(): string[]
  /** The folders conch keeps for itself, which no workspace may lie in: hidden paths and providers' `ownPaths`. */
  ownFolders?(): string[]
  /** The `network` of the first registered provider for `process.platform` (for describing; no probe). */
  networkAllowed?(): boolean | undefined
  /** The `sharesLoopback` of the first registered provider for `process.platform` (no probe). */
  sharesLoopback?(): boolean | undefined
  /** The `rootWritable` of the first registered provider for `process.platform` (no probe). */
  rootWritable?(): boolean | undefined
  /**
   * Subscribes to the hosts an agent's egress proxy refused (network `allow`), so what the model
   * reads can name them; `agent` is `SandboxAgent.key`. The disposer is tied to the caller's scope.
   */
  onRefused?(listener: (refusal: NetworkRefusal) => void): () => void
  /** Called by a provider for each refused host: tells every `onRefused` listener. */
  refused?(refusal: NetworkRefusal): void
  /** Runs each registered provider's `sweep` in turn; resolves to those that swept and what each removed. */
  sweep?(): Promise<{ swept: string[]; removed: Array<SweptItem & { provider: string }> }>
}

/** A host an agent's egress proxy refused. */
export interface NetworkRefusal {
  agent: string
  host: string
}
