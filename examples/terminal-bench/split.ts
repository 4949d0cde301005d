/**
 * Splits a shell script into the sends a person would type into a terminal: one send per
 * top-level command. bash's own parser decides where a command ends (`bash -n` on each
 * prefix), so a heredoc, a multi-line `if`/`for`/`while`, a function, an open quote and a
 * line ending in `\` stay whole and reach the shell as one send, continuation lines and all.
 *
 * A line that is not bash and cannot become bash (`print(x)` to a Python REPL, gdb's
 * `printf "%d\n", n`, a key typed to `ed`) is a send of its own: it is meant for the program
 * in front, not for the shell. Blank lines and comment lines between commands are not sent.
 */
import { spawnSync } from 'node:child_process'

export interface Send {
  /** The text to type, without the final line break (the send's Enter submits it). */
  text: string
  /** 1-based line number in the script where the send starts. */
  line: number
}

type Verdict = 'complete' | 'incomplete' | 'invalid'

/**
 * What bash makes of `text` as a whole script: `complete`, `incomplete` (it could go on: an
 * open heredoc, quote, compound command or line continuation) or `invalid`.
 */
export function parseVerdict(text: string): Verdict {
  // bash -n accepts a trailing `\` at the end of input; a person's Enter after it continues the line.
  if (/(^|[^\\])(\\\\)*\\$/.test(text)) return 'incomplete'
  const result = spawnSync('bash', ['--norc', '--noprofile', '-n'], { input: `${text}\n`, encoding: 'utf8' })
  if (result.error) throw result.error
  // An unterminated heredoc is only a warning (exit 0): bash closes it at end of input.
  if (result.status === 0) return /here-document .* delimited by end-of-file/.test(result.stderr) ? 'incomplete' : 'complete'
  return /unexpected end of file|unexpected EOF/.test(result.stderr) ? 'incomplete' : 'invalid'
}

const isBlankOrComment = (line: string): boolean => /^\s*(#.*)?$/.test(line)

/**
 * The sends of `script`, in order. Lines are gathered from a command's first line until bash
 * calls them complete. When they can never be (they turn invalid, or the script ends), the
 * first of them is sent alone — a line for the program in front, such as Python's `exit()`,
 * which bash reads as the start of a function — and gathering starts again after it.
 */
export function splitCommands(script: string): Send[] {
  const lines = script.replace(/\r\n/g, '\n').replace(/\n$/, '').split('\n')
  const sends: Send[] = []
  let start = 0
  while (start < lines.length) {
    if (isBlankOrComment(lines[start]!)) {
      start++
      continue
    }
    let end = start
    let verdict: Verdict = parseVerdict(lines[start]!)
    while (verdict === 'incomplete' && end + 1 < lines.length) {
      end++
      verdict = parseVerdict(lines.slice(start, end + 1).join('\n'))
    }
    if (verdict !== 'complete') end = start
    sends.push({ text: lines.slice(start, end + 1).join('\n'), line: start + 1 })
    start = end + 1
  }
  return sends
}
