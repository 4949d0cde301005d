import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { seqStream, syntheticStream } from '../../../../bench/parser.ts'
import { OutputParser, type OutputParserOptions } from '../src/output.ts'
import { acquireScanner, releaseScanner } from '../src/scan.ts'

const here = dirname(fileURLToPath(import.meta.url))

/** How many times the WebAssembly pass ran during `run()`. */
function passes(run: () => void): number {
  const scanner = acquireScanner()
  if (scanner === undefined) throw new Error('the WebAssembly scanner is not available')
  releaseScanner(scanner)
  const before = scanner.calls
  run()
  return scanner.calls - before
}

interface TraceOptions extends OutputParserOptions {
  /** Attach a screen when the parser asks for one (as a session does). */
  screens?: boolean
}

/**
 * Everything a consumer can see, in stream order: committed lines, OSC payloads with the partial
 * line and cursor at that moment (and a mark made at each `nonce` OSC, read back after every
 * chunk), queries with the cursor, screen events and what the screen was written, and after each
 * chunk the partial line, whether its revision changed, the line count, the tracked modes and
 * the cursor position.
 */
function trace(chunks: readonly Uint8Array[], options: TraceOptions): string[] {
  const { screens, ...parserOptions } = options
  const parser = new OutputParser(parserOptions)
  const events: string[] = []
  let mark: ReturnType<OutputParser['mark']> | undefined
  parser.onLine((text, n) => events.push(`line ${n}: ${JSON.stringify(text)} (partial ${JSON.stringify(parser.partial)})`))
  parser.onOsc((payload) => {
    events.push(`osc ${JSON.stringify(payload)} @ ${JSON.stringify(parser.partial)} ${JSON.stringify(parser.cursorPosition())} line ${parser.lineCount}`)
    if (!payload.endsWith('nonce')) return
    mark?.release()
    mark = parser.mark()
  })
  parser.onQuery((query) => events.push(`query ${JSON.stringify(query)} at ${JSON.stringify(parser.cursorPosition())}`))
  let written = ''
  if (screens === true) {
    parser.onScreen((event) => {
      events.push(`screen ${JSON.stringify(event)}`)
      if (event.kind === 'needed') {
        written = ''
        parser.attachScreen({ write: (text) => (written += text), cursor: () => ({ row: 1, col: written.length + 1 }) })
      } else parser.detachScreen()
    })
  }
  let revision = parser.partialRevision
  for (const chunk of chunks) {
    parser.feed(chunk)
    const changed = parser.partialRevision !== revision
    revision = parser.partialRevision
    events.push(
      `partial ${JSON.stringify(parser.partial)} changed ${changed} lines ${parser.lineCount} cursor ${JSON.stringify(parser.cursorPosition())}` +
        ` modes ${JSON.stringify([...parser.privateModes])} keypad ${parser.applicationKeypad} alternate ${parser.onAlternateScreen}` +
        (mark === undefined ? '' : ` since ${JSON.stringify(parser.textSince(mark))} truncated ${mark.truncated}`),
    )
  }
  parser.flush()
  events.push(`flushed ${JSON.stringify(parser.partial)}`)
  if (parser.attachedScreen !== undefined) events.push(`screen text ${JSON.stringify(written)}`)
  return events
}

/** The trace with the pass on every stretch it can take, required to equal JavaScript's alone; returns the passes taken. */
function same(chunks: readonly Uint8Array[], options: TraceOptions, label: string): number {
  let scanned: string[] = []
  const taken = passes(() => {
    scanned = trace(chunks, { ...options, wasmMinBytes: 1 })
  })
  const plain = trace(chunks, { ...options, wasmMinBytes: Infinity })
  if (scanned.length !== plain.length || scanned.some((event, k) => event !== plain[k])) {
    // Show the first difference, not two traces of thousands of events.
    const k = scanned.findIndex((event, n) => event !== plain[n])
    expect(scanned.slice(Math.max(0, k - 2), k + 2), `${label}: first difference at event ${k}`).toEqual(plain.slice(Math.max(0, k - 2), k + 2))
  }
  return taken
}

/** `bytes` cut at random offsets into about `pieces` chunks. */
function cut(bytes: Uint8Array, pieces: number, random: (n: number) => number): Uint8Array[] {
  const offsets = [...new Set(Array.from({ length: pieces - 1 }, () => random(bytes.length + 1)))].sort((a, b) => a - b)
  const chunks: Uint8Array[] = []
  let last = 0
  for (const offset of [...offsets, bytes.length]) {
    chunks.push(bytes.subarray(last, offset))
    last = offset
  }
  return chunks
}

function seeded(seed: number): (n: number) => number {
  let state = seed
  return (n) => {
    state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff
    return (state >>> 8) % n
  }
}

