/**
 * The background-work contract behind `ctx.tasks`: a task is work owned by one Agent that
 * produces bounded text output and ends with a status. Tools start tasks for work that should
 * not hold the model's turn (a terminal send with `run_in_background`), and the model
 * collects them with `task_output`.
 */
import type { Agent } from '@conch/agent'
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/session'

/**
 * `stopped`: the task is over but its work was suspended, not ended (a terminal job stopped by
 * SIGTSTP, which its shell keeps): it can be resumed outside the task.
 */
export type TaskStatus = 'running' | 'completed' | 'stopped' | 'failed' | 'killed'

/** Given to a task's `run`. */
export interface TaskController {
  /** Aborted when the task is killed or its owner is disposed. */
  readonly signal: AbortSignal
  /** Appends output (pushed producers). Output beyond `outputLimitBytes` unread bytes drops the oldest, and the next read says how much (`omitted`). */
  write(text: string): void
  /** Pull producers: output is ready to drain. The service drains at once while it watches the task's output for `notifyOn`. */
  changed(): void
}

/** How a task ended, as returned by `run`. */
export interface TaskOutcome {
  /** Defaults to `completed`. `killed`: the owner stopped it some other way (closed its terminal); no notification. */
  status?: Exclude<TaskStatus, 'running'>
  /** Status fields rendered after the status, e.g. `{ wait: 'stdin_read', session: 'running' }`. */
  fields?: Record<string, string>
  /** Structured data for clients (not rendered to the model). */
  meta?: Record<string, unknown>
  /** What happened, for the notification (`exited 2`, `waiting for input: Password:`); defaults to the status. */
  event?: string
  /** How the producer knows, one line (`controlled prompt`). */
  evidence?: string
}

export interface TaskSpec {
  /** What produced it, e.g. `pty-send`. */
  kind: string
  /** One line for listings, e.g. `pty-1: sleep 100`. */
  label: string
  owner: Agent
  /** Bound on unread output kept per task, in UTF-8 bytes. Defaults to the service's `outputLimitBytes`. */
  outputLimitBytes?: number
  /** Wake the owner when the task ends: its run stays alive for it after the model's turn ended. */
  notify?: boolean
  /**
   * Notify (and wake, as `notify`) at the first output line matching it. It is tried on every line
   * the task prints, so it must run in time linear in the line (a model's pattern is compiled by
   * an RE2 engine, not by `RegExp`, whose backtracking a hostile line can stall).
   */
  notifyOn?: LinePattern
  /**
   * Output lines that echo the typed input, first (a terminal's echo of the command): the label
   * already names the work, so `notifyOn` is not tried on them and no notification's tail repeats them.
   */
  echoLines?: number
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

export interface TaskInfo {
  id: string
  kind: string
  label: string
  status: TaskStatus
  fields: Record<string, string>
  startedAt: string
  endedAt?: string
}

/** A task's state at one read. `output` is what was produced since the previous read of this task. */
export interface TaskSnapshot extends TaskInfo {
  output: string
  /**
   * Output dropped unread since the previous read because of the byte bound, before `output`:
   * UTF-8 bytes and lines (a line cut in two counts once); undefined when none was.
   */
  omitted: { bytes: number; lines: number } | undefined
  /**
   * Events this read is the first to show, as their notifications say them (`matched "Listening
   * on"`): their notifications are withdrawn. The task's end is not listed: `status` says it.
   */
  events: string[]
  meta: Record<string, unknown>
  /** Failure message for `failed`. */
  error?: string
}

/** The codes of `TaskError`, each with its details and its message. */
const TASK_ERRORS = {
  /** An unknown task id; `own` lists the caller's tasks. */
  NO_TASK: (d: { id: string; own: string[] }) => `unknown task ${d.id}; ${d.own.length ? `this agent's tasks are ${d.own.join(', ')}` : 'this agent has no tasks'}`,
  FOREIGN_TASK: (d: { id: string }) => `task ${d.id} belongs to another agent; an agent can only read, wait for or kill its own tasks`,
  OWNER_NOT_LIVE: (d: { kind: string; owner: string; state: string }) => `cannot start a ${d.kind} task for ${d.owner}: the agent is ${d.state}`,
  SERVICE_DISPOSING: (d: { kind: string }) => `cannot start a ${d.kind} task: the tasks service is shutting down`,
  /** A tool was asked to run in the background and `ctx.tasks` is not loaded. */
  NO_SERVICE: (d: { tool: string }) => `${d.tool} with run_in_background needs the tasks service (@conch/tasks), which is not loaded; nothing was started. Load it, or call ${d.tool} without run_in_background`,
} satisfies ErrorMessages

export type TaskErrorCode = keyof typeof TASK_ERRORS
export const TaskError = errorClass('TaskError', TASK_ERRORS)
export type TaskError<C extends TaskErrorCode = TaskErrorCode> = ErrorOf<typeof TASK_ERRORS, C>

/**
 * `ctx.tasks` for a tool that runs work in the background.
 * @throws TaskError `NO_SERVICE` naming `tool` when the tasks service is not loaded.
 */
export function tasksOf(ctx: { get(name: string): unknown }, tool: string): TasksServiceApi {
  const tasks = ctx.get('tasks') as TasksServiceApi | undefined
  if (tasks === undefined) throw new TaskError('NO_SERVICE', { tool })
  return tasks
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
   * Waits until the task has news — an event it notifies (it ends, its `notifyOn` matches) — or
   * `timeoutMs` passes or `signal` aborts, then reads it. An event the owner has not seen (neither
   * delivered nor read) returns at once; one already seen does not. `timedOut` is true when it
   * was still running without news.
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

/** A line test: `source` names it in the notification (`matched "<source>"`). A RegExp is one. */
export interface LinePattern {
  readonly source: string
  test(line: string): boolean
}
