/**
 * The confinement contract behind `ctx.sandbox`: turn an argv into one that runs under a
 * policy, or refuse. conch fails closed — when no registered provider can enforce a policy,
 * `confine` throws `SANDBOX_UNAVAILABLE`; it never returns the argv unconfined.
 */

/**
 * - `read-only`: the whole filesystem is readable, nothing is writable except a private /tmp.
 * - `workspace-write`: as read-only, plus the workspace root is writable.
 * - `danger-full-access`: no confinement; callers skip `confine` entirely.
 */
export type SandboxMode = 'read-only' | 'workspace-write' | 'danger-full-access'

export const SANDBOX_MODES: readonly SandboxMode[] = ['read-only', 'workspace-write', 'danger-full-access']

export interface SandboxPolicy {
  mode: Exclude<SandboxMode, 'danger-full-access'>
  /** Absolute, canonical path. */
  workspaceRoot: string
  /** Working directory inside the sandbox; defaults to `workspaceRoot`. */
  cwd?: string
}

export interface ConfineResult {
  argv: [string, ...string[]]
  /** `full` when files, processes and (if configured) network are enforced; `partial` when some part is not. */
  enforcement: 'full' | 'partial'
  /** Provider that wrapped the argv, e.g. `bubblewrap`. */
  provider: string
  /** What is not enforced, for `partial`. */
  gaps?: string[]
}

export interface SandboxProvider {
  /** e.g. `bubblewrap`, `sandbox-exec`. */
  readonly name: string
  /** Platforms it can serve (`process.platform` values). */
  readonly platforms: readonly NodeJS.Platform[]
  /** Whether confined processes may use the network (as configured), when the provider knows. */
  readonly network?: boolean
  /**
   * Whether the mechanism works on this machine. Called at most once per provider; the verdict
   * is cached. Returns `true`, or a reason it cannot run (shown to users with the install hint).
   */
  probe(): Promise<true | string>
  confine(argv: [string, ...string[]], policy: SandboxPolicy): ConfineResult
}

export type SandboxErrorCode = 'SANDBOX_UNAVAILABLE' | 'DUPLICATE_PROVIDER' | 'INVALID_POLICY'

export class SandboxError extends Error {
  override readonly name = 'SandboxError'
  constructor(readonly code: SandboxErrorCode, message: string) {
    super(message)
  }
}

/** The public surface of `ctx.sandbox` (implemented by the default-exported `SandboxService`). */
export interface SandboxServiceApi {
  /** Registers a provider; the disposer is tied to the caller's plugin scope. */
  register(provider: SandboxProvider): () => void
  /**
   * Wraps `argv` with the first registered provider for this platform whose probe succeeds.
   * @throws SandboxError `SANDBOX_UNAVAILABLE` with a message that names each provider's probe
   * failure, how to install one (e.g. `apt-get install bubblewrap`), and how to choose
   * `danger-full-access` explicitly.
   */
  confine(argv: [string, ...string[]], policy: SandboxPolicy): Promise<ConfineResult>
  /**
   * Whether processes confined on this platform may use the network: the `network` of the first
   * registered provider for `process.platform`, or undefined when there is none or it does not
   * say. For describing the sandbox (e.g. in a system prompt); it does not probe.
   */
  networkAllowed?(): boolean | undefined
}
