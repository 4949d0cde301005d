/** How a notification reads in the conversation (see the README, "Notifications"). */
import type { Notification } from './types.ts'

/**
 * One notification as the model reads it: a bracketed line naming the source, what happened and
 * the evidence, then the last lines of output. The work's `label` is left out: the model started
 * it, and the source names it. Evidence that is itself a line of that output (the line a pattern
 * matched) is not said twice, nor a last line the event quotes (the prompt of
 * `waiting for input: Password:`).
 *
 * ```
 * [notification: task-1 exited 2; evidence: controlled prompt]
 * make: *** [all] Error 2
 * ```
 */
export function renderNotification(notification: Notification): string {
  const lines = (notification.tail?.replace(/\n+$/, '') ?? '').split('\n')
  const last = lines.at(-1)!.trim()
  if (last !== '' && notification.event.endsWith(`: ${last}`)) lines.pop()
  const tail = lines.join('\n')
  const shown = notification.evidence === undefined || lines.includes(notification.evidence)
  const evidence = shown ? '' : `; evidence: ${notification.evidence}`
  const head = `[notification: ${notification.source} ${notification.event}${evidence}]`
  return tail === '' ? head : `${head}\n${tail}`
}

/** Several notifications, oldest first, separated by blank lines. */
export function renderNotifications(notifications: readonly Notification[]): string {
  return notifications.map(renderNotification).join('\n\n')
}
