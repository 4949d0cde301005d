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

/** Whether a write ends in a signal character: the line discipline signals the foreground group once it is written. */
export function endsInSignal(data: string): boolean {
  return /[\x03\x1c\x1a]$/.test(data)
}

/**
 * The write steps of a text send. Line breaks (`\n`, `\r\n`) become CR, as typed.
 * - A signal character (^C, ^\, ^Z) ends a write: what follows it is written as its own step
 *   once the program consumed it (`afterConsumed`; to the shell at its prompt, once it showed a
 *   new one), as a person types after an interrupt. Written
 *   together, the interrupted reader can lose what came after it: bash's readline takes the next
 *   character before it handles the SIGINT and drops it with the line it discards
 *   (`\x03echo hi` in one write runs `cho hi`).
 * - `submit: false`: the text in one write.
 * - `submit: true`: the text, then Enter as its own write after the text was consumed, so a
 *   raw-mode reader that takes each read as keystrokes sees Enter alone (a chunk `hello\r` reads
 *   as a paste and does not submit). An empty text submits Enter alone. At the shell's own
 *   prompt (`shellPrompt`) one line of printable text goes with its Enter in one write: the
 *   reader is bash's readline, which reads its input one byte per read(2) and knows a paste only
 *   by its brackets, so Enter is its own key press there either way — without a wait for the
 *   text's echo.
 * - A block of text for a line editor is pasted (`pastes`): `ESC [ 200 ~ … ESC [ 201 ~`, so a shell
 *   or a REPL takes it as one input instead of submitting it line by line; its trailing line
 *   breaks, and Enter, follow as key presses. Anything else is typed (each CR submits its line).
 */
export function textSteps(input: { text: string; submit: boolean }, modes: PasteModes): WriteStep[] {
  const text = input.text.replace(/\r?\n/g, '\r')
  const steps: WriteStep[] = []
  const pieces = text === '' ? [] : text.split(SIGNAL_CHARACTER)
  pieces.forEach((piece, index) => {
    // A piece that ends in a signal character echoes nothing to wait for (the reader redraws).
    const echo = index === pieces.length - 1 && !endsInSignal(piece) ? lastLine(piece) : ''
    if (!pastes(piece, modes)) {
      steps.push({ data: piece, afterConsumed: index > 0, echo })
      return
    }
    const block = piece.replace(/\r+$/, '')
    steps.push({ data: `${PASTE_START}${block}${PASTE_END}`, afterConsumed: index > 0, echo: lastLine(block) })
    for (let enter = block.length; enter < piece.length; enter++) steps.push({ data: ENTER, afterConsumed: true, echo: '' })
  })
  const [line] = steps
  if (input.submit && modes.shellPrompt === true && steps.length === 1 && !CONTROL.test(line!.data)) steps[0] = { ...line!, data: line!.data + ENTER }
  else if (input.submit) steps.push({ data: ENTER, afterConsumed: steps.length > 0, echo: '' })
  return steps
}

/** What the paste rule (`pastes`) and Enter read of the terminal: the modes the program set, and who reads. */
export interface PasteModes {
  /** DECSET 2004: the program asked for pastes to be bracketed. */
  bracketedPaste: boolean
  /** DECSET 47, 1047 or 1049: a full-screen program is in front. */
  alternateScreen: boolean
  /** The shell sits at its controlled prompt (the send before settled on it; nothing written or printed since). */
  shellPrompt?: boolean
}

/** C0 and C1 controls and DEL: a text with one is not a plain line (ESC would begin a key sequence with the Enter after it). */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f-\x9f]/

/** Characters that make a text keystrokes: C0 and C1 controls but Tab and CR (ESC, ^H, DEL, …). */
// eslint-disable-next-line no-control-regex
const KEYSTROKE_CONTROL = /[\x00-\x08\x0a-\x0c\x0e-\x1f\x7f-\x9f]/

/**
 * Whether a piece of text goes to the program as one bracketed paste rather than typed: only a
 * block of text for a line editor — the program asked for bracketed paste (DECSET 2004: bash's
 * readline at every prompt, ipython's prompt_toolkit), it is not on the alternate screen, and the
 * piece holds a line break followed by more text and no control character but Tab and CR.
 * Everything else is typed, as keys: a single line, with or without a trailing CR (`:wq\r`); ESC
 * or another control character (`ihello\x1b`; an ESC inside a paste could also end it early); and
 * anything to a full-screen program, which reads its input as commands — vim inserts a paste as
 * text even in Normal mode, so a pasted `:wq\r` lands in the buffer and saves nothing. python3's
 * REPL (its readline turns bracketed paste off) and the Node REPL never ask for it: their input is
 * always typed.
 */
export function pastes(piece: string, modes: PasteModes): boolean {
  return modes.bracketedPaste && !modes.alternateScreen && /\r+[^\r]/.test(piece) && !KEYSTROKE_CONTROL.test(piece)
}

/** The last line of `text` (after its last CR or LF), trimmed. */
export function lastLine(text: string): string {
  return (text.split(/\r?\n|\r/).at(-1) ?? '').trim()
}
