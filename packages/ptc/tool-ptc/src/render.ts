/**
 * What the model reads for a `run_code` call: the logs, then the value as JSON (or the failure
 * with its stack), then one status line, bounded by `maxResultBytes` on code-point boundaries.
 * The status line is always kept; the body is cut from its end with a notice.
 */
import type { PtcResult } from '@conch/ptc'
import { boundUtf8, utf8Bytes } from '@conch/tools'

/** `[run_code: ok in 41 ms, 3 tool calls]`, `[run_code: timeout after 120000 ms, 2 tool calls]`. */
export function statusLine(result: PtcResult, toolCalls: number, timeoutMs: number | null): string {
  const calls = `${toolCalls} tool call${toolCalls === 1 ? '' : 's'}`
  if (result.ok) return `[run_code: ok in ${result.elapsedMs} ms, ${calls}]`
  const ms = result.failure.kind === 'timeout' && timeoutMs !== null ? timeoutMs : result.elapsedMs
  return `[run_code: ${result.failure.kind} after ${ms} ms, ${calls}]`
}

/**
 * The full text: logs (as printed), the value or the failure, the status line; at most `maxBytes`
 * bytes. `redact` (the session's, `SessionLog.redact`) is applied before the cut: a secret cut in
 * two would otherwise leave its first part before the notice, which no redactor recognises.
 */
export function renderResult(
  result: PtcResult,
  options: { toolCalls: number; timeoutMs: number | null; maxBytes: number; redact?: (text: string) => string },
): string {
  const parts: string[] = []
  if (result.logs !== '') parts.push(result.logs.replace(/\n$/, ''))
  if (result.ok) {
    parts.push(JSON.stringify(result.value, null, 2))
  } else {
    const failure = result.failure
    parts.push(`${failure.kind}: ${failure.stack ?? failure.message}`)
    if (failure.stack !== undefined && !failure.stack.startsWith(failure.message)) parts.push(failure.message)
  }
  const denials = result.sandbox.denials
  if (denials.length > 0) parts.push(`[sandbox: ${result.sandbox.mode} denied ${denials.map((denial) => denial.code).filter((code, index, all) => all.indexOf(code) === index).join(', ')}]`)
  // The same note a terminal's result carries (tool-pty): the program itself saw only a 403 or a failed fetch.
  for (const host of result.sandbox.refused ?? []) parts.push(`[network: blocked ${hostText(host)} — not in the allowlist]`)
  const status = statusLine(result, options.toolCalls, options.timeoutMs)
  const body = options.redact === undefined ? parts.join('\n') : options.redact(parts.join('\n'))
  const room = options.maxBytes - utf8Bytes(status) - 1
  if (utf8Bytes(body) <= room) return `${body}\n${status}`
  const notice = (omitted: number) => `\n[… ${omitted} bytes cut: the result is bounded to ${options.maxBytes} bytes; print less or return a smaller value]`
  const cut = boundUtf8(body, Math.max(0, room - utf8Bytes(notice(utf8Bytes(body)))))
  return `${cut.text}${notice(cut.omittedBytes)}\n${status}`
}

/** A refused host as one line of the result: control characters and line separators escaped, at most 256 characters. */
function hostText(host: string): string {
  const text = JSON.stringify(host).slice(1, -1).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
  return text.length > 256 ? `${text.slice(0, 256)}…` : text
}
