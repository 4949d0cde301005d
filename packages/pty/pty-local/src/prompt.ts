/**
 * The controlled prompt: how a session learns at once that its shell is back at its prompt (a
 * hint checked with the kernel: README, "Readiness"), and that it exited with all output drained
 * (the wrapper: at the master's EOF Linux reports EIO while output may still be queued).
 *
 * The nonce reaches no environment or argv, which other processes can read in /proc: it goes
 * through a private key file and descriptor 3 (`wrap`; README, "Readiness").
 */
import { randomBytes } from 'node:crypto'
import { lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { CONTROLLED_PS1 } from '@conch/pty'
import { closeDescriptorsCommand, descriptorShell, resolveExecutable, SYSTEM_FOLDERS, systemFolders } from '@conch/subprocess'

/** OSC number of conch's private markers (an otherwise unused private-use number). */
export const MARKER_OSC = '6973'


/** What a parsed marker says. */
export type Marker =
  | { kind: 'prompt'; status: number }
  | { kind: 'exit'; status: number }

/** argv under the wrapper, and the removal of the key file it reads first. */
export interface WrappedCommand {
  argv: [string, ...string[]]
  /**
   * Removes the key file and its folder; call it once the wrapper has read it (the terminal's
   * first output or its exit). Idempotent.
   */
  release(): Promise<void>
}

export interface ControlledPrompt {
  readonly ps1: string
  /** The session's nonce, which every marker carries after the OSC number. */
  readonly nonce: string
  /**
   * Value of the shell's `PROMPT_COMMAND` environment variable; it holds no nonce. At the first
   * prompt it reads the marker's command from descriptor 3 (`wrap` with `handOver`), closes the
   * descriptor, runs the command and keeps it as `PROMPT_COMMAND`.
   */
  readonly promptCommand: string
  /**
   * The marker's command with the nonce, as `PROMPT_COMMAND`: for a shell no descriptor of this
   * host reaches (a container's), which must get it in its environment.
   */
  readonly markerCommand: string
  /**
   * Writes the session's key file (the nonce and the marker's command, mode 0600 in a fresh
   * mkdtemp(3) folder, mode 0700) and returns argv that runs `argv` under the wrapper: it reads
   * the file, sets IUTF8, runs `argv` — with the marker's command on descriptor 3 (a pipe) when
   * `handOver` — and prints the exit marker afterwards. Synchronous: two small file-system calls
   * on the way to every open.
   * @throws the file system's error when the folder or the file cannot be made.
   */
  wrap(argv: readonly string[], options: { handOver: boolean }): WrappedCommand
  /** Parses an OSC payload (the text between `ESC ]` and the terminator); undefined when it is not a marker. */
  parse(payload: string): Marker | undefined
  /** The signals, in order, that tell the (stopped) wrapper its exit marker was read, so it exits. */
  readonly exitAcknowledgement: readonly NodeJS.Signals[]
}

/** What the marker's command and the bootstrap run first: bash's `$?` before `PROMPT_COMMAND`. */
const CAPTURE_STATUS = '__conch_status=$?; '

/**
 * The bootstrap `PROMPT_COMMAND`: reads the marker's command without its status capture from
 * descriptor 3, closes it (plain `exec`: a redirection on `builtin exec` is undone after it),
 * runs it for the first prompt and keeps it, capture prepended, for every later one.
 */
const BOOTSTRAP =
  CAPTURE_STATUS +
  'IFS= builtin read -r PROMPT_COMMAND <&3; exec 3<&-; ' +
  'builtin eval "$PROMPT_COMMAND"; ' +
  `PROMPT_COMMAND="${CAPTURE_STATUS.replace('$', '\\$')}$PROMPT_COMMAND"`

/** A key folder's name: `conch-prompt-<pid of the conch that made it>-XXXXXX` (mkdtemp(3)). */
const KEY_FOLDER = /^conch-prompt-(\d+)-/

/** Whether this process swept `tmpdir()` already (once per process: its first key). */
let swept = false

/**
 * Removes the key folders in `dir` that a conch no longer running left (killed between writing a
 * key and its terminal's first output). A folder of a live process stays, a reused pid's too, and
 * so does anything but a folder of this process's uid (lstat(2)): /tmp is shared, and another user
 * could name a folder of theirs so, and swap what is in it for links while root removes it.
 */
export function sweepKeyFolders(dir: string): void {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  for (const name of names) {
    const pid = Number(KEY_FOLDER.exec(name)?.[1] ?? 0)
    if (pid > 0 && pid !== process.pid && !running(pid) && ownFolder(path.join(dir, name))) rmSync(path.join(dir, name), { recursive: true, force: true })
  }
}

/** Whether `file` is a folder (not a link to one) owned by this process's uid. */
function ownFolder(file: string): boolean {
  try {
    const stats = lstatSync(file)
    return stats.isDirectory() && stats.uid === (process.getuid?.() ?? stats.uid)
  } catch {
    return false
  }
}

/** kill(2) with signal 0: ESRCH is the only answer that means no such process. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

/** Creates the controlled prompt of a session. */
export function createControlledPrompt(): ControlledPrompt {
  const nonce = randomBytes(8).toString('hex')
  const head = `${MARKER_OSC};${nonce};`
  // One line: the wrapper and the bootstrap read it with `read -r`.
  const marker =
    `builtin printf '\\033]${head}prompt;%s\\007' "$__conch_status"; ` +
    `PS1='${CONTROLLED_PS1}'; ` +
    `builtin export -n PROMPT_COMMAND PS1`
  return {
    ps1: CONTROLLED_PS1,
    nonce,
    promptCommand: BOOTSTRAP,
    markerCommand: CAPTURE_STATUS + marker,
    wrap(argv, { handOver }) {
      if (!swept) {
        swept = true
        sweepKeyFolders(tmpdir())
      }
      const folder = mkdtempSync(path.join(tmpdir(), `conch-prompt-${process.pid}-`))
      const key = path.join(folder, 'key')
      try {
        writeFileSync(key, `${nonce}\n${marker}\n`, { mode: 0o600 })
      } catch (error) {
        rmSync(folder, { recursive: true, force: true })
        throw error
      }
      return {
        argv: [...descriptorShell(), '-c', wrapper(handOver), 'conch-shell', key, ...argv],
        release: () => rm(folder, { recursive: true, force: true }),
      }
    },
    exitAcknowledgement: ['SIGUSR1', 'SIGCONT'],
    parse(payload) {
      if (!payload.startsWith(head)) return undefined
      const [kind, status, ...rest] = payload.slice(head.length).split(';')
      const code = Number(status)
      if (rest.length || !Number.isSafeInteger(code)) return undefined
      return kind === 'prompt' || kind === 'exit' ? { kind, status: code } : undefined
    },
  }
}

/** The system's stty, found once: `SYSTEM_FOLDERS` in conch's PATH order, then in theirs; '' without one. */
let stty: string | undefined

/** `stty iutf8` by stty's absolute path (`stty`); `:` where the system has none. */
function sttyCommand(): string {
  stty ??= resolveExecutable('stty', [...systemFolders(process.env['PATH'] ?? ''), ...SYSTEM_FOLDERS]) ?? ''
  return stty === '' ? ':' : `${stty} iutf8 2>/dev/null`
}

/**
 * The wrapper's script (`$1`: the key file, then the argv to run); it holds no nonce, so its
 * argv (readable by every user in /proc) gives none away.
 */
function wrapper(handOver: boolean): string {
  return [
    // Inherited descriptors beyond 0–2 must not reach the shell: through another terminal's PTY
    // master (node-pty opens them without close-on-exec) a command could type past its sandbox.
    `${closeDescriptorsCommand(3)}; ` +
      `{ IFS= read -r __conch_nonce && IFS= read -r __conch_marker; } <"$1" || exit 125; shift`,
    // node-pty sets IUTF8 only for string output; with raw output it is off, and canonical-mode
    // programs would erase half a UTF-8 character on backspace. The wrapper runs on the host,
    // outside any sandbox, with the shell's PATH: stty is named by its path in a system folder,
    // never looked up there (a workspace's node_modules/.bin or a relative entry could hold one).
    sttyCommand(),
    // The here-document is a pipe (or an unlinked file) made in the child: the wrapper keeps no
    // descriptor of it.
    handOver ? '"$@" 3<<__conch_marker_end\n$__conch_marker\n__conch_marker_end\n__conch_status=$?' : '"$@"; __conch_status=$?',
    // After the exit marker the wrapper waits, stopped, for the acknowledgement (SIGUSR1, then
    // SIGCONT), keeping the slave open until the marker was read. Not by reading the terminal: an
    // orphaned background group's read fails at once (EIO). HUP or TERM end the wait too; the
    // trap is set before the marker is printed.
    `trap 'exit "$__conch_status"' USR1 HUP TERM`,
    `printf '\\033]${MARKER_OSC};%s;exit;%s\\007' "$__conch_nonce" "$__conch_status"`,
    'while :; do kill -STOP $$; done',
  ].join('; ')
}
