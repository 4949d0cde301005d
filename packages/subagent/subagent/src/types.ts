/**
 * The sub-agent contract behind `ctx.subagents`. The publish boundary: before `start` fulfils, a
 * failure rejects and the provider has cleaned up; after it, `result` never rejects — any end
 * resolves to a `stopReason` with the output collected so far.
 */
import type { Agent } from '@conch/agent'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'
import { BeneathError, type BeneathErrorCode } from '@conch/subprocess'

/** One block of a prompt or an answer (the text subset of ACP `ContentBlock`). */
export interface TextBlock {
  type: 'text'
  text: string
}

/** Prompt and answer content. Consumers must ignore block types they do not know. */
export type ContentBlock = TextBlock

/** The text of the text blocks of `blocks`, joined by `separator`. */
export function textOf(blocks: readonly ContentBlock[], separator = ''): string {
  return blocks
    .filter((block) => block.type === 'text')
    .map((block) => block.text)
    .join(separator)
}

/**
 * What a provider can enforce on its child. A request that needs a capability its provider
 * lacks is refused with `UNSUPPORTED_CAPABILITY` before the provider runs, never accepted and
 * silently ignored.
 */
export interface SubagentCapabilities {
  /** Returns `structured` output matching `request.outputSchema`. */
  readonly outputSchema: boolean
  /** Enforces `request.maxDepth` on the child (and its own sub-agents). */
  readonly depthLimit: boolean
  /** Restricts the child's tools to `request.toolFilter`. */
  readonly toolFilter: boolean
  /** Gives the child `request.persona` as its system prompt. */
  readonly persona: boolean
}

/** Capabilities of a provider whose child runs in its own environment and enforces nothing. */
export const NO_CAPABILITIES: SubagentCapabilities = Object.freeze({
  outputSchema: false,
  depthLimit: false,
  toolFilter: false,
  persona: false,
})

/**
 * Why a run ended. `protocol`: the child broke its protocol (for example a line over the
 * reader's bound), so nothing more it sends can be trusted; `timeout`: the run's deadline
 * passed.
 */
export type SubagentStopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal' | 'protocol' | 'timeout'

/** What a settled run gives back. `output` keeps whatever the child produced, also on failure. */
export interface SubagentResult {
  output: ContentBlock[]
  /** Structured output (only from providers with the `outputSchema` capability). */
  structured?: unknown
  stopReason: SubagentStopReason
  /** Why a run did not complete, in one or two sentences naming the child (absent for `completed`). */
  diagnostic?: string
  /** Set when the child streamed more than the service's `maxOutputBytes`: the oldest text was dropped. */
  truncated?: true
}

/** Live information about a running child, for progress displays (ACP tool_call content). */
export type SubagentUpdate =
  /** Answer text the child streamed; after a `tool` update it starts a next message, a blank line before it. */
  | { type: 'text'; text: string }
  /** The child started or finished one of its own tool calls. */
  | {
      type: 'tool'
      callId: string
      title: string
      status: 'running' | 'completed' | 'failed'
      /** For `failed`: the start of what the tool reported, on one line (at most 300 characters). */
      detail?: string
    }

export interface SubagentRequest {
  /** The task for the child. */
  prompt: ContentBlock[]
  /** The agent that delegates; its session log records `subagent/start` and `subagent/end`. */
  parent: Agent
  /** Aborting cancels the run: `result` settles `aborted` at once and the child is torn down. */
  signal?: AbortSignal
  /** A short name for logs and status lines. */
  label?: string
  /** JSON Schema of a structured answer; needs the `outputSchema` capability. */
  outputSchema?: Record<string, unknown>
  /** Deepest delegation chain the child may start below itself; needs the `depthLimit` capability. */
  maxDepth?: number
  /** Tool names the child may use; needs the `toolFilter` capability. */
  toolFilter?: string[]
  /** System prompt for the child; needs the `persona` capability. */
  persona?: string
  /** Receives live updates while the run is going (called synchronously, in order; must not throw). */
  onUpdate?: (update: SubagentUpdate) => void
  /**
   * Deadline of the run from `start`, in ms: omitted → the service's `timeoutMs`; capped at its
   * `maxTimeoutMs`. When it passes, `result` settles `timeout` with the partial output and the
   * child is torn down.
   */
  timeoutMs?: number
}

