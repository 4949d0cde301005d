/**
 * The controlled prompt: how a local session learns, without waiting, that its shell is back at
 * its own prompt (the marker, its nonce and the kernel checks that make it a hint rather than
 * proof: README, "Readiness"), and that it exited with every byte of output drained (the wrapper
 * below: relying on the master's EOF loses output, as Linux reports EIO while data written just
 * before the last slave holder exited is still queued).
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
    // Descriptors the wrapper inherited beyond 0–2 — other terminals' PTY masters (node-pty
    // opens them without close-on-exec), anything the harness itself inherited — must not reach
    // the shell: through another terminal's master a command could type into that terminal,
    // past this one's sandbox.
    closeDescriptorsCommand(3),
    // node-pty sets IUTF8 only for string output; with raw output it is off, and canonical-mode
    // programs would erase half a UTF-8 character on backspace.
    'stty iutf8 2>/dev/null',
    '"$@"; __conch_status=$?',
    // After the exit marker the wrapper waits, stopped, for the session's acknowledgement
    // (SIGUSR1, then SIGCONT) so it keeps the slave open until the marker has been read. It must
    // not wait by reading the terminal: a shell in a PID namespace cannot hand the terminal back
    // to the wrapper's group, and a read from a background, orphaned process group fails at once
    // (EIO). A hangup (the harness gone: the kernel sends SIGHUP and SIGCONT) or TERM ends the
    // wait too. The trap is set before the marker is printed.
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
