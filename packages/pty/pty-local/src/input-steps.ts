/**
 * What a send writes: ordered write steps, each its own write(2) on the master; one marked
 * `afterConsumed` waits until the program consumed the ones before, so a raw-mode reader sees a
 * separate key press. Every form of input (keys, a secret) becomes `WriteStep`s.
 */
import { entersAfter } from '@conch/pty'
import type { Key } from './keys.ts'

/** One write of a send. */
export interface WriteStep {
  /** The bytes to write, as text (written as UTF-8). Never empty. */
  data: string
  /** A named key (keys.ts), encoded for the modes at the write (DECCKM may change mid-send); `data` as planned. */
  key?: Key
  /** Wait until the program consumed the previous steps (kernel evidence or their echo), at most `submitWaitMs`. */
  afterConsumed: boolean
  /** The printable tail whose echo proves this step was consumed; empty when it echoes nothing. */
  echo: string
}

/** Bracketed paste (DECSET 2004, XTerm Control Sequences "Bracketed Paste Mode"): start and end markers. */
export const PASTE_START = '\x1b[200~'
export const PASTE_END = '\x1b[201~'

/** Enter, as a terminal sends it (CR; the line discipline maps it to NL under ICRNL). */
export const ENTER = '\r'

/** The ISIG signal characters at their termios(3) defaults: VINTR ^C, VQUIT ^\, VSUSP ^Z. */
const SIGNAL_CHARACTER = /(?<=[\x03\x1c\x1a])/

/** Whether a write ends in a signal character: the line discipline signals the foreground group once it is written. */
export function endsInSignal(data: string): boolean {
  return /[\x03\x1c\x1a]$/.test(data)
}

/** Whether a write ends in ESC: the program may wait a little for the rest of an escape sequence (vim's `ttimeoutlen`). */
export function endsInEscape(data: string): boolean {
  return data.endsWith('\x1b')
}

/**
 * The write steps of a text send. Line breaks (`\n`, `\r\n`) become CR, as typed.
 * - A signal character (^C, ^\, ^Z) ends a write; what follows waits until it was consumed
 *   (`afterConsumed`), as a person types after an interrupt: readline drops the next character
 *   with the line it discards (`\x03echo hi` in one write runs `cho hi`).
 * - `submit: true` (`entersAfter`: not after a text of only signal characters): Enter follows as
 *   its own write once the text was consumed, so a raw-mode reader sees it alone (`hello\r` in
 *   one chunk reads as a paste), after an ESC once the program took it as the Escape key (the send
 *   machine's escape wait). At the shell's prompt (`shellPrompt`) one printable line goes with
 *   its Enter: readline reads byte by byte.
 * - A block of text for a line editor is pasted (`pastes`), its trailing line breaks and Enter
 *   following as key presses. Anything else is typed (each CR submits its line).
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
  const submit = entersAfter(input.text, input.submit)
  if (submit && modes.shellPrompt === true && steps.length === 1 && !CONTROL.test(line!.data)) steps[0] = { ...line!, data: line!.data + ENTER }
  else if (submit) steps.push({ data: ENTER, afterConsumed: steps.length > 0, echo: '' })
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
 * Whether a piece goes as one bracketed paste: the program asked for it (DECSET 2004), is not on
 * the alternate screen (vim would insert a pasted `:wq\r` as text), and the piece holds a line
 * break followed by more text and no control but Tab and CR (an ESC could end a paste early).
 */
export function pastes(piece: string, modes: PasteModes): boolean {
  return modes.bracketedPaste && !modes.alternateScreen && /\r+[^\r]/.test(piece) && !KEYSTROKE_CONTROL.test(piece)
}

/** The last line of `text` (after its last CR or LF), trimmed. */
export function lastLine(text: string): string {
  return (text.split(/\r?\n|\r/).at(-1) ?? '').trim()
}
