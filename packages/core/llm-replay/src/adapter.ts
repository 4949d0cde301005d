/**
 * The scripted model adapter: every model call consumes the next script line and streams it as
 * deterministic chunks.
 */
import { LlmError, type ModelAdapter, type ModelChunk, type ModelRequest } from '@conch/llm'
import type { ScriptStep } from './script.ts'

export class ReplayAdapter implements ModelAdapter {
  readonly model: string
  private next = 0

  /** @param file how messages name the script (the configured path) */
  constructor(
    readonly provider: string,
    readonly file: string,
    private readonly steps: readonly ScriptStep[],
  ) {
    this.model = `script:${file}`
  }

  /** Lines not consumed yet (a run that ends with some left says so). */
  remaining(): number {
    return this.steps.length - this.next
  }

  /** Lines consumed so far (= model calls answered, including ones that failed on a tool name). */
  consumed(): number {
    return this.next
  }

  /** Script lines in the file (blank lines excluded). */
  get length(): number {
    return this.steps.length
  }

  /**
   * Streams the next line: its `text` as up to three deltas split on code points, then each tool
   * call as two deltas (id `call_<line>_<index>` and name first, the arguments JSON split across
   * both), then `finish` (`tool_calls` or `stop`). Checks `request.signal` before every chunk and
   * rejects with its reason.
   * @throws LlmError `SCRIPT_EXHAUSTED` past the end; `SCRIPT_ERROR` naming `file:line` when a
   *   tool is not among `request.tools`.
   */
  async *stream(request: ModelRequest): AsyncGenerator<ModelChunk> {
    const signal = request.signal
    signal?.throwIfAborted()
    const step = this.steps[this.next]
    if (!step) {
      throw new LlmError('SCRIPT_EXHAUSTED', { file: this.file, call: this.next + 1, lines: this.steps.length })
    }
    this.next++
    const available = request.tools.map((tool) => tool.name)
    for (const call of step.toolCalls) {
      if (!available.includes(call.name)) {
        throw new LlmError('SCRIPT_ERROR', { file: this.file, line: step.line, problem: `tool "${call.name}" is not available; available tools: ${available.length ? available.join(', ') : '(none)'}` })
      }
    }
    for (const piece of splitCodePoints(step.text, 3)) {
      await Promise.resolve()
      signal?.throwIfAborted()
      yield { type: 'text-delta', text: piece }
    }
    for (const [index, call] of step.toolCalls.entries()) {
      const json = JSON.stringify(call.arguments)
      const [head, tail] = splitCodePoints(json, 2)
      await Promise.resolve()
      signal?.throwIfAborted()
      yield { type: 'tool-call-delta', index, id: `call_${step.line}_${index}`, name: call.name, argumentsDelta: head ?? '' }
      if (tail !== undefined) yield { type: 'tool-call-delta', index, argumentsDelta: tail }
    }
    signal?.throwIfAborted()
    yield { type: 'finish', reason: step.toolCalls.length ? 'tool_calls' : 'stop' }
  }
}

/** Splits `text` into at most `parts` non-empty pieces of nearly equal code-point counts. */
function splitCodePoints(text: string, parts: number): string[] {
  const points = Array.from(text)
  if (points.length === 0) return []
  const size = Math.ceil(points.length / parts)
  const pieces: string[] = []
  for (let start = 0; start < points.length; start += size) pieces.push(points.slice(start, start + size).join(''))
  return pieces
}
