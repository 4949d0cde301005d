/**
 * The controlled prompt: how a session learns at once that its shell is back at its prompt (a
 * hint checked with the kernel: README, "Readiness"), and that it exited with all output drained
 * (the wrapper: at the master's EOF Linux reports EIO while output may still be queued).
 */
import { randomBytes } from 'node:crypto'
import { closeDescriptorsCommand, descriptorShell } from '@conch/subprocess'

/** OSC number of conch's private markers (an otherwise unused private-use number). */
export const MARKER_OSC = '6973'

/** The controlled primary prompt. */
export const CONTROLLED_PS1 = '$ '

/** What a parsed marker says. */
export type Marker =
  | { kind: 'prompt'; status: number }
  | { kind: 'exit'; status: number }

export interface ControlledPrompt {
  readonly ps1: string
  /** The session's nonce, which every marker carries after the OSC number. */
  readonly nonce: string
  /** Value of the shell's `PROMPT_COMMAND` environment variable. */
  readonly promptCommand: string
  /** argv that runs `argv` under the wrapper that prints the exit marker afterwards. */
  wrap(argv: readonly string[]): [string, ...string[]]
  /** Parses an OSC payload (the text between `ESC ]` and the terminator); undefined when it is not a marker. */
  parse(payload: string): Marker | undefined
  /** The signals, in order, that tell the (stopped) wrapper its exit marker was read, so it exits. */
  readonly exitAcknowledgement: readonly NodeJS.Signals[]
}

/** Creates the controlled prompt of a session. */
export function createControlledPrompt(): ControlledPrompt {
  const nonce = randomBytes(8).toString('hex')
  const head = `${MARKER_OSC};${nonce};`
  const promptCommand =
    `__conch_status=$?; ` +
    `builtin printf '\\033]${head}prompt;%s\\007' "$__conch_status"; ` +
    `PS1='${CONTROLLED_PS1}'; ` +
    `builtin export -n PROMPT_COMMAND PS1`
  const wrapper = [
    // Inherited descriptors beyond 0–2 must not reach the shell: through another terminal's PTY
    // master (node-pty opens them without close-on-exec) a command could type past its sandbox.
    closeDescriptorsCommand(3),
    // node-pty sets IUTF8 only for string output; with raw output it is off, and canonical-mode
    // programs would erase half a UTF-8 character on backspace.
    'stty iutf8 2>/dev/null',
    '"$@"; __conch_status=$?',
    // After the exit marker the wrapper waits, stopped, for the acknowledgement (SIGUSR1, then
    // SIGCONT), keeping the slave open until the marker was read. Not by reading the terminal: an
    // orphaned background group's read fails at once (EIO). HUP or TERM end the wait too; the
    // trap is set before the marker is printed.
    `trap 'exit "\$__conch_status"' USR1 HUP TERM`,
    `printf '\\033]${head}exit;%s\\007' "\$__conch_status"`,
    'while :; do kill -STOP $$; done',
  ].join('; ')
  return {
    ps1: CONTROLLED_PS1,
    nonce,
    promptCommand,
    wrap: (argv) => [descriptorShell(), '-c', wrapper, 'conch-shell', ...argv],
    exitAcknowledgement: ['SIGUSR1', 'SIGCONT'],
    parse(payload) {
      if (!payload.startsWith(head)) return undefined
      const [kind, status, ...rest] = payload.slice(head.length).split(';')
      const code = Number(status)
      if (rest.length || !Number.isSafeInteger(code)) return undefined
      if (kind === 'prompt' || kind === 'exit') return { kind, status: code }
      return undefined
    },
  }
}
