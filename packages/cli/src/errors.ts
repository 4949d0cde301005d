/**
 * Errors of the `conch` command. Each has a stable `code`; `exitCode` is what the command
 * exits with when the error ends it (2: the command line or the environment is wrong, 1: the
 * composition could not be read or started).
 */
import { type ConchError, type DetailsOf, errorClass, type ErrorMessages } from '@conch/session'

/**
 * The codes of `CliError`, each with its details and its message. A refusal of the command line,
 * a config or a folder carries the sentence that names the flag, file or folder and the fix
 * (`reason`); the composition's own errors carry its ids and files.
 */
const CLI_ERRORS = {
  /** A command-line argument is missing, unknown or invalid; the message names the flag. */
  USAGE: (d: { reason: string }) => d.reason,
  /** A composition file cannot be read, is not valid YAML, or an entry or patch is invalid. */
  CONFIG_INVALID: (d: { reason: string }) => d.reason,
  /** An overlay patch (`where`) names an `id` that no row has (`ids`: those that are). */
  UNKNOWN_ENTRY: (d: { where: string; id: string; ids: string[] }) => `${d.where}: no entry has id "${d.id}"; the ids are ${d.ids.join(', ') || '(none)'}`,
  /** Two rows (in `where`: a file, or two) share an `id`; `checkedIn`: the composition checked. */
  DUPLICATE_ENTRY: (d: { where: string; id: string; checkedIn: string }) => `${d.where}: two entries have id "${d.id}"; ids must be unique (checked in ${d.checkedIn})`,
  /** Overlays include each other in a cycle: the `files`, the first again last. */
  OVERLAY_CYCLE: (d: { files: string[] }) => `overlays include each other: ${d.files.join(' → ')}`,
  /** A config value (`where`) reads an environment `variable` that is not set. */
  MISSING_ENV: (d: { where: string; variable: string }) => `${d.where}: environment variable ${d.variable} is not set; export it, or write \${${d.variable}:-default} to give a default`,
  /** The live model has no API key and no script was given. */
  NO_API_KEY: (d: { reason: string }) => d.reason,
  /** The `--script` file cannot be read or a line of it is not a model reply; the message names the file and line. */
  SCRIPT_INVALID: (d: { reason: string }) => d.reason,
  /** `conch run`'s workspace root is `/`, a system folder, one of conch's own folders, or (confined) a temporary folder every user shares. */
  CWD_REFUSED: (d: { reason: string }) => d.reason,
  /** `conch run`'s workspace root holds code the composition runs (its local plugins), and its terminals would be confined there. */
  WORKSPACE_HOLDS_CODE: (d: { reason: string }) => d.reason,
  /** The sandbox policy confines terminals and no sandbox provider works on this machine. */
  SANDBOX_UNAVAILABLE: (d: { reason: string }) => d.reason,
  /** The audit found entries that are not active; see `BootError.failures`. */
  BOOT_FAILED: (d: { file: string; failures: readonly EntryFailure[] }) => formatFailures(d.file, d.failures),
  /** A subcommand whose implementation is not installed. */
  UNAVAILABLE: (d: { reason: string }) => d.reason,
} satisfies ErrorMessages

export type CliErrorCode = keyof typeof CLI_ERRORS

/** What the command exits with when an error of `code` ends it: 2 when the command line or the environment is wrong, else 1. */
export function exitCodeOf(code: CliErrorCode): number {
  return code === 'USAGE' || code === 'NO_API_KEY' || code === 'SCRIPT_INVALID' || code === 'SANDBOX_UNAVAILABLE' || code === 'CWD_REFUSED' || code === 'WORKSPACE_HOLDS_CODE' ? 2 : 1
}

export type CliErrorDetails = DetailsOf<typeof CLI_ERRORS, CliErrorCode>
// The command's own class adds `exitCode`, so its base takes any code with any code's details.
const CliErrorBase: new (code: CliErrorCode, details: CliErrorDetails, options?: { cause?: unknown }) => ConchError<CliErrorCode, CliErrorDetails> = errorClass('CliError', CLI_ERRORS)

export class CliError extends CliErrorBase {
  /** What the command exits with (`exitCodeOf`). */
  get exitCode(): number {
    return exitCodeOf(this.code)
  }
}

/**
 * Why one enabled entry is not active after loading. `errors`: the errors the message was made
 * from (the config's ValidationError, what its apply threw, the loader's errors), when there are any.
 */
export type EntryFailure = { id: string; name: string; message: string; errors?: unknown[] } & (
  | { reason: 'import' | 'not-a-plugin' | 'invalid-config' | 'failed' | 'not-started' }
  | { reason: 'missing-services'; services: string[] }
)

/** The composition did not start: every enabled entry that is not active, in file order. */
export class BootError extends CliError {
  override readonly name = 'BootError'
  constructor(
    readonly file: string,
    readonly failures: EntryFailure[],
  ) {
    super('BOOT_FAILED', { file, failures })
  }
}

function formatFailures(file: string, failures: readonly EntryFailure[]): string {
  const lines = [`the composition ${file} did not start: ${failures.length} ${failures.length === 1 ? 'entry is' : 'entries are'} not active`]
  for (const failure of failures) {
    const [first = '', ...rest] = failure.message.split('\n')
    lines.push(`  - entry "${failure.id}" (${failure.name}): ${first}`)
    for (const line of rest) lines.push(`      ${line.trimStart()}`)
  }
  return lines.join('\n')
}
