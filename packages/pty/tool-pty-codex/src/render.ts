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
import { boundUtf8, utf8Bytes } from '@conch/tools'

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
  const room = Math.max(0, Math.min(budgetBytes, maxBytes - utf8Bytes(header) - 1))
  const shown = budget(outcome.output, room)
  return {
    text: `${header}\n${shown.text}`,
    meta: {
      wall_time_seconds: outcome.wallTimeSeconds,
      ...(outcome.exitCode !== undefined && { exit_code: outcome.exitCode }),
      ...(outcome.sessionId !== undefined && { session_id: outcome.sessionId }),
      original_token_count: outcome.originalTokenCount,
      truncated: shown.truncated,
    },
  }
}

/** Output within `maxBytes`: its newest bytes, after a line saying how much went before. */
function budget(output: string, maxBytes: number): { text: string; truncated: boolean } {
  if (utf8Bytes(output) <= maxBytes) return { text: output, truncated: false }
  const notice = (omitted: number) => `[… ${omitted} bytes omitted]\n`
  const kept = boundUtf8(output, Math.max(0, maxBytes - utf8Bytes(notice(utf8Bytes(output)))), { keep: 'tail' })
  return { text: notice(kept.omittedBytes) + kept.text, truncated: true }
}
