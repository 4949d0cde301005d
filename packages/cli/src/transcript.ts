/**
 * What `conch run` prints on stdout: `stream-json` (one JSON object per line, keys in a stable
 * order) or a readable `text` transcript; both formats, the per-call bound of live output and how
 * control characters are shown are specified in packages/cli/README.md, "Output". Nothing hostile
 * reaches the operator's terminal, and diagnostics never go here (stderr, through `visible` too).
 */
import type { AgentRunEvent, RunResult } from '@conch/agent'
import { toolResultText } from '@conch/tools'
import { unreachable } from '@conch/session'

export type OutputFormat = 'text' | 'stream-json'

export interface Transcript {
  /** Observer for `agents.run`. */
  onEvent(event: AgentRunEvent): void
  /** Prints the end of the run. */
  finish(result: RunResult): void
}

/** `completed` stays `completed`; every other run status is reported as `error`. */
export function resultStatus(result: RunResult): 'completed' | 'error' {
  return result.status === 'completed' ? 'completed' : 'error'
}

export function createTranscript(format: OutputFormat, stdout: NodeJS.WritableStream, options: { partial?: boolean } = {}): Transcript {
  switch (format) {
    case 'stream-json':
      return streamJson(stdout, options.partial === true)
    case 'text':
      return textTranscript(stdout)
    default:
      return unreachable(format, 'output format')
  }
}

function streamJson(stdout: NodeJS.WritableStream, partial: boolean): Transcript {
  // JSON.stringify escapes C0 but leaves DEL and C1 raw.
  const line = (value: object) => stdout.write(`${JSON.stringify(value).replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`)
  const bound = liveBound()
  return {
    onEvent(event) {
      switch (event.type) {
        case 'tool-call':
          line({ type: 'tool_call', id: event.callId, name: event.name, arguments: event.arguments })
          break
        case 'tool-result': {
          const { result } = event
          bound.end(event.callId)
          line({
            type: 'tool_result',
            id: event.callId,
            name: event.name,
            isError: result.isError === true,
            text: toolResultText(result),
            ...(result.meta === undefined ? {} : { meta: result.meta }),
          })
          break
        }
        case 'assistant':
          line({ type: 'assistant', text: event.text })
          break
        case 'notification': {
          const { source, event: what, label, evidence, tail, wake } = event.notification
          line({ type: 'notification', source, event: what, label, evidence, tail, wake, text: event.text })
          break
        }
        case 'waiting':
          line({ type: 'waiting', tasks: event.tasks, timeoutMs: event.timeoutMs })
          break
        case 'tool-progress':
          if (partial && event.text !== '') {
            const text = bound.take(event.callId, event.text)
            if (text !== '') line({ type: 'tool_output', id: event.callId, text })
          }
          break
        case 'text-delta':
          // Incremental pieces; the complete assistant text follows.
          break
        default:
          return unreachable(event, 'run event')
      }
    },
    finish(result) {
      line({ type: 'result', status: resultStatus(result), text: result.text })
    },
  }
}

