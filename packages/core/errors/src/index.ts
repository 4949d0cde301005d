/**
 * The one error model of conch. An error has a stable SCREAMING_SNAKE `code`, typed `details`
 * (the ids, paths and numbers its message names) and an optional `cause`. Each seam declares its
 * codes once, in a table of message builders (code → details → message); `errorClass` turns the
 * table into the seam's named error class, so `instanceof PtyError` and `.code` keep working while
 * callers and tools read `code` and `details` instead of parsing messages.
 */

/** A seam's codes and how each one's message is built from its details. */
export type ErrorMessages = Record<string, (details: never) => string>

/** The details type of `code` in `messages`. */
export type DetailsOf<M extends ErrorMessages, C extends keyof M> = C extends unknown ? (M[C] extends (details: infer D) => string ? D : never) : never

export class ConchError<Code extends string = string, Details = unknown> extends Error {
  constructor(
    readonly code: Code,
    readonly details: Details,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }
}

/** An error of one of the codes of `M`, with the details its code declares. */
export type ErrorOf<M extends ErrorMessages, C extends keyof M & string = keyof M & string> = { [K in C]: ConchError<K, DetailsOf<M, K>> }[C]

export interface ErrorClass<M extends ErrorMessages> {
  new <C extends keyof M & string>(code: C, details: DetailsOf<M, C>, options?: { cause?: unknown }): ConchError<C, DetailsOf<M, C>>
  readonly prototype: ErrorOf<M>
  /** The message `code` has for `details`, without building an error. */
  message<C extends keyof M & string>(code: C, details: DetailsOf<M, C>): string
}

/** The named error class of a seam whose codes and messages are `messages`. */
export function errorClass<M extends ErrorMessages>(name: string, messages: M): ErrorClass<M> {
  const build = (code: string, details: unknown): string => (messages[code] as (details: unknown) => string)(details)
  class SeamError extends ConchError {
    constructor(code: string, details: unknown, options?: { cause?: unknown }) {
      super(code, details, build(code, details), options)
    }
    static message(code: string, details: unknown): string {
      return build(code, details)
    }
  }
  Object.defineProperty(SeamError, 'name', { value: name })
  Object.defineProperty(SeamError.prototype, 'name', { value: name, writable: true, configurable: true })
  return SeamError as unknown as ErrorClass<M>
}

/** What an unknown thrown value says: an Error's message (its name when the message is empty), anything else as a string. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message || error.name : String(error)
}

/** How a process's end reads in a message: `exited with code 3`, `was killed by SIGKILL` (`is running` for a running status). */
export function describeExit(exit: { state?: string; exitCode?: number | null; signal?: string | null }): string {
  if (exit.state === 'running') return 'is running'
  if (exit.signal) return `was killed by ${exit.signal}`
  return `exited with code ${exit.exitCode ?? 'unknown'}`
}

/**
 * The end of a switch over a tagged union: `value` is `never` when every case is handled, so a
 * case added to the union and forgotten here fails the typecheck. Reached anyway (a value from
 * outside the types), it throws `unhandled <what> <value as JSON>`.
 */
export function unreachable(value: never, what: string): never {
  throw new Error(`unhandled ${what} ${JSON.stringify(value)}`)
}
