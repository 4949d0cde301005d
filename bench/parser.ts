/**
 * `parser`: the output normaliser (`OutputParser` of the node-pty backend) alone, over a
 * synthetic terminal stream, against a bare streaming UTF-8 decode of the same chunks; and the
 * same stream through the line consumers a session attaches to it (scrollback, the per-send
 * buffer), as the session wires them (session.ts).
 */
import { OutputParser } from '../packages/pty/pty-local/src/index.ts'
import { Config } from '../packages/pty/pty-local/src/config.ts'
import { Scrollback } from '../packages/pty/pty-local/src/scrollback.ts'
import { SendBuffer } from '../packages/pty/pty-local/src/send-buffer.ts'
import { loadScreenModel, renderScreen, ScreenModel } from '../packages/pty/pty-local/src/screen.ts'
import { median, round } from './stats.ts'
import { PLAN, progress } from './harness.ts'
import type { Bench } from './registry.ts'
import { ms, x } from './table.ts'

await loadScreenModel()

/** Size of one chunk fed to the parser, bytes (node-pty reads the master in chunks up to 64 KiB). */
const CHUNK_BYTES = 65_536

/**
 * One screenful of what busy terminals print, repeated to fill the stream: a coloured bash
 * prompt with bracketed-paste toggles and a window-title OSC, `ls --color` output with CJK,
 * accented and astral (emoji) names, CR-redrawn progress bars with erase-in-line, a compiler
 * diagnostic with SGR colours, cursor save/restore and a DCS reply, and plain ASCII lines.
 */
const SCREEN = [
  '\x1b[?2004h\x1b]0;dev@box: ~/app\x07\x1b[1;32mdev@box\x1b[0m:\x1b[1;34m~/app\x1b[0m$ make test\r\n\x1b[?2004l\r',
  '\x1b[01;34mbuild\x1b[0m  \x1b[01;32mconfigure\x1b[0m  Übersicht.txt  データ.csv  naïve-café.md  🐚🚀.log\r\n',
  'compiling [=>                  ]  5%\r\x1b[Kcompiling [=========>          ] 48%\r\x1b[Kcompiling [===================>] 100%\r\n',
  '取得中 ▓▓▓▓░░░░░░ 40% ⠙\r\x1b[2K取得中 ▓▓▓▓▓▓▓▓▓▓ 100% ✓\r\n',
  '\x1b[1msrc/main.c:42:7:\x1b[0m \x1b[1;31mwarning:\x1b[0m unused variable ‘ψ’ — Ω≈ç√∫ — 😀🎉\r\n',
  '\x1b7\x1b[1;1H\x1b[2Kstatus: ok\x1b8\x1bP+q544e\x1b\\\x1b[38;5;208morange\x1b[39m and \x1b[48;2;10;20;30mtruecolor\x1b[49m\r\n',
  'a plain line of ASCII text, as most build logs are, with nothing special in it at all\r\n',
].join('')

/** The synthetic stream of `bytes` bytes, cut into `CHUNK_BYTES` chunks at arbitrary offsets (splitting UTF-8 and escapes). */
function syntheticStream(bytes: number): Buffer[] {
  const unit = Buffer.from(SCREEN, 'utf8')
  const stream = Buffer.alloc(bytes)
  for (let offset = 0; offset < bytes; offset += unit.length) unit.copy(stream, offset)
  const chunks: Buffer[] = []
  for (let offset = 0; offset < bytes; offset += CHUNK_BYTES) chunks.push(stream.subarray(offset, offset + CHUNK_BYTES))
  return chunks
}

/** `seq 1 N` as a terminal delivers it (CR LF line ends), `bytes` long, in `CHUNK_BYTES` chunks. */
function seqStream(bytes: number): Buffer[] {
  const parts: string[] = []
  let size = 0
  for (let n = 1; size < bytes; n++) {
    const line = `${n}\r\n`
    parts.push(line)
    size += line.length
  }
  const stream = Buffer.from(parts.join(''), 'latin1').subarray(0, bytes)
  const chunks: Buffer[] = []
  for (let offset = 0; offset < stream.length; offset += CHUNK_BYTES) chunks.push(stream.subarray(offset, offset + CHUNK_BYTES))
  return chunks
}

/** Wall time and this process's CPU time of one run, ms. */
interface Timing {
  wallMs: number
  cpuMs: number
}

function timed(run: () => void): Timing {
  const cpu = process.cpuUsage()
  const start = performance.now()
  run()
  const wallMs = performance.now() - start
  const used = process.cpuUsage(cpu)
  return { wallMs, cpuMs: (used.user + used.system) / 1000 }
}

/** The session's defaults (config.ts) for the parser and its consumers. */
const SESSION = Config.parse({})

/** A parser made as a session makes it (session.ts), with a line listener and an OSC listener. */
function sessionParser(): OutputParser {
  return new OutputParser({ maxLineLength: SESSION.maxLineLength, stringTimeoutMs: SESSION.stringTimeoutMs })
}

