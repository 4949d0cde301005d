/**
 * `pnpm exec tsx bench/scanners.ts [megabytes] [runs]`: what V8's native scanners cost as the
 * output parser's search for controls, against a bare streaming UTF-8 decode and the parser
 * itself, in CPU time per MB (ms), same process, interleaved runs after a warm-up.
 *
 * Each scanner decodes the chunk as the parser does (a one-byte string when the chunk is ASCII,
 * else one streaming `TextDecoder` call) and then finds the controls of the decoded string:
 * - `scan_js`: a JavaScript loop over the code units (what the parser does, on bytes);
 * - `scan_regex`: a global RegExp of the controls (`[\x00-\x08\x0a-\x1f\x7f-\x9f]`), one `test`
 *   per control from `lastIndex` (irregexp compiles it to machine code);
 * - `scan_indexof`: `String.prototype.indexOf('\x1b')` for escapes, the RegExp for other controls
 *   inside an escape-free span;
 * - `scan_lines`: `indexOf('\r\n')`, each line one slice (the leanest line splitter; only right on
 *   streams of plain CR LF lines).
 * Each then takes the text between controls as one `slice` and handles a control the way the
 * parser's fast paths do, on a simplified line model (CR clears the line, CSI K clears it, CR LF
 * commits it to a listener; OSC to BEL, DCS to ST): a lower bound on a full parser built that way.
 * The `count_*` rows only find: every control with the RegExp, every ESC with the string's
 * `indexOf`, every ESC byte with `Buffer.prototype.indexOf` (memchr, no decode).
 */
import { isAscii } from 'node:buffer'
import { OutputParser } from '../packages/pty/pty-local/src/index.ts'
import { seqStream, syntheticStream } from './parser.ts'
import { interleavedCpuPerMb, printAgainstDecode } from './stats.ts'

type Chunks = readonly Buffer[]
/** A streaming UTF-8 decoder (`TextDecoder`). */
interface Decoder {
  decode(input: Uint8Array, options?: { stream?: boolean }): string
}

/** The chunk decoded as `OutputParser.feed` decodes a chunk with nothing carried. */
function decodeChunk(decoder: Decoder, chunk: Buffer): string {
  return isAscii(chunk) ? chunk.toString('latin1') : decoder.decode(chunk, { stream: true })
}

function newDecoder(): Decoder {
  return new TextDecoder('utf-8', { ignoreBOM: true })
}

let lines = 0
const onLine = (_text: string): void => {
  lines++
}

/** Controls other than TAB: C0, DEL and the C1 range. */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g

interface LineState {
  line: string
}

/** Handles the control at `j` of `text` (length `n`); returns the index after it. */
function control(text: string, j: number, n: number, state: LineState): number {
  const c = text.charCodeAt(j)
  if (c === 0x1b) {
    const next = j + 1 < n ? text.charCodeAt(j + 1) : -1
    if (next === 0x5b) {
      let k = j + 2
      let d = k < n ? text.charCodeAt(k) : -1
      if (d >= 0x3c && d <= 0x3f) d = ++k < n ? text.charCodeAt(k) : -1
      let param = -1
      while (d >= 0x30 && d <= 0x3b) {
        param = d <= 0x39 ? (param < 0 ? d - 0x30 : param * 10 + (d - 0x30)) : -1
        d = ++k < n ? text.charCodeAt(k) : -1
      }
      if (d === 0x4b) state.line = ''
      return k + 1
    }
    if (next === 0x5d) {
      const e = text.indexOf('\x07', j + 2)
      return e < 0 ? n : e + 1
    }
    if (next === 0x50) {
      const e = text.indexOf('\x1b\\', j + 2)
      return e < 0 ? n : e + 2
    }
    return j + 2
  }
  if (c === 0x0d) {
    if (j + 1 < n && text.charCodeAt(j + 1) === 0x0a) {
      onLine(state.line)
      state.line = ''
      return j + 2
    }
    state.line = ''
    return j + 1
  }
  if (c === 0x0a) {
    onLine(state.line)
    state.line = ''
  }
  return j + 1
}

function decode(chunks: Chunks): void {
  const decoder = newDecoder()
  for (const chunk of chunks) decoder.decode(chunk, { stream: true })
}

function parser(chunks: Chunks): void {
  const p = new OutputParser({ maxLineLength: 16384, stringTimeoutMs: 1000 })
  p.onLine(onLine)
  p.onOsc(() => {})
  for (const chunk of chunks) p.feed(chunk)
  p.flush()
}

