/**
 * The agent contract behind `ctx.agents`: an Agent is an owner identity (the object every
 * ownership check compares), its session log and its own Cordis scope. The agent loop turns
 * a prompt into model calls and tool executions until the model answers with plain text.
 */
import type { Context } from 'cordis'
import { errorClass, type ErrorMessages, type ErrorOf, type SessionLog } from '@conch/session'
import type { ToolResult } from '@conch/tools'

export type AgentState = 'live' | 'disposing' | 'disposed'

export interface Agent {
  /** `agent-1`, `agent-2`, … per service, in creation order. */
  readonly id: string
  readonly session: SessionLog
  /** The agent's own Cordis scope; plugins may hang per-agent effects on it. Disposed with the agent. */
  readonly ctx: Context
  readonly state: AgentState
  /** Aborted (reason: an `AgentError` `AGENT_DISPOSED`) when disposal starts. */
  readonly signal: AbortSignal
  /**
   * Registers a cleanup run (and awaited) when the agent is disposed, in reverse registration
   * order. Returns a disposer that unregisters it. On an agent that is no longer live it throws
   * `AgentError` `AGENT_NOT_LIVE`.
   */
  onDispose(cleanup: () => void | Promise<void>): () => void
  /**
   * Queues a notification for the conversation: the loop attaches it to the next tool result,
   * or, when `wake` is set and the turn has ended, it starts another turn. Ignored once the
   * agent is no longer live.
   */
  notify(notification: Notification): void
  /**
   * Keeps a run alive after the model ends its turn (up to `wakeWaitMs`), for work the model
   * asked to be woken by; call the returned release once its notification is queued or the
   * work ended. Releasing twice does nothing.
   */
  holdWake(): () => void
}

/**
 * Something that happened outside the model's calls, for the conversation: a background task
 * ended, printed a line matching its pattern, or waits for input.
 */
export interface Notification {
  /** What it is about, e.g. `task-1`. */
  source: string
  /** What happened: `exited 0`, `matched "Listening on"`, `waiting for input: Password:`. */
  event: string
  /** One line naming the work, e.g. `pty-1: make`, for clients (the model's text leaves it out: it started the work). */
  label?: string
  /** How conch knows, one line (`controlled prompt`, `python3[41] read fd0 /dev/pts/3`). */
  evidence?: string
  /** The last lines of output, bounded by the producer. */
  tail?: string
  /** Whether it may wake the agent after its turn ended. */
  wake: boolean
  /** Checked at delivery (and before waking): true drops it, because the model has seen what it says (task_output showed the event). */
  withdrawn?: () => boolean
  /** Called once, when it is delivered: the producer counts the event and the tail as seen from then on. */
  delivered?: () => void
}

declare module '@conch/tools' {
  interface ToolOwner extends Agent {}
}

/** A system-prompt section; sections render in ascending `order`, then by `id`. */
export interface PromptSection {
  id: string
  order?: number
  /** Returns the section text for this agent, or undefined to omit it. */
  render(agent: Agent): string | undefined
}

/** What a run reports to its observer as it happens (for stream-json, ACP and text output). */
export type AgentRunEvent =
  | { type: 'text-delta'; text: string }
  | { type: 'assistant'; text: string }
  | { type: 'tool-call'; callId: string; name: string; arguments: unknown; title: string; kind: string }
  | { type: 'tool-progress'; callId: string; name: string; text: string }
  | { type: 'tool-result'; callId: string; name: string; result: ToolResult }
  /** A delivered notification; `text` is what the model read (redacted). */
  | { type: 'notification'; notification: Notification; text: string }
  /**
   * The model ended its turn while `tasks` pieces of work it asked to be woken by still run: the
   * run waits up to `timeoutMs` for their notification (`wakeWaitMs`) before it ends.
   */
  | { type: 'waiting'; tasks: number; timeoutMs: number }

export type RunStatus = 'completed' | 'cancelled' | 'max_steps' | 'error'

export interface RunResult {
  status: RunStatus
  /** The final assistant text (`completed`), or the error message (`error`). */
  text: string
  /** Model calls made. */
  steps: number
  error?: Error
}

export interface RunOptions {
  prompt: string
  /** Cancels the turn: the model stream and the running tool see it; the run ends `cancelled`. */
  signal?: AbortSignal
  onEvent?: (event: AgentRunEvent) => void
}

/** The codes of `AgentError`, each with its details and its message. */
const AGENT_ERRORS = {
  /** `next`: what the caller can do instead (`create a new agent`). */
  AGENT_NOT_LIVE: (d: { agent: string; state: string; next: string }) => `agent ${d.agent} is ${d.state}; ${d.next}`,
  AGENT_DISPOSED: (d: { agent: string }) => `agent ${d.agent} was disposed`,
  TURN_ACTIVE: (d: { agent: string }) => `agent ${d.agent} is already running a turn; wait for it or cancel it first`,
  NO_AGENT: (d: { agent: string }) => `agent ${d.agent} does not belong to this agent service`,
} satisfies ErrorMessages

export type AgentErrorCode = keyof typeof AGENT_ERRORS
export const AgentError = errorClass('AgentError', AGENT_ERRORS)
export type AgentError<C extends AgentErrorCode = AgentErrorCode> = ErrorOf<typeof AGENT_ERRORS, C>

/** The public surface of `ctx.agents` (implemented by the default-exported `AgentService`). */
export interface AgentServiceApi {
  /**
   * Creates a live agent `agent-<n>` with a new session (`workspaceRoot` goes into its
   * `session/start`) or the given one, and a child Cordis scope of the caller's context: when the
   * caller's plugin unloads, the agent is disposed with it.
   */
  create(options?: { session?: SessionLog; workspaceRoot?: string }): Promise<Agent>
  /**
   * Disposes `agent`: state `disposing`, aborts `agent.signal` (reason `AGENT_DISPOSED`), waits
   * for a running turn to end, runs the cleanups in reverse registration order awaiting each,
   * disposes the agent's scope, closes the session the agent created, state `disposed`.
   * Idempotent: every call returns the same disposal.
   * @throws AggregateError of the cleanup failures (after every cleanup ran); AgentError
   *   `NO_AGENT` for an agent of another service.
   */
  dispose(agent: Agent): Promise<void>
  get(id: string): Agent | undefined
  list(): Agent[]
  /** Registers a system-prompt section; the disposer is tied to the caller's plugin scope. */
  section(section: PromptSection): () => void
  /** The system prompt for `agent`, sections joined by blank lines. */
  systemPrompt(agent: Agent): string
  /**
   * Runs one turn: appends `turn/start` and `user/message`, then calls the model with the
   * system prompt, the tools and the history; runs each tool call in order (appending
   * `tool/call` and `tool/result`), and repeats until the model answers without tool calls
   * (`completed`), `maxSteps` model calls were made (`max_steps`), the signal aborts
   * (`cancelled`) or the model fails (`error`). Appends `turn/end`. Never rejects for model or
   * tool failures; rejects with `AgentError` `TURN_ACTIVE` when a turn is already running for
   * this agent, `AGENT_NOT_LIVE` when the agent is not live.
   */
  run(agent: Agent, options: RunOptions): Promise<RunResult>
}
