/**
 * The text the model sees for task tools (every shape: the README, "What the model sees").
 * Compact and stable, because scripts and snapshot runs compare it byte for byte.
 */
import type { TaskInfo, TaskSnapshot } from '@conch/tasks'
import { budgetOutput, tailShareOf, utf8Bytes } from '@conch/tools'

export const NO_OUTPUT = '(no new output)'
export interface RenderSnapshotOptions {
  /** Budget of the whole text in UTF-8 bytes; output over it keeps its head and its tail around a marker (`budgetOutput`). */
  maxBytes: number
  /** Set when the call waited and the task was still running afterwards without news: the wait in ms. */
  waitedMs?: number
  /**
   * The reading session's redaction (`SessionLog.redact`), applied to the output before the cut: a
   * secret cut in two would otherwise leave its last part, which no later redaction recognises.
   */
  redact?: (text: string) => string
}

/** `[status: <status>, <key>: <value>, …, <note>, …]`: the fields, then notes such as an event (`matched "Listening on"`). */
export function statusLine(status: string, fields: Record<string, string>, notes: readonly string[] = []): string {
  return `[${[`status: ${status}`, ...fieldList(fields), ...notes.map(oneLine)].join(', ')}]`
}

/** `<key>: <value>` — fields in insertion order, each kept on one line. */
function fieldList(fields: Record<string, string>): string[] {
  return Object.entries(fields).map(([key, value]) => `${key}: ${oneLine(value)}`)
}

/** Renders one read of a task (task_output, task_kill). */
export function renderSnapshot(snapshot: TaskSnapshot, options: RenderSnapshotOptions): string {
  const waited = options.waitedMs === undefined ? [] : [`waited ${options.waitedMs} ms`]
  const trailer = [statusLine(snapshot.status, snapshot.fields, [...snapshot.events, ...waited])]
  if (snapshot.error !== undefined) trailer.push(`[error: ${oneLine(snapshot.error)}]`)

  const redacted = options.redact === undefined ? snapshot.output : options.redact(snapshot.output)
  // Room for the output: the budget minus the trailer and its line break. A failing command keeps more tail.
  const room = Math.max(0, options.maxBytes - utf8Bytes(trailer.join('\n')) - 1)
  // What the task's buffer dropped unread comes before the output: one marker counts it with what the budget cuts.
  const omitted = snapshot.omitted && { headLines: 0, ...snapshot.omitted }
  const kept =
    redacted === '' && omitted === undefined ? NO_OUTPUT : budgetOutput(redacted, room, { tailShare: tailShareOf(snapshot.fields['exit']), ...(omitted && { omitted }) }).text
  return `${kept.endsWith('\n') ? kept : `${kept}\n`}${trailer.join('\n')}`
}

/** One line per task: `task-1 running pty-send "pty-1: sleep 100"`, then `[key: value, …]` when it has fields. */
export function renderList(tasks: readonly TaskInfo[]): string {
  if (tasks.length === 0) return '(no tasks)'
  return tasks
    .map((task) => {
      const fields = fieldList(task.fields)
      const line = `${task.id} ${task.status} ${task.kind} ${JSON.stringify(task.label)}`
      return fields.length ? `${line} [${fields.join(', ')}]` : line
    })
    .join('\n')
}

function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim()
}