function scanJs(chunks: Chunks): void {
  const decoder = newDecoder()
  const state = { line: '' }
  for (const chunk of chunks) {
    const text = decodeChunk(decoder, chunk)
    const n = text.length
    let i = 0
    while (i < n) {
      let j = i
      for (; j < n; j++) {
        const c = text.charCodeAt(j)
        if (c >= 0x20 ? c >= 0x7f && c <= 0x9f : c !== 0x09) break
      }
      if (j > i) state.line += text.slice(i, j)
      if (j >= n) break
      i = control(text, j, n, state)
    }
  }
}

function scanRegex(chunks: Chunks): void {
  const decoder = newDecoder()
  const state = { line: '' }
  for (const chunk of chunks) {
    const text = decodeChunk(decoder, chunk)
    const n = text.length
    let i = 0
    while (i < n) {
      CONTROL.lastIndex = i
      const j = CONTROL.test(text) ? CONTROL.lastIndex - 1 : n
      if (j > i) state.line += text.slice(i, j)
      if (j >= n) break
      i = control(text, j, n, state)
    }
  }
}

function scanIndexOf(chunks: Chunks): void {
  const decoder = newDecoder()
  const state = { line: '' }
  for (const chunk of chunks) {
    const text = decodeChunk(decoder, chunk)
    const n = text.length
    let i = 0
    let escape = -1
    while (i < n) {
      if (escape < i) {
        escape = text.indexOf('\x1b', i)
        if (escape < 0) escape = n
      }
      let j = i
      if (escape > i) {
        CONTROL.lastIndex = i
        j = CONTROL.test(text) ? CONTROL.lastIndex - 1 : n
        if (j > escape) j = escape
      }
      if (j > i) state.line += text.slice(i, j)
      if (j >= n) break
      i = control(text, j, n, state)
    }
  }
}

function scanLines(chunks: Chunks): void {
  const decoder = newDecoder()
  let line = ''
  for (const chunk of chunks) {
    const text = decodeChunk(decoder, chunk)
    const n = text.length
    let i = 0
    while (i < n) {
      const j = text.indexOf('\r\n', i)
      if (j < 0) {
        line += text.slice(i)
        break
      }
      onLine(line + text.slice(i, j))
      line = ''
      i = j + 2
    }
  }
}

function countRegex(chunks: Chunks): number {
  const decoder = newDecoder()
  let found = 0
  for (const chunk of chunks) {
    const text = decodeChunk(decoder, chunk)
    CONTROL.lastIndex = 0
    while (CONTROL.test(text)) found++
  }
  return found
}

function countIndexOf(chunks: Chunks): number {
  const decoder = newDecoder()
  let found = 0
  for (const chunk of chunks) {
    const text = decodeChunk(decoder, chunk)
    for (let i = text.indexOf('\x1b'); i >= 0; i = text.indexOf('\x1b', i + 1)) found++
  }
  return found
}

function countBufferIndexOf(chunks: Chunks): number {
  let found = 0
  for (const chunk of chunks) {
    for (let i = chunk.indexOf(0x1b); i >= 0; i = chunk.indexOf(0x1b, i + 1)) found++
  }
  return found
}

const CASES: Record<string, (chunks: Chunks) => unknown> = {
  decode,
  parser,
  scan_js: scanJs,
  scan_regex: scanRegex,
  scan_indexof: scanIndexOf,
  scan_lines: scanLines,
  count_regex: countRegex,
  count_indexof: countIndexOf,
  count_buffer_indexof: countBufferIndexOf,
}

const megabytes = Number(process.argv[2] ?? 20)
const runs = Number(process.argv[3] ?? 9)
for (const [name, chunks] of [
  ['mixed', syntheticStream(megabytes * 1e6)],
  ['short lines', seqStream(megabytes * 1e6)],
] as const) {
  for (const run of Object.values(CASES)) run(chunks)
  const samples = interleavedCpuPerMb(CASES, chunks, megabytes, runs)
  console.log(`${name}: controls ${Math.round(countRegex(chunks) / megabytes)}/MB, ESC ${Math.round(countIndexOf(chunks) / megabytes)}/MB`)
  printAgainstDecode(samples, 22)
}
if (lines === 0) throw new Error('no lines were produced')
