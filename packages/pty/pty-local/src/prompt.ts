/**
 * The controlled prompt: how a local session knows, without waiting, that its shell is back at
 * its own prompt, and how it learns the shell's exit status with every byte of output drained.
 *
 * bash runs with `--noprofile --norc -i` and two variables from its environment:
 * - `PS1` — the controlled prompt text (`$ `);
 * - `PROMPT_COMMAND` — run by bash before printing each primary prompt (bash(1), PROMPTING). It
 *   saves `$?`, prints a private OSC string `ESC ] 6973 ; <nonce> ; prompt ; <status> BEL`,
 *   re-asserts `PS1`, and un-exports `PROMPT_COMMAND` and `PS1` so child shells do not inherit
 *   the marker. bash restores `$?` after PROMPT_COMMAND, so `echo $?` still shows the last
 *   command's status. It references only variables it sets
 *   itself (robust under `set -u`) and every command in it succeeds (robust under `set -e`).
 *
 * The nonce is random per session, so text a program prints cannot forge a marker.
 *
 * The shell is started by a `/bin/sh -c` wrapper that holds the PTY slave open while the shell
 * runs and, after it exits, prints `ESC ] 6973 ; <nonce> ; exit ; <status> BEL` and waits for the
 * session to acknowledge it with SIGUSR1. Output written to a terminal is read in order, so
 * when that marker is parsed every byte the shell wrote before exiting has been read: the exit
 * is reported only after the output is drained. (Relying on the master reaching EOF loses
 * output: measured here, Linux reports EIO on the master while data written just before the
 * last slave holder exited is still queued — about one run in six for `seq 1 5000; exit`.)
 */
import { randomBytes } from 'node:crypto'

/** OSC number of conch's private markers (an otherwise unused private-use number). */
export const MARKER_OSC = '6973'

/** The controlled primary prompt. */
export const CONTROLLED_PS1 = '$ '

/** What a parsed marker says. */
export type Marker =
  | { kind: 'prompt'; status: number }
  | { kind: 'exit'; status: number }

export interface ControlledPrompt {
  readonly nonce: string
  readonly ps1: string
  /** Value of the shell's `PROMPT_COMMAND` environment variable. */
  readonly promptCommand: string
  /** argv that runs `argv` under the wrapper that prints the exit marker afterwards. */
  wrap(argv: readonly string[]): [string, ...string[]]
  /** Parses an OSC payload (the text between `ESC ]` and the terminator); undefined when it is not this session's marker. */
  parse(payload: string): Marker | undefined
  /** The signal that tells the wrapper its exit marker was read, so it exits. */
  readonly exitAcknowledgement: NodeJS.Signals
}

/** Creates the controlled prompt of one session with a fresh 96-bit nonce. */
export function createControlledPrompt(nonce: string = randomBytes(12).toString('hex')): ControlledPrompt {
  const head = `${MARKER_OSC};${nonce};`
  const promptCommand =
    `__conch_status=$?; ` +
    `builtin printf '\\033]${MARKER_OSC};${nonce};prompt;%s\\007' "$__conch_status"; ` +
    `PS1='${CONTROLLED_PS1}'; ` +
    `builtin export -n PROMPT_COMMAND PS1`
  // After the exit marker the wrapper waits for the session's acknowledgement — a SIGUSR1 —
  // so it keeps the slave open until the marker has been read. It must not wait by reading the
  // terminal: a shell in a PID namespace cannot hand the terminal back to the wrapper's group,
  // and a read from a background, orphaned process group fails at once (EIO). A hangup or TERM
  // (the session closing) ends the wait too. The trap is set before the marker is printed, so
  // an acknowledgement can never arrive before the wrapper is ready for it.
  const wrapper =
    `"$@"; __conch_status=$?; __conch_wait=; ` +
    `trap 'kill $__conch_wait 2>/dev/null; exit "$__conch_status"' USR1 HUP TERM; ` +
    `printf '\\033]${MARKER_OSC};${nonce};exit;%s\\007' "$__conch_status"; ` +
    `while :; do sleep 86400 & __conch_wait=$!; wait "$__conch_wait"; done`
  return {
    nonce,
    ps1: CONTROLLED_PS1,
    promptCommand,
    wrap: (argv) => ['/bin/sh', '-c', wrapper, 'conch-shell', ...argv],
    exitAcknowledgement: 'SIGUSR1',
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