function timeParser(chunks: readonly Buffer[]): Timing {
  const parser = sessionParser()
  let lines = 0
  parser.onLine(() => {
    lines++
  })
  parser.onOsc(() => {})
  const timing = timed(() => {
    for (const chunk of chunks) parser.feed(chunk)
    parser.flush()
  })
  if (lines === 0) throw new Error('the parser produced no lines from the synthetic stream')
  return timing
}

/**
 * The parser with what a session hangs on it between sends: the scrollback following it and the
 * buffer of output not yet shown in a result (a `SendBuffer`), at the session's default bounds.
 */
function timePipeline(chunks: readonly Buffer[]): Timing {
  const parser = sessionParser()
  const scrollback = new Scrollback({ maxLines: SESSION.scrollbackLines, maxBytes: SESSION.scrollbackMaxBytes })
  scrollback.follow(parser)
  parser.onOsc(() => {})
  const unseen = new SendBuffer(parser, { maxBytes: SESSION.maxReadBytes })
  const timing = timed(() => {
    for (const chunk of chunks) parser.feed(chunk)
    parser.flush()
  })
  if (scrollback.committedLines === 0 || unseen.lastLine() === '') throw new Error('the pipeline kept no lines from the synthetic stream')
  return timing
}

function timeDecode(chunks: readonly Buffer[]): Timing {
  const decoder = new TextDecoder('utf-8')
  let chars = 0
  const timing = timed(() => {
    for (const chunk of chunks) chars += decoder.decode(chunk, { stream: true }).length
    chars += decoder.decode().length
  })
  if (chars === 0) throw new Error('the decoder produced no text')
  return timing
}

export type ParserFigures = ReturnType<typeof measureParser>

/** The rate in MB/s of each timing in `timings` over `megabytes`, by wall or CPU time. */
function ratesOf(timings: readonly Timing[], megabytes: number, of: keyof Timing): number[] {
  return timings.map((timing) => megabytes / (timing[of] / 1000))
}

/** Passes before the timed runs: the parser's CPU rate is steady from the fourth pass (V8 recompiles its hot path). */
const WARM_UP_PASSES = 3

/** Runs of the parser and of a bare decode over `chunks`, interleaved, after the warm-up. */
function parserRuns(chunks: readonly Buffer[], runs: number) {
  for (let i = 0; i < WARM_UP_PASSES; i++) {
    timeParser(chunks)
    timeDecode(chunks)
  }
  const parse: Timing[] = []
  const decode: Timing[] = []
  for (let i = 0; i < runs; i++) {
    parse.push(timeParser(chunks))
    decode.push(timeDecode(chunks))
  }
  return { parse, decode }
}

/**
 * Runs through the session's line consumers over `chunks`, after a warm-up, interleaved with
 * runs of the parser alone made after them: in a process where the consumers ran, the
 * parser's call of its line listeners has seen several functions (as in a session's process),
 * which V8 calls without inlining.
 */
function pipelineRuns(chunks: readonly Buffer[], runs: number) {
  timePipeline(chunks)
  const pipeline: Timing[] = []
  const parse: Timing[] = []
  for (let i = 0; i < runs; i++) {
    pipeline.push(timePipeline(chunks))
    parse.push(timeParser(chunks))
  }
  return { pipeline, parse }
}

