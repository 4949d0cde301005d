/** Errors of the pool, one table of codes (`@conch/errors`). */
import { ConchError, errorClass, type ErrorMessages, type ErrorOf } from '@conch/errors'
import { BeneathError, type BeneathErrorCode } from '@conch/subprocess'

/** Why the pool could not answer and the fresh-spawn path ran instead (a `pool-failures.jsonl` reason). */
export type FailureReason = 'boot' | 'stall' | 'hard_cap' | 'no_sentinel' | 'spawn' | 'unhealthy'
export const FAILURE_REASONS: readonly FailureReason[] = ['boot', 'stall', 'hard_cap', 'no_sentinel', 'spawn', 'unhealthy']

/** What a refusal of the beneath module means in a CLI's home, after its own sentence. */
const IN_HOME: Partial<Record<BeneathErrorCode, string>> = {
  PATH_SYMLINK: "; the pool never follows links in a CLI's home (the CLI may have planted it to redirect the host)",
  PATH_NOT_FOLDER: '; the pool uses only folders it finds or makes there',
  PATH_EXISTS: ' (a link or a file the CLI may have planted); the pool writes only files it creates',
  PATH_NOT_REGULAR: '; the pool reads and appends only regular files of its own',
}

/** Why an invoke failed without an answer: its `kind`, and what went wrong. */
type InvokeFailed =
  | { kind: string; problem: 'unknown_kind'; known: string[] }
  | { kind: string; problem: 'foreign_owner'; owner: string; keyOwner: string }
  | { kind: string; problem: 'no_fallback' }
  /** Both the pool (`reason`, `failure`) and the fresh-spawn path (`fallback`) failed. */
  | { kind: string; problem: 'fallback_failed'; reason: FailureReason; failure: string; fallback: string }

const POOL_ERRORS = {
  /** `field` as it is written (`pool config: kinds.claude.command`, `status.host`, an environment variable) and what is wrong with it. */
  CONFIG_INVALID: (d: { field: string; problem: string }) => `${d.field}: ${d.problem}`,
  /** The pool is shutting down and admits no invoke. */
  POOL_CLOSED: (_d: Record<string, never>) => 'the pool is shutting down and admits no new invoke',
  INVOKE_FAILED: (d: InvokeFailed) => {
    switch (d.problem) {
      case 'unknown_kind':
        return `unknown CLI kind "${d.kind}"; known: ${d.known.join(', ')}`
      case 'foreign_owner':
        return `the invoke's owner agent ${d.owner} is not its key's owner ${d.keyOwner}`
      case 'no_fallback':
        return `no fresh-spawn path is configured for kind "${d.kind}"`
      case 'fallback_failed':
        return `the pool failed (${d.reason}: ${d.failure}) and the fresh-spawn path failed too: ${d.fallback}`
    }
  },
  /** The caller cancelled. */
  INVOKE_CANCELLED: (d: { kind: string }) => `the invoke on ${d.kind} was cancelled; its session was closed and the next acquire boots a new one`,
  /**
   * A path in a CLI's home the host refused: the beneath module's refusal (`refusal`, `beneath`),
   * or (`seed`) a kind's `files` entry that is not a plain relative path inside the home.
   */
  HOME_PATH_UNSAFE: (d: { refusal: BeneathErrorCode; beneath: BeneathError['details'] } | { seed: string }) => {
    if ('seed' in d) return `the kind's files: ${JSON.stringify(d.seed)} is not a plain relative path inside the home`
    if (d.refusal === 'PATH_CHANGED') return `the pool's state folder ${d.beneath.path} was moved or replaced since the pool opened it; nothing is written or read there`
    return `${BeneathError.message(d.refusal, d.beneath as never)}${IN_HOME[d.refusal] ?? ''}`
  },
  /** The peer on the worker channel sent something the protocol does not allow (`sent` says what). */
  PROTOCOL_VIOLATION: (d: { sent: string }) => `the peer sent ${d.sent}`,
} satisfies ErrorMessages

export type PoolErrorCode = keyof typeof POOL_ERRORS
export const PoolError = errorClass('PoolError', POOL_ERRORS)
export type PoolError<C extends PoolErrorCode = PoolErrorCode> = ErrorOf<typeof POOL_ERRORS, C>

/** Details of an `InvokeFailure`: its `pool-failures.jsonl` reason (or `cancelled`) and where the invoke was. */
export interface InvokeFailureDetails {
  reason: FailureReason | 'cancelled'
  /** Whether the prompt had been submitted (the CLI may have started working on it). */
  midTask: boolean
  /** Elapsed time in the CLI for this invoke, ms (the stall window for `stall`). */
  elapsedMs: number
}

/**
 * A failure of one pooled invoke, before the fallback runs (code `POOLED_INVOKE_FAILED`). Its
 * message is the cause as the pool or the CLI's terminal reported it (a boot screen, an exit).
 */
export class InvokeFailure extends ConchError<'POOLED_INVOKE_FAILED', InvokeFailureDetails> {
  override readonly name = 'InvokeFailure'
  constructor(reason: InvokeFailureDetails['reason'], message: string, midTask: boolean, elapsedMs = 0) {
    super('POOLED_INVOKE_FAILED', { reason, midTask, elapsedMs }, message)
  }

  get reason(): InvokeFailureDetails['reason'] {
    return this.details.reason
  }

  get midTask(): boolean {
    return this.details.midTask
  }

  get elapsedMs(): number {
    return this.details.elapsedMs
  }

  /** Spawn → input prompt, ms, when a session was booted for this invoke before it failed. */
  bootMs: number | undefined
}
