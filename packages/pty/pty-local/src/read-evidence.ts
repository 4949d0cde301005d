/**
 * The evidence rules of the /proc tier for a reader that waits on the terminal: what counts as
 * a new read, and whether the output looks like a prompt. Pure functions of explicit inputs;
 * the send machine (send-machine.ts) calls them with what it observed. Whether a window of
 * probes confirms a read is judged by wait-evidence.ts.
 */
import { isNewReadEvidence, type Baseline, type ReadProbe } from './inspector.ts'

/**
 * Whether `probe` is read evidence for this send: for a startup (`startup`), any reader once the shell
 * printed something; for a send without input (`input: false`, it only keeps waiting), any
 * reader; otherwise a read new since the baseline (`isNewReadEvidence`, which on a relayed
 * terminal also needs the reader to have read the `inputBytes` written since). The
 * wrapper (`wrapperPid`) reads the terminal only for the exit handshake, after the shell
 * exited: that is not a program waiting for input (its exit marker is on its way).
 */
export function isReadEvidence(probe: ReadProbe, context: { startup: boolean; input: boolean; baseline: Baseline; wrapperPid: number; sawOutput: boolean; inputBytes?: number }): boolean {
  if (probe.reader?.pid === context.wrapperPid) return false
  if (context.startup) return probe.verdict === 'reading' && probe.reader !== undefined && context.sawOutput
  if (!context.input) return probe.verdict === 'reading' && probe.reader !== undefined
  return isNewReadEvidence(context.baseline, probe, context.inputBytes)
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
 * The timeout of a timed read when it is the only other thing that can wake the reader (`sources`
 * is exactly the reader's own `timer in N ms`: no descriptor, no other task waiting on one), else
 * undefined. Such a program waits for a key and redraws when its own timer ends (`top -d 1`,
 * `watch`-like loops, a Node REPL with a timer pending): it is ready for input now, and waiting
 * for a window quiet past its timer would never end, since the timer redraws it.
 */
export function timedReadMs(sources: readonly string[]): number | undefined {
  if (sources.length !== 1) return undefined
  const match = /^timer in (\d+) ms$/.exec(sources[0]!)
  return match === null ? undefined : Number(match[1])
}
