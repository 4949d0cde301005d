/**
 * The programmatic-tool-calling contract behind `ctx.ptc`: a short program and host functions
 * (bindings) go to a runtime, and one result comes back — a lossless JSON value with the logs, or
 * a failure of a named kind. `resolve` fills what the caller left out; `run` adds nothing.
 */
import type { Agent } from '@conch/agent'
import type { AgentNetwork, SandboxMode } from '@conch/sandbox'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'

/** A value that survives `JSON.stringify` → `JSON.parse` unchanged (RFC 8259 values, finite numbers). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

/** Who a program runs for: the exact Agent whose workspace, policy and lifetime apply. */
export type PtcOwner = Agent

/** What a caller asks for. Omitted fields are filled by `resolve`. */
export interface PtcRequest {
  /** The program: the body of an async function, erasable TypeScript (top-level `await` and `return` work). */
  code: string
  /** Working directory of the program; default the owner's workspace root. Absolute. */
  cwd?: string
  /**
   * Wall-clock deadline in ms, nested calls included. Omitted → the runtime's `timeoutMs`; a
   * number is capped at `maxTimeoutMs`; `null` (service callers only) → none.
   */
  timeoutMs?: number | null
}

/** The sandbox a program runs under: the owner's mode and workspace, from `ctx.sandboxPolicy`. */
export interface PtcPolicy {
  mode: SandboxMode
  /** Absolute canonical workspace root. */
  workspaceRoot: string
  /** The owner's network (`ResolvedPolicy.network`); absent: the sandbox provider's default. */
  network?: AgentNetwork
}

/** A fully resolved run: `run` accepts only this and adds no defaults. */
export interface PtcSpec {
  owner: PtcOwner
  code: string
  /** Absolute working directory. */
  cwd: string
  /** Deadline in ms, or null for none. */
  timeoutMs: number | null
  policy: PtcPolicy
}

/** One host function callable from the program as `await <global>.<name>(args)`. */
export type PtcFunction = (args: JsonValue, context: { signal: AbortSignal }) => Promise<JsonValue>

/** A namespace of host functions exposed to the program as the global `global`. */
export interface PtcBinding {
  /** A portable identifier (`[A-Za-z_$][A-Za-z0-9_$]*`) that shadows no built-in global. */
  global: string
  functions: Record<string, PtcFunction>
}

export interface PtcRunOptions {
  bindings?: readonly PtcBinding[]
  /** Aborting ends the run as `abort` (the process tree is gone before the result). */
  signal?: AbortSignal
}

/**
 * The kinds of failure, exhaustively:
 * - `exception` — a parse error, non-erasable TypeScript, or a thrown value;
 * - `timeout` — the deadline passed;
 * - `abort` — the caller's signal aborted;
 * - `protocol` — malformed, unexpected or oversized control traffic from the program's process;
 * - `sandbox-unavailable` — a confined mode was asked for and no mechanism works (nothing ran);
 * - `worker-exit` — the process ended before it reported, or its cleanup failed;
 * - `invalid-output` — the completion value is not lossless JSON;
 * - `output-limit` — logs plus value exceed the runtime's output budget.
 */
export type PtcFailureKind =
  | 'exception'
  | 'timeout'
  | 'abort'
  | 'protocol'
  | 'sandbox-unavailable'
  | 'worker-exit'
  | 'invalid-output'
  | 'output-limit'

export interface PtcFailure {
  kind: PtcFailureKind
  message: string
  /** For `exception`: the stack, with line numbers of the program as written. */
  stack?: string
}

/** A denial the sandbox caused, as seen in the program's errors and output (e.g. `EROFS`). */
export interface PtcDenial {
  /** errno name: `EROFS`, `EACCES` or `EPERM`. */
  code: string
  /** The line it was seen in. */
  text: string
}

