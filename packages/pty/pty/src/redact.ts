/**
 * Replaces secret values in a terminal's raw output with `[secret NAME]`, before anything parses,
 * stores or shows it. Pure — no I/O, no timers.
 *
 * Works on bytes, as the terminal delivers them: a value split across chunks is still found,
 * because a chunk's tail that could begin a value is held back until the next chunk decides it
 * (`push`), or until the caller gives up waiting (`flush`, which releases it as it was).
 * Matches the exact bytes of a value and of the forms conch's own formatting writes it in
 * (`formsOf`); a program that prints a value otherwise changed (encoded, reversed) is not
 * recognised.
 */

import { inspect } from 'node:util'
import { LiveRedaction } from '@conch/session'

/** The shortest value accepted, in UTF-8 bytes: a shorter one would match ordinary output and be replaced all over it. */
export const MIN_SECRET_BYTES = 8

/**
 * The shortest piece of a value recognised in a process name or path, in characters (a shorter
 * value counts whole): a name is cut to 15 bytes (TASK_COMM_LEN, proc(5) `comm`), so a longer
 * value reaches names only in pieces.
 */
export const PROCESS_PIECE_CHARS = 6

interface Secret {
  name: string
  value: Buffer
  /** `[secret NAME]`, what the terminal shows instead. */
  label: Buffer
  /** The value and the label as text, for the passes over rendered text. */
  text: string
  labelText: string
  /** Every run of `min(PROCESS_PIECE_CHARS, text.length)` characters of the value (`redactProcessText`). */
  pieces: Set<string>
  /** For the decimal byte spelling: the text passes match it with any run of spaces after each comma (`decimalPattern`). */
  pattern?: RegExp
}

/** A value found in rows read as one text: `[from, to)` of that text is replaced by `label`. */
interface Edit {
  from: number
  to: number
  label: string
}

/**
 * `rows` with `edits` applied, the rows read as one text that starts at `start`: each label on the
 * row where its value begins, the value's characters removed from every row it covers.
 */
function applyEdits(rows: readonly string[], edits: readonly Edit[], start: number): string[] {
  const out: string[] = []
  let next = 0
  let rowStart = start
  for (const row of rows) {
    const rowEnd = rowStart + row.length
    let piece = ''
    let at = rowStart
    while (next < edits.length && edits[next]!.from < rowEnd) {
      const edit = edits[next]!
      if (edit.from >= rowStart) piece += row.slice(at - rowStart, edit.from - rowStart) + edit.label
      at = Math.min(edit.to, rowEnd)
      if (edit.to > rowEnd) break
      next++
    }
    out.push(piece + row.slice(at - rowStart))
    rowStart = rowEnd
  }
  return out
}

/** Every run of `min(PROCESS_PIECE_CHARS, value.length)` UTF-16 code units of `value`. */
function piecesOf(value: string): Set<string> {
  const length = Math.min(PROCESS_PIECE_CHARS, value.length)
  const pieces = new Set<string>()
  for (let at = 0; at + length <= value.length; at++) pieces.add(value.slice(at, at + length))
  return pieces
}

/**
 * The value as written and as conch's own formatting writes it: escaped in a JSON string, in
 * `util.inspect`'s quotes, without its line breaks (the text passes read lines joined), each of
 * its lines in those forms (`util.inspect` splits a long multi-line string into one quoted piece
 * per line), and its byte spellings (`byteSpellingsOf`). Forms shorter than `MIN_SECRET_BYTES`
 * are left out; a value escaped twice, or otherwise by the program, is not recognised.
 */
function formsOf(value: string): Set<string> {
  const escaped = (text: string) => [text, JSON.stringify(text).slice(1, -1), inspect(text).slice(1, -1)]
  const lines = value.includes('\n') ? value.split('\n') : []
  const forms = new Set([...escaped(value), value.replaceAll('\n', ''), ...lines.flatMap(escaped), ...byteSpellingsOf(value)])
  for (const form of forms) if (Buffer.byteLength(form, 'utf8') < MIN_SECRET_BYTES) forms.delete(form)
  return forms
}

/** How many bytes `util.inspect` shows of a Buffer before `... N more bytes` (`buffer.INSPECT_MAX_BYTES`'s default). */
const INSPECT_BYTES = 50

/**
 * The value's UTF-8 bytes as a program printing its file without an encoding shows them: hex
 * separated by spaces (`<Buffer 68 75 …>`), whole and cut to `INSPECT_BYTES`; decimal separated
 * by `, ` (`util.inspect` of a typed array) and by `,` (`JSON.stringify`). Other encodings
 * (base64, bare hex) are not covered.
 */
function byteSpellingsOf(value: string): string[] {
  const bytes = [...Buffer.from(value, 'utf8')]
  const hex = bytes.map((byte) => byte.toString(16).padStart(2, '0'))
  return [hex.join(' '), hex.slice(0, INSPECT_BYTES).join(' '), bytes.join(', '), bytes.join(',')]
}

/**
 * The decimal spelling with any run of spaces after each comma, as `util.inspect` pads a typed
 * array wrapped into columns. Only the text passes use it.
 */
