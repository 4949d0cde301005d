/**
 * Throughput of the output normaliser alone (issue 6, `parser.mb_per_s`).
 *
 * Builds a 50 MB synthetic terminal stream dense in escape sequences (SGR colours, bracketed
 * paste, OSC titles, erase-in-line), CR progress-bar redraws and multi-byte UTF-8, feeds it in
 * 64 KiB chunks (cut at arbitrary byte offsets, so UTF-8 and escapes are split) to one
 * `OutputParser` with a line listener attached, and prints MB/s. Not a test: no threshold.
 *
 * Run: pnpm exec tsx packages/pty/pty-local/bench/parser.ts [megabytes]
 */
import { OutputParser } from '../src/output.ts'

const megabytes = Number(process.argv[2] ?? 50)
const chunkBytes = 65536

function buildStream(totalBytes: number): Buffer {
  const units = [
    '\x1b[?2004h\x1b]0;user@host: ~/projects\x07\x1b[01;32muser@host\x1b[00m:\x1b[01;34m~/src\x1b[00m$ ls --color\r\n\x1b[?2004l\r',
    '\x1b[0m\x1b[01;34mdir\x1b[0m  \x1b[01;32mrun.sh\x1b[0m  notes.txt  résumé.pdf  中文文件.md  😀.png\r\n',
    '[#####               ] 25%\r\x1b[K[##########          ] 50%\r\x1b[K[####################] 100%\r\n',
    'Downloading 下载中 ████████░░░░ 67% ⠋\r\x1b[2KDownloading 下载中 ████████████ 100% ✔\r\n',
    '\x1b[31merror\x1b[39m: naïve façade — ünïcödé — Ελληνικά — русский — 🚀🎉\r\n',
    '\x1bP1$r0m\x1b\\\x1b_apc payload\x1b\\\x1b7\x1b[1;1H\x1b8\x1b(B plain ascii text for good measure\r\n',
  ]
  const unit = Buffer.from(units.join(''), 'utf8')
  const out = Buffer.alloc(totalBytes)
  for (let offset = 0; offset < totalBytes; offset += unit.length) unit.copy(out, offset)
  return out
}

const stream = buildStream(megabytes * 1024 * 1024)
const chunks: Buffer[] = []
for (let offset = 0; offset < stream.length; offset += chunkBytes) chunks.push(stream.subarray(offset, offset + chunkBytes))

function run(): number {
  const parser = new OutputParser()
  let lines = 0
  parser.onLine(() => {
    lines++
  })
  parser.onOsc(() => {})
  const start = performance.now()
  for (const chunk of chunks) parser.feed(chunk)
  parser.flush()
  const seconds = (performance.now() - start) / 1000
  if (lines === 0) throw new Error('the stream produced no lines')
  return stream.length / (1024 * 1024) / seconds
}

run() // warm-up
const rates = [run(), run(), run()].sort((a, b) => a - b)
const median = rates[1] ?? 0
console.log(JSON.stringify({ parser: { mb_per_s: Math.round(median), runs: rates.map((r) => Math.round(r)), megabytes } }))
