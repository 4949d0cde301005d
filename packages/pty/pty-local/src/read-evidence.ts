/**
 * The evidence rules of the /proc tier for a reader that waits on the terminal: what counts as
 * a new read, how long a read with other wake sources must stay quiet, whether a second look
 * confirms the first, and whether the output looks like a prompt. Pure functions of explicit
 * inputs; the send machine (send-machine.ts) calls them with what it observed.
 */
import { isNewReadEvidence, type Baseline, type ReadProbe } from './inspector.ts'
import type { SendKind } from './send-machine.ts'

/**
 * Whether `probe` is read evidence for this send: for a startup, any reader once the shell
 * printed something; otherwise a read new since the baseline (`isNewReadEvidence`). The
 * wrapper (`wrapperPid`) reads the terminal only for the exit handshake, after the shell
 * exited: that is not a program waiting for input (its exit marker is on its way).
 */
export function isReadEvidence(probe: ReadProbe, context: { kind: SendKind; baseline: Baseline; wrapperPid: number; sawOutput: boolean }): boolean {
  if (probe.reader?.pid === context.wrapperPid) return false
  if (context.kind === 'startup') return probe.verdict === 'reading' && probe.reader !== undefined && context.sawOutput
  return isNewReadEvidence(context.baseline, probe)
}

/**
 * The quiet window that corroborates a read with other wake sources, ms: twice
 * `pollIntervalMs`, and past the wait's own near timeout when it has one (`timer in N ms`, so a
 * timer due inside the window wakes the reader and the check fails), at most `idleMs`.
 */
export function corroborationMs(sources: readonly string[], limits: { pollIntervalMs: number; idleMs: number }): number {
  const base = limits.pollIntervalMs * 2
  const timers = sources.map((source) => /^timer in (\d+) ms$/.exec(source)?.[1]).filter((ms) => ms !== undefined).map(Number)
  const window = Math.max(base, ...timers.map((ms) => ms + base))
  return Math.min(window, limits.idleMs)
}

/**
 * Whether the output since the write ends in what looks like a prompt: a non-blank partial line
 * (no line break after it) that is not the echo of the input's last line. A program that
 * reserves rows below its prompt (prompt_toolkit prints blank lines, then moves the cursor back
 * up) leaves the open line blank: the last non-blank line it wrote is taken instead.
 */
export function promptShaped(observed: { outputSinceWrite: boolean; promptLine: string; lastNonBlankLine: () => string; inputText: string }): boolean {
  if (!observed.outputSinceWrite) return false
  let partial = observed.promptLine
  if (partial.trim() === '') partial = observed.lastNonBlankLine()
  if (partial.trim() === '') return false
  const last = observed.inputText.split(/\r?\n/).at(-1) ?? ''
  return last.trim() === '' || !partial.trimEnd().endsWith(last.trimEnd())
}

/**
 * Whether a second look (`again`, taken a gap after `first` with no output in between)
 * confirms a read: the same task of the same group is still blocked in it without having run.
 * This rejects a program that passes through a read on its way out — the Node REPL re-enters
 * epoll after `.exit` before it exits.
 *
 * `corroborating`: for a read(2)/readv(2) reader the counter may move — a reader thread that
 * polls the terminal with a termios VTIME timeout (JLine, in jshell) wakes every tenth of a
 * second and reads again; quiet output and the same read at both ends carry the window then.
 * A reader in poll/select/epoll must not have run: it wakes for its other sources.
 */
export function confirmRead(first: ReadProbe, again: ReadProbe, corroborating = false): boolean {
  const reader = first.reader
  if (reader === undefined) return false
  if (again.verdict !== 'reading' || again.reader?.tid !== reader.tid || again.tpgid !== first.tpgid) return false
  if (corroborating && (reader.syscall === 'read' || reader.syscall === 'readv') && again.reader?.syscall === reader.syscall) return true
  const before = first.tasks.find((task) => task.tid === reader.tid)?.switches
  const after = again.tasks.find((task) => task.tid === reader.tid)?.switches
  return before !== undefined && before === after
}