function decimalPattern(value: string): RegExp {
  return new RegExp([...Buffer.from(value, 'utf8')].join(', *'), 'g')
}

/** Text around the text a pass is given: read for matching only, never changed or returned. */
export interface RedactContext {
  before?: string
  after?: string
}

export class SecretRedactor {
  private secrets: Secret[] = []
  private held: Buffer = Buffer.alloc(0)
  private longest = 0
  /** The longest value in UTF-16 code units (the text passes count in them). */
  private longestText = 0
  /** The first byte of every form: a held tail starts at one (a form's hex and decimal spellings make tails long). */
  private firstBytes = new Set<number>()

  /** Whether any value is registered (no work is done per chunk until one is). */
  get active(): boolean {
    return this.secrets.length > 0
  }

  /** Whether bytes are held back (the tail of the last chunk could begin a value). */
  get holding(): boolean {
    return this.held.length > 0
  }

  /**
   * Registers a value under `name`, with its escaped forms (`formsOf`); re-registering a name replaces its value.
   * @throws RangeError for a value shorter than `MIN_SECRET_BYTES`.
   */
  add(name: string, value: string): void {
    if (Buffer.byteLength(value, 'utf8') < MIN_SECRET_BYTES) throw new RangeError(`a secret value must be at least ${MIN_SECRET_BYTES} bytes`)
    const forms = formsOf(value)
    const spellings = new Set(byteSpellingsOf(value))
    const decimal = [...Buffer.from(value, 'utf8')].join(', ')
    this.secrets = this.secrets.filter((secret) => secret.name !== name && !forms.has(secret.text))
    const labelText = `[secret ${name}]`
    const label = Buffer.from(labelText, 'utf8')
    // A byte spelling's pieces (`6e 74 `) say nothing of a process name or path: only the text forms' count there.
    for (const text of forms) {
      const pieces = spellings.has(text) ? new Set<string>() : piecesOf(text)
      this.secrets.push({ name, value: Buffer.from(text, 'utf8'), label, text, labelText, pieces, ...(text === decimal ? { pattern: decimalPattern(value) } : {}) })
    }
    // Longest first, so a value that contains another is replaced whole.
    this.secrets.sort((a, b) => b.value.length - a.value.length)
    this.longest = this.secrets[0]!.value.length
    this.longestText = Math.max(...this.secrets.map((secret) => secret.text.length))
    this.firstBytes = new Set(this.secrets.map((secret) => secret.value[0]!))
  }

  /**
   * `text` with every registered value replaced by its label: the second pass, over what the
   * model reads. It finds what the byte pass (`push`) cannot: a value whose pieces arrive more
   * than the hold apart, or are split by bytes rendering drops (SGR, NUL, an overwriting CR).
   * Values across line breaks (a long line cut by the parser) are found as `redactRows` finds them.
   * `context`: the text around `text` where it came from, so a value partly inside is found.
   */
  redactText(text: string, context?: RedactContext): string {
    if (this.secrets.length === 0) return text
    if (context === undefined && !text.includes('\n')) {
      let out = text
      for (const secret of this.secrets) {
        if (secret.pattern !== undefined) out = out.replace(secret.pattern, secret.labelText)
        else if (out.includes(secret.text)) out = out.split(secret.text).join(secret.labelText)
      }
      return out
    }
    return this.redactRows(text.split('\n'), context).join('\n')
  }

  /**
   * A process name or a path a process holds open: `[secret NAME]` in place of the whole text
   * when it shares a run of `min(PROCESS_PIECE_CHARS, value length)` characters with a value
   * (longest value first), else the text as it is. The program chooses the rest of such a text,
   * so none of it is kept.
   */
  redactProcessText(text: string): string {
    for (const secret of this.secrets) {
      const length = Math.min(PROCESS_PIECE_CHARS, secret.text.length)
      for (let at = 0; at + length <= text.length; at++) {
        if (secret.pieces.has(text.slice(at, at + length))) return secret.labelText
      }
    }
    return text
  }

  /**
   * `rows` with every registered value replaced, where a value may run on from the end of one
   * row to the start of the next (rows are read as one text, as a screen's rows wrapped at the
   * right margin or a long line cut in pieces are). Returns as many rows: the label stands on the
   * row where the value begins, and the value's characters on the rows after it are removed.
   * `context.before`/`after` are read as the text just before the first row and after the last.
   */
  redactRows(rows: readonly string[], context?: RedactContext): string[] {
    if (this.secrets.length === 0) return [...rows]
    const before = context?.before ?? ''
    const body = rows.join('')
    const edits = this.edits(before + body + (context?.after ?? ''), before.length, before.length + body.length)
    return edits.length === 0 ? [...rows] : applyEdits(rows, edits, before.length)
  }

