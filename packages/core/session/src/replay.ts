/**
 * Reading a persisted session back: `<dir>/<id>.jsonl`, one `SessionEvent` per line, as
 * written by `SessionService` (JSON Lines, https://jsonlines.org).
 */
import { readFileSync } from 'node:fs'
import { SessionError, type SessionEvent } from './types.ts'

/**
 * Parses the text of a session file into its events.
 *
 * Every non-blank line must be a JSON object `{seq, ts, sessionId, type, data}` whose `seq` is
 * the previous line's plus one (the first is 1), whose `sessionId` is `id`, and the first event
 * must be `session/start`. Blank lines (such as the empty text after the final newline) are
 * skipped.
 *
 * @throws SessionError `CORRUPT_LOG` naming `file`, the 1-based line number and what is wrong.
 */
export function parseSessionLog(text: string, id: string, file: string): SessionEvent[] {
  const events: SessionEvent[] = []
  const lines = text.split('\n')
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!
    if (line.trim() === '') continue
    const corrupt = (what: string) =>
      new SessionError('CORRUPT_LOG', `corrupt session log ${file}:${index + 1}: ${what}`)
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
    const expectedSeq = events.length + 1
    if (event['seq'] !== expectedSeq) {
      throw corrupt(`expected seq ${expectedSeq}, found ${JSON.stringify(event['seq'])}`)
    }
    if (typeof event['ts'] !== 'string') throw corrupt('"ts" must be an ISO-8601 string')
    if (event['sessionId'] !== id) {
      throw corrupt(`"sessionId" is ${JSON.stringify(event['sessionId'])}, expected ${JSON.stringify(id)}`)
    }
    if (typeof event['type'] !== 'string' || event['type'] === '') throw corrupt('"type" must be a non-empty string')
    if (!('data' in event)) throw corrupt('"data" is missing')
    if (expectedSeq === 1 && event['type'] !== 'session/start') {
      throw corrupt(`the first event must be session/start, found ${event['type']}`)
    }
    const omittedBytes = event['omittedBytes']
    events.push({ seq: expectedSeq, ts: event['ts'], sessionId: id, type: event['type'], data: event['data'], ...(typeof omittedBytes === 'number' && { omittedBytes }) })
  }
  if (events.length === 0) {
    throw new SessionError('CORRUPT_LOG', `corrupt session log ${file}:1: the file holds no events (a session starts with session/start)`)
  }
  return events
}

/** Reads and parses `file`; see `parseSessionLog`. Filesystem errors other than parsing propagate. */
export function readSessionLog(file: string, id: string): SessionEvent[] {
  return parseSessionLog(readFileSync(file, 'utf8'), id, file)
}
