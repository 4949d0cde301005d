import { PtyError } from '@conch/pty'
import { describe, expect, it } from 'vitest'
import { encodeKey, KEY_NAMES_TEXT, MAX_KEYS, parseKey, parseKeys, suggestKey, type KeyModes } from '../src/keys.ts'
import { OutputParser } from '../src/output.ts'

const normal: KeyModes = { applicationCursor: false, applicationKeypad: false }
const application: KeyModes = { applicationCursor: true, applicationKeypad: true }

function encode(names: string[], modes: KeyModes = normal): string[] {
  return parseKeys(names).map((key) => encodeKey(key, modes))
}

function unknown(entries: Parameters<typeof parseKeys>[0]): PtyError {
  try {
    parseKeys(entries)
  } catch (error) {
    return error as PtyError
  }
  throw new Error('parseKeys accepted the entries')
}

describe('named keys', () => {
  it('cursor keys send CSI in normal mode and SS3 with application cursor keys (DECCKM)', () => {
    expect(encode(['Up', 'Down', 'Right', 'Left', 'Home', 'End'])).toEqual(['\x1b[A', '\x1b[B', '\x1b[C', '\x1b[D', '\x1b[H', '\x1b[F'])
    expect(encode(['Up', 'Down', 'Right', 'Left', 'Home', 'End'], application)).toEqual(['\x1bOA', '\x1bOB', '\x1bOC', '\x1bOD', '\x1bOH', '\x1bOF'])
  })

  it('editing and function keys follow xterm', () => {
    expect(encode(['Insert', 'Delete', 'PageUp', 'PageDown'])).toEqual(['\x1b[2~', '\x1b[3~', '\x1b[5~', '\x1b[6~'])
    expect(encode(['F1', 'F2', 'F3', 'F4'])).toEqual(['\x1bOP', '\x1bOQ', '\x1bOR', '\x1bOS'])
    expect(encode(['F5', 'F6', 'F7', 'F8', 'F9', 'F10', 'F11', 'F12'])).toEqual(
      ['15', '17', '18', '19', '20', '21', '23', '24'].map((n) => `\x1b[${n}~`),
    )
    // Neither depends on DECCKM.
    expect(encode(['PageDown', 'F1'], application)).toEqual(['\x1b[6~', '\x1bOP'])
  })

  it('plain keys are their characters: Backspace is DEL, Meta puts ESC first', () => {
    expect(encode(['Enter', 'Tab', 'Escape', 'Backspace', 'Space'])).toEqual(['\r', '\t', '\x1b', '\x7f', ' '])
    expect(encode(['M-Enter', 'M-Backspace', 'M-f', 'M-F', 'M-.'])).toEqual(['\x1b\r', '\x1b\x7f', '\x1bf', '\x1bF', '\x1b.'])
    expect(encode(['S-Tab'])).toEqual(['\x1b[Z'])
  })

  it('Ctrl maps letters and the VT100 symbols to C0 controls', () => {
    expect(encode(['C-a', 'C-c', 'C-z', 'C-D', 'C-@', 'C-[', 'C-\\', 'C-]', 'C-^', 'C-_', 'C-?', 'C-Space'])).toEqual([
      '\x01', '\x03', '\x1a', '\x04', '\x00', '\x1b', '\x1c', '\x1d', '\x1e', '\x1f', '\x7f', '\x00',
    ])
    expect(encode(['C-M-x'])).toEqual(['\x1b\x18'])
  })

  it('modifiers on cursor, editing and function keys use the xterm parameter 1 + shift + 2·meta + 4·ctrl', () => {
    expect(encode(['C-Left', 'S-Up', 'M-Right', 'C-S-Down'], application)).toEqual(['\x1b[1;5D', '\x1b[1;2A', '\x1b[1;3C', '\x1b[1;6B'])
    expect(encode(['S-F5', 'C-Delete', 'C-F1'])).toEqual(['\x1b[15;2~', '\x1b[3;5~', '\x1b[1;5P'])
  })

  it('the keypad sends its characters in numeric mode and SS3 in application mode (DECKPAM)', () => {
    expect(encode(['KP0', 'KP9', 'KPEnter', 'KPPlus', 'KPMinus', 'KPMultiply', 'KPDivide', 'KPDecimal'])).toEqual(['0', '9', '\r', '+', '-', '*', '/', '.'])
    expect(encode(['KP0', 'KP9', 'KPEnter', 'KPPlus', 'KPMinus', 'KPMultiply', 'KPDivide', 'KPDecimal'], application)).toEqual(
      ['p', 'y', 'M', 'k', 'm', 'j', 'o', 'n'].map((c) => `\x1bO${c}`),
    )
  })

  it('names match without regard to case; a single character is typed as itself', () => {
    expect(encode(['enter', 'PAGEUP', 'pgdn', 'esc', 'f12'])).toEqual(['\r', '\x1b[5~', '\x1b[6~', '\x1b', '\x1b[24~'])
    expect(encode(['q', 'Q', ':', 'é', '😀'])).toEqual(['q', 'Q', ':', 'é', '😀'])
  })

  it('a {text} entry is literal text, never a key name; its line breaks are typed as Enter', () => {
    expect(encode([{ text: 'Enter' }, { text: ':wq' }, { text: 'a\nb' }] as never)).toEqual(['Enter', ':wq', 'a\rb'])
  })

  it('an unknown name is refused before anything is encoded, naming the entry and listing the valid names', () => {
    const error = unknown(['Up', 'Bogus', 'Enter'])
    expect(error).toBeInstanceOf(PtyError)
    expect(error.code).toBe('UNKNOWN_KEY')
    expect(error.message).toContain('unknown key "Bogus" (entry 2 of keys); nothing was written')
    expect(error.message).toContain(KEY_NAMES_TEXT)
    for (const bad of ['hello', 'C-1', 'S-a', 'C-Enter', 'S-Enter', 'C-C-a', 'C-KP1', '\x03', 'F13', 'c-a', '']) {
      expect(unknown([bad]).code, bad).toBe('UNKNOWN_KEY')
    }
  })

  it('every unknown entry is named at once, each with the nearest valid name when one is close', () => {
    const error = unknown(['ArrowUp', 'Return', 'Ctrl-C', 'Bogus', 'Ctrl+C', '^C'])
    expect(error.code).toBe('UNKNOWN_KEY')
    expect(error.message).toBe(
      'unknown keys "ArrowUp" (entry 1 of keys; did you mean "Up"?), "Ctrl-C" (entry 3 of keys; did you mean "C-c"?), ' +
        '"Bogus" (entry 4 of keys), "Ctrl+C" (entry 5 of keys; did you mean "C-c"?), "^C" (entry 6 of keys; did you mean "C-c"?); ' +
        `nothing was written. Keys are: ${KEY_NAMES_TEXT}`,
    )
  })

  it('a suggestion is a valid key: other modifier spellings, browser names, near misses; nothing when none is close or two are', () => {
    const cases: Record<string, string | undefined> = {
      ArrowUp: 'Up',
      arrowleft: 'Left',
      'Ctrl-C': 'C-c',
      'ctrl c': 'C-c',
      '^C': 'C-c',
      'c-a': 'C-a',
      'Alt+f': 'M-f',
      'shift-tab': 'S-Tab',
      'Ctrl+Alt+Del': 'C-M-Delete',
      'Page Down': 'PageDown',
      Entr: 'Enter',
      Escpe: 'Escape',
      Bogus: undefined,
      F13: undefined,
      'C-Enter': undefined,
      '': undefined,
    }
    for (const [entry, expected] of Object.entries(cases)) {
      expect(suggestKey(entry), entry).toBe(expected)
      if (expected !== undefined) expect(parseKey(expected), expected).toBeDefined()
    }
  })

  it('an empty list and an over-long one are invalid input', () => {
    expect(unknown([]).code).toBe('INVALID_INPUT')
    expect(unknown(Array.from({ length: MAX_KEYS + 1 }, () => 'a')).code).toBe('INVALID_INPUT')
  })
})

describe('keypad mode tracking', () => {
  it('DECKPAM and DECKPNM switch the parser keypad mode, also across chunk splits', () => {
    const parser = new OutputParser()
    expect(parser.applicationKeypad).toBe(false)
    parser.feed(Buffer.from('vim\x1b'))
    parser.feed(Buffer.from('=text'))
    expect(parser.applicationKeypad).toBe(true)
    expect(parser.partial).toBe('vimtext')
    parser.feed(Buffer.from('\x1b>'))
    expect(parser.applicationKeypad).toBe(false)
    // `=` inside a CSI is a private prefix, not DECKPAM.
    parser.feed(Buffer.from('\x1b[=1c'))
    expect(parser.applicationKeypad).toBe(false)
  })
})
