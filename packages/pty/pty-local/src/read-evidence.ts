/** The /proc tier's evidence rules: what counts as a new read, whether output looks like a prompt. Pure. */
import { isNewReadEvidence, type Baseline, type ReadProbe } from './inspector.ts'

/**
 * Whether `probe` is read evidence for this send: at startup any reader once the shell printed
 * something; without input any reader; else a read new since the baseline (`isNewReadEvidence`).
 * The wrapper's read (`wrapperPid`, the exit handshake) never is.
 */
export function isReadEvidence(probe: ReadProbe, context: { startup: boolean; input: boolean; baseline: Baseline; wrapperPid: number; sawOutput: boolean; inputBytes?: number }): boolean {
  if (probe.reader?.pid === context.wrapperPid) return false
  if (context.startup) return probe.verdict === 'reading' && probe.reader !== undefined && context.sawOutput
  if (!context.input) return probe.verdict === 'reading' && probe.reader !== undefined
  return isNewReadEvidence(context.baseline, probe, context.inputBytes)
}

/**
 * Whether the output since the write ends in a prompt-like line: a non-blank partial line (or,
 * when blank as prompt_toolkit leaves it, the last non-blank one) that is not the input's echo.
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
 * The timeout when `sources` is only the reader's own `timer in N ms`, else undefined. Such a
 * program (`top -d 1`) is ready for input now; a window quiet past its timer would never come.
 */
export function timedReadMs(sources: readonly string[]): number | undefined {
  if (sources.length !== 1) return undefined
  const match = /^timer in (\d+) ms$/.exec(sources[0]!)
  return match === null ? undefined : Number(match[1])
}
