/**
 * What an appended event becomes before it is written: its data with every registered
 * redactor applied to each string (object keys included), then cut to the session's
 * `maxEventBytes` with the cut recorded.
 */
import { utf8Prefix } from './utf8.ts'

/** What must not be recorded (a secret's value), replaced in text whole or as it streams. */
export interface SessionRedactor {
  /** `text` with every value replaced. */
  redact(text: string): string
  /**
   * The next piece of a stream, split into what can be shown now (replaced) and a tail that
   * could begin a value, to be put before the next piece.
   */
  splitLive(text: string): { shown: string; held: string }
}

/** The JSON form of `data` with `redact` applied to every string and key. */
export function redactJson(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === 'string') return redact(value)
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map((item) => redactJson(item, redact))
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) out[redact(key)] = redactJson(item, redact)
  return out
}

/**
 * One stream of text shown as it arrives (a tool's progress) through every redactor in turn,
 * each holding back a tail that could begin a value until the next piece decides it.
 */
export class LiveRedaction {
  private readonly held: string[]

  constructor(private readonly redactors: readonly SessionRedactor[]) {
    this.held = redactors.map(() => '')
  }

  /** The piece to show now; `end`: nothing follows, so every held tail goes too (replaced). */
  push(text: string, end = false): string {
    let out = text
    this.redactors.forEach((redactor, index) => {
      const data = this.held[index] + out
      if (end) {
        this.held[index] = ''
        out = redactor.redact(data)
      } else {
        const split = redactor.splitLive(data)
        this.held[index] = split.held
        out = split.shown
      }
    })
    return out
  }
}

/**
 * Cuts the longest strings of `data` (the JSON form, changed in place) until `line(data, cut
 * bytes)` is at most `maxBytes` UTF-8 bytes, and returns that line; each cut string ends with a
 * notice naming the bound. Data with too little string to cut becomes `{cut: notice}`.
 */
export function boundEvent(data: unknown, line: (data: unknown, omittedBytes: number) => string, maxBytes: number): string {
  let text = line(data, 0)
  const whole = Buffer.byteLength(text, 'utf8')
  let over = whole - maxBytes
  if (over <= 0) return text
  const notice = (omitted: number) => `\n[… ${omitted} bytes cut: a session event is bounded to maxEventBytes ${maxBytes}]`
  const leaves: { holder: Record<string | number, unknown>; key: string | number; length: number }[] = []
  const walk = (holder: Record<string | number, unknown>, key: string | number): void => {
    const item = holder[key]
    if (typeof item === 'string') leaves.push({ holder, key, length: Buffer.byteLength(JSON.stringify(item), 'utf8') })
    else if (Array.isArray(item)) item.forEach((_, index) => walk(item as never, index))
    else if (typeof item === 'object' && item !== null) for (const child of Object.keys(item)) walk(item as never, child)
  }
  const root = { data }
  walk(root, 'data')
  leaves.sort((a, b) => b.length - a.length)
  let omitted = 0
  for (const leaf of leaves) {
    const value = leaf.holder[leaf.key] as string
    const bytes = Buffer.byteLength(value, 'utf8')
    // JSON escapes make the line longer than the text: cut the text by its JSON share of the excess.
    const keep = utf8Prefix(value, Math.floor(bytes - (over + 200) * (bytes / Math.max(1, leaf.length))))
    const cut = bytes - Buffer.byteLength(keep, 'utf8')
    if (cut <= 0) continue
    omitted += cut
    leaf.holder[leaf.key] = keep + notice(cut)
    text = line(root.data, omitted)
    over = Buffer.byteLength(text, 'utf8') - maxBytes
    if (over <= 0) return text
  }
  return line({ cut: notice(whole).trim() }, whole)
}
