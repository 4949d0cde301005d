/**
 * What a send types, as an ordered list of writes — each one a person's key press or piece of
 * typed text — plus what must be checked before the first of them. Pure: the session encodes each
 * step for the terminal's modes at the moment it is written (`encodeStep`).
 *
 * - `text`: the text (line breaks typed as Enter, CR) and, when `submit`, Enter — one write;
 * - `keys`: one step per entry (keys.ts);
 * - `secret`: the value, then Enter; the value is registered for redaction before it is written.
 */
import { PtyError, type BackendSendInput, type SecretValue } from '@conch/pty'
import { encodeKey, parseKeys, type Key, type KeyModes } from './keys.ts'
import { MIN_SECRET_BYTES } from './redact.ts'

export type InputStep =
  /** Typed text, written as one write. */
  | { kind: 'text'; data: string }
  /** One key press. */
  | { kind: 'key'; key: Key }
  /** The Enter that submits (CR, what the Enter key sends; ICRNL turns it into a line feed for canonical readers). */
  | { kind: 'enter' }
  /** A secret's value. */
  | { kind: 'secret'; secret: SecretValue }

export interface InputPlan {
  steps: InputStep[]
  /**
   * The bytes that reach a canonical reader as lines (text, literal key text or a secret value),
   * for the line-limit check before anything is written; '' when there are none.
   */
  lines: string
  /** The secret this send types, to be registered for redaction before the write. */
  secret?: SecretValue
  /** The last line of typed text, to tell its echo from a prompt ('' when it types none). */
  echo: string
}

/**
 * The plan of one send.
 * @throws PtyError `UNKNOWN_KEY` / `INVALID_INPUT` for bad keys, `INVALID_INPUT` for a secret value
 *   that is too short or holds a control character — before anything is written.
 */
export function planInput(input: BackendSendInput): InputPlan {
  if (input.keys !== undefined) {
    const keys = parseKeys(input.keys)
    const lines = keys.map((key) => (key.kind === 'text' ? key.text : key.kind === 'char' && !key.ctrl && !key.meta ? key.char : '\r')).join('')
    return { steps: keys.map((key) => ({ kind: 'key', key })), lines, echo: '' }
  }
  if (input.secret !== undefined) {
    const { name, value } = input.secret
    checkSecretValue(name, value)
    return { steps: [{ kind: 'secret', secret: input.secret }, { kind: 'enter' }], lines: value, secret: input.secret, echo: '' }
  }
  const text = input.text.replace(/\r?\n/g, '\r')
  // Text and its Enter are one write here; the send lifecycle may split them (Enter as its own key press).
  const data = input.submit ? `${text}\r` : text
  const steps: InputStep[] = data === '' ? [] : [{ kind: 'text', data }]
  return { steps, lines: text, echo: input.text.split(/\r?\n/).at(-1) ?? '' }
}

/** The bytes of one step, for the terminal's modes now. */
export function encodeStep(step: InputStep, modes: KeyModes): string {
  switch (step.kind) {
    case 'text':
      return step.data
    case 'key':
      return encodeKey(step.key, modes)
    case 'enter':
      return '\r'
    case 'secret':
      return step.secret.value
    default:
      return exhausted(step)
  }
}

/**
 * A value conch will type and redact: at least `MIN_SECRET_BYTES` bytes (a shorter one would be
 * replaced all over ordinary output), and no control characters (a line break would submit part
 * of it; the terminal would act on the others).
 * @throws PtyError `INVALID_INPUT` naming the secret, never showing its value.
 */
export function checkSecretValue(name: string, value: string): void {
  if (Buffer.byteLength(value, 'utf8') < MIN_SECRET_BYTES) {
    throw new PtyError(
      'INVALID_INPUT',
      `secret ${name} is shorter than ${MIN_SECRET_BYTES} bytes; conch refuses it because it replaces a typed secret wherever the terminal prints it, and a value that short would match ordinary output; nothing was written`,
    )
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(value)) {
    throw new PtyError('INVALID_INPUT', `secret ${name} holds a control character (a line break, say); only its first line could be typed; nothing was written`)
  }
}

function exhausted(value: never): never {
  throw new Error(`unhandled input step ${JSON.stringify(value)}`)
}
