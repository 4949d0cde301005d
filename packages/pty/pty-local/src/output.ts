/**
 * The terminal output normaliser: raw PTY bytes → what a person would read, line by line. One
 * per session, shared by the scrollback, the send buffer and the prompt detector.
 *
 * The grammar is ECMA-48 (5th edition, §5.3–§5.6, §8.3.2) as xterm implements it ("ctlseqs"),
 * in the DEC/xterm parser model. State is carried across `feed()` calls at every byte, so a
 * chunk may end anywhere (inside a UTF-8 sequence, a CSI, between the ESC and `\` of ST).
 */

import { isAscii, isUtf8 } from 'node:buffer'
import { utf8ByteLength, utf8Suffix } from '@conch/session'
import { LineModel, rowsOf } from './line.ts'

/** `bytes` (all below 0x80) as a string, without a UTF-8 decode. */
function latin1(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')
}

/** Options of an `OutputParser`. */
export interface OutputParserOptions {
  /**
   * Bound on the payload of one OSC, DCS, SOS, PM or APC string (and on one CSI or escape
   * sequence), in UTF-8 bytes. Default 65536. Past it the sequence is abandoned: its payload is
   * discarded and the character that would exceed the bound and all after it are ordinary output.
   */
  maxStringBytes?: number
  /**
   * Bound on one line, in UTF-16 code units. Default 16384. A longer line is committed in pieces
   * of at most this length (never splitting a surrogate pair), as if a line feed were there, so
   * output that never ends a line costs time linear in its length.
   */
  maxLineLength?: number
  /** Bound on the committed lines a mark keeps for `textSince`, in UTF-8 bytes. Default 65536. */
  maxMarkBytes?: number
  /**
   * A string (OSC, DCS, SOS, PM, APC) still open after a pause this long, in ms, is abandoned
   * before the next chunk is parsed: a program writes a control string in one go. Default 1000.
   */
  stringTimeoutMs?: number
  /** Monotonic clock in ms, for `stringTimeoutMs`. Default `performance.now`. */
  now?: () => number
  /** Terminal size in cells, for cursor reports of the line model. Default 40 × 160. */
  rows?: number
  cols?: number
}

/**
 * A query a program wrote to the terminal ("ctlseqs"): DSR 5 and 6 (`?6` = DECXCPR), primary and
 * secondary DA, DECRQM, XTVERSION (`CSI > q`), XTWINOPS 18 and OSC 10/11/12. `terminator` is how
 * an OSC query ended (`\x07` or `\x1b\\`); its reply ends the same way.
 */
export type TerminalQuery =
  | { kind: 'status' }
  | { kind: 'cursor'; private: boolean }
  | { kind: 'primary-attributes' }
  | { kind: 'secondary-attributes' }
  | { kind: 'mode'; mode: number; private: boolean }
  | { kind: 'version' }
  | { kind: 'text-area-size' }
  | { kind: 'color'; index: 10 | 11 | 12; terminator: string }

export type QueryListener = (query: TerminalQuery) => void

/** A screen (screen.ts) kept in step with the stream; brought up to date before a query is answered. */
export interface ScreenSink {
  write(text: string): void
  /** 1-based cursor position. */
  cursor(): { row: number; col: number }
}

/**
 * What the parser tells the session about screens:
 * - `needed`: with no screen attached, the alternate screen was entered (DECSET 47, 1047, 1049)
 *   or the cursor addressed (CUP, HVP, VPA, DECSTBM, ED 2 or 3); the listener writes `sequence`
 *   to the screen it attaches, fed from just after it;
 * - `left-alternate`: DECRST 47, 1047 or 1049;
 * - `scrolled-out`: `rows` line feeds since the last cursor addressing: the line model is exact again.
 */
export type ScreenEvent =
  | { kind: 'needed'; reason: 'alternate' | 'addressing'; sequence: string }
  | { kind: 'left-alternate' }
  | { kind: 'scrolled-out' }

export type ScreenListener = (event: ScreenEvent) => void

/** DEC private modes (DECSET/DECRST) tracked for DECRQM, with their power-on state. */
const TRACKED_PRIVATE_MODES = new Map<number, boolean>([
  [1, false], // DECCKM, application cursor keys
  [6, false], // DECOM, origin mode
  [7, true], // DECAWM, autowrap
  [12, false], // cursor blink
  [25, true], // DECTCEM, cursor visible
  [47, false], // alternate screen
  [1000, false], // mouse: button events
  [1002, false], // mouse: button-motion events
  [1003, false], // mouse: any-motion events
  [1004, false], // focus events
  [1005, false], // mouse: UTF-8 encoding
  [1006, false], // mouse: SGR encoding
  [1015, false], // mouse: urxvt encoding
  [1047, false], // alternate screen
  [1048, false], // save cursor
  [1049, false], // alternate screen, saving the cursor
  [2004, false], // bracketed paste
])
/** ANSI modes (SM/RM) tracked for DECRQM: IRM (4) and LNM (20). */
const TRACKED_ANSI_MODES = new Map<number, boolean>([
  [4, false],
  [20, false],
])
const ALTERNATE_MODES = new Set([47, 1047, 1049])
/** Most CSI parameters kept; later ones are parsed and ignored. */
const MAX_CSI_PARAMS = 16

/** Receives each committed line (no terminator) and its 1-based line number in the stream. */
export type LineListener = (text: string, lineNumber: number) => void
/** Receives the payload of an OSC string (between `ESC ]` and its terminator, e.g. `0;title`). */
export type OscListener = (payload: string) => void
/** Told that committed line `lineNumber` is open again (`OutputParser.onRewind`). */
export type RewindListener = (lineNumber: number) => void

/**
 * A position made by `OutputParser.mark()`: 1-based `line`, UTF-16 `column`. Text written left of
 * the column on the mark's line moves the column there, so `textSince` covers all written after.
 */
export interface OutputMark {
  readonly line: number
  readonly column: number
  /** Whether committed lines after the mark were dropped to `maxMarkBytes` (oldest first). */
  readonly truncated: boolean
  /** Stops keeping lines for this mark. `textSince` then still answers while the mark's line is current. */
  release(): void
}

// Parser states (the DEC/xterm model).
const GROUND = 0
const ESCAPE = 1
const ESCAPE_INTERMEDIATE = 2
const CSI = 3
const OSC = 4
const IGNORED_STRING = 5
/** An ESC ended an OSC body that holds a line break; only `\` (completing ST) dispatches it. */
const OSC_ESCAPE = 6
/** An ESC ended a DCS, SOS, PM or APC body that holds a line break; only `\` (completing ST) drops it. */
const STRING_ESCAPE = 7

// CSI flags: anything that makes the sequence one we do not honour.
const CSI_PRIVATE = 1
const CSI_INTERMEDIATE = 2
const CSI_INVALID = 4

const ESC = 0x1b
const BEL = 0x07
const BS = 0x08
const LF = 0x0a
const CR = 0x0d
const CAN = 0x18
const SUB = 0x1a
const DEL = 0x7f

const STATES = 8

