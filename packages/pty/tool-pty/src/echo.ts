/**
 * The terminal's echo of a send's text. The model wrote those bytes itself, so a result leaves
 * them out — only when the output begins with exactly them: each submitted line in order, the
 * first one possibly after the prompt it was typed at, later ones after a continuation prompt
 * (bash's `> `, python's `... `). An echo the shell or program changed (a Tab it completed, a
 * control character shown as `^C`) does not match, and then nothing is left out.
 */
import { parseScreenHeader, type SendResult } from '@conch/pty'

/** Longest prompt accepted before an echoed line, in UTF-16 units. */
const MAX_PROMPT = 256

/**
 * A state machine over a send's output, fed in chunks: holds back text while it may still be
 * the echo, drops it once every submitted line matched, and passes everything on unchanged as
 * soon as one line does not match.
 */
export class EchoFilter {
  /** Submitted lines not yet seen; empty once matched or given up. */
  private expected: string[]
  private held = ''
  /** Where the next echoed line starts in `held`. */
  private at = 0
  private matched = 0

  /**
   * @param typed the send's text; with `submitted` false its last line was not ended by Enter,
   * so it is not expected (the terminal shows it as the line being edited).
   */
  constructor(typed: string, submitted = true) {
    const lines = typed.split('\n')
    if (!submitted) lines.pop()
    this.expected = lines
  }

  /** Lines of echo left out so far (all of them, or none). */
  get dropped(): number {
    return this.expected.length === 0 && this.held === '' ? this.matched : 0
  }

  /** Takes a chunk of output; returns what may be shown now. */
  feed(chunk: string): string {
    if (this.expected.length === 0) return chunk
    this.held += chunk
    while (this.expected.length > this.matched) {
      const end = this.held.indexOf('\n', this.at)
      const want = this.expected[this.matched]!
      if (end < 0) return this.held.length - this.at > want.length + MAX_PROMPT ? this.release() : ''
      if (!echoes(this.held.slice(this.at, end).replace(/\r$/, ''), want, this.matched === 0)) return this.release()
      this.at = end + 1
      this.matched++
    }
    const rest = this.held.slice(this.at)
    this.held = ''
    this.expected = []
    return rest
  }

  /**
   * The end of the output. Output that ends with the last submitted line is its echo too: the
   * cursor waits on the next row (a command still running), which leaves no newline to end it.
   * Whatever else is still held back was not the whole echo.
   */
  flush(): string {
    if (this.expected.length === 0) return ''
    const last = this.matched === this.expected.length - 1 && echoes(this.held.slice(this.at).replace(/\r$/, ''), this.expected[this.matched]!, this.matched === 0)
    if (!last) return this.release()
    this.matched++
    this.held = ''
    this.expected = []
    return ''
  }

  private release(): string {
    const held = this.held
    this.held = ''
    this.expected = []
    this.matched = 0
    return held
  }
}

/**
 * Whether `line` shows `typed` as typed, alone or after a prompt (which ends in a space). A bare
 * Enter shows nothing of its own, so as the `first` line it must be empty: a line that merely ends
 * in a space is output the model has not seen (a program's late `Press Enter `).
 */
function echoes(line: string, typed: string, first: boolean): boolean {
  if (line === typed) return true
  if (typed === '' && first) return false
  if (!line.endsWith(typed)) return false
  const prompt = line.slice(0, line.length - typed.length)
  return prompt.length <= MAX_PROMPT && /\s$/.test(prompt)
}

/** `output` without its leading echo of `typed`, and how many lines that was (0: kept whole). */
export function withoutEcho(output: string, typed: string, submitted = true): { text: string; lines: number } {
  const filter = new EchoFilter(typed, submitted)
  const text = filter.feed(output) + filter.flush()
  return { text, lines: filter.dropped }
}

/**
 * A foreground send's result as the model reads it: without the echo of its text. A screen is
 * left whole, and so is output whose start the backend cut; the places the backend noted in
 * lines (the earlier command's end, a flood's gap) move up with the lines left out, and an echo
 * that reaches past one of them is kept.
 */
export function sendWithoutEcho(result: SendResult, typed: string, submitted: boolean): SendResult {
  if (parseScreenHeader(result.viewport) !== undefined || (result.truncated && result.omitted === undefined)) return result
  const { text, lines } = withoutEcho(result.viewport, typed, submitted)
  if (lines === 0) return result
  const earlier = result.earlier?.lines
  const omitted = result.omitted?.headLines
  if ((earlier !== undefined && earlier < lines) || (omitted !== undefined && omitted < lines)) return result
  return {
    ...result,
    viewport: text,
    ...(result.earlier && { earlier: { ...result.earlier, ...(earlier !== undefined && { lines: earlier - lines }) } }),
    ...(result.omitted && { omitted: { ...result.omitted, headLines: result.omitted.headLines - lines } }),
  }
}
