/**
 * The background-work contract behind `ctx.tasks`: a task is work owned by one Agent that
 * produces bounded text output and ends with a status. Tools start tasks for work that should
 * not hold the model's turn (a terminal send with `run_in_background`), and the model
 * collects them with `task_output`.
 */
import type { Agent } from '@conch/agent'

export type TaskStatus = 'running' | 'completed' | 'failed' | 'killed'

/** Given to a task's `run`. */
export interface TaskController {
  /** Aborted when the task is killed or its owner is disposed. */
  readonly signal: AbortSignal
  /** Appends output (pushed producers). Output beyond `outputLimitBytes` unread bytes drops the oldest and marks the next read truncated. */
  write(text: string): void
}

/** How a task ended, as returned by `run`. */
export interface TaskOutcome {
  /** Defaults to `completed`. */
  status?: 'completed' | 'failed'
  /** Status fields rendered after the status, e.g. `{ wait: 'stdin_read', session: 'running' }`. */
  fields?: Record<string, string>
  /** Structured data for clients (not rendered to the model). */
  meta?: Record<string, unknown>
}

export interface TaskSpec {
  /** What produced it, e.g. `pty-send`. */
  kind: string
  /** One line for listings, e.g. `pty-1: sleep 100`. */
  label: string
  owner: Agent
  /** Bound on unread output kept per task, in UTF-8 bytes. Defaults to the service's `outputLimitBytes`. */
  outputLimitBytes?: number
  /** The work. A rejection ends the task `failed` with the error message. */
  run(controller: TaskController): Promise<TaskOutcome | void>
  /** Pull producers: returns output produced since the last call; called on every read and once after `run` settles. */
  drain?(): string
  /**
   * Called by `kill` before the signal aborts; the task stays `running` until `run` settles.
   * It may report what stopping took (see `KillReport`), which the final snapshot carries.
   */
  cancel?(): void | KillReport | Promise<void | KillReport>
}

/**
 * What a `cancel` hook reports. A producer that escalates (SIGINT, then SIGTERM, then SIGKILL)
 * says so here, and says when its program survived all of it, so `killed` is never a claim
 * that something stopped when it did not.
 */
export interface KillReport {
  /** Merged over the outcome's fields of the final snapshot (e.g. `{signals: 'SIGINT then SIGTERM'}`). */
  fields?: Record<string, string>
  /** Output produced while stopping, appended after the task's own. */
  output?: string
}

/** A task's state at one read. `output` is what was produced since the previous read of this task. */
export interface TaskSnapshot {
  id: string
  kind: string
  label: string
  status: TaskStatus
  output: string
  /** Whether output was dropped since the previous read because of the byte bound. */
  truncated: boolean
  fields: Record<string, string>
  meta: Record<string, unknown>
  /** Failure message for `failed`. */
  error?: string
  startedAt: string
  endedAt?: string
}

export interface TaskInfo {
  id: string
  kind: string
  label: string
  status: TaskStatus
  fields: Record<string, string>
  startedAt: string
  endedAt?: string
}

export type TaskErrorCode = 'NO_TASK' | 'FOREIGN_TASK' | 'OWNER_NOT_LIVE' | 'SERVICE_DISPOSING'

export class TaskError extends Error {
  override readonly name = 'TaskError'
  constructor(readonly code: TaskErrorCode, message: string) {
    super(message)
  }
}

/** The public surface of `ctx.tasks` (implemented by the default-exported `TasksService`). */
export interface TasksServiceApi {
  /**
   * Starts a task and returns its id (`task-1`, `task-2`, … per service, in creation order).
   * @throws TaskError `OWNER_NOT_LIVE`, `SERVICE_DISPOSING`.
   */
  start(spec: TaskSpec): { id: string }
  /**
   * Reads output produced since the previous read, and the status.
   * @throws TaskError `NO_TASK` (unknown id) or `FOREIGN_TASK` (another agent's task).
   */
  read(owner: Agent, id: string): TaskSnapshot
  /**
   * Waits until the task ends, `timeoutMs` passes or `signal` aborts, then reads it.
   * `timedOut` is true when it was still running.
   */
  wait(owner: Agent, id: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<TaskSnapshot & { timedOut: boolean }>
  /**
   * Kills a running task: calls its `cancel` hook, aborts its signal, awaits `run`, and returns
   * the final snapshot with status `killed`. Killing an ended task returns its snapshot unchanged.
   */
  kill(owner: Agent, id: string): Promise<TaskSnapshot>
  /** The owner's tasks in creation order. */
  list(owner: Agent): TaskInfo[]
}