/** What the service hands a provider: the request, with the run's own signal and output sink. */
export interface ProviderRequest extends Readonly<Pick<SubagentRequest, 'prompt' | 'parent' | 'label' | 'outputSchema' | 'maxDepth' | 'toolFilter' | 'persona'>> {
  readonly runId: string
  /** Aborted when the caller cancels, the run is disposed or the service goes. */
  readonly signal: AbortSignal
  /** Reports answer text (kept in the output, also on failure) or a child tool call; ignored once settled. */
  update(update: SubagentUpdate): void
}

/** How a provider's run ended. `output` defaults to the text reported through `update`. */
export interface ProviderOutcome {
  stopReason: SubagentStopReason
  output?: ContentBlock[]
  structured?: unknown
  diagnostic?: string
}

/** A started child, as a provider returns it (the provider's side of the publish boundary). */
export interface ProviderRun {
  /** The child's own id (an ACP session id, a Codex thread id, a pid …), for logs. */
  readonly childId: string
  /** Settles when the child's work ends; a rejection becomes `error` with its message as the diagnostic. */
  readonly outcome: Promise<ProviderOutcome>
  /**
   * Tears the child down, resolving when its tree is gone; called once by the service.
   * @throws SubagentError `TEARDOWN_FAILED` when processes survive.
   */
  dispose(): Promise<void>
}

/** A registered sub-agent backend. */
export interface SubagentProvider {
  /** Registry key, `[a-z][a-z0-9-]*`, e.g. `acp`, `codex`, `conch`. */
  readonly name: string
  readonly capabilities: SubagentCapabilities
  /**
   * Starts a child and publishes it. Must reject (with a `SubagentError`, or any error, which
   * the service wraps as `START_FAILED`) when the child cannot be started, after cleaning up
   * everything it started; must reject when `request.signal` aborts before it fulfils.
   */
  start(request: ProviderRequest): Promise<ProviderRun>
}

/** A published run. */
export interface SubagentRun {
  /** `subagent-1`, `subagent-2`, … per service, in start order. */
  readonly id: string
  readonly provider: string
  readonly childId: string
  /** Never rejects. */
  readonly result: Promise<SubagentResult>
  /**
   * Cancels the run if it is still going (→ `aborted`), and resolves when the result has
   * settled and the child's process tree is gone. Idempotent: every call returns the same
   * promise (a failed teardown may be retried by calling again).
   */
  dispose(): Promise<void>
}

/** Data of `subagent/start`, appended to the parent's session log when a run is published. */
export interface SubagentStartData {
  runId: string
  provider: string
  label?: string
  childId: string
}

/** Data of `subagent/end`, appended when a run's result settles. */
export interface SubagentEndData extends SubagentStartData {
  stopReason: SubagentStopReason
  /** From `start` to the result, in ms. */
  durationMs: number
  diagnostic?: string
}

/**
 * The codes of `SubagentError`, each with its details and its message. `START_FAILED` carries the
 * sentence that names the provider, what failed and the fix (`reason`).
 */
