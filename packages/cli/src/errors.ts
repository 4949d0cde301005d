/**
 * Errors of the `conch` command. Each has a stable `code`; `exitCode` is what the command
 * exits with when the error ends it (2: the command line or the environment is wrong, 1: the
 * composition could not be read or started).
 */
import { ConchError } from '@conch/session'

export type CliErrorCode =
  /** A command-line argument is missing, unknown or invalid; the message names the flag. */
  | 'USAGE'
  /** A composition file cannot be read, is not valid YAML, or an entry or patch is invalid. */
  | 'CONFIG_INVALID'
  /** An overlay patch names an id that no row has. */
  | 'UNKNOWN_ENTRY'
  /** Two rows share an id. */
  | 'DUPLICATE_ENTRY'
  /** Overlays include each other in a cycle. */
  | 'OVERLAY_CYCLE'
  /** A config value reads an environment variable that is not set. */
  | 'MISSING_ENV'
  /** The live model has no API key and no script was given. */
  | 'NO_API_KEY'
  /** The `--script` file cannot be read or a line of it is not a model reply; the message names the file and line. */
  | 'SCRIPT_INVALID'
  /** `conch run`'s workspace root is `/`, a system folder, one of conch's own folders, or (confined) a temporary folder every user shares. */
  | 'CWD_REFUSED'
  /** `conch run`'s workspace root holds code the composition runs (its local plugins), and its terminals would be confined there. */
  | 'WORKSPACE_HOLDS_CODE'
  /** The sandbox policy confines terminals and no sandbox provider works on this machine. */
  | 'SANDBOX_UNAVAILABLE'
  /** The audit found entries that are not active; see `BootError.failures`. */
  | 'BOOT_FAILED'
  /** A subcommand whose implementation is not installed. */
  | 'UNAVAILABLE'

export class CliError extends ConchError<CliErrorCode, undefined> {
  override readonly name: string = 'CliError'
  constructor(
    code: CliErrorCode,
    message: string,
    readonly exitCode: number = code === 'USAGE' || code === 'NO_API_KEY' || code === 'SANDBOX_UNAVAILABLE' ? 2 : 1,
  ) {
    super(code, undefined, message)
  }
}

/**
 * Why one enabled entry is not active after loading. `errors`: the errors the message was made
 * from (the config's ValidationError, what its apply threw, the loader's errors), when there are any.
 */
export type EntryFailure = (
  | { id: string; name: string; reason: 'import'; message: string }
  | { id: string; name: string; reason: 'not-a-plugin'; message: string }
  | { id: string; name: string; reason: 'invalid-config'; message: string }
  | { id: string; name: string; reason: 'failed'; message: string }
  | { id: string; name: string; reason: 'missing-services'; message: string; services: string[] }
  | { id: string; name: string; reason: 'not-started'; message: string }
) & { errors?: unknown[] }

/** The composition did not start: every enabled entry that is not active, in file order. */
export class BootError extends CliError {
  override readonly name = 'BootError'
  constructor(
    readonly file: string,
    readonly failures: EntryFailure[],
  ) {
    super('BOOT_FAILED', formatFailures(file, failures))
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