describe('the WebAssembly pass of the output parser', () => {
  it('is available in this Node and assembled from scan.wat as committed', () => {
    const scanner = acquireScanner()
    expect(scanner, 'WebAssembly with SIMD').toBeDefined()
    releaseScanner(scanner!)
    // The committed module is what scripts/build-scan-wasm.ts makes of scan.wat now.
    const script = join(here, '..', 'scripts', 'build-scan-wasm.ts')
    execFileSync(process.execPath, ['--import', 'tsx', script, '--check'], { stdio: 'pipe' })
    expect(readFileSync(join(here, '..', 'src', 'scan-wasm.ts'), 'utf8')).toMatch(/^\/\/ Generated by scripts\/build-scan-wasm\.ts/)
  })

  it('gives what the JavaScript path gives on the bench streams, in 64 KiB chunks and cut anywhere, with and without screens', () => {
    const random = seeded(3)
    for (const [name, chunks] of [
      ['mixed', syntheticStream(400_000)],
      ['short lines', seqStream(400_000)],
    ] as const) {
      const whole = Buffer.concat(chunks)
      for (const screens of [false, true]) {
        const taken = same(chunks, { screens }, `${name} in 64 KiB chunks, screens ${screens}`)
        if (!screens) expect(taken, `${name}: passes`).toBeGreaterThanOrEqual(chunks.length)
        same(cut(whole, 300, random), { screens }, `${name} cut in 300, screens ${screens}`)
      }
      same(chunks, { maxLineLength: 20, maxStringBytes: 10 }, `${name} with small bounds`)
    }
  })

  it('stops and goes on when a stretch has more lines or events than the pass records at once', () => {
    // 64 KiB of empty lines (more than its 8192 line slots) and of titles and mode changes on
    // empty lines (more than its 1024 event slots).
    for (const unit of ['\r\n', '\n', '\x1b]0;t\x07\x1b[?25l\x1b[?25h\r\n', '\x1b]2;x\x1b\\\x1b[?2004;1h']) {
      const bytes = Buffer.from(unit.repeat(Math.ceil(65536 / unit.length))).subarray(0, 65536)
      const taken = same([bytes], {}, JSON.stringify(unit))
      expect(taken, JSON.stringify(unit)).toBeGreaterThanOrEqual(4)
    }
  })

  it('hands a long open line over a bounded number of times per chunk when the pass keeps stopping', () => {
    // A 1000-character open line, then sequences the pass stops at: each call would hand the
    // line over again (encoded in, decoded out), so a chunk of them would cost the line per stop.
    for (const stop of ['\x1b=', '\x1b[5G', '\x1b[6n', '\x1b[c']) {
      const bytes = Buffer.from('a'.repeat(1000) + stop.repeat(Math.ceil(65536 / stop.length))).subarray(0, 65536)
      const taken = same([bytes], {}, JSON.stringify(stop))
      // The first call takes the 1000 characters; then 4096 code units of slack over what the
      // pass advanced allow six handovers of the line before the chunk's rest goes to the table.
      expect(taken, JSON.stringify(stop)).toBeLessThanOrEqual(7)
      expect(taken, JSON.stringify(stop)).toBeGreaterThanOrEqual(1)
    }
  })

  it('gives line listeners that mark, resize or throw in the middle of a run of lines what the JavaScript path gives them', () => {
    // Lines with no event between them go to the listeners in one loop; a listener may open a
    // mark (the next lines must then go through the marks), resize (the row count must follow)
    // or throw (the rest of the run must still be numbered and delivered, the error rethrown).
    const bytes = Buffer.from(Array.from({ length: 3000 }, (_, n) => `${n}${n % 7 === 0 ? ' a longer line of text that wraps past ten columns' : ''}\r\n`).join(''))
    const run = (wasmMinBytes: number) => {
      const parser = new OutputParser({ wasmMinBytes, rows: 24, cols: 80 })
      const seen: string[] = []
      let mark: ReturnType<OutputParser['mark']> | undefined
      parser.onLine((text, n) => {
        seen.push(`${n} ${text} ${JSON.stringify(parser.cursorPosition())}`)
        if (n === 100) mark = parser.mark()
        if (n === 900) seen.push(`since mark: ${parser.textSince(mark!).length}`)
        if (n === 901) mark!.release()
        if (n === 1500) parser.resize(5, 10)
        if (n === 2000) throw new Error('listener failed at line 2000')
      })
      parser.onLine((text, n) => {
        if (n % 500 === 0) seen.push(`second listener ${n}`)
      })
      const thrown: string[] = []
      for (let offset = 0; offset < bytes.length; offset += 16384) {
        try {
          parser.feed(bytes.subarray(offset, offset + 16384))
        } catch (error) {
          thrown.push((error as Error).message)
        }
      }
      return { seen, thrown, lines: parser.lineCount, cursor: parser.cursorPosition() }
    }
    let scanned: ReturnType<typeof run> | undefined
    expect(passes(() => (scanned = run(1)))).toBeGreaterThan(0)
    const plain = run(Infinity)
    expect(scanned!.thrown).toEqual(['listener failed at line 2000'])
    expect(scanned!.seen.length).toBe(plain.seen.length)
    expect(scanned).toEqual(plain)
  })

  /** Pieces that reach every branch of the pass, and the ones it leaves to JavaScript. */
  const PIECES = [
    'plain text', 'a'.repeat(40), 'é中😀', 'x😀'.repeat(7), 'ÿ', '\u00a0', '\u0085', '\t', '\r\n', '\r', '\n', '\b', '\b\b\b', '\x07',
    '\x00', '\x0b', '\x7f', '\x18', '\x1a', '\x1b[31m', '\x1b[0m', '\x1b[38;5;208m', '\x1b[48:2::10:20:30m', '\x1b[99999999999m',
    '\x1b[>4;1m', '\x1b[?25l', '\x1b[K', '\x1b[0K', '\x1b[1K', '\x1b[2K', '\x1b[3K', '\x1b[J', '\x1b[0J', '\x1b[1J', '\x1b[2J',
    '\x1b[5G', '\x1b[3;4H', '\x1b[H', '\x1b[7f', '\x1b[10d', '\x1b[2;5r', '\x1b[A', '\x1b[3C', '\x1b[P', '\x1b[?2004h',
    '\x1b[?2004;1l', '\x1b[?1;2;3;4;5h', '\x1b[?1;1049h', '\x1b[?1049h', '\x1b[?1049l', '\x1b[?47h', '\x1b[?47l', '\x1b[4h',
    '\x1b[20l', '\x1b[6n', '\x1b[5n', '\x1b[c', '\x1b[0c', '\x1b[>c', '\x1b[>q', '\x1b[?6n', '\x1b[18t', '\x1b[?1$p', '\x1b[1 q',
    '\x1b]0;title\x07', '\x1b]0;tïtle😀\x1b\\', '\x1b]2;t\x1b[1m', '\x1b]133;A;nonce\x07', '\x1b]11;?\x07', '\x1b]10;?\x1b\\',
    '\x1b]2;a\rb\x07', '\x1b]8;;\x07', '\x1b]\x07', '\x1b]', '\x1bP1$r0m\x1b\\', '\x1bPq#0\r\n\x07~\x1b\\', '\x1b_apc\x18',
    '\x1b^pm\x1a', '\x1bXsos\x1b\\', '\x1bPQ54\r\n', '\x1bX\n', '\x1b^a\rb', '\x1b_\r\n1\r\n', '\x1b7', '\x1b8', '\x1b(B', '\x1b(', '\x1b#8', '\x1b$(B', '\x1b=', '\x1b>', '\x1b\\',
    '\x1b\x7f', '\x1b\r', '\x1b', '\x1b[', ';', '\x1b\x1b[1m', '\x1b[3\r\n1m', '\x1b[?\x1b[1m', '\x1b[1\xe9m',
  ]

  it('gives what the JavaScript path gives on random streams, whole, cut anywhere and byte by byte', () => {
    const random = seeded(41)
    const OPTIONS: TraceOptions[] = [{}, { screens: true }, { maxStringBytes: 8, maxLineLength: 12 }, { rows: 3, cols: 10, screens: true }, { maxLineLength: 5 }]
    let taken = 0
    for (let round = 0; round < 400; round++) {
      const input = Buffer.from(Array.from({ length: 1 + random(60) }, () => PIECES[random(PIECES.length)]!).join(''), 'utf8')
      const options = OPTIONS[round % OPTIONS.length]!
      const label = JSON.stringify(input.toString('utf8'))
      taken += same([input], options, `${label} whole`)
      same(cut(input, 2 + random(6), random), options, `${label} cut`)
      if (round % 4 === 0) same([...input].map((byte) => Uint8Array.of(byte)), options, `${label} byte by byte`)
    }
    expect(taken).toBeGreaterThan(400)
  })

  it('leaves invalid UTF-8 to JavaScript and gives the same lines as TextDecoder would, minus C1 controls', () => {
    const random = seeded(5)
    const pieces = [[0x61], [0xc3, 0xa9], [0xe4, 0xb8, 0xad], [0xf0, 0x9f, 0x98, 0x80], [0xc3], [0xe4, 0xb8], [0xf0, 0x9f, 0x98], [0x80], [0xff], [0xc2, 0x85], [0x0d, 0x0a], [0x0d], [0x1b, 0x5b, 0x4b], [0x20]]
    for (let round = 0; round < 200; round++) {
      const bytes = Buffer.from(Array.from({ length: 1 + random(30) }, () => pieces[random(pieces.length)]!).flat())
      same([bytes], {}, bytes.toString('hex'))
      same(cut(bytes, 2 + random(4), random), {}, `${bytes.toString('hex')} cut`)
    }
  })
})
