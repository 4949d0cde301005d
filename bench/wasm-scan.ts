/**
 * `pnpm exec tsx bench/wasm-scan.ts [megabytes] [runs]`: the output parser's WebAssembly pass
 * (packages/pty/pty-local/src/scan.wat) on the chunks of bench/parser.ts, before it is wired into
 * the parser: CPU time per MB of
 * - `decode`: a bare streaming `TextDecoder` decode of the chunks (the baseline);
 * - `parser`: `OutputParser` with the JavaScript state machine alone (`wasmMinBytes: Infinity`);
 * - `parser_wasm`: `OutputParser` with the pass wired in (its default);
 * - `pass`: the WebAssembly pass alone (copying each chunk in, one `scan` per stretch);
 * - `pass_lines`: the pass, one decode of its output per stretch (a one-byte string when it is
 *   ASCII) and each committed line sliced from it and handed to a listener, OSC payloads too.
 * At a stop (something the pass leaves to JavaScript) this bench only steps over the sequence,
 * so `pass_lines` is a lower bound for a parser built this way; the stops are counted.
 */
import { OutputParser } from '../packages/pty/pty-local/src/index.ts'
import {
  acquireScanner, EVENT_OSC, EVENTS, LINES, S_CURSOR, S_CURSOR16, S_EDITS, S_END, S_EVENTS, S_EVENTS_END, S_LINE_ASCII,
  S_LINE_LENGTH16, S_LINE_START, S_LINE_START16, S_LINES, S_LINES_BASE, S_LINES_END, S_MAX_LINE16, S_MAX_SEQUENCE, S_OUT,
  S_OUT_ASCII, S_POS, S_QUIET, INPUT, type Scanner,
} from '../packages/pty/pty-local/src/scan.ts'
import { seqStream, syntheticStream } from './parser.ts'
import { interleavedCpuPerMb, printAgainstDecode } from './stats.ts'

type Chunks = readonly Buffer[]
let lines = 0
let oscs = 0
const onLine = (_text: string): void => {
  lines++
}
const counts = { stops: 0, passes: 0, lines: 0, events: 0 }

function decode(chunks: Chunks): void {
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
  for (const chunk of chunks) decoder.decode(chunk, { stream: true })
}

function parser(chunks: Chunks, wasmMinBytes = Infinity): void {
  const p = new OutputParser({ maxLineLength: 16384, stringTimeoutMs: 1000, wasmMinBytes })
  p.onLine(onLine)
  p.onOsc(() => {})
  for (const chunk of chunks) p.feed(chunk)
  p.flush()
}

/** Starts a stretch at input offset `pos` with an empty line. */
function start(scanner: Scanner, pos: number, n: number): void {
  const w = scanner.words
  const out = scanner.output
  w[S_POS] = INPUT + pos
  w[S_END] = INPUT + n
  w[S_OUT] = out
  w[S_LINE_START] = out
  w[S_CURSOR] = out
  w[S_LINE_ASCII] = 1
  w[S_LINE_START16] = 0
  w[S_LINE_LENGTH16] = 0
  w[S_CURSOR16] = 0
  w[S_MAX_LINE16] = 16384
  w[S_MAX_SEQUENCE] = 65536
  w[S_LINES] = LINES
  w[S_LINES_BASE] = LINES
  w[S_LINES_END] = EVENTS
  w[S_EVENTS] = EVENTS
  w[S_EVENTS_END] = INPUT
  w[S_OUT_ASCII] = 1
  w[S_EDITS] = 0
  w[S_QUIET] = 1
}

/** Steps over what the pass stopped at: a CSI to its final byte, anything else one byte. */
function skip(bytes: Uint8Array, pos: number, n: number): number {
  if (bytes[pos] === 0x1b && bytes[pos + 1] === 0x5b) {
    let j = pos + 2
    while (j < n && (bytes[j]! < 0x40 || bytes[j]! > 0x7e)) j++
    return j + 1
  }
  return pos + 1
}

function run(chunks: Chunks, slice: boolean): void {
  const scanner = acquireScanner()!
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
  let carry = ''
  for (const chunk of chunks) {
    // (The parser cuts an incomplete UTF-8 sequence off the end; these chunks are cut anywhere,
    // so the bench does the same to keep the pass on valid UTF-8.)
    let n = chunk.length
    let lead = n - 1
    while (lead > 0 && lead > n - 4 && (chunk[lead]! & 0xc0) === 0x80) lead--
    const first = chunk[lead]!
    if (first >= 0xc0 && n - lead < (first < 0xe0 ? 2 : first < 0xf0 ? 3 : 4)) n = lead
    scanner.load(chunk.subarray(0, n), 0)
    const w = scanner.words
    let pos = 0
    while (pos < n) {
      start(scanner, pos, n)
      scanner.scan()
      counts.passes++
      pos = w[S_POS]! - INPUT
      if (slice) {
        const out = scanner.output
        const end = w[S_OUT]!
        const text = end === out ? '' : w[S_OUT_ASCII] ? Buffer.from(scanner.memory.buffer, out, end - out).toString('latin1') : decoder.decode(scanner.bytes.subarray(out, end), { stream: true })
        const lp = w[S_LINES]! >> 2
        for (let k = LINES >> 2; k < lp; k += 2) onLine(carry + text.slice(w[k]!, w[k + 1]!))
        const ep = w[S_EVENTS]! >> 2
        for (let k = EVENTS >> 2; k < ep; k += 8) if (w[k] === EVENT_OSC && text.slice(w[k + 2]!, w[k + 3]!).length >= 0) oscs++
        carry = text.slice(w[S_LINE_START16]!, w[S_LINE_START16]! + w[S_LINE_LENGTH16]!)
      }
      counts.lines += (w[S_LINES]! - LINES) >> 3
      counts.events += (w[S_EVENTS]! - EVENTS) >> 5
      if (pos < n) {
        counts.stops++
        pos = skip(chunk, pos, n)
      }
    }
  }
  scanner.busy = false
}

const CASES: Record<string, (chunks: Chunks) => unknown> = {
  decode,
  parser: (chunks) => parser(chunks),
  parser_wasm: (chunks) => parser(chunks, 64),
  pass: (chunks) => run(chunks, false),
  pass_lines: (chunks) => run(chunks, true),
}

const megabytes = Number(process.argv[2] ?? 20)
const runs = Number(process.argv[3] ?? 9)
for (const [name, chunks] of [
  ['mixed', syntheticStream(megabytes * 1e6)],
  ['short lines', seqStream(megabytes * 1e6)],
] as const) {
  for (const fn of Object.values(CASES)) fn(chunks)
  for (const key of Object.keys(counts) as (keyof typeof counts)[]) counts[key] = 0
  run(chunks, false)
  const perMb = Object.fromEntries(Object.entries(counts).map(([key, value]) => [key, Math.round(value / megabytes)]))
  const samples = interleavedCpuPerMb(CASES, chunks, megabytes, runs)
  console.log(`${name}: per MB ${JSON.stringify(perMb)}`)
  printAgainstDecode(samples, 12)
}
if (lines === 0 || oscs < 0) throw new Error('no lines were produced')