const SUBAGENT_ERRORS = {
  /** No provider `provider` is registered (`known`: those that are), or (`role`) a composition names none for a role. */
  NO_PROVIDER: (d: { provider: string; known: string } | { role: string }) =>
    'role' in d ? `the pool kind names no fresh-spawn provider (${d.role})` : `no sub-agent provider named "${d.provider}"; registered: ${d.known}`,
  UNSUPPORTED_CAPABILITY: (d: { provider: string; capability: string }) =>
    `sub-agent provider "${d.provider}" cannot enforce ${d.capability} on its child; remove it from the request or use a provider that supports it`,
  DUPLICATE_PROVIDER: (d: { provider: string }) => `a sub-agent provider named "${d.provider}" is already registered; give the second one another name`,
  START_FAILED: (d: { reason: string }) => d.reason,
  /** A provider definition `registerProvider()` refuses (bad `name`), or a provider's config names an unknown pool `kind` (`known`). */
  INVALID_PROVIDER: (d: { name: string } | { kind: string; known: string[] }) =>
    'name' in d ? `sub-agent provider name ${JSON.stringify(d.name)} is not [a-z][a-z0-9-]*` : `subagent-cli-pool: kind: unknown pool kind "${d.kind}"; known: ${d.known.join(', ')}`,
  /** The child's process tree did not go away: `survivors` after KILL, as `comm (pid N)`. */
  TEARDOWN_FAILED: (d: { provider: string; survivors: string[] }) => `the "${d.provider}" sub-agent's processes survived SIGKILL: ${d.survivors.join(', ')}`,
  /** A depth-enforcing provider refused to start a child: this process is at `depth` of at most `max`. */
  DEPTH_EXCEEDED: (d: { provider: string; depth: number; max: number }) =>
    `this conch is at delegation depth ${d.depth} of at most ${d.max}: it may not start another "${d.provider}" sub-agent; do the task yourself`,
  /** A provider's private state folder is a symbolic link, not a folder, or not private (`hidePrivateRoot`): the beneath module's `refusal`. */
  PRIVATE_ROOT_UNSAFE: (d: { owner: string; refusal: BeneathErrorCode; beneath: BeneathError['details'] }) =>
    `${d.owner}: the private state folder ${BeneathError.message(d.refusal, d.beneath as never)}${d.refusal === 'PATH_SYMLINK' ? ', which conch does not follow to the run homes' : ''}; remove it (conch makes it again), or configure another folder`,
  /** The `parent` already has `running` runs going (started, running, or being torn down), the `maxRunsPerParent`. */
  TOO_MANY_RUNS: (d: { parent: string; running: number; maxRunsPerParent: number }) =>
    `${d.parent} already has ${d.running} sub-agents running (subagents.maxRunsPerParent: ${d.maxRunsPerParent}); wait for one to end first`,
  /** A `timeoutMs` that is not a positive integer. */
  INVALID_REQUEST: (d: { provider: string; timeoutMs: unknown }) => `timeoutMs of a "${d.provider}" sub-agent must be a positive integer of ms, not ${String(d.timeoutMs)}`,
  /** A request (`method`) to the child's own protocol (codex app-server JSON-RPC) failed with the child's `error`, or its connection closed first (`closed`: why). */
  RPC_FAILED: (d: { method: string; error: string } | { method: string; closed: string }) => ('closed' in d ? `${d.method}: ${d.closed}` : `${d.method} failed: ${d.error}`),
} satisfies ErrorMessages

export type SubagentErrorCode = keyof typeof SUBAGENT_ERRORS
export const SubagentError = errorClass('SubagentError', SUBAGENT_ERRORS)
export type SubagentError<C extends SubagentErrorCode = SubagentErrorCode> = ErrorOf<typeof SUBAGENT_ERRORS, C>

/** The public surface of `ctx.subagents` (implemented by the default-exported `SubagentService`). */
export interface SubagentServiceApi {
  /**
   * Registers a provider; the disposer is tied to the caller's plugin scope.
   * @throws SubagentError `DUPLICATE_PROVIDER`, `INVALID_PROVIDER`.
   */
  registerProvider(provider: SubagentProvider): () => void
  getProvider(name: string): SubagentProvider | undefined
  /** Registered providers, sorted by name. */
  list(): SubagentProvider[]
  /**
   * Starts a run on provider `name`.
   * @throws SubagentError `NO_PROVIDER` (naming the registered ones), `UNSUPPORTED_CAPABILITY`
   *   (naming the capability and the provider; the provider never ran), `START_FAILED` (the
   *   provider's failure as the cause; nothing is left running), `TOO_MANY_RUNS` (the parent
   *   has `maxRunsPerParent` runs), `INVALID_REQUEST` (a bad `timeoutMs`), or the provider's own
   *   `SubagentError` (for example `DEPTH_EXCEEDED`).
   */
  start(name: string, request: SubagentRequest): Promise<SubagentRun>
}
