/**
 * The text the model sees for exec_command and write_stdin, in the shape Codex's unified exec
 * answers with:
 *
 * ```
 * Wall time: 0.042 seconds
 * Process exited with code 0          or: Process running with session ID 3 (waiting for input)
 * Original token count: 2
 * Output:
 * hello
 * ```
 */
import { boundUtf8, budgetOutput, omissionMarker, utf8Bytes, type OmittedRange } from '@conch/tools'

/** What one call settled with; `meta` carries it as the Codex field names. */
export interface ExecOutcome {
  wallTimeSeconds: number
  /** Set once the process ended (then `sessionId` is absent). */
  exitCode?: number
  /** Set while the process runs: write_stdin takes it. */
  sessionId?: number
  /** Why a running process was handed back: it waits reading the terminal, or it was still busy at the bound. */
  running?: 'waiting for input' | 'still running at yield_time_ms'
  /** The output before the budget, in tokens (`bytesPerToken` bytes each, rounded up). */
  originalTokenCount: number
  output: string
  /** What the backend already left out of a flood between the head and the tail of `output`. */
  omitted?: OmittedRange
  /** The backend cut `output` without counting what it dropped. */
  truncated?: boolean
}

/**
 * Renders `outcome` with its output cut to `budgetBytes` (the call's max_output_tokens in bytes)
 * and the whole to `maxBytes`.
 */
export function renderExec(outcome: ExecOutcome, budgetBytes: number, maxBytes: number): { text: string; meta: Record<string, unknown> } {
  const status = outcome.sessionId === undefined
    ? `Process exited with code ${outcome.exitCode ?? 'unknown'}`
    : `Process running with session ID ${outcome.sessionId}${outcome.running === undefined ? '' : ` (${outcome.running})`}`
  const header = [`Wall time: ${outcome.wallTimeSeconds.toFixed(3)} seconds`, status, `Original token count: ${outcome.originalTokenCount}`, 'Output:'].join('\n')
  const shown = budget(outcome, Math.max(0, Math.min(budgetBytes, maxBytes - utf8Bytes(header) - 1)))
  return {
    text: boundUtf8(`${header}\n${shown.text}`, maxBytes).text,
    meta: {
      wall_time_seconds: outcome.wallTimeSeconds,
      ...(outcome.exitCode !== undefined && { exit_code: outcome.exitCode }),
      ...(outcome.sessionId !== undefined && { session_id: outcome.sessionId }),
      original_token_count: outcome.originalTokenCount,
      truncated: shown.truncated,
    },
  }
}

/**
 * Output within `maxBytes`: its head and tail around one omission marker (`budgetOutput`), or
 * the marker alone, whole, when the budget cannot hold it (the result's bound still applies).
 */
function budget(outcome: ExecOutcome, maxBytes: number): { text: string; truncated: boolean } {
  const output = outcome.truncated === true && outcome.omitted === undefined ? `${omissionMarker()}\n${outcome.output}` : outcome.output
  try {
    const kept = budgetOutput(output, maxBytes, outcome.omitted === undefined ? {} : { omitted: outcome.omitted })
    return { text: kept.text, truncated: kept.truncated || outcome.truncated === true }
  } catch (error) {
    if (!(error instanceof RangeError)) throw error
    return { text: omissionMarker(utf8Bytes(output) + (outcome.omitted?.bytes ?? 0)), truncated: true }
  }
}
