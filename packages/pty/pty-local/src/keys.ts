/**
 * Named keys: what a key press writes for the terminal's current modes, with xterm's encodings
 * and defaults ("ctlseqs": "PC-Style Function Keys", the cursor-key and keypad tables; README,
 * `keys`). Names match case-blind except a single character; `C-`, `M-`, `S-` combine.
 */
import { PtyError, type KeyEntry } from '@conch/pty'
import { distance as editDistance } from 'fastest-levenshtein'
import { unreachable } from '@conch/session'

/** The terminal modes a key's encoding depends on (tracked from the program's output). */
export interface KeyModes {
  /** DECCKM (DECSET 1): cursor keys send `SS3` instead of `CSI`. */
  applicationCursor: boolean
  /** DECKPAM (`ESC =`): the keypad sends `SS3` sequences instead of its characters. */
  applicationKeypad: boolean
}

/** A key press or literal text, parsed and checked; `encodeKey` turns it into bytes for the modes at write time. */
export type Key =
  | { kind: 'text'; text: string }
  | { kind: 'char'; char: string; ctrl: boolean; meta: boolean }
  | { kind: 'named'; name: NamedKey; ctrl: boolean; meta: boolean; shift: boolean }

/** Keys that are one C0 character (or space) in every mode; Meta puts ESC before them. */
const PLAIN_BYTES = { Enter: '\r', Tab: '\t', Escape: '\x1b', Backspace: '\x7f', Space: ' ' } as const
/** Cursor keys: final byte, after `CSI` or (DECCKM) `SS3`. */
const CURSOR_FINALS = { Up: 'A', Down: 'B', Right: 'C', Left: 'D', Home: 'H', End: 'F' } as const
/** Editing and F5–F12 keys: the number of `CSI n ~`. */
const TILDE_NUMBERS = {
  Insert: 2,
  Delete: 3,
  PageUp: 5,
  PageDown: 6,
  F5: 15,
  F6: 17,
  F7: 18,
  F8: 19,
  F9: 20,
  F10: 21,
  F11: 23,
  F12: 24,
} as const
/** F1–F4: final byte after `SS3` (or `CSI 1 ; m` with modifiers). */
const PF_FINALS = { F1: 'P', F2: 'Q', F3: 'R', F4: 'S' } as const
/** Keypad keys: [numeric-mode character, application-mode final after SS3]. */
const KEYPAD_BYTES = {
  KP0: ['0', 'p'],
  KP1: ['1', 'q'],
  KP2: ['2', 'r'],
  KP3: ['3', 's'],
  KP4: ['4', 't'],
  KP5: ['5', 'u'],
  KP6: ['6', 'v'],
  KP7: ['7', 'w'],
  KP8: ['8', 'x'],
  KP9: ['9', 'y'],
  KPEnter: ['\r', 'M'],
  KPPlus: ['+', 'k'],
  KPMinus: ['-', 'm'],
  KPMultiply: ['*', 'j'],
  KPDivide: ['/', 'o'],
  KPDecimal: ['.', 'n'],
} as const

/** A key with a name: a key of one of the encoding tables. */
type NamedKey =
  | keyof typeof PLAIN_BYTES
  | keyof typeof CURSOR_FINALS
  | keyof typeof TILDE_NUMBERS
  | keyof typeof PF_FINALS
  | keyof typeof KEYPAD_BYTES

const NAMED_KEYS = [PLAIN_BYTES, CURSOR_FINALS, TILDE_NUMBERS, PF_FINALS, KEYPAD_BYTES].flatMap(Object.keys) as NamedKey[]
const PLAIN: Partial<Record<NamedKey, string>> = PLAIN_BYTES
const CURSOR: Partial<Record<NamedKey, string>> = CURSOR_FINALS
const TILDE: Partial<Record<NamedKey, number>> = TILDE_NUMBERS
const PF: Partial<Record<NamedKey, string>> = PF_FINALS
const KEYPAD: Partial<Record<NamedKey, readonly [string, string]>> = KEYPAD_BYTES

/** Other spellings a model is likely to use. */
const ALIASES: Record<string, NamedKey> = {
  return: 'Enter',
  esc: 'Escape',
  bspace: 'Backspace',
  del: 'Delete',
  ins: 'Insert',
  pgup: 'PageUp',
  pgdn: 'PageDown',
  pagedn: 'PageDown',
}

const BY_LOWER = new Map<string, NamedKey>([
  ...NAMED_KEYS.map((name) => [name.toLowerCase(), name] as const),
  ...Object.entries(ALIASES),
])

/** Ctrl with a character other than a letter (the VT100's table). */
const CTRL_SYMBOLS: Record<string, string> = { '@': '\x00', ' ': '\x00', '[': '\x1b', '\\': '\x1c', ']': '\x1d', '^': '\x1e', _: '\x1f', '?': '\x7f' }