/** How the program was confined, reported apart from its outcome. */
export interface PtcSandboxReport {
  mode: SandboxMode
  /** `none` under danger-full-access or when nothing ran. */
  enforcement: 'full' | 'partial' | 'none'
  /** The confinement provider, e.g. `bubblewrap`. */
  provider?: string
  denials: PtcDenial[]
  /** Hosts the agent's egress proxy refused while the program ran (network `allow`), in order; absent when none. */
  refused?: string[]
}

interface PtcResultBase {
  /** Captured console and stdout/stderr text, in order (a prefix when the budget ran out). */
  logs: string
  sandbox: PtcSandboxReport
  /** Wall time from `run` to the result, cleanup included, in ms. */
  elapsedMs: number
}

export type PtcResult =
  | (PtcResultBase & { ok: true; value: JsonValue })
  | (PtcResultBase & { ok: false; failure: PtcFailure })

/** What a runtime declares about its deadlines, for `resolve`. */
export interface PtcTimeouts {
  /** Deadline used when a request omits one, in ms. */
  timeoutMs: number
  /** The largest deadline `resolve` accepts, in ms; larger requests are capped. */
  maxTimeoutMs: number
}

/** A provider of program runs (e.g. `@conch/ptc-node`). */
export interface PtcRuntime {
  /** e.g. `node`. */
  readonly name: string
  readonly timeouts: PtcTimeouts
  /** Runs a resolved, validated spec. Resolves for every outcome of the program. */
  run(spec: PtcSpec, options: { bindings: readonly PtcBinding[]; signal?: AbortSignal }): Promise<PtcResult>
}

/** The codes of `PtcError`, each with its details and its message. */
const PTC_ERRORS = {
  /** An invalid or unsupported option (`field`: `cwd`, `timeoutMs`, `code`, `binding my.fn`, …) and what is wrong with it. */
  INVALID_OPTIONS: (d: { field: string; problem: string }) => `${d.field} ${d.problem}`,
  /** No runtime is registered. */
  NO_RUNTIME: (_: Record<string, never>) => 'no ptc runtime is registered; load @conch/ptc-node',
  /** A second runtime was registered. */
  DUPLICATE_RUNTIME: (d: { registered: string; runtime: string }) => `a ptc runtime (${d.registered}) is already registered; cannot register ${d.runtime}`,
  /** A call after the service or runtime was disposed (`what`: `the ptc service`, `the node ptc runtime`). */
  DISPOSED: (d: { what: string }) => `${d.what} is disposed`,
} satisfies ErrorMessages

export type PtcErrorCode = keyof typeof PTC_ERRORS
export const PtcError = errorClass('PtcError', PTC_ERRORS)
export type PtcError<C extends PtcErrorCode = PtcErrorCode> = ErrorOf<typeof PTC_ERRORS, C>

/** The public surface of `ctx.ptc` (implemented by the default-exported `PtcService`). */
export interface PtcServiceApi {
  /** Registers the runtime; the disposer is tied to the caller's plugin scope. @throws PtcError `DUPLICATE_RUNTIME`. */
  register(runtime: PtcRuntime): () => void
  /** The registered runtime's deadlines, or undefined when none is registered. */
  timeouts(): PtcTimeouts | undefined
  /**
   * Fills what `request` leaves out: `cwd` (the owner's workspace root), the deadline (see
   * `PtcRequest.timeoutMs`) and the owner's sandbox policy (`ctx.sandboxPolicy.resolve`).
   * @throws PtcError `INVALID_OPTIONS` naming the field, `NO_RUNTIME`, `DISPOSED`.
   */
  resolve(request: PtcRequest, owner: PtcOwner): PtcSpec
  /**
   * Runs `spec` on the runtime. Resolves for every outcome of the program; rejects only for
   * misuse: `INVALID_OPTIONS` (an unresolved spec, an illegal or duplicate binding name),
   * `NO_RUNTIME`, `DISPOSED`.
   */
  run(spec: PtcSpec, options?: PtcRunOptions): Promise<PtcResult>
}
