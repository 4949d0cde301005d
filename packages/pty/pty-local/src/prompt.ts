/**
 * The controlled prompt: how a local session learns, without waiting, that its shell is back at
 * its own prompt, and how it learns that the shell exited with every byte of output drained.
 *
 * bash runs with `--noprofile --rcfile /dev/null +H -i` (an empty rc file, not `--norc`: bash 5.2
 * with `--norc` and an inherited `PROMPT_COMMAND` leaves `PIPESTATUS` empty after every prompt)
 * and two variables from its environment:
 * - `PS1` — the controlled prompt text (`$ `);
 * - `PROMPT_COMMAND` — run by bash before printing each primary prompt (bash(1), PROMPTING). It
 *   saves `$?`, prints a private OSC string `ESC ] 6973 ; <nonce> ; prompt ; <status> BEL`, re-asserts
 *   `PS1`, and un-exports `PROMPT_COMMAND` and `PS1` so child shells do not inherit the marker.
 *   bash restores `$?` after PROMPT_COMMAND, so `echo $?` still shows the last command's
 *   status. It references only variables it sets itself (robust under `set -u`) and every
 *   command in it succeeds (robust under `set -e`).
 *
 * **A marker is a hint, never proof.** Each carries a per-session nonce (random, 16 hex digits),
 * so a program that prints the marker's shape (`cat` of a log, a test of conch itself) prints
 * no marker; but no secret can be hidden from a program that looks for it: whatever the shell
 * knows is in its environment, its variables or its memory, and a program running as the same
 * user (or as root) reads /proc/<pid>/environ and /proc/<pid>/mem of its parent. So the session
 * checks each marker with the kernel (see send.ts and session.ts):
 * - a prompt marker settles a send only while the shell itself is the foreground process group
 *   and its main task is blocked reading this terminal (/proc/<pid>/task/<tid>/syscall,
 *   proc(5));
 * - an exit marker counts only when the wrapper below is really stopped and has no child left
 *   (its stat state `T` and an empty /proc/<pid>/task/<pid>/children); the exit status then
 *   comes from the wrapper's real wait status (waitpid(2), reported by node-pty), not from the
 *   marker's text.
 * Where this host cannot see the terminal's processes at all (a relayed process on a remote
 * container daemon, `TerminalInspector.observable` false) the nonce is the only check a prompt
 * marker gets: a program that reads the shell's environment can then settle a send early.
 *
 * The shell is started by a small wrapper script (bash, or sh where there is no bash) that first
 * closes every inherited descriptor above 2 and sets IUTF8 on the terminal, holds the PTY slave
 * open while the shell runs and, after it exits, prints `ESC ] 6973 ; <nonce> ; exit ; <status> BEL` and
 * waits, stopped, for the session to acknowledge it (SIGUSR1, SIGCONT), then exits with the
 * shell's status. Output written to a terminal is read in order, so when that marker is parsed
 * every byte the shell wrote before exiting has been read: the exit is reported only after the
 * output is drained. (Relying on the master reaching EOF loses output: measured here, Linux
 * reports EIO on the master while data written just before the last slave holder exited is
 * still queued — about one run in six for `seq 1 5000; exit`.)
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
