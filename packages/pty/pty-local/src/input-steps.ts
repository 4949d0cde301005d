/**
 * What a send writes, as an ordered list of write steps. The send machine (send-machine.ts)
 * writes each step as its own write(2) on the PTY master, in order; a step marked
 * `afterConsumed` is written only once the foreground program consumed everything before it
 * (or a short bound passed), so a raw-mode reader sees it as a separate key press.
 *
 * This is the one entry point for input: any other form (named keys, a secret) becomes a list
 * of `WriteStep`s and goes through the same machine.
 */

/** One write of a send. */
export interface WriteStep {
  /** The bytes to write, as text (written as UTF-8). Never empty. */
  data: string
  /**
   * Wait, before writing this step, until the foreground program consumed the previous steps:
   * the kernel shows its reader ran and is blocked reading the terminal again (its input queue
   * drained), or the echo of the previous step arrived — bounded by `submitWaitMs`.
   */
  afterConsumed: boolean
  /**
   * Text whose echo proves this step was consumed: the printable tail a line-editing reader
   * shows once it read the step (its last line). Empty when the step echoes nothing printable.
   */
  echo: string
}

/** Bracketed paste (DECSET 2004, XTerm Control Sequences "Bracketed Paste Mode"): start and end markers. */
export const PASTE_START = '\x1b[200~'
export const PASTE_END = '\x1b[201~'

/** Enter, as a terminal sends it (CR; the line discipline maps it to NL under ICRNL). */
export const ENTER = '\r'

/**
 * The write steps of a text send: the text, line breaks (`\n`, `\r\n`) as CR as typed, and with
 * `submit` an Enter (CR) after it, in one write.
 */
export function textSteps(input: { text: string; submit: boolean }, _modes: { bracketedPaste: boolean }): WriteStep[] {
  const text = input.text.replace(/\r?\n/g, '\r')
  const data = input.submit ? `${text}${ENTER}` : text
  return data === '' ? [] : [{ data, afterConsumed: false, echo: lastLine(input.text) }]
}

function lastLine(text: string): string {
  return (text.split(/\r?\n|\r/).at(-1) ?? '').trim()
}
