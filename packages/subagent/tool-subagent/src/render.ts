/** The text the model sees for a sub-agent call (the README's "What the model sees"); snapshot runs compare it. */
import { textOf, type SubagentResult, type SubagentUpdate } from '@conch/subagent'
import { boundUtf8, truncationNotice, utf8Bytes } from '@conch/tools'

export const NO_OUTPUT = '(no output)'

/** Seconds with one decimal: `3.4 s`. */
export function formatDuration(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`
}

/** `[subagent: NAME, stop: REASON, 3.4 s]`. */
export function statusLine(provider: string, stopReason: string, durationMs: number): string {
  return `[subagent: ${provider}, stop: ${stopReason}, ${formatDuration(durationMs)}]`
}

export interface RenderOptions {
  provider: string
  durationMs: number
  /** Bound of the whole text in UTF-8 bytes; the answer keeps its head so the trailer lines fit. */
  maxBytes: number
  /**
   * The parent session's redaction (`SessionLog.redact`), applied to the answer before the cut: a
   * secret cut in two would otherwise leave its first part, which no later redaction recognises.
   */
  redact?: (text: string) => string
}

/** The answer text of a result (its text blocks, concatenated). */
export function answerText(result: SubagentResult): string {
  return textOf(result.output)
}

/** The foreground result text. */
export function renderResult(result: SubagentResult, options: RenderOptions): string {
  const trailer = [statusLine(options.provider, result.stopReason, options.durationMs)]
  if (result.diagnostic !== undefined && result.stopReason !== 'completed') {
    trailer.push(`[diagnostic: ${oneLine(result.diagnostic)}]`)
  }
  let answer = answerText(result).replace(/\n+$/, '')
  if (options.redact !== undefined) answer = options.redact(answer)
  if (answer === '') answer = NO_OUTPUT
  const trailerBytes = utf8Bytes(trailer.join('\n')) + 1
  const budget = options.maxBytes - trailerBytes
  if (utf8Bytes(answer) > budget || result.truncated) {
    const noticeBytes = utf8Bytes(truncationNotice(utf8Bytes(answer))) + 1
    const kept = boundUtf8(answer, Math.max(0, budget - noticeBytes), { keep: 'head' })
    const omitted = kept.omittedBytes
    answer = kept.text
    trailer.splice(1, 0, result.truncated && omitted === 0 ? '[output truncated: the child streamed more than was kept]' : truncationNotice(omitted))
  }
  return `${answer}\n${trailer.join('\n')}`
}

/** What progress displays get for one update: the text as it streams, a line per child tool call. */
export function progressText(update: SubagentUpdate): string {
  switch (update.type) {
    case 'text':
      return update.text
    case 'tool':
      if (update.status === 'running') return `\n[tool: ${oneLine(update.title)}]\n`
      if (update.status === 'failed') {
        return `\n[tool failed: ${oneLine(update.title)}${update.detail === undefined ? '' : `: ${oneLine(update.detail)}`}]\n`
      }
      return ''
    default: {
      const never: never = update
      return never
    }
  }
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim()
}
