/** Errors of the pool, each with a stable code. */
import { ConchError } from '@conch/session'
export type PoolErrorCode =
  /** The config is invalid; the message names the field. */
  | 'CONFIG_INVALID'
  /** The pool is shutting down and admits no invoke. */
  | 'POOL_CLOSED'
  /** Both the pool and the fresh-spawn path failed; the message names both causes. */
  | 'INVOKE_FAILED'
  /** The caller cancelled. */
  | 'INVOKE_CANCELLED'

export class PoolError extends ConchError<PoolErrorCode, undefined> {
  override readonly name = 'PoolError'
  constructor(code: PoolErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, undefined, message, options)
  }
}

/** Why the pool could not answer and the fresh-spawn path ran instead (a `pool-failures.jsonl` reason). */
export type FailureReason = 'boot' | 'stall' | 'hard_cap' | 'no_sentinel' | 'spawn' | 'unhealthy'
export const FAILURE_REASONS: readonly FailureReason[] = ['boot', 'stall', 'hard_cap', 'no_sentinel', 'spawn', 'unhealthy']

/** A failure of one pooled invoke, before the fallback runs. */
export class InvokeFailure extends Error {
  override readonly name = 'InvokeFailure'
  constructor(
    readonly reason: FailureReason | 'cancelled',
    message: string,
    /** Whether the prompt had been submitted (the CLI may have started working on it). */
    readonly midTask: boolean,
    /** Elapsed time in the CLI for this invoke, ms (the stall window for `stall`). */
    readonly elapsedMs = 0,
  ) {
    super(message)
  }

  /** Spawn → input prompt, ms, when a session was booted for this invoke before it failed. */
  bootMs: number | undefined
}