  /**
   * Splits live text — the next piece of a stream the parser rendered — into what can be shown
   * now (redacted) and a tail that could begin a value (line breaks inside it ignored), to be
   * put before the next piece. See `LiveTextRedactor`.
   */
  splitLive(text: string): { shown: string; held: string } {
    if (this.secrets.length === 0 || text === '') return { shown: text, held: '' }
    const body = text.replaceAll('\n', '')
    const edits = this.edits(body, 0, body.length)
    const held = this.heldTextFrom(body, edits.at(-1)?.to ?? 0)
    if (held === body.length) return { shown: edits.length === 0 ? text : applyEdits(text.split('\n'), edits, 0).join('\n'), held: '' }
    // Where the held tail starts in `text`: walk back from the end over its characters and the line breaks among them.
    let cut = text.length
    for (let left = body.length - held; left > 0; cut--) if (text.charCodeAt(cut - 1) !== 10) left--
    return { shown: this.redactText(text.slice(0, cut)), held: text.slice(cut) }
  }

  /** The values in `joined` that reach into `[start, end)`, cut to it, as replacements. */
  private edits(joined: string, start: number, end: number): Edit[] {
    const edits: Edit[] = []
    for (const match of this.matches(joined)) {
      const from = Math.max(match.from, start)
      const to = Math.min(match.to, end)
      if (from < to) edits.push({ from, to, label: match.secret.labelText })
    }
    return edits
  }

  /** Every value in `text`, leftmost first (the longest where two begin at one place), not overlapping. */
  private matches(text: string): { from: number; to: number; secret: Secret }[] {
    const found: { from: number; to: number; secret: Secret }[] = []
    let position = 0
    for (;;) {
      let best: { at: number; length: number; secret: Secret } | undefined
      for (const secret of this.secrets) {
        const next = this.find(text, secret, position)
        if (next !== undefined && (best === undefined || next.at < best.at)) best = { ...next, secret }
      }
      if (best === undefined) return found
      position = best.at + best.length
      found.push({ from: best.at, to: position, secret: best.secret })
    }
  }

  /** Where `secret` next occurs in `text` from `position` on, and how long it is there. */
  private find(text: string, secret: Secret, position: number): { at: number; length: number } | undefined {
    if (secret.pattern === undefined) {
      const at = text.indexOf(secret.text, position)
      return at < 0 ? undefined : { at, length: secret.text.length }
    }
    secret.pattern.lastIndex = position
    const match = secret.pattern.exec(text)
    return match === null ? undefined : { at: match.index, length: match[0].length }
  }

  /** Where a held text tail starts: the earliest position from `from` on where the rest is a proper prefix of some value. */
  private heldTextFrom(text: string, from: number): number {
    const start = Math.max(from, text.length - this.longestText + 1)
    for (let at = start; at < text.length; at++) {
      // An ASCII character is its own first byte; any other is tried.
      if (text.charCodeAt(at) < 128 && !this.firstBytes.has(text.charCodeAt(at))) continue
      const rest = text.length - at
      for (const secret of this.secrets) {
        if (rest < secret.text.length && secret.text.startsWith(text.slice(at))) return at
      }
    }
    return text.length
  }

  /** The chunk with every complete value replaced, minus a tail that may begin one (held for the next call). */
  push(chunk: Uint8Array): Buffer {
    const input = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    if (this.secrets.length === 0) return input
    const data = this.held.length === 0 ? input : Buffer.concat([this.held, input])
    this.held = Buffer.alloc(0)
    const out: Buffer[] = []
    let position = 0
    for (;;) {
      let best: { at: number; secret: Secret } | undefined
      for (const secret of this.secrets) {
        const at = data.indexOf(secret.value, position)
        if (at >= 0 && (best === undefined || at < best.at)) best = { at, secret }
      }
      if (best === undefined) break
      if (best.at > position) out.push(data.subarray(position, best.at))
      out.push(best.secret.label)
      position = best.at + best.secret.value.length
    }
    const keep = this.heldFrom(data, position)
    if (keep < data.length) this.held = Buffer.from(data.subarray(keep))
    if (keep > position) out.push(data.subarray(position, keep))
    return out.length === 1 ? out[0]! : Buffer.concat(out)
  }

  /** Releases the held tail unchanged (no value followed it in time). */
  flush(): Buffer {
    const held = this.held
    this.held = Buffer.alloc(0)
    return held
  }

  /** Where the held tail starts: the earliest position from which the rest is a proper prefix of some value. */
  private heldFrom(data: Buffer, from: number): number {
    const start = Math.max(from, data.length - this.longest + 1)
    for (let at = start; at < data.length; at++) {
      if (!this.firstBytes.has(data[at]!)) continue
      const rest = data.subarray(at)
      for (const secret of this.secrets) {
        if (rest.length < secret.value.length && secret.value.subarray(0, rest.length).equals(rest)) return at
      }
    }
    return data.length
  }
}

/**
 * The text pass over a live stream (a send's `readOutput`): each piece is redacted, and a tail
 * that could begin a value is held, without a time bound, until a later piece decides it or the
 * stream ends (`push(text, true)`). So a value printed in pieces further apart than the byte
 * pass's hold shows as its label here too.
 */
export class LiveTextRedactor extends LiveRedaction {
  constructor(redactor: SecretRedactor) {
    super([{ redact: (text) => redactor.redactText(text), splitLive: (text) => redactor.splitLive(text) }])
  }
}