function textTranscript(out: NodeJS.WritableStream): Transcript {
  const stdout = { write: (text: string) => out.write(visible(text)) }
  let blocks = 0
  let printedAnswer = false
  /** The last tool result's text: a notification that rode on it was printed with it. */
  let lastResult = ''
  /** Whether live output is open mid-line (its next text continues that line). */
  let liveMidLine = false
  const bound = liveBound()
  const live = (callId: string, whole: string) => {
    const text = bound.take(callId, whole)
    if (text === '') return
    let out = ''
    for (const piece of text.split(/(?<=\n)/)) {
      if (!liveMidLine) out += LIVE_PREFIX
      out += piece
      liveMidLine = !piece.endsWith('\n')
    }
    stdout.write(out)
  }
  /** Blocks (a tool call with its result, an assistant message) are separated by a blank line. */
  const block = (text: string) => {
    stdout.write(`${blocks++ ? '\n' : ''}${text.endsWith('\n') ? text : `${text}\n`}`)
  }
  return {
    onEvent(event) {
      switch (event.type) {
        case 'tool-call':
          block(`> ${event.name} ${JSON.stringify(event.arguments)}`)
          printedAnswer = false
          break
        case 'tool-result': {
          bound.end(event.callId)
          if (liveMidLine) stdout.write('\n')
          liveMidLine = false
          const marker = event.result.isError ? '  [error]\n' : ''
          lastResult = toolResultText(event.result)
          stdout.write(`${marker}${indent(lastResult)}\n`)
          break
        }
        case 'assistant':
          block(event.text)
          printedAnswer = true
          lastResult = ''
          break
        case 'notification':
          // One that rode on a tool result was printed with it; one that woke a turn stands alone.
          if (!lastResult.includes(event.text)) block(event.text)
          break
        case 'waiting':
          block(`[waiting up to ${Math.round(event.timeoutMs / 1000)} s for ${event.tasks === 1 ? 'the task' : `${event.tasks} tasks`} the model asked to be woken by]`)
          break
        case 'tool-progress':
          if (event.text !== '') live(event.callId, event.text)
          break
        case 'text-delta':
          break
        default:
          return unreachable(event, 'run event')
      }
    },
    finish(result) {
      if (result.status === 'completed') {
        if (!printedAnswer && result.text !== '') block(result.text)
        return
      }
      block(`[run ended: ${result.status}: ${result.text}]`)
    },
  }
}

/**
 * `text` with each control character but `\n` and `\t` shown instead of acted on: C0 and DEL in
 * caret notation (ESC `^[`, BEL `^G`, CR `^M`, DEL `^?`), C1 (U+0080–U+009F) as `\x9b`; and the
 * characters that reorder or hide text without showing themselves as `<U+202E>`: the bidi
 * controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C, which make `txt.exe` read as
 * `exe.txt`) and the invisible format characters (U+200B–U+200D, U+2060–U+2064, U+FEFF).
 */
export function visible(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g, (c) => {
    const code = c.charCodeAt(0)
    if (code > 0xff) return `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>`
    return code >= 0x80 ? `\\x${code.toString(16)}` : `^${String.fromCharCode(code ^ 0x40)}`
  })
}

/** Prefix of each line of a tool's live output in the text transcript. */
export const LIVE_PREFIX = '  | '

/** Live output shown per tool call, UTF-8 bytes; the rest is replaced by `LIVE_CUT_NOTICE`. */
export const LIVE_LIMIT_BYTES = 65_536

/** What replaces one call's live output past `LIVE_LIMIT_BYTES`, on a line of its own. */
export const LIVE_CUT_NOTICE = `[live output cut after ${LIVE_LIMIT_BYTES} bytes; the result follows]`

/**
 * Per-call budget of live output: `take` returns the part of `text` still within the call's
 * `LIVE_LIMIT_BYTES` (cut on a code-point boundary), then the notice once, then ''.
 */
function liveBound(): { take(callId: string, text: string): string; end(callId: string): void } {
  const used = new Map<string, number>()
  return {
    end(callId) {
      used.delete(callId)
    },
    take(callId, text) {
      const spent = used.get(callId) ?? 0
      if (spent > LIVE_LIMIT_BYTES) return ''
      const bytes = Buffer.byteLength(text)
      if (spent + bytes <= LIVE_LIMIT_BYTES) {
        used.set(callId, spent + bytes)
        return text
      }
      used.set(callId, LIVE_LIMIT_BYTES + 1)
      const head = Buffer.from(text).subarray(0, LIVE_LIMIT_BYTES - spent).toString('utf8').replace(/\uFFFD$/, '')
      return `${head}${head === '' || head.endsWith('\n') ? '' : '\n'}${LIVE_CUT_NOTICE}\n`
    },
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => (line === '' ? '' : `  ${line}`))
    .join('\n')
}
