/**
 * The sentinel protocol (the README's "The sentinel protocol"): a turn's answer is the text of the
 * last complete pair of the session's sentinel lines after the prompt's echo.
 */
import { randomBytes } from 'node:crypto'

export function newSentinel(): string {
  return `<<<CONCH-${randomBytes(4).toString('hex')}>>>`
}

/** The instruction given at boot (through the kind's flag or a seeded config file). */
export function sentinelInstruction(sentinel: string): string {
  return [
    `Answer protocol for this terminal session: begin every answer with a line holding only ${sentinel}`,
    `and end it with a line holding only ${sentinel}. Write nothing after the closing line.`,
  ].join(' ')
}

export interface Extraction {
  /** The text between the last complete pair, decoration and common indentation removed. */
  text: string
  /** Row of the closing sentinel. */
  closingRow: number
}

/** The row of the prompt's echo: the last row `isPrompt` accepts that holds the prompt's first line; -1 when none. */
export function findEcho(rows: readonly string[], prompt: string, isPrompt: (row: string) => boolean = () => true): number {
  const probe = echoProbe(prompt)
  return rows.findLastIndex((row) => isPrompt(row) && collapse(row).includes(probe))
}

/** What identifies a prompt on screen: its first non-empty line, whitespace collapsed, at most 40 characters. */
export function echoProbe(prompt: string): string {
  const first = prompt.split('\n').find((line) => line.trim() !== '') ?? ''
  return collapse(first).slice(0, 40)
}

/**
 * The last complete sentinel pair at or after `fromRow`, or undefined. Rows between the pair
 * become the answer: a decoration prefix (`answerPrefix`) is removed from the first row, the
 * smallest common indentation from all.
 */
export function extractAnswer(rows: readonly string[], sentinel: string, fromRow: number, answerPrefix?: RegExp): Extraction | undefined {
  const marks: number[] = []
  for (let row = Math.max(0, fromRow); row < rows.length; row++) {
    if (rows[row]!.includes(sentinel)) marks.push(row)
  }
  if (marks.length < 2) return undefined
  const closingRow = marks[marks.length - 1]!
  const openingRow = marks[marks.length - 2]!
  const opening = rows[openingRow]!
  const afterOpening = opening.slice(opening.lastIndexOf(sentinel) + sentinel.length)
  const closing = rows[closingRow]!
  const beforeClosing = closing.slice(0, closing.indexOf(sentinel))
  let body = rows.slice(openingRow + 1, closingRow)
  if (afterOpening.trim() !== '') body = [afterOpening, ...body]
  if (beforeClosing.trim() !== '' && !(answerPrefix && answerPrefix.test(beforeClosing) && beforeClosing.replace(answerPrefix, '').trim() === '')) body = [...body, beforeClosing]
  if (answerPrefix && body.length > 0) body[0] = body[0]!.replace(answerPrefix, '')
  const indents = body.filter((line) => line.trim() !== '').map((line) => /^ */.exec(line)![0].length)
  const indent = indents.length > 0 ? Math.min(...indents) : 0
  const text = body.map((line) => line.slice(Math.min(indent, /^ */.exec(line)![0].length)).trimEnd()).join('\n').trim()
  return { text, closingRow }
}

/** The text between the last complete pair in a transcript's answer text, or undefined. */
export function extractFromText(text: string, sentinel: string): string | undefined {
  const closing = text.lastIndexOf(sentinel)
  if (closing < 0) return undefined
  const opening = text.lastIndexOf(sentinel, closing - 1)
  if (opening < 0) return undefined
  return text.slice(opening + sentinel.length, closing).trim()
}

export function collapse(text: string): string {
  return text.replace(/\s+/g, ' ').trim()
}