// Byte classes (every byte from 0x80 up is K_HIGH, part of a UTF-8 sequence).
const K_C0 = 0 // C0 controls not named below
const K_TAB = 1
const K_LF = 2
const K_CR = 3
const K_BS = 4
const K_BEL = 5
const K_CAN_SUB = 6
const K_ESC = 7
const K_INTERMEDIATE = 8 // 0x20–0x2F
const K_DIGIT = 9 // 0x30–0x39
const K_SEPARATOR = 10 // : ;
const K_PREFIX = 11 // < = > ?
const K_LEFT_BRACKET = 12 // [
const K_RIGHT_BRACKET = 13 // ]
const K_STRING_INTRODUCER = 14 // P X ^ _
const K_BACKSLASH = 15
const K_FINAL = 16 // the rest of 0x40–0x7E
const K_DEL = 17
const K_HIGH = 18 // 0x80–0xFF
const CLASSES = 19

/** The class of each byte. */
const BYTE_CLASS = (() => {
  const table = new Uint8Array(0x100)
  for (let c = 0; c < 0x100; c++) {
    let k = K_HIGH
    if (c < 0x20) k = c === 0x09 ? K_TAB : c === LF ? K_LF : c === CR ? K_CR : c === BS ? K_BS : c === BEL ? K_BEL : c === CAN || c === SUB ? K_CAN_SUB : c === ESC ? K_ESC : K_C0
    else if (c <= 0x2f) k = K_INTERMEDIATE
    else if (c <= 0x39) k = K_DIGIT
    else if (c <= 0x3b) k = K_SEPARATOR
    else if (c <= 0x3f) k = K_PREFIX
    else if (c === 0x5b) k = K_LEFT_BRACKET
    else if (c === 0x5d) k = K_RIGHT_BRACKET
    else if (c === 0x50 || c === 0x58 || c === 0x5e || c === 0x5f) k = K_STRING_INTRODUCER
    else if (c === 0x5c) k = K_BACKSLASH
    else if (c <= 0x7e) k = K_FINAL
    else if (c === DEL) k = K_DEL
    table[c] = k
  }
  return table
})()

// Actions (what the parser does with the character; see `parse`).
const A_PRINT = 1
const A_EXECUTE = 2
const A_IGNORE = 3
const A_ESCAPE = 4
const A_CSI_START = 5
const A_STRING_START = 6
const A_INTERMEDIATE_START = 7
const A_TRANSITION = 8
const A_REPROCESS = 9
const A_INTERMEDIATE = 10
const A_CSI_PARAM = 11
const A_CSI_SEPARATOR = 12
const A_CSI_PREFIX = 13
const A_CSI_INTERMEDIATE = 14
const A_CSI_INVALID = 15
const A_CSI_DISPATCH = 16
const A_STRING_PUT = 17
const A_STRING_END = 18
const A_STRING_TERMINATED = 19
const A_STRING_ABANDONED = 20

/** states × classes → action | next state << 5 (`next` for A_TRANSITION), the DEC/xterm model. */
const TRANSITIONS = (() => {
  const table = new Uint8Array(STATES * CLASSES)
  const set = (state: number, classes: readonly number[], action: number, next = state) => {
    for (const k of classes) table[state * CLASSES + k] = action | (next << 5)
  }
  const all = Array.from({ length: CLASSES }, (_, k) => k)
  const controls = [K_C0, K_LF, K_CR, K_BS, K_BEL]
  const ascii = [K_INTERMEDIATE, K_DIGIT, K_SEPARATOR, K_PREFIX, K_LEFT_BRACKET, K_RIGHT_BRACKET, K_STRING_INTRODUCER, K_BACKSLASH, K_FINAL]

  set(GROUND, all, A_PRINT)
  set(GROUND, controls, A_EXECUTE)
  set(GROUND, [K_CAN_SUB, K_DEL], A_IGNORE)
  set(GROUND, [K_ESC], A_ESCAPE)

  set(ESCAPE, all, A_REPROCESS)
  set(ESCAPE, [...controls, K_TAB], A_EXECUTE)
  set(ESCAPE, [K_ESC, K_DEL], A_IGNORE)
  set(ESCAPE, [K_CAN_SUB], A_TRANSITION, GROUND)
  set(ESCAPE, [K_LEFT_BRACKET], A_CSI_START)
  set(ESCAPE, [K_RIGHT_BRACKET], A_STRING_START, OSC)
  set(ESCAPE, [K_STRING_INTRODUCER], A_STRING_START, IGNORED_STRING)
  set(ESCAPE, [K_INTERMEDIATE], A_INTERMEDIATE_START)
  set(ESCAPE, [K_DIGIT, K_SEPARATOR, K_PREFIX, K_BACKSLASH, K_FINAL], A_TRANSITION, GROUND)

  set(ESCAPE_INTERMEDIATE, all, A_REPROCESS)
  set(ESCAPE_INTERMEDIATE, [...controls, K_TAB], A_EXECUTE)
  set(ESCAPE_INTERMEDIATE, [K_DEL], A_IGNORE)
  set(ESCAPE_INTERMEDIATE, [K_ESC], A_TRANSITION, ESCAPE)
  set(ESCAPE_INTERMEDIATE, [K_CAN_SUB], A_TRANSITION, GROUND)
  set(ESCAPE_INTERMEDIATE, [K_INTERMEDIATE], A_INTERMEDIATE)
  set(ESCAPE_INTERMEDIATE, ascii.filter((k) => k !== K_INTERMEDIATE), A_TRANSITION, GROUND)

  set(CSI, all, A_CSI_INVALID)
  set(CSI, [...controls, K_TAB], A_EXECUTE)
  set(CSI, [K_DEL], A_IGNORE)
  set(CSI, [K_ESC], A_TRANSITION, ESCAPE)
  set(CSI, [K_CAN_SUB], A_TRANSITION, GROUND)
  set(CSI, [K_DIGIT], A_CSI_PARAM)
  set(CSI, [K_SEPARATOR], A_CSI_SEPARATOR)
  set(CSI, [K_PREFIX], A_CSI_PREFIX)
  set(CSI, [K_INTERMEDIATE], A_CSI_INTERMEDIATE)
  set(CSI, [K_LEFT_BRACKET, K_RIGHT_BRACKET, K_STRING_INTRODUCER, K_BACKSLASH, K_FINAL], A_CSI_DISPATCH)

  for (const state of [OSC, IGNORED_STRING]) {
    set(state, all, A_STRING_PUT)
    set(state, [K_BEL, K_ESC, K_CAN_SUB], A_STRING_END)
  }

  for (const state of [OSC_ESCAPE, STRING_ESCAPE]) {
    set(state, all, A_STRING_ABANDONED)
    set(state, [K_BACKSLASH], A_STRING_TERMINATED)
  }
  return table
})()

/** Length of the UTF-8 sequence that `lead` begins (RFC 3629 §3); 1 for anything but a lead byte. */
function sequenceLength(lead: number): number {
  return lead < 0xc2 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : lead < 0xf5 ? 4 : 1
}

/** Whether `byte` may follow `lead` in UTF-8 (WHATWG Encoding §9.1.1: no overlongs, surrogates, > U+10FFFF). */
function validSecond(lead: number, byte: number): boolean {
  if (lead === 0xe0) return byte >= 0xa0 && byte <= 0xbf
  if (lead === 0xed) return byte >= 0x80 && byte <= 0x9f
  if (lead === 0xf0) return byte >= 0x90 && byte <= 0xbf
  if (lead === 0xf4) return byte >= 0x80 && byte <= 0x8f
  return byte >= 0x80 && byte <= 0xbf
}

