/**
 * Reading a persisted session back: `<dir>/<id>.jsonl`, one `SessionEvent` per line, as
 * written by `SessionService` (JSON Lines, https://jsonlines.org).
 */
import { readSync } from 'node:fs'
import { StringDecoder } from 'node:string_decoder'
import { SessionError, type SessionEvent } from './types.ts'

/**
 * Reads a session file from `fd` a chunk at a time, keeping only the events `keep` accepts (the
 * whole text is never held). Every non-blank line must be a JSON object `{seq, ts, sessionId,
 * type, data}` whose `seq` is the previous line's plus one (the first is 1), whose `sessionId`
 * is `id`, and the first event must be `session/start`.
 * @returns the kept events and the last `seq` of the file.
 * @throws SessionError `CORRUPT_LOG` naming `file`, the 1-based line number and what is wrong.
 */
export function readSessionLog(fd: number, id: string, file: string, keep: (event: SessionEvent) => boolean): { events: SessionEvent[]; seq: number } {
  const parser = new SessionLogParser(id, file, keep)
  const decoder = new StringDecoder('utf8')
  const chunk = Buffer.allocUnsafe(1 << 20)
  let rest = ''
  for (let read = readSync(fd, chunk); read > 0; read = readSync(fd, chunk)) {
    const lines = (rest + decoder.write(chunk.subarray(0, read))).split('\n')
    rest = lines.pop()!
    for (const line of lines) parser.line(line)
  }
  parser.line(rest + decoder.end())
  return parser.end()
}

class SessionLogParser {
  private readonly events: SessionEvent[] = []
  private seq = 0
  private lineNumber = 0

  constructor(
    private readonly id: string,
    private readonly file: string,
    private readonly keep: (event: SessionEvent) => boolean,
  ) {}

  line(line: string): void {
    this.lineNumber++
    if (line.trim() === '') return
    const corrupt = (problem: string) => new SessionError('CORRUPT_LOG', { file: this.file, line: this.lineNumber, problem })
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch (error) {
      throw corrupt(`not valid JSON (${(error as Error).message})`)
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw corrupt('expected a JSON object {seq, ts, sessionId, type, data}')
    }
    const event = value as Record<string, unknown>
    const expectedSeq = this.seq + 1
    if (event['seq'] !== expectedSeq) {
      throw corrupt(`expected seq ${expectedSeq}, found ${JSON.stringify(event['seq'])}`)
    }
    if (typeof event['ts'] !== 'string') throw corrupt('"ts" must be an ISO-8601 string')
    if (event['sessionId'] !== this.id) {
      throw corrupt(`"sessionId" is ${JSON.stringify(event['sessionId'])}, expected ${JSON.stringify(this.id)}`)
    }
    if (typeof event['type'] !== 'string' || event['type'] === '') throw corrupt('"type" must be a non-empty string')
    if (!('data' in event)) throw corrupt('"data" is missing')
    if (expectedSeq === 1 && event['type'] !== 'session/start') {
      throw corrupt(`the first event must be session/start, found ${event['type']}`)
    }
    this.seq = expectedSeq
    const omittedBytes = event['omittedBytes']
    const parsed: SessionEvent = { seq: expectedSeq, ts: event['ts'], sessionId: this.id, type: event['type'], data: event['data'], ...(typeof omittedBytes === 'number' && { omittedBytes }) }
    if (this.keep(parsed)) this.events.push(parsed)
  }

  end(): { events: SessionEvent[]; seq: number } {
    if (this.seq === 0) {
      throw new SessionError('CORRUPT_LOG', { file: this.file, line: 1, problem: 'the file holds no events (a session starts with session/start)' })
    }
    return { events: this.events, seq: this.seq }
  }
}