const ESC = '\x1b'
const CSI = '\x1b['
const SS3 = '\x1bO'

/** Most entries in one `keys` send. */
export const MAX_KEYS = 256

/** What the error for an unknown name lists. */
export const KEY_NAMES_TEXT =
  'Enter, Tab, S-Tab, Escape, Backspace, Space, Insert, Delete, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1–F12, ' +
  'KP0–KP9, KPEnter, KPPlus, KPMinus, KPMultiply, KPDivide, KPDecimal, C-a … C-z (also C-@ C-[ C-\\ C-] C-^ C-_ C-Space), ' +
  'M-<key> (Meta: ESC first, e.g. M-f, M-Enter), C-/S-/M- on cursor, editing and function keys (C-Left, S-F5), ' +
  'any single character (typed as itself), or {"text": "…"} for literal text'

/**
 * Parses and checks every entry before anything is written.
 * @throws PtyError `UNKNOWN_KEY` naming every bad entry (its position, 1-based, and the nearest valid name when
 *   one is close — `suggestKey`) and listing the valid names; `INVALID_INPUT` for an empty list or more than
 *   `MAX_KEYS` entries.
 */
export function parseKeys(entries: readonly KeyEntry[]): Key[] {
  if (entries.length === 0) throw new PtyError('INVALID_INPUT', { reason: 'keys is empty; name at least one key; nothing was written' })
  if (entries.length > MAX_KEYS) throw new PtyError('INVALID_INPUT', { reason: `keys has ${entries.length} entries, more than ${MAX_KEYS}; send them in parts, or literal text as {"text": "…"}; nothing was written` })
  const keys: Key[] = []
  const unknown: string[] = []
  entries.forEach((entry, index) => {
    if (typeof entry !== 'string') {
      keys.push({ kind: 'text', text: entry.text.replace(/\r?\n/g, '\r') })
      return
    }
    const key = parseKey(entry)
    if (key !== undefined) {
      keys.push(key)
      return
    }
    const suggestion = suggestKey(entry)
    const hint = suggestion === undefined ? '' : `; did you mean ${JSON.stringify(suggestion)}?`
    unknown.push(`${JSON.stringify(entry)} (entry ${index + 1} of keys${hint})`)
  })
  if (unknown.length > 0) {
    const subject = unknown.length === 1 ? 'unknown key' : 'unknown keys'
    throw new PtyError('UNKNOWN_KEY', { reason: `${subject} ${unknown.join(', ')}; nothing was written. Keys are: ${KEY_NAMES_TEXT}` })
  }
  return keys
}

/** Modifier spellings of other programs and keyboards (`Ctrl-C`, `Ctrl+C`, `Alt+F`, `shift-tab`), as conch's prefixes. */
const MODIFIER_WORDS = new Map<string, 'C' | 'M' | 'S'>([
  ...['c', 'ctrl', 'ctl', 'control'].map((word) => [word, 'C'] as const),
  ...['m', 'meta', 'a', 'alt', 'opt', 'option'].map((word) => [word, 'M'] as const),
  ...['s', 'shift'].map((word) => [word, 'S'] as const),
])

/**
 * The valid key name nearest to an unknown `entry` (one that parses), or undefined: other modifier
 * spellings (`Ctrl+C`, `^C`, `Alt+f`), browser names (`ArrowUp`), a spaced base (`Page Down`), or
 * the one named key within edit distance 1 (2 from five characters).
 */
export function suggestKey(entry: string): string | undefined {
  let rest = entry.trim()
  const prefixes = new Set<'C' | 'M' | 'S'>()
  const caret = /^\^(.)$/su.exec(rest)
  if (caret !== null) {
    prefixes.add('C')
    rest = caret[1]!
  }
  for (;;) {
    const match = /^([a-z]+)\s*[-+_ ]\s*(.+)$/isu.exec(rest)
    const prefix = match === null ? undefined : MODIFIER_WORDS.get(match[1]!.toLowerCase())
    if (prefix === undefined || prefixes.has(prefix)) break
    prefixes.add(prefix)
    rest = match![2]!
  }
  const base = suggestBase(rest, prefixes.has('C'))
  if (base === undefined) return undefined
  const candidate = (['C', 'M', 'S'] as const).filter((prefix) => prefixes.has(prefix)).map((prefix) => `${prefix}-`).join('') + base
  return candidate !== entry && parseKey(candidate) !== undefined ? candidate : undefined
}