/** Where a proper prefix of a valid UTF-8 sequence ending `bytes[from, to)` starts, else `to`. */
function incompleteTail(bytes: Uint8Array, from: number, to: number): number {
  let lead = to - 1
  while (lead > from && lead > to - 4 && (bytes[lead]! & 0xc0) === 0x80) lead--
  if (lead < from) return to
  const first = bytes[lead]!
  const have = to - lead
  if (have >= sequenceLength(first) || first < 0xc2) return to
  if (have >= 2 && !validSecond(first, bytes[lead + 1]!)) return to
  return lead
}

class Mark implements OutputMark {
  column: number
  truncated = false
  released = false
  /** Committed lines after the mark (the first one cut at `column`), oldest first from `head`. */
  pieces: string[] = []
  head = 0
  bytes = 0

  constructor(
    readonly owner: OutputParser,
    readonly line: number,
    column: number,
    readonly keepLines: boolean,
    private readonly onRelease: (mark: Mark) => void,
  ) {
    this.column = column
  }

  keep(text: string, maxBytes: number): void {
    this.pieces.push(text)
    this.bytes += utf8ByteLength(text) + 1
    while (this.bytes > maxBytes && this.head < this.pieces.length) {
      this.bytes -= utf8ByteLength(this.pieces[this.head] ?? '') + 1
      this.pieces[this.head++] = ''
      this.truncated = true
    }
    if (this.head > 64 && this.head * 2 > this.pieces.length) {
      this.pieces = this.pieces.slice(this.head)
      this.head = 0
    }
  }

  /** The newest kept line is open again (a rewind): it is kept again when it is committed again. */
  forgetNewest(): void {
    if (this.pieces.length <= this.head) return
    this.bytes -= utf8ByteLength(this.pieces.pop()!) + 1
  }

  release(): void {
    if (this.released) return
    this.released = true
    this.pieces = []
    this.head = 0
    this.onRelease(this)
  }
}

/** Listeners of one kind, copied on change: a call in progress keeps the list it started with. */
class Listeners<L> {
  list: readonly L[] = []

  /** Adds `listener`; returns its disposer. */
  add(listener: L): () => void {
    this.list = [...this.list, listener]
    return () => {
      this.list = this.list.filter((l) => l !== listener)
    }
  }
}

/**
 * Streaming normaliser of terminal output (README, "Output").
 *
 * Removed: CSI, OSC, DCS, SOS, PM and APC sequences, other escape sequences, C0 controls other
 * than LF, CR, BS and TAB, DEL, and C1 controls (U+0080–U+009F, not interpreted). Invalid UTF-8
 * becomes U+FFFD; a sequence split across chunks is decoded whole.
 *
 * The current line (`LineModel`, line.ts) honours LF, CR, BS, EL (ECMA-48 §8.3.41), CHA (§8.3.9),
 * CUF, CUB and ED 0 (§8.3.39, also blanking the lines below that a cursor moved up from:
 * `linesBelow`); CUU and RI reopen lines above (`cursorUp`). What needs a real screen is reported
 * (`onScreen`) and an attached screen kept in step, whose alternate-screen text is not part of the
 * lines. Modes and queries: `privateModes`, `ansiModes`, `onQuery`.
 *
 * An unterminated string is abandoned past `maxStringBytes` or `stringTimeoutMs`, and a body
 * holding a CR or LF counts only when terminated (README, "Unterminated control strings").
 *
 * Listeners run synchronously inside `feed()` at their position in the stream, and must not call
 * `feed()`/`flush()`. A throwing listener does not stop the parse; `feed()` rethrows the first error.
 */
export class OutputParser {
  readonly maxStringBytes: number
  readonly maxLineLength: number
  readonly maxMarkBytes: number
  readonly stringTimeoutMs: number
  private readonly now: () => number
  /** When the previous chunk was fed, ms on `now`. */
  private fedAt = 0

  /** Decodes chunks cut before an incomplete sequence (`stream: true` picks Node's faster converter). */
  private readonly decoder = new TextDecoder('utf-8', { ignoreBOM: true })
  /** One-shot decodes of short byte ranges (invalid UTF-8, a sequence split across chunks, a shown OSC body). */
  private readonly pieceDecoder = new TextDecoder('utf-8', { ignoreBOM: true })
  /** An incomplete UTF-8 sequence at the end of the previous chunk (`carryLength` bytes), parsed once it ends. */
  private readonly carry = new Uint8Array(4)
  private carryLength = 0
  /** The chunk being fed (positions in it say how far an attached screen is written), else undefined. */
  private chunkBytes: Uint8Array | undefined
  private state = GROUND
  /** UTF-8 bytes of the sequence being parsed (after its introducer), against the bound. */
  private sequenceBytes = 0
  /** CSI parameters (-1 = omitted), `csiParamIndex + 1` of them, up to MAX_CSI_PARAMS. */
  private readonly csiParams = new Int32Array(MAX_CSI_PARAMS)
  private csiParamIndex = 0
  private csiFlags = 0
  /** The private prefix (`?`, `>`, `=`, `<`) when it is the first parameter byte, else 0. */
  private csiPrefix = 0
  /** The last intermediate byte (0x20–0x2F), else 0. */
  private csiIntermediate = 0

  readonly privateModes = new Map(TRACKED_PRIVATE_MODES)
  readonly ansiModes = new Map(TRACKED_ANSI_MODES)
  /** The keypad is in application mode: DECKPAM (`ESC =`) seen last, not DECKPNM (`ESC >`); off at power-on. */
  applicationKeypad = false
  /** The program is on the alternate screen. */
  private alternate = false
  /** The alternate screen is in effect and a screen is attached: text goes to it, not to lines. */
  private suspended = false
  private rows: number
  private cols: number
  /** 1-based screen row of the current line, as the line model sees it. */
  private lineRow = 1
  private screen: ScreenSink | undefined
  /** Line feeds on the normal screen since the last cursor-addressing sequence, while a screen is attached. */
  private feedsSinceAddressing = 0
  /** How many bytes of the chunk being fed the attached screen has, and its own streaming decoder. */
  private screenWritten = 0
  private screenDecoder = new TextDecoder('utf-8', { ignoreBOM: true })
  private readonly queryListeners = new Listeners<QueryListener>()
  private readonly screenListeners = new Listeners<ScreenListener>()
  /** The body of the open string (OSC, DCS, SOS, PM, APC), without its controls. */
  private stringPayload = ''
  /** The string's body as written (controls included), kept from its first CR or LF on. */
  private stringRaw: string | undefined

  /** The current line and its cursor. */
  private readonly current = new LineModel()
  private committed = 0

  private readonly lineListeners = new Listeners<LineListener>()
  private readonly rewindListeners = new Listeners<RewindListener>()
  /** The newest committed lines (a cursor moving up reopens them): a power-of-two ring, newest at `recentEnd - 1`. */
  private recent: string[] = []
  private recentMask = 0
  private recentEnd = 0
  private recentCount = 0
  /** Lines below the current one that the cursor moved up from, the nearest last: each line feed reopens the next. */
  private below: string[] = []
  private readonly oscListeners = new Listeners<OscListener>()
  private marks: Mark[] = []
  private listenerError: { error: unknown } | undefined