/** A full 160×40 screen of mixed text, rendered `samples` times after a warm-up; median ms. */
function timeScreenRender(samples = 200): number {
  const screen = new ScreenModel({ rows: 40, cols: 160 })
  const row = (y: number) => `row ${y} ${'αβγ text 界 '.repeat(14)}`.slice(0, 159)
  screen.write(`\x1b[?1049h${Array.from({ length: 40 }, (_, y) => `\x1b[${y + 1};1H${row(y)}`).join('')}\x1b[12;5H`)
  const times: number[] = []
  for (let i = 0; i < samples + 20; i++) {
    const start = performance.now()
    const text = renderScreen(screen.snapshot())
    if (i >= 20) times.push(performance.now() - start)
    if (!text.startsWith('[screen: alternate 40x160, cursor 12,5]')) throw new Error(`screen render: unexpected header ${text.slice(0, 60)}`)
  }
  screen.dispose()
  return median(times)
}

/**
 * Feeds `megabytes` (10^6 bytes) of the synthetic stream, and as much of short lines, through a
 * fresh parser with a line listener, once to warm up and then `runs` times, interleaved with
 * bare decodes of the same chunks; then through the session's line consumers, interleaved with
 * the parser alone again (the `after_consumers` figures). Reports rates in MB/s.
 */
function measureParser(megabytes = 50, runs = 5) {
  const mixedStream = syntheticStream(megabytes * 1e6)
  const seqChunks = seqStream(megabytes * 1e6)
  // The parser and its baseline first, for both streams, before any consumer code has run.
  const mixed = parserRuns(mixedStream, runs)
  const short = parserRuns(seqChunks, runs)
  const mixedPipeline = pipelineRuns(mixedStream, runs)
  const shortPipeline = pipelineRuns(seqChunks, runs)
  const rate = (timings: readonly Timing[], of: keyof Timing = 'wallMs') => ratesOf(timings, megabytes, of)
  const mb = median(rate(mixed.parse))
  const decodeMb = median(rate(mixed.decode))
  const shortMb = median(rate(short.parse))
  const shortDecodeMb = median(rate(short.decode))
  return {
    /** Median over the runs, MB (10^6 bytes) per wall-clock second. */
    mb_per_s: round(mb, 1),
    /** The fastest run (the least disturbed by other load on the machine). */
    best_mb_per_s: round(Math.max(...rate(mixed.parse)), 1),
    /**
     * Median MB per second of this process's CPU time (`process.cpuUsage`, every thread: the
     * garbage collector's helpers count): what the parser costs, whatever the load. The targets
     * are on the CPU rates.
     */
    cpu_mb_per_s: round(median(rate(mixed.parse, 'cpuMs')), 1),
    /** The same three for a bare streaming UTF-8 decode of the same chunks (TextDecoder). */
    decode_mb_per_s: round(decodeMb, 1),
    decode_best_mb_per_s: round(Math.max(...rate(mixed.decode)), 1),
    decode_cpu_mb_per_s: round(median(rate(mixed.decode, 'cpuMs')), 1),
    ratio_to_decode: round(mb / decodeMb),
    cpu_ratio_to_decode: round(median(rate(mixed.parse, 'cpuMs')) / median(rate(mixed.decode, 'cpuMs'))),
    /** The same on `seq`-style short lines (`1\r\n2\r\n…`). */
    short_mb_per_s: round(shortMb, 1),
    short_decode_mb_per_s: round(shortDecodeMb, 1),
    short_ratio_to_decode: round(shortMb / shortDecodeMb),
    short_cpu_mb_per_s: round(median(rate(short.parse, 'cpuMs')), 1),
    short_decode_cpu_mb_per_s: round(median(rate(short.decode, 'cpuMs')), 1),
    short_cpu_ratio_to_decode: round(median(rate(short.parse, 'cpuMs')) / median(rate(short.decode, 'cpuMs'))),
    /**
     * Median MB/s of the parser with the session's line consumers (scrollback and the unseen-output
     * buffer), on the mixed stream and on short lines, same runs; no target (what a session pays).
     */
    pipeline_mb_per_s: round(median(rate(mixedPipeline.pipeline)), 1),
    short_pipeline_mb_per_s: round(median(rate(shortPipeline.pipeline)), 1),
    /**
     * Median MB per second of CPU time of the parser alone, on the mixed stream and on short
     * lines, in runs made after the consumers' runs (interleaved with them): the parser in the
     * state of a session's process, where its line-listener call has seen several functions. No
     * target.
     */
    after_consumers_cpu_mb_per_s: round(median(rate(mixedPipeline.parse, 'cpuMs')), 1),
    short_after_consumers_cpu_mb_per_s: round(median(rate(shortPipeline.parse, 'cpuMs')), 1),
    /** Median time to render a full 160×40 screen (snapshot and text), ms. */
    screen_render_ms: round(timeScreenRender(), 3),
    megabytes,
    runs,
  }
}

export const parserBench: Bench = {
  keys: ['parser'],
  composed: false,
  async run() {
    progress(`parser: ${PLAN.parserMegabytes} MB synthetic stream`)
    const parser = measureParser(PLAN.parserMegabytes)
    progress(`parser: ${parser.cpu_mb_per_s} MB/s of CPU time (short lines ${parser.short_cpu_mb_per_s})`)
    return { parser }
  },
  rows(r, verdict) {
    const p = r.parser
    if (!p) return []
    return [
      ['parser, CPU time', `${p.cpu_mb_per_s} MB/s`, `decode ${p.decode_cpu_mb_per_s} MB/s`, x(p.cpu_ratio_to_decode), `${verdict('parser.cpu_mb_per_s')}; ${verdict('parser.cpu_ratio_to_decode')}`],
      ['parser, short lines, CPU time', `${p.short_cpu_mb_per_s} MB/s`, `decode ${p.short_decode_cpu_mb_per_s} MB/s`, x(p.short_cpu_ratio_to_decode), verdict('parser.short_cpu_mb_per_s')],
      ['parser, wall clock', `${p.mb_per_s} MB/s`, `decode ${p.decode_mb_per_s} MB/s`, x(p.ratio_to_decode), 'no target'],
      ['parser, short lines, wall clock', `${p.short_mb_per_s} MB/s`, `decode ${p.short_decode_mb_per_s} MB/s`, x(p.short_ratio_to_decode), 'no target'],
      // Figures without a baseline: the mixed stream's and the short lines' side by side.
      ['parser + scrollback + buffer (mixed; short)', `${p.pipeline_mb_per_s}; ${p.short_pipeline_mb_per_s} MB/s`, '', '', 'no target'],
      ['parser after consumers, CPU (mixed; short)', `${p.after_consumers_cpu_mb_per_s}; ${p.short_after_consumers_cpu_mb_per_s} MB/s`, '', '', 'no target'],
      ['screen render 160x40', ms(p.screen_render_ms), '', '', verdict('parser.screen_render_ms')],
    ]
  },
}
