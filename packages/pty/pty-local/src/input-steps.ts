/**
 * What a send writes, as an ordered list of write steps. The send machine (send-machine.ts)
 * writes each step as its own write(2) on the PTY master, in order; a step marked
 * `afterConsumed` is written only once the foreground program consumed everything before it
 * (or a short bound passed), so a raw-mode reader sees it as a separate key press.
 *
 * This is the one entry point for input: any other form (named keys, a secret) becomes a list
 * of `WriteStep`s and goes through the same machine.
 */
import type { Key } from './keys.ts'

/** One write of a send. */
export interface WriteStep {
  /** The bytes to write, as text (written as UTF-8). Never empty. */
  data: string
  /**
   * A named key press (keys.ts): written as the key's encoding for the terminal's modes at the
   * moment of the write (a program can switch DECCKM between two keys of a send); `data` is its
   * encoding when the send was planned.
   */
  key?: Key
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
 * The characters the line discipline turns into signals under ISIG, at their termios(3)
 * defaults: VINTR ^C, VQUIT ^\, VSUSP ^Z.
 */
const SIGNAL_CHARACTER = /(?<=[\x03\x1c\x1a])/

/**
 * The write steps of a text send. Line breaks (`\n`, `\r\n`) become CR, as typed.
 * - A signal character (^C, ^\, ^Z) ends a write: what follows it is written as its own step
 *   once the program consumed it (`afterConsumed`), as a person types after an interrupt. Written
 *   together, the interrupted reader can lose what came after it: bash's readline takes the next
 *   character before it handles the SIGINT and drops it with the line it discards
 *   (`\x03echo hi` in one write runs `cho hi`).
 * - `submit: false`: the text in one write.
 * - `submit: true`: the text, then Enter as its own write after the text was consumed, so a
 *   raw-mode reader that takes each read as keystrokes sees Enter alone (a chunk `hello\r` reads
 *   as a paste and does not submit). An empty text submits Enter alone.
 * - `bracketedPaste` (the program turned on DECSET 2004) and the text spans lines: the text is
 *   sent as one paste, `ESC [ 200 ~ … ESC [ 201 ~`, so an editor or a shell takes it as one
 *   input instead of submitting it line by line; Enter follows separately. Without it, the
 *   lines are typed one after another (each CR submits its line).
 */
export function textSteps(input: { text: string; submit: boolean }, modes: { bracketedPaste: boolean }): WriteStep[] {
  const text = input.text.replace(/\r?\n/g, '\r')
  const steps: WriteStep[] = []
  const pieces = text === '' ? [] : text.split(SIGNAL_CHARACTER)
  pieces.forEach((piece, index) => {
    const paste = modes.bracketedPaste && piece.includes('\r')
    // A piece that ends in a signal character echoes nothing to wait for (the reader redraws).
    const echo = index === pieces.length - 1 && !/[\x03\x1c\x1a]$/.test(piece) ? lastLine(piece) : ''
    steps.push({ data: paste ? `${PASTE_START}${piece}${PASTE_END}` : piece, afterConsumed: index > 0, echo })
  })
  if (input.submit) steps.push({ data: ENTER, afterConsumed: steps.length > 0, echo: '' })
  return steps
}

function lastLine(text: string): string {
  return (text.split(/\r?\n|\r/).at(-1) ?? '').trim()
}
