import type { ProcessTable } from './types.ts'

/** What `signalIfSame` did. */
export type SignalOutcome = 'sent' | 'gone' | 'recycled'

/** A process identity: its pid plus its start time (see `ProcessEntry.startTime`). */
export interface ProcessIdentity {
  pid: number
  startTime: string
}

/** Whether a listed state means the process has ended: `Z` zombie, `X`/`x` dead (proc(5)). */
export function isEnded(state: string): boolean {
  return state === 'Z' || state === 'X' || state === 'x'
}

/**
 * Sends `signal` to `identity.pid` only if its start time is unchanged. Returns `gone` (no such
 * process, a zombie, or ESRCH from kill(2)) or `recycled` (another process, never signalled). A
 * pid recycled between the re-read and kill(2) cannot be excluded without pidfds, which Node lacks.
 * @throws the kill error for anything but ESRCH (EPERM: the process belongs to another user).
 */
export async function signalIfSame(
  table: ProcessTable,
  identity: ProcessIdentity,
  signal: NodeJS.Signals,
  options: { kill?: (pid: number, signal: NodeJS.Signals) => void } = {},
): Promise<SignalOutcome> {
  const entry = await table.get(identity.pid)
  if (entry === undefined || isEnded(entry.state)) return 'gone'
  if (entry.startTime !== identity.startTime) return 'recycled'
  try {
    ;(options.kill ?? process.kill)(identity.pid, signal)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return 'gone'
    throw error
  }
  return 'sent'
}