  constructor(options: OutputParserOptions = {}) {
    this.maxStringBytes = options.maxStringBytes ?? 65536
    this.maxLineLength = options.maxLineLength ?? 16384
    this.maxMarkBytes = options.maxMarkBytes ?? 65536
    this.stringTimeoutMs = options.stringTimeoutMs ?? 1000
    this.now = options.now ?? (() => performance.now())
    this.rows = options.rows ?? 40
    this.cols = options.cols ?? 160
    for (const [key, value] of [
      ['maxStringBytes', this.maxStringBytes],
      ['maxLineLength', this.maxLineLength],
      ['maxMarkBytes', this.maxMarkBytes],
      ['stringTimeoutMs', this.stringTimeoutMs],
      ['rows', this.rows],
      ['cols', this.cols],
    ] as const) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(`OutputParser option ${key} must be a positive safe integer, got ${value}`)
      }
    }
    this.current.cols = this.cols
    this.sizeRecent()
  }

  /** A ring for the newest lines that holds at least `rows`; the lines kept so far are kept (the newest, as many as fit). */
  private sizeRecent(): void {
    let capacity = 1
    while (capacity < this.rows) capacity *= 2
    const kept = Math.min(this.recentCount, capacity)
    const ring = new Array<string>(capacity).fill('')
    for (let k = 0; k < kept; k++) ring[(kept - 1 - k) & (capacity - 1)] = this.recent[(this.recentEnd - 1 - k) & this.recentMask]!
    this.recent = ring
    this.recentMask = capacity - 1
    this.recentEnd = kept
    this.recentCount = kept
  }

  /** The current (uncommitted) line as it would be seen now; `''` right after a line feed. */
  get partial(): string {
    return this.current.text
  }

  /** The lines below the current one that a cursor moved up from (CUU, RI), top to bottom, trailing blanks left out. */
  linesBelow(): string[] {
    const below = this.below
    let bottom = 0
    while (bottom < below.length && below[bottom]!.trimEnd() === '') bottom++
    return below.slice(bottom).reverse()
  }

  /** Rows from the cursor's row down to the last row of `linesBelow()` (0 without any), wraps at `cols` counted. */
  rowsBelowCursor(): number {
    const lines = this.linesBelow()
    if (lines.length === 0) return 0
    const cols = this.cols
    let rows = Math.max(0, rowsOf(this.current.text, cols) - 1 - this.current.position().row)
    for (const line of lines) rows += rowsOf(line, cols)
    return rows
  }

  /** Changes when text on the current line was altered or a line committed, not on appending. */
  get partialRevision(): number {
    return this.current.revision
  }

  /** Number of lines committed so far; the current line is number `lineCount + 1`. */
  get lineCount(): number {
    return this.committed
  }

  /** Registers a listener for committed lines. Returns a disposer. */
  onLine(listener: LineListener): () => void {
    return this.lineListeners.add(listener)
  }

  /** Registers a listener for rewinds: a cursor moved up (CUU, RI) into a committed line. Returns a disposer. */
  onRewind(listener: RewindListener): () => void {
    return this.rewindListeners.add(listener)
  }

  /** Registers a listener for OSC payloads, called at their position in the stream. Returns a disposer. */
  onOsc(listener: OscListener): () => void {
    return this.oscListeners.add(listener)
  }

  /** Registers a listener for terminal queries, called at their position in the stream. Returns a disposer. */
  onQuery(listener: QueryListener): () => void {
    return this.queryListeners.add(listener)
  }

  /** Registers a listener for screen events (see `ScreenEvent`). Returns a disposer. */
  onScreen(listener: ScreenListener): () => void {
    return this.screenListeners.add(listener)
  }

  /** Whether the program is on the alternate screen (DECSET 47, 1047 or 1049 in effect). */
  get onAlternateScreen(): boolean {
    return this.alternate
  }

  /** The attached screen, if any. */
  get attachedScreen(): ScreenSink | undefined {
    return this.screen
  }

  /** Keeps `screen` in step from here on (inside a `needed` event, after writing its sequence). One at a time. */
  attachScreen(screen: ScreenSink): void {
    this.screen = screen
    this.screenDecoder = new TextDecoder('utf-8', { ignoreBOM: true })
    this.feedsSinceAddressing = 0
    this.suspended = this.alternate
  }

  /** Stops feeding the attached screen; the line model alone describes the terminal again. */
  detachScreen(): void {
    this.screen = undefined
    this.suspended = false
  }

  /** The terminal size the cursor reports of the line model assume. */
  resize(rows: number, cols: number): void {
    this.rows = rows
    this.cols = cols
    this.current.cols = cols
    this.lineRow = Math.min(this.lineRow, rows)
    if (this.recentMask + 1 < rows) this.sizeRecent()
  }

  /** The 1-based cursor position: the attached screen's, else the line model's. */
  cursorPosition(): { row: number; col: number } {
    if (this.screen !== undefined) return this.screen.cursor()
    const { row, col } = this.current.position()
    return { row: Math.min(this.rows, this.lineRow + row), col: Math.min(col, this.cols - 1) + 1 }
  }

  /**
   * Marks the current position; the lines committed after it are kept, up to `maxMarkBytes`,
   * until `mark.release()`. With `keepLines: false` the mark only tracks its column and is
   * released when its line is committed.
   */
  mark(options: { keepLines?: boolean } = {}): OutputMark {
    const mark = new Mark(this, this.committed + 1, this.current.cursor, options.keepLines ?? true, (m) => {
      this.marks = this.marks.filter((x) => x !== m)
    })
    this.marks.push(mark)
    return mark
  }

  /**
   * The printable text written after `mark`, lines joined by `\n`, ending with the partial line.
   * @throws RangeError for a mark of another parser, or a released mark whose line was committed.
   */
  textSince(mark: OutputMark): string {
    if (!(mark instanceof Mark) || mark.owner !== this) {
      throw new RangeError('textSince: the mark was not made by this parser')
    }
    const line = this.current.text
    if (mark.line === this.committed + 1) return line.slice(Math.min(mark.column, line.length))
    if (mark.released) throw new RangeError(`textSince: mark on line ${mark.line} was released and its line is committed`)
    const kept = mark.pieces.slice(mark.head)
    kept.push(line)
    return kept.join('\n')
  }

  /**
   * Parses one chunk of raw terminal output (node-pty with `encoding: null` delivers Buffers).
   * @throws the first error a listener threw while this chunk was parsed (after parsing all of it).
   */
  feed(input: Uint8Array): void {
    // One kind of array for every parse (a Buffer is a subclass): element reads stay monomorphic.
    const chunk = input.constructor === Uint8Array ? input : new Uint8Array(input.buffer, input.byteOffset, input.byteLength)
    const now = this.now()
    const state = this.state
    if (state >= OSC && now - this.fedAt >= this.stringTimeoutMs) {
      // A string left open across a pause is abandoned (see `stringTimeoutMs`).
      if (this.stringRaw !== undefined) this.abandonString()
      this.state = state === OSC_ESCAPE || state === STRING_ESCAPE ? ESCAPE : GROUND
      this.stringPayload = ''
    }
    this.fedAt = now
    const end = chunk.length
    // A sequence the previous chunk ended inside is completed (or ended) by this chunk's first bytes.
    const from = this.carryLength > 0 ? this.continueCarry(chunk) : 0
    // An incomplete sequence at the end waits for the next chunk; the rest is decoded whole.
    const to = end > from && chunk[end - 1]! >= 0x80 ? incompleteTail(chunk, from, end) : end
    if (to < end) {
      this.carry.set(chunk.subarray(to, end))
      this.carryLength = end - to
    }
    this.chunkBytes = chunk
    this.screenWritten = 0
    if (to > from) {
      const core = from === 0 && to === end ? chunk : chunk.subarray(from, to)
      const ascii = isAscii(core)
      if (!ascii && !isUtf8(core)) this.parse(chunk, from, to, undefined)
      else this.parse(chunk, from, to, ascii ? latin1(core) : this.decoder.decode(core, { stream: true }))
    }
    if (this.screen !== undefined && this.screenWritten < end) {
      this.screen.write(this.screenDecoder.decode(this.screenWritten === 0 ? chunk : chunk.subarray(this.screenWritten), { stream: true }))
    }
    this.chunkBytes = undefined
    this.rethrow()
  }

  /**
   * Ends the byte stream: an incomplete UTF-8 sequence becomes U+FFFD, an open sequence or string
   * is abandoned. The current line stays `partial`. Feeding may continue afterwards.
   */
  flush(): void {
    if (this.carryLength > 0) {
      const rest = this.carry.slice(0, this.carryLength)
      this.carryLength = 0
      this.parseBytes(rest)
    }
    // What the screen's decoder held is dropped with it (the screen never shows a half character).
    this.screenDecoder = new TextDecoder('utf-8', { ignoreBOM: true })
    this.state = GROUND
    this.stringPayload = ''
    this.stringRaw = undefined
    this.rethrow()
  }

  /**
   * Completes the carried sequence from the start of `chunk` and parses it once complete or
   * broken (then U+FFFD). Returns how many bytes of `chunk` it took.
   */
  private continueCarry(chunk: Uint8Array): number {
    const carry = this.carry
    const need = sequenceLength(carry[0]!)
    let used = 0
    while (this.carryLength < need && used < chunk.length) {
      const byte = chunk[used]!
      if ((byte & 0xc0) !== 0x80 || (this.carryLength === 1 && !validSecond(carry[0]!, byte))) break
      carry[this.carryLength++] = byte
      used++
    }
    if (this.carryLength < need && used === chunk.length) return used
    const sequence = carry.slice(0, this.carryLength)
    this.carryLength = 0
    this.parseBytes(sequence)
    return used
  }

  /** Parses bytes that are not the chunk being fed (a carried sequence, a shown OSC body), decoded in one go. */
  private parseBytes(bytes: Uint8Array): void {
    const chunk = this.chunkBytes
    this.chunkBytes = undefined
    const n = bytes.length
    if (isAscii(bytes)) this.parse(bytes, 0, n, latin1(bytes))
    else if (isUtf8(bytes)) this.parse(bytes, 0, n, this.pieceDecoder.decode(bytes))
    else this.parse(bytes, 0, n, undefined)
    this.chunkBytes = chunk
  }

  private rethrow(): void {
    const failure = this.listenerError
    if (failure === undefined) return
    this.listenerError = undefined
    throw failure.error
  }

  /** The text of `bytes[from, to)` decoded on its own (for input that is not valid UTF-8 as a whole). */
  private decodePiece(bytes: Uint8Array, from: number, to: number): string {
    return this.pieceDecoder.decode(bytes.subarray(from, to))
  }

  /**
   * The state machine over `bytes[from, to)`, which ends on a UTF-8 sequence boundary. `text` is
   * those bytes decoded when valid UTF-8 (else undefined: each piece is decoded on its own); the
   * UTF-16 index of byte `i` is `i - from - delta`, `delta` counting continuation bytes up and
   * 4-byte leads down. Fast paths for text runs, `ESC [` CSIs and string payloads give the same
   * result as the table byte by byte.
   */
  private parse(bytes: Uint8Array, start: number, end: number, text: string | undefined): void {
    // `| 0`: small integers for V8, or the loop costs half as much again.
    const from = start | 0
    const to = end | 0
    const max = this.maxStringBytes
    let state = this.state
    let i = from
    let delta = 0
    while (i < to) {
      let c = bytes[i]!
      if (state === CSI) {
        // An over-long CSI is abandoned; this byte (a whole character) is parsed again as output.
        if (this.sequenceBytes + (c >= 0xc0 ? sequenceLength(c) : 1) > max) {
          state = GROUND
          continue
        }
        this.sequenceBytes++
      }
      const entry = TRANSITIONS[state * CLASSES + BYTE_CLASS[c]!]!
      const next = entry >> 5
      switch (entry & 31) {
        case A_PRINT:
        case A_ESCAPE: {
          // Runs of text, CR LF and whole CSI sequences in one loop; anything else goes to the table.
          const current = this.current
          for (;;) {
            if (c === ESC) {
              if (i + 1 >= to || bytes[i + 1]! !== 0x5b) {
                i++
                state = ESCAPE
                break
              }
              // A whole CSI of prefix, digits and separators is parsed here; any other goes
              // through the table from the `[`, which parses it the same way.
              let j = i + 2
              let d = j < to ? bytes[j]! : -1
              let prefix = 0
              if (d >= 0x3c && d <= 0x3f) {
                prefix = d
                d = ++j < to ? bytes[j]! : -1
              }
              const params = this.csiParams
              let param = -1
              let index = 0
              while (d >= 0x30 && d <= 0x3b) {
                if (d <= 0x39) {
                  param = param < 0 ? d - 0x30 : param * 10 + (d - 0x30)
                  if (param > 0xffff) param = 0xffff
                } else {
                  if (index < MAX_CSI_PARAMS) params[index] = param
                  index++
                  param = -1
                }
                d = ++j < to ? bytes[j]! : -1
              }
              if (d < 0x40 || d > 0x7e || j - i - 1 > max) {
                i += 2
                state = CSI
                this.startCsi()
                break
              }
              i = j + 1
              // SGR (colours, attributes) is most of them and means nothing to the line model.
              if (d !== 0x6d || prefix !== 0) {
                if (index < MAX_CSI_PARAMS) params[index] = param
                this.csiParamIndex = index
                this.csiPrefix = prefix
                this.csiIntermediate = 0
                this.csiFlags = prefix === 0 ? 0 : CSI_PRIVATE
                this.state = GROUND
                if (prefix === 0) this.dispatchCsi(d, i)
                else this.dispatchMarkedCsi(d, i)
              }
            } else {
              // Printable text (TAB and UTF-8 included) up to a control or a C1 control (dropped).
              const start = i
              const startDelta = delta
              let c1 = false
              for (; i < to; i++) {
                c = bytes[i]!
                if (c >= 0x20) {
                  if (c < DEL) continue
                  if (c === DEL) break
                  if (c < 0xc0) delta++
                  else if (c >= 0xf0) delta--
                  else if (c === 0xc2 && i + 1 < to && bytes[i + 1]! >= 0x80 && bytes[i + 1]! <= 0x9f) {
                    c1 = true
                    break
                  }
                  continue
                }
                if (c !== 0x09) break
              }
              // CR LF, the commonest line end, at once (`newline`).
              const lineEnd = c === CR && i + 1 < to && bytes[i + 1]! === LF
              if (i > start && !this.suspended) {
                const piece = text === undefined ? this.decodePiece(bytes, start, i) : text.slice((start - from - startDelta) | 0, (i - from - delta) | 0)
                // In valid UTF-8 only non-ASCII bytes move `delta`.
                const ascii = delta === startDelta && text !== undefined
                if (lineEnd && current.cursor === 0 && current.text.length === 0 && piece.length <= this.maxLineLength && this.marks.length === 0 && this.screen === undefined && this.below.length === 0) {
                  // A whole line on an empty one: committed without touching the line model.
                  current.revision++
                  this.emit(piece, rowsOf(piece, this.cols, ascii))
                } else {
                  this.print(piece, ascii)
                  if (lineEnd) this.newline()
                }
              } else if (lineEnd) {
                this.newline()
              }
              if (lineEnd) i += 2
              else if (c1) {
                // The C1 control is dropped (its continuation byte counts one code unit less).
                i += 2
                delta++
              }
            }
            if (i >= to) break
            c = bytes[i]!
            if (c === ESC) continue
            if (c === CR && i + 1 < to && bytes[i + 1]! === LF) {
              // An empty line, or the end of one whose last characters were an escape sequence.
              i += 2
              this.newline()
              if (i >= to) break
              c = bytes[i]!
              if (c === ESC) continue
            }
            if (!(c >= 0x20 ? c !== DEL : c === 0x09)) break
          }
          break
        }
        case A_EXECUTE:
          i++
          this.execute(c)
          break
        case A_IGNORE:
          i++
          break
        case A_CSI_START:
          i++
          state = CSI
          this.startCsi()
          break
        case A_STRING_START:
          // OSC, or DCS, SOS, PM, APC (the table's next state).
          i++
          state = next
          this.stringPayload = ''
          this.sequenceBytes = 0
          break
        case A_INTERMEDIATE_START:
          i++
          state = ESCAPE_INTERMEDIATE
          this.sequenceBytes = 1
          break
        case A_TRANSITION:
          // A complete escape (dropped), or CAN/SUB cancelling a sequence. DECKPAM / DECKPNM:
          if (state === ESCAPE && (c === 0x3d || c === 0x3e)) this.applicationKeypad = c === 0x3d
          // RI, reverse index: one row up.
          else if (state === ESCAPE && c === 0x4d) this.cursorUp(1)
          // RIS, full reset (`reset`): clears the screen, as cursor addressing does.
          else if (state === ESCAPE && c === 0x63) this.addressedBy('\x1bc', i + 1)
          i++
          state = next
          break
        case A_REPROCESS:
          // A byte that cannot continue the sequence: abandon it, parse the byte again.
          state = GROUND
          break
        case A_INTERMEDIATE:
          if (++this.sequenceBytes > max) state = GROUND
          else i++
          break
        case A_CSI_PARAM: {
          i++
          const index = this.csiParamIndex
          if (index < MAX_CSI_PARAMS) {
            const param = this.csiParams[index]!
            this.csiParams[index] = Math.min((param < 0 ? 0 : param) * 10 + (c - 0x30), 0xffff)
          }
          if (this.csiFlags & CSI_INTERMEDIATE) this.csiFlags |= CSI_INVALID
          break
        }
        case A_CSI_SEPARATOR:
          i++
          if (++this.csiParamIndex < MAX_CSI_PARAMS) this.csiParams[this.csiParamIndex] = -1
          break
        case A_CSI_PREFIX:
          i++
          if (this.sequenceBytes === 1) this.csiPrefix = c
          else this.csiFlags |= CSI_INVALID
          this.csiFlags |= CSI_PRIVATE
          break
        case A_CSI_INTERMEDIATE:
          i++
          this.csiFlags |= CSI_INTERMEDIATE
          this.csiIntermediate = c
          break
        case A_CSI_INVALID:
          // Non-ASCII inside a CSI: the sequence is malformed; ignore it up to its final byte.
          i++
          if (c < 0xc0) delta++
          else if (c >= 0xf0) delta--
          this.csiFlags |= CSI_INVALID
          break
        case A_CSI_DISPATCH:
          i++
          state = GROUND
          this.state = GROUND
          if (this.csiFlags === 0) this.dispatchCsi(c, i)
          else if ((this.csiFlags & CSI_INVALID) === 0) this.dispatchMarkedCsi(c, i)
          break
        case A_STRING_PUT: {
          // A DCS, SOS, PM or APC body is only ever shown: from its first line break it is kept as written.
          const osc = state === OSC
          let start = i
          let startDelta = delta
          let count = this.sequenceBytes
          let overflow = false
          for (; i < to; i++) {
            c = bytes[i]!
            if (c >= 0x20) {
              // A character counts whole against the bound: it never ends split.
              if (count + (c >= 0xc0 ? sequenceLength(c) : 1) > max) {
                overflow = true
                break
              }
              count++
              if (c >= 0x80) {
                if (c < 0xc0) delta++
                else if (c >= 0xf0) delta--
              }
              continue
            }
            if (c === BEL || c === ESC || c === CAN || c === SUB) break
            if (!osc && this.stringRaw !== undefined) {
              if (++count > max) {
                overflow = true
                break
              }
              continue
            }
            if (i > start) this.collectString(text === undefined ? this.decodePiece(bytes, start, i) : text.slice((start - from - startDelta) | 0, (i - from - delta) | 0), osc)
            // From the first line break on, the raw body is kept too, in case it must be shown.
            if (this.stringRaw === undefined && (c === LF || c === CR)) this.stringRaw = this.stringPayload
            if (this.stringRaw !== undefined) {
              if (++count > max) {
                overflow = true
                start = i
                startDelta = delta
                break
              }
              this.stringRaw += String.fromCharCode(c)
            }
            // Other C0 controls inside a string are not part of the payload.
            start = i + 1
            startDelta = delta
          }
          this.sequenceBytes = count
          if (i > start) this.collectString(text === undefined ? this.decodePiece(bytes, start, i) : text.slice((start - from - startDelta) | 0, (i - from - delta) | 0), osc)
          if (overflow) {
            // Abandon the string; the character at `i` is parsed again as ordinary output.
            state = GROUND
            this.stringPayload = ''
            this.stringRaw = undefined
          }
          break
        }
        case A_STRING_END: {
          // BEL, ESC, CAN or SUB inside a string.
          i++
          const collect = state === OSC
          // BEL terminates only OSC (an xterm convention); inside DCS/SOS/PM/APC it is ignored.
          if (c === BEL && !collect) break
          if (this.stringRaw !== undefined && c !== BEL) {
            // A body with a line break counts only when properly terminated: an ESC must be ST.
            if (c === ESC) state = collect ? OSC_ESCAPE : STRING_ESCAPE
            else {
              this.state = state
              this.abandonString()
              state = this.state
            }
            break
          }
          const payload = this.stringPayload
          this.stringPayload = ''
          this.stringRaw = undefined
          state = c === ESC ? ESCAPE : GROUND
          // BEL or ESC (the start of ST) ends the string; CAN and SUB cancel it.
          if (collect && c !== CAN && c !== SUB) {
            this.state = state
            this.dispatchOsc(payload, c === BEL ? '\x07' : '\x1b\\', i)
          }
          break
        }
        case A_STRING_TERMINATED: {
          // `\` completes ST after a body with a line break: an OSC is dispatched, others dropped.
          i++
          const payload = this.stringPayload
          this.stringPayload = ''
          this.stringRaw = undefined
          const osc = state === OSC_ESCAPE
          state = GROUND
          this.state = GROUND
          if (osc) this.dispatchOsc(payload, '\x1b\\', i)
          break
        }
        case A_STRING_ABANDONED:
          // Anything else after that ESC: the body is shown and the ESC goes on with this byte.
          this.state = state
          this.abandonString()
          state = ESCAPE
          break
        default:
          throw new Error(`unreachable parser action ${entry & 31} in state ${state}`)
      }
    }
    this.state = state
  }

  private startCsi(): void {
    this.csiParams[0] = -1
    this.csiParamIndex = 0
    this.csiFlags = 0
    this.csiPrefix = 0
    this.csiIntermediate = 0
    this.sequenceBytes = 0
  }

  /** Adds `text` to the open string's body: to its payload (an OSC's, or any body before a line break) and raw body. */
  private collectString(text: string, osc: boolean): void {
    if (osc || this.stringRaw === undefined) this.stringPayload += text
    if (this.stringRaw !== undefined) this.stringRaw += text
  }

  /** Ends a string whose body holds a line break without dispatching it: the body is parsed as output. */
  private abandonString(): void {
    const raw = this.stringRaw ?? ''
    this.stringPayload = ''
    this.stringRaw = undefined
    this.state = GROUND
    // The raw body holds no ESC, BEL, CAN or SUB (each of them ends the body), so it ends in GROUND.
    if (raw !== '') this.parseBytes(new TextEncoder().encode(raw))
  }

  /** CR LF: the CR only picks the row a line feed leaves on a line that wraps (a shorter one has one row). */
  private newline(): void {
    if (this.current.text.length * 2 > this.cols && this.current.rows() > 1) this.execute(CR)
    this.execute(LF)
  }

  /** C0 controls in the ground state or inside a sequence (ECMA-48 §8.3). */
  private execute(c: number): void {
    if (this.suspended) return
    if (c === LF) {
      // Down a row: within the current line when it wraps on below the cursor, else onto the next line.
      const current = this.current
      if (current.rowsBelow() > 0) this.emit(current.splitBelowCursor())
      else this.commit()
      if (this.screen !== undefined && ++this.feedsSinceAddressing >= this.rows) {
        // Everything visible was written as a stream: the cursor is on the bottom row.
        this.lineRow = this.rows
        this.call(this.screenListeners, { kind: 'scrolled-out' })
      }
    }
    else if (c === CR) this.current.carriageReturn()
    else if (c === BS) this.current.backspace()
    // Every other C0 control (BEL, VT, FF, SO, SI, …) and C1 control is dropped.
  }

  /** A CSI without private prefix or intermediates, ending at index `end` of the chunk. */
  private dispatchCsi(final: number, end: number): void {
    const param = this.csiParams[0]!
    switch (final) {
      case 0x4b: // K — EL, erase in line
        if (!this.suspended) this.current.erase(param < 0 ? 0 : param)
        break
      case 0x50: // P — DCH, delete characters
        if (!this.suspended) this.current.deleteCells(Math.max(param, 1))
        break
      case 0x40: // @ — ICH, insert blank characters
        if (!this.suspended) this.current.insertCells(Math.max(param, 1))
        break
      case 0x58: // X — ECH, erase characters
        if (!this.suspended) this.current.eraseCells(Math.max(param, 1))
        break
      case 0x41: // A — CUU, cursor up
        this.cursorUp(Math.max(param, 1))
        break
      case 0x42: // B — CUD, cursor down: over lines a cursor moved up from
        this.cursorDown(Math.max(param, 1))
        break
      case 0x43: // C — CUF, cursor forward
      case 0x44: // D — CUB, cursor backward
        if (!this.suspended && this.screen === undefined) {
          const { col } = this.current.position()
          this.current.moveInRow(final === 0x43 ? col + Math.max(param, 1) : col - Math.max(param, 1))
        }
        break
      case 0x47: // G — CHA, cursor horizontal absolute (1-based)
        if (!this.suspended) this.current.moveInRow(Math.max(param, 1) - 1)
        break
      case 0x4a: // J — ED; "erase below" erases the rest of the line and the lines below it, 2 and 3 clear the screen
        if (param >= 2) this.addressedBy(this.csiText(final), end)
        else if (param <= 0 && !this.suspended) {
          this.current.eraseToEnd()
          this.below.fill('')
        }
        break
      case 0x48: // H — CUP
      case 0x66: // f — HVP
      case 0x64: // d — VPA
      case 0x72: // r — DECSTBM
        this.addressedBy(this.csiText(final), end)
        break
      case 0x6e: // n — DSR
        if (param === 5) this.query({ kind: 'status' }, end)
        else if (param === 6) this.query({ kind: 'cursor', private: false }, end)
        break
      case 0x63: // c — primary DA
        if (param <= 0) this.query({ kind: 'primary-attributes' }, end)
        break
      case 0x74: // t — XTWINOPS; 18 reports the text area size in characters
        if (param === 18) this.query({ kind: 'text-area-size' }, end)
        break
      case 0x68: // h — SM
      case 0x6c: // l — RM
        this.setModes(this.ansiModes, final === 0x68)
        break
      default:
        break
    }
  }

  /** A CSI with a private prefix or an intermediate byte (DECSET, DECRQM, DA2, XTVERSION, DECXCPR). */
  private dispatchMarkedCsi(final: number, end: number): void {
    const prefix = this.csiPrefix
    const intermediate = this.csiIntermediate
    const param = this.csiParams[0]!
    if (prefix === 0x3f && intermediate === 0 && (final === 0x68 || final === 0x6c)) {
      this.setModes(this.privateModes, final === 0x68, end)
    } else if (final === 0x70 && intermediate === 0x24 && (prefix === 0 || prefix === 0x3f) && this.csiParamIndex === 0) {
      this.query({ kind: 'mode', mode: param < 0 ? 0 : param, private: prefix === 0x3f }, end)
    } else if (intermediate === 0 && prefix === 0x3e && final === 0x63 && param <= 0) {
      this.query({ kind: 'secondary-attributes' }, end)
    } else if (intermediate === 0 && prefix === 0x3e && final === 0x71 && param <= 0) {
      this.query({ kind: 'version' }, end)
    } else if (intermediate === 0 && prefix === 0x3f && final === 0x6e && param === 6) {
      this.query({ kind: 'cursor', private: true }, end)
    }
  }

  /** The current CSI as text, for a screen that starts with it. */
  private csiText(final: number): string {
    let params = ''
    const count = Math.min(this.csiParamIndex + 1, MAX_CSI_PARAMS)
    for (let k = 0; k < count; k++) {
      const value = this.csiParams[k]!
      params += `${k > 0 ? ';' : ''}${value < 0 ? '' : value}`
    }
    const prefix = this.csiPrefix === 0 ? '' : String.fromCharCode(this.csiPrefix)
    const intermediate = this.csiIntermediate === 0 ? '' : String.fromCharCode(this.csiIntermediate)
    return `\x1b[${prefix}${params}${intermediate}${String.fromCharCode(final)}`
  }

  /** SM/RM or DECSET/DECRST with every parameter; the alternate-screen modes switch screens. */
  private setModes(modes: Map<number, boolean>, on: boolean, end = 0): void {
    const count = Math.min(this.csiParamIndex + 1, MAX_CSI_PARAMS)
    for (let k = 0; k < count; k++) {
      const mode = this.csiParams[k]!
      if (modes.has(mode)) modes.set(mode, on)
      if (modes !== this.privateModes || !ALTERNATE_MODES.has(mode)) continue
      if (on && !this.alternate) {
        this.alternate = true
        this.feedsSinceAddressing = 0
        if (this.screen === undefined) this.needScreen('alternate', `\x1b[?${mode}h`, end)
        this.suspended = this.screen !== undefined
      } else if (!on && this.alternate) {
        this.alternate = false
        this.suspended = false
        // The screen restores the normal screen's cursor: the line model goes on from its row.
        this.syncScreen(end)
        if (this.screen !== undefined) this.lineRow = this.screen.cursor().row
        this.call(this.screenListeners, { kind: 'left-alternate' })
      }
    }
  }

  /** A cursor-addressing sequence: the terminal needs a screen from here on. */
  private addressedBy(sequence: string, end: number): void {
    this.feedsSinceAddressing = 0
    if (this.screen === undefined) this.needScreen('addressing', sequence, end)
  }

  /** Calls every listener of `listeners` with `args`; the first error is kept for `feed()` to rethrow. */
  private call<A extends unknown[]>(listeners: Listeners<(...args: A) => void>, ...args: A): void {
    for (const listener of listeners.list) {
      try {
        listener(...args)
      } catch (error) {
        this.listenerError ??= { error }
      }
    }
  }

  private needScreen(reason: 'alternate' | 'addressing', sequence: string, end: number): void {
    this.call(this.screenListeners, { kind: 'needed', reason, sequence })
    // The listener wrote the sequence itself; the screen is fed from just after it.
    if (this.screen !== undefined) this.screenWritten = end
  }

  /** Brings the attached screen up to index `end` of the chunk and hands `query` to the listeners. */
  private query(query: TerminalQuery, end: number): void {
    if (this.queryListeners.list.length === 0) return
    this.syncScreen(end)
    this.call(this.queryListeners, query)
  }

  private syncScreen(end: number): void {
    const screen = this.screen
    const chunk = this.chunkBytes
    if (screen === undefined || chunk === undefined || end <= this.screenWritten) return
    screen.write(this.screenDecoder.decode(chunk.subarray(this.screenWritten, end), { stream: true }))
    this.screenWritten = end
  }

  private dispatchOsc(payload: string, terminator: string, end: number): void {
    // OSC 10/11/12 with `?`: a colour query (foreground, background, cursor).
    if (payload.length === 4 && payload.charCodeAt(0) === 0x31 && payload.charCodeAt(2) === 0x3b && payload.charCodeAt(3) === 0x3f) {
      const index = payload.charCodeAt(1) - 0x30 + 10
      if (index === 10 || index === 11 || index === 12) this.query({ kind: 'color', index, terminator }, end)
    }
    // Listeners read the cursor where the OSC stands (a prompt marker on a screen).
    if (this.oscListeners.list.length > 0) this.syncScreen(end)
    this.call(this.oscListeners, payload)
  }

  private print(text: string, ascii: boolean): void {
    const current = this.current
    if (this.marks.length > 0) {
      // Text written left of a mark on this line was written after it: the mark's text starts there.
      const cursor = current.cursor
      for (const mark of this.marks) {
        if (mark.line === this.committed + 1 && mark.column > cursor) {
          mark.column = cursor
          current.revision++
        }
      }
    }
    current.print(text, ascii)
    // A line past the cap is committed in pieces, as if a line feed had been written there.
    while (current.text.length > this.maxLineLength) this.emit(current.splitAt(this.maxLineLength))
  }

  private commit(): void {
    const text = this.current.text
    const rows = this.current.rows()
    this.current.clear()
    this.emit(text, rows)
    // The line below was on the screen already: the cursor is on it now.
    if (this.below.length > 0) this.current.reopen(this.below.pop()!)
  }

  /**
   * CUU and RI without a screen: up `count` rows, within the current line's wraps, then into the
   * committed lines still on the screen, each reopened (`onRewind`), keeping the column. A redraw
   * (bash's multi-line paste, prompt_toolkit, JLine) then rewrites those lines, not a second copy.
   */
  private cursorUp(count: number): void {
    if (this.suspended || this.screen !== undefined) return
    const current = this.current
    const cols = this.cols
    const position = current.position()
    const column = Math.min(position.col, cols - 1)
    let rows = count
    let row = position.row
    while (rows > row && this.recentCount > 0 && this.lineRow > 1) {
      rows -= row + 1
      this.below.push(current.text)
      this.recentCount--
      const text = this.recent[--this.recentEnd & this.recentMask]!
      current.reopen(text)
      const lineNumber = this.committed--
      const lineRows = rowsOf(text, cols)
      this.lineRow = Math.max(1, this.lineRow - lineRows)
      row = lineRows - 1
      for (const mark of this.marks) if (mark.keepLines && mark.line <= lineNumber) mark.forgetNewest()
      this.call(this.rewindListeners, lineNumber)
    }
    current.moveToColumn((row - Math.min(rows, row)) * cols + column)
  }

  /** CUD: down over the lines a cursor moved up from (a terminal moves no further without them either here). */
  private cursorDown(count: number): void {
    if (this.suspended || this.screen !== undefined) return
    for (let n = 0; n < count && this.below.length > 0; n++) {
      const column = Math.min(this.current.position().col, this.cols - 1)
      this.commit()
      this.current.moveToColumn(column)
    }
  }

  /** Keeps `text` among the newest committed lines (the ring holds at least `rows`). */
  private remember(text: string): void {
    this.recent[this.recentEnd++ & this.recentMask] = text
    if (this.recentCount <= this.recentMask) this.recentCount++
  }

  /** Numbers `text` as the next committed line and hands it to the marks and listeners. */
  private emit(text: string, rows = rowsOf(text, this.cols)): void {
    const lineNumber = ++this.committed
    this.remember(text)
    // The next line starts below this one and its wraps at the terminal width, at most at the bottom row.
    const next = this.lineRow + rows
    this.lineRow = next < this.rows ? next : this.rows
    if (this.marks.length > 0) {
      for (const mark of this.marks) {
        if (mark.keepLines) mark.keep(mark.line === lineNumber ? text.slice(Math.min(mark.column, text.length)) : text, this.maxMarkBytes)
      }
      for (const mark of this.marks) if (!mark.keepLines) mark.release()
    }
    const listeners = this.lineListeners.list
    for (let k = 0; k < listeners.length; k++) {
      try {
        listeners[k]!(text, lineNumber)
      } catch (error) {
        this.listenerError ??= { error }
      }
    }
  }
}