/** The base of a suggested key: a single character as itself (a letter lower-cased under Ctrl), else the nearest named key. */
function suggestBase(rest: string, ctrl: boolean): string | undefined {
  if ([...rest].length === 1) return ctrl && /^[A-Z]$/.test(rest) ? rest.toLowerCase() : rest
  const squeezed = rest.replace(/[\s_-]+/g, '').replace(/^arrow|arrow$/i, '').toLowerCase()
  const exact = BY_LOWER.get(squeezed)
  if (exact !== undefined) return exact
  const limit = squeezed.length >= 5 ? 2 : 1
  let best: NamedKey[] = []
  let bestDistance = limit + 1
  for (const name of NAMED_KEYS) {
    const distance = editDistance(squeezed, name.toLowerCase())
    if (distance < bestDistance) {
      best = [name]
      bestDistance = distance
    } else if (distance === bestDistance) {
      best.push(name)
    }
  }
  return best.length === 1 ? best[0] : undefined
}

/** One key name, or undefined when it names no key. */
export function parseKey(entry: string): Key | undefined {
  if ([...entry].length === 1) return isTypable(entry) ? { kind: 'char', char: entry, ctrl: false, meta: false } : undefined
  const prefixes = new Set<string>()
  let rest = entry
  // Prefixes, each at most once: `C-`, `M-` (also `A-`, Alt), `S-`. The base after them is at least one character.
  for (;;) {
    const match = /^([CMAS])-(.+)$/su.exec(rest)
    if (match === null) break
    const prefix = match[1] === 'A' ? 'M' : match[1]!
    if (prefixes.has(prefix)) return undefined
    prefixes.add(prefix)
    rest = match[2]!
  }
  const ctrl = prefixes.has('C')
  const meta = prefixes.has('M')
  const shift = prefixes.has('S')
  if ([...rest].length === 1 && (ctrl || meta || shift)) {
    if (shift || !isTypable(rest)) return undefined
    if (ctrl && ctrlChar(rest) === undefined) return undefined
    return { kind: 'char', char: rest, ctrl, meta }
  }
  const name = BY_LOWER.get(rest.toLowerCase())
  if (name === undefined) return undefined
  // Shift and Ctrl have no encoding on these in a terminal, except backtab and C-Space.
  if (PLAIN[name] !== undefined) {
    if (shift && name !== 'Tab') return undefined
    if (ctrl && name !== 'Space') return undefined
    if (shift && (ctrl || meta)) return undefined
  }
  if (KEYPAD[name] !== undefined && (ctrl || shift)) return undefined
  return { kind: 'named', name, ctrl, meta, shift }
}

/** The bytes one key writes, for `modes` as they are now. */
export function encodeKey(key: Key, modes: KeyModes): string {
  switch (key.kind) {
    case 'text':
      return key.text
    case 'char': {
      const base = key.ctrl ? ctrlChar(key.char)! : key.char
      return key.meta ? ESC + base : base
    }
    case 'named':
      return encodeNamed(key, modes)
    default:
      return unreachable(key, 'key')
  }
}

function encodeNamed(key: Extract<Key, { kind: 'named' }>, modes: KeyModes): string {
  const { name } = key
  const modifier = 1 + (key.shift ? 1 : 0) + (key.meta ? 2 : 0) + (key.ctrl ? 4 : 0)
  const plain = PLAIN[name]
  if (plain !== undefined) {
    if (name === 'Tab' && key.shift) return CSI + 'Z'
    if (name === 'Space' && key.ctrl) return key.meta ? ESC + '\x00' : '\x00'
    return key.meta ? ESC + plain : plain
  }
  const cursor = CURSOR[name]
  if (cursor !== undefined) {
    if (modifier > 1) return `${CSI}1;${modifier}${cursor}`
    return (modes.applicationCursor ? SS3 : CSI) + cursor
  }
  const tilde = TILDE[name]
  if (tilde !== undefined) return modifier > 1 ? `${CSI}${tilde};${modifier}~` : `${CSI}${tilde}~`
  const pf = PF[name]
  if (pf !== undefined) return modifier > 1 ? `${CSI}1;${modifier}${pf}` : SS3 + pf
  const keypad = KEYPAD[name]
  if (keypad !== undefined) {
    const bytes = modes.applicationKeypad ? SS3 + keypad[1] : keypad[0]
    return key.meta ? ESC + bytes : bytes
  }
  throw new Error(`no encoding for key ${name}`)
}

/** Ctrl with `char`: a letter's C0 control, or the VT100's symbols; undefined for anything else. */
function ctrlChar(char: string): string | undefined {
  if (/^[a-zA-Z]$/.test(char)) return String.fromCharCode(char.toLowerCase().charCodeAt(0) & 0x1f)
  return CTRL_SYMBOLS[char]
}

/** A single character that is typed as itself: printable (no C0, DEL or C1 control). */
function isTypable(char: string): boolean {
  const code = char.codePointAt(0)!
  return code >= 0x20 && code !== 0x7f && !(code >= 0x80 && code < 0xa0)
}
