/**
 * Reading a CLI's own transcript for the exact text of its last answer. The CLI writes it, so it
 * may be huge, hold a line without end, or be a link: it is found and read without following
 * links, at most `maxReadBytes` a call, skipping a line over `maxLineBytes` (memory stays bounded).
 */
import type { TranscriptConfig } from './config.ts'
import { nodeBeneathFs, type BeneathFs } from '@conch/subprocess'
import { newestFileBeneath } from './home-fs.ts'

/** Directory entries one search for the newest transcript looks at, in all. */
export const TRANSCRIPT_WALK_ENTRIES = 4096
/** How many folders deep below the transcript folder the search goes. */
export const TRANSCRIPT_WALK_DEPTH = 6

export type TranscriptFormat = TranscriptConfig['format']

/** The last assistant answer of a transcript, fed one line at a time. */
class AnswerParser {
  last: string | undefined
  /** Stop records read (`claude-stop`). */
  stops = 0
  private current: string[] = []
  constructor(private readonly format: TranscriptFormat) {}

  line(text: string): void {
    if (text.trim() === '') return
    let entry: any
    try {
      entry = JSON.parse(text)
    } catch {
      return
    }
    if (this.format === 'claude-stop') {
      if (entry?.hook_event_name === 'Stop' && typeof entry.last_assistant_message === 'string') {
        this.last = entry.last_assistant_message
        this.stops++
      }
    } else if (this.format === 'claude-jsonl') {
      if (entry?.type === 'user' && !isToolResult(entry)) this.current = []
      if (entry?.type === 'assistant' && Array.isArray(entry.message?.content)) {
        for (const block of entry.message.content) if (block?.type === 'text' && typeof block.text === 'string') this.current.push(block.text)
        this.last = this.current.join('\n')
      }
    } else {
      const payload = entry?.payload
      if (entry?.type === 'response_item' && payload?.type === 'message' && payload.role === 'assistant' && Array.isArray(payload.content)) {
        this.last = payload.content.filter((block: any) => block?.type === 'output_text').map((block: any) => String(block.text)).join('')
      }
    }
  }
}

function isToolResult(entry: any): boolean {
  const content = entry.message?.content
  return Array.isArray(content) && content.some((block: any) => block?.type === 'tool_result')
}

export interface TranscriptReaderOptions {
  /** The trusted folder the transcript folder is reached from (the pool's state folder). */
  base: string
  /** The transcript folder (absolute). */
  dir: string
  format: TranscriptFormat
  /** Bytes one `read()` reads at most. */
  maxReadBytes: number
  /** Bytes one line may have; a longer one is skipped. */
  maxLineBytes: number
  /** Told once per file about a skipped line, once about a truncated search, once about a refused path. */
  warn: (message: string) => void
  fs?: BeneathFs
}

/** One session's transcript, read on from where the last read stopped (module comment). */
export class TranscriptReader {
  private file: { dev: number; ino: number; path: string } | undefined
  private offset = 0
  private pending: Buffer[] = []
  private pendingBytes = 0
  private skipping = false
  private warnedLine = false
  private warnedWalk = false
  private warnedPath = false
  private stopsBefore = 0
  private parser: AnswerParser
  private readonly fs: BeneathFs

  constructor(private readonly options: TranscriptReaderOptions) {
    this.parser = new AnswerParser(options.format)
    this.fs = options.fs ?? nodeBeneathFs
  }

  /** Stop records read so far, over every file read (`claude-stop`): a rise means a turn ended. */
  get stops(): number {
    return this.stopsBefore + this.parser.stops
  }

  /** The path of the transcript the last `read()` read from, once there is one. */
  get path(): string | undefined {
    return this.file?.path
  }

  /**
   * Reads at most `maxReadBytes` more of the newest transcript and returns its last assistant
   * answer so far, or undefined (no transcript, none yet, or a folder on the way is a link).
   */
  read(): string | undefined {
    const { format } = this.options
    let found
    try {
      found = newestFileBeneath(this.options.base, this.options.dir, (name) => name.endsWith('.jsonl') && (format !== 'codex-rollout' || name.startsWith('rollout-')), { maxDepth: TRANSCRIPT_WALK_DEPTH, maxEntries: TRANSCRIPT_WALK_ENTRIES }, this.fs)
    } catch (error) {
      // A link (or a file) where a folder of the transcript's path should be: nothing is read.
      if (!this.warnedPath) {
        this.warnedPath = true
        this.options.warn(`pool: transcript folder ${this.options.dir} is not read: ${(error as Error).message}`)
      }
      return undefined
    }
    if (found.truncated && !this.warnedWalk) {
      this.warnedWalk = true
      this.options.warn(`pool: transcript folder ${this.options.dir} holds more than ${TRANSCRIPT_WALK_ENTRIES} entries; only the first ${TRANSCRIPT_WALK_ENTRIES} are searched for the newest transcript`)
    }
    const file = found.file
    if (file === undefined) return this.parser.last
    try {
      const { dev, ino, size } = file.stats
      if (this.file === undefined || this.file.dev !== dev || this.file.ino !== ino || size < this.offset) this.restart({ dev, ino, path: file.path })
      const length = Math.min(this.options.maxReadBytes, size - this.offset)
      if (length > 0) {
        const buffer = Buffer.allocUnsafe(length)
        let got = 0
        while (got < length) {
          const n = this.fs.read(file.fd, buffer, got, length - got, this.offset + got)
          if (n === 0) break
          got += n
        }
        this.offset += got
        this.feed(buffer.subarray(0, got))
      }
    } finally {
      this.fs.close(file.fd)
    }
    return this.parser.last
  }

  private restart(file: { dev: number; ino: number; path: string }): void {
    this.stopsBefore += this.parser.stops
    this.file = file
    this.offset = 0
    this.pending = []
    this.pendingBytes = 0
    this.skipping = false
    this.warnedLine = false
    this.parser = new AnswerParser(this.options.format)
  }

  private feed(chunk: Buffer): void {
    let start = 0
    for (;;) {
      const newline = chunk.indexOf(0x0a, start)
      const piece = chunk.subarray(start, newline < 0 ? chunk.length : newline)
      if (!this.skipping && this.pendingBytes + piece.length > this.options.maxLineBytes) this.skipLine()
      if (newline < 0) {
        if (!this.skipping && piece.length > 0) {
          this.pending.push(Buffer.from(piece))
          this.pendingBytes += piece.length
        }
        return
      }
      if (this.skipping) this.skipping = false
      else this.parser.line(Buffer.concat([...this.pending, piece]).toString('utf8'))
      this.pending = []
      this.pendingBytes = 0
      start = newline + 1
    }
  }

  private skipLine(): void {
    this.skipping = true
    this.pending = []
    this.pendingBytes = 0
    if (this.warnedLine) return
    this.warnedLine = true
    this.options.warn(`pool: transcript ${this.file?.path}: a line longer than ${this.options.maxLineBytes} bytes (transcript.maxLineBytes) is skipped; the answer is read from the screen`)
  }
}
