/** What a send types (`text`, `keys` or a `secret`) as write steps (input-steps.ts; README, "Input"). Pure. */
import { MIN_SECRET_BYTES, PtyError, type BackendSendInput, type SecretValue } from '@conch/pty'
import { ENTER, lastLine, textSteps, type PasteModes, type WriteStep } from './input-steps.ts'
import { encodeKey, parseKeys, type KeyModes } from './keys.ts'

export interface InputPlan {
  steps: WriteStep[]
  /** The typed text, for the prompt-shape rule (its echo is not a prompt); '' for keys and secrets. */
  inputText: string
  /** The bytes that reach a canonical reader as lines, for the line-limit check before any write. */
  lines: string
  /** The secret this send types, to be registered for redaction before the write. */
  secret?: SecretValue
}

/** The terminal modes a plan depends on (output.ts tracks them). */
export interface InputModes extends KeyModes, PasteModes {}

/**
 * The plan of one send.
 * @throws PtyError `UNKNOWN_KEY` / `INVALID_INPUT` for bad keys, `INVALID_INPUT` for a secret value
 *   that is too short or holds a control character — before anything is written.
 */
export function planInput(input: BackendSendInput, modes: InputModes): InputPlan {
  if (input.keys !== undefined) {
    const keys = parseKeys(input.keys)
    const steps = keys.map((key, index): WriteStep => {
      const data = encodeKey(key, modes)
      const echo = key.kind === 'text' ? lastLine(key.text) : key.kind === 'char' && !key.ctrl && !key.meta ? key.char.trim() : ''
      return { data, ...(key.kind === 'named' && { key }), afterConsumed: index > 0, echo }
    })
    const lines = keys.map((key) => (key.kind === 'text' ? key.text : key.kind === 'char' && !key.ctrl && !key.meta ? key.char : '\r')).join('')
    return { steps: steps.filter((step) => step.data !== ''), inputText: '', lines }
  }
  if (input.secret !== undefined) {
    const { name, value } = input.secret
    checkSecretValue(name, value)
    return {
      steps: [
        { data: value, afterConsumed: false, echo: '' },
        { data: ENTER, afterConsumed: true, echo: '' },
      ],
      inputText: '',
      lines: value,
      secret: input.secret,
    }
  }
  return { steps: textSteps(input, modes), inputText: input.text, lines: input.text.replace(/\r?\n/g, '\r') }
}

/**
 * A value conch will type and redact: at least `MIN_SECRET_BYTES` bytes (else it would match
 * ordinary output), no control characters (a line break would submit part of it).
 * @throws PtyError `INVALID_INPUT` naming the secret, never showing its value.
 */
export function checkSecretValue(name: string, value: string): void {
  if (Buffer.byteLength(value, 'utf8') < MIN_SECRET_BYTES) {
    throw new PtyError('INVALID_INPUT', {
      reason: `secret ${name} is shorter than ${MIN_SECRET_BYTES} bytes; conch refuses it because it replaces a typed secret wherever the terminal prints it, and a value that short would match ordinary output; nothing was written`,
    })
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(value)) {
    throw new PtyError('INVALID_INPUT', { reason: `secret ${name} holds a control character (a line break, say); only its first line could be typed; nothing was written` })
  }
}
