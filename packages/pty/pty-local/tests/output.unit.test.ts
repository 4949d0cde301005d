import { describe, expect, it } from 'vitest'
import { utf8ByteLength, utf8Suffix } from '@conch/session'
import { OutputParser, type OutputParserOptions } from '../src/output.ts'

interface Trace {
  /** Committed lines with their numbers, and OSC payloads with the partial line at that moment, in stream order. */
  events: string[]
  partial: string
}

/** The trace of `chunks`. */
function run(chunks: Uint8Array[], options: OutputParserOptions = {}): Trace {
  const parser = new OutputParser(options)
  const events: string[] = []
  parser.onLine((text, n) => events.push(`line ${n}: ${text}`))
  parser.onOsc((payload) => events.push(`osc ${payload} @ ${parser.partial}`))
  parser.onRewind((n) => events.push(`rewind ${n}`))
  for (const chunk of chunks) parser.feed(chunk)
  parser.flush()
  return { events, partial: parser.partial }
}

/** The committed lines as a consumer that follows rewinds keeps them: a rewound line is forgotten until it is committed again. */
function shown(trace: Trace): string[] {
  const kept: string[] = []
  for (const event of trace.events) {
    const line = /^line (\d+): (.*)$/s.exec(event)
    if (line !== null) {
      kept.length = Number(line[1]) - 1
      kept.push(line[2]!)
    }
    const rewind = /^rewind (\d+)$/.exec(event)
    if (rewind !== null) kept.length = Number(rewind[1]) - 1
  }
  return kept
}

function lines(trace: Trace): string[] {
  return trace.events.filter((e) => e.startsWith('line ')).map((e) => e.replace(/^line \d+: /, ''))
}

/**
 * Parses `input` whole, split into two chunks at every byte offset, and byte by byte, and
 * requires the same events and partial line every time. Returns the unsplit trace.
 */
function everySplit(input: string | Buffer, options: OutputParserOptions = {}): Trace {
  const bytes = typeof input === 'string' ? Buffer.from(input, 'utf8') : input
  const whole = run([bytes], options)
  for (let cut = 0; cut <= bytes.length; cut++) {
    expect(run([bytes.subarray(0, cut), bytes.subarray(cut)], options), `split at byte ${cut}`).toEqual(whole)
  }
  const single = [...bytes].map((b) => Uint8Array.of(b))
  expect(run(single, options), 'byte by byte').toEqual(whole)
  return whole
}

const noControls = (text: string) => expect(text).not.toMatch(/[\x00-\x08\x0a-\x1f\x7f-\x9f]/)

describe('escape sequences at every split point', () => {
  it('removes an SGR colour sequence and keeps the coloured text (C3)', () => {
    const trace = everySplit('\x1b[31mRED\x1b[0m\r\n')
    expect(lines(trace)).toEqual(['RED'])
  })

  it('removes an OSC title terminated by BEL and surfaces its payload (C3)', () => {
    const trace = everySplit('\x1b]0;title\x07VISIBLE\r\n')
    expect(trace.events).toEqual(['osc 0;title @ ', 'line 1: VISIBLE'])
  })

  it('removes an OSC terminated by ESC backslash without leaking the backslash (C3)', () => {
    const trace = everySplit('\x1b]0;t\x1b\\AFTER\r\n')
    expect(trace.events).toEqual(['osc 0;t @ ', 'line 1: AFTER'])
  })

  it('drops bracketed paste toggles around a bash prompt', () => {
    const trace = everySplit('\x1b[?2004h$ echo hi\r\n\x1b[?2004l\rhi\r\n\x1b[?2004h$ ')
    expect(lines(trace)).toEqual(['$ echo hi', 'hi'])
    expect(trace.partial).toBe('$ ')
  })

  it('drops DCS, SOS, PM and APC payloads up to their String Terminator', () => {
    const trace = everySplit('\x1bPq#0;2;0;0;0#1~~\x1b\\X\x1b_Gf=24;AAAA\x1b\\Y\x1bXsos\x1b\\\x1b^pm\x07still pm\x1b\\Z\n')
    expect(lines(trace)).toEqual(['XYZ'])
  })

  it('drops two-byte and intermediate escapes such as ESC 7, ESC =, ESC ( B and ESC # 8', () => {
    const trace = everySplit('\x1b7\x1b=\x1b(Babc\x1b8\x1b>\x1b#8d\x1bc\n')
    expect(lines(trace)).toEqual(['abcd'])
  })

  it('drops cursor addressing, screen erase and mode changes that are not line-local, and moves along the line on CUF and CUB', () => {
    const trace = everySplit('\x1b[2J\x1b[H\x1b[10;5Habc\x1b[A\x1b[3C\x1b[2Ddef\x1b[?25l\x1b[>4;1m\x1b[2 q\n')
    expect(lines(trace)).toEqual(['abc def'])
  })

  it('cancels a sequence on CAN and SUB and prints what follows', () => {
    const trace = everySplit('\x1b[31\x18x\x1b]0;t\x1ay\x1bP1\x18z\n')
    expect(lines(trace)).toEqual(['xyz'])
    expect(trace.events.some((e) => e.startsWith('osc'))).toBe(false)
  })

  it('executes C0 controls that arrive inside a CSI sequence', () => {
    const trace = everySplit('ab\x1b[\x08Kc\n')
    expect(lines(trace)).toEqual(['ac'])
  })

  it('ignores C0 controls inside an OSC payload', () => {
    const trace = everySplit('\x1b]0;a\nb\x00c\x07x\n')
    expect(trace.events).toEqual(['osc 0;abc @ ', 'line 1: x'])
  })

  it('restarts at an ESC inside a CSI and dispatches an OSC ended by an ESC that is not ST', () => {
    const trace = everySplit('\x1b[3\x1b[32mA\x1b]2;t\x1b[0mB\n')
    expect(trace.events).toEqual(['osc 2;t @ A', 'line 1: AB'])
  })
})

describe('text and controls at every split point', () => {
  it('decodes multi-byte UTF-8 split anywhere without U+FFFD', () => {
    const trace = everySplit('é 中 😀 naïve\r\n')
    expect(lines(trace)).toEqual(['é 中 😀 naïve'])
  })

  it('decodes any bytes as the WHATWG UTF-8 decoder does, whole and cut anywhere', () => {
    // Random text of valid, truncated, overlong, surrogate and stray bytes between line feeds:
    // the lines must be what TextDecoder makes of the whole stream (minus C1 controls).
    let seed = 7
    const random = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
      return (seed >>> 8) % n
    }
    const pieces = [[0x61], [0xc3, 0xa9], [0xe4, 0xb8, 0xad], [0xf0, 0x9f, 0x98, 0x80], [0xc3], [0xe4, 0xb8], [0xf0, 0x9f, 0x98], [0x80], [0xbf], [0xc0, 0x80], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xff], [0xc2, 0x85], [0xc2, 0xa0], [0x0a], [0x20]]
    for (let round = 0; round < 200; round++) {
      const bytes = Buffer.from(Array.from({ length: 1 + random(24) }, () => pieces[random(pieces.length)]!).flat())
      const expected = new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes).replace(/[\u0080-\u009f]/g, '').split('\n')
      const whole = run([bytes])
      expect([...lines(whole), whole.partial], bytes.toString('hex')).toEqual(expected)
      for (let cut = 0; cut <= bytes.length; cut++) {
        expect(run([bytes.subarray(0, cut), bytes.subarray(cut)]), `${bytes.toString('hex')} split at ${cut}`).toEqual(whole)
      }
      expect(run([...bytes].map((b) => Uint8Array.of(b))), `${bytes.toString('hex')} byte by byte`).toEqual(whole)
    }
  })

  it('turns a genuinely invalid byte into U+FFFD', () => {
    const trace = everySplit(Buffer.from([0x61, 0xff, 0x62, 0xe4, 0xb8, 0x63, 0x0a]))
    expect(lines(trace)).toEqual(['a\ufffdb\ufffdc'])
  })

  it('makes exactly one line break of LF, CR LF and CR CR LF', () => {
    const trace = everySplit('a\r\nb\r\r\nc\nd\r\n\r\ne\r')
    expect(lines(trace)).toEqual(['a', 'b', 'c', 'd', ''])
    expect(trace.partial).toBe('e')
  })

  it('collapses CR progress-bar redraws to their last frame', () => {
    const trace = everySplit('10%\r20%\r100%\n[##  ]\r\x1b[K[####]\r\n')
    expect(lines(trace)).toEqual(['100%', '[####]'])
  })

  it('overwrites only as many cells as the new text covers, as a terminal does', () => {
    expect(lines(everySplit('100%\r50%\n'))).toEqual(['50%%'])
  })

  it('removes stray C0 controls, DEL and C1 controls but keeps TAB', () => {
    const trace = everySplit('a\x07b\x00c\x0bd\x0ce\x7ff\tg\u0085h\u009b31mi\u009cj\n')
    expect(lines(trace)).toEqual(['abcdef\tgh31mij'])
  })

  it('moves one cell left on BS: one BS after a wide emoji is on its right half, which a write there blanks', () => {
    const trace = everySplit('abc\b\bX\na😀\bY\na😀\b\bY\nab\b\b\bZ\n')
    expect(lines(trace)).toEqual(['aXc', 'a Y', 'aY', 'Zb'])
  })

  it('erases to the end of the line, to the cursor, or the whole line on CSI K 0, 1 and 2', () => {
    const trace = everySplit('abcdef\x1b[3G\x1b[Kx\nabcdef\x1b[3G\x1b[1K\nabcdef\x1b[3G\x1b[1Kx\nabc\x1b[2Kxy\nabc\r\x1b[2Kz\n')
    expect(lines(trace)).toEqual(['abx', '   def', '  xdef', '   xy', 'z'])
  })

  it('deletes cells at the cursor on CSI P and inserts blank cells on CSI @, shifting the rest of the line', () => {
    const trace = everySplit('abcdef\x1b[3D\x1b[2Pxy\nabcdef\x1b[3D\x1b[@Z\nabcdef\x1b[3D\x1b[PX\nabc\x1b[9D\x1b[9@\nabc\x1b[5P\n')
    expect(lines(trace)).toEqual(['abcxy', 'abcZdef', 'abcXf', '         abc', 'abc'])
  })

  it('erases cells from the cursor on CSI X without shifting the rest of the line', () => {
    const trace = everySplit('abcdefghij\r\x1b[3C\x1b[4X\nabcdefghij\x1b[7D\x1b[2Xz\nabc\r\x1b[X\n你好世界abc\r\x1b[1C\x1b[2X\n')
    expect(lines(trace)).toEqual(['abc    hij', 'abcz fghij', ' bc', '    世界abc'])
  })

  it('follows the Node REPL redraw with CSI G and CSI J', () => {
    const trace = everySplit('\x1b[1G\x1b[0J> \x1b[3G1+\x1b[1G\x1b[0J> 1+1\x1b[6G\r\r\n\x1b[33m2\x1b[39m\r\n\x1b[1G\x1b[0J> \x1b[3G')
    expect(lines(trace)).toEqual(['> 1+1', '2'])
    expect(trace.partial).toBe('> ')
  })

  it('pads with blanks when text is written past the end of the line', () => {
    expect(lines(everySplit('ab\x1b[6Gc\n'))).toEqual(['ab   c'])
  })
})

describe('a cursor that moves up rewrites the lines it reaches', () => {
  it('rewrites two lines up on CUU instead of appending (every split point)', () => {
    const trace = everySplit('aaa\nbbb\n\x1b[2Axyz\n\n')
    expect(shown(trace)).toEqual(['xyz', 'bbb'])
    expect(trace.partial).toBe('')
  })

  it('rewrites the line above on RI', () => {
    expect(shown(everySplit('one\ntwo\x1bM\rTWO\n\n'))).toEqual(['TWO', 'two'])
  })

  it('shows a bash 5.2 multi-line paste once after its redraw', () => {
    const echo = '$ \x1b[7mfor f in a b; do\x1b[27m\r\n\r\x1b[7m  echo "file $f"\x1b[27m\r\n\r\x1b[7mdone\x1b[27m'
    const redraw = '\x1b[A\x1b[A\x08\x08for f in a b; do\r\n\r  echo "file $f"\r\n\rdone\r\n\x1b[?2004l\rfile a\r\nfile b\r\n\x1b[?2004h$ '
    const trace = everySplit(echo + redraw)
    expect(shown(trace)).toEqual(['$ for f in a b; do', '  echo "file $f"', 'done', 'file a', 'file b'])
    expect(trace.partial).toBe('$ ')
  })

  it('moves up the rows of a line wrapped at cols first, keeping the column', () => {
    // The line feed goes down onto the row `kl`, which stays the current line (tmux shows the same rows).
    const trace = everySplit('abcdefghijkl\x1b[AX\n', { cols: 10 })
    expect(shown(trace)).toEqual(['abXdefghij'])
    expect(trace.partial).toBe('kl')
  })

  describe('rows of cols cells and the wrap pending after the last one, as tmux shows them', () => {
    // Each case was checked against tmux 3.3a (`capture-pane -p`) fed the same bytes at 10 columns.
    const right = (input: string) => everySplit(input, { cols: 10 })
    const CUF9 = '\x1b[C'.repeat(9)

    it('returns to the row just written on CR, BS, CUB, CUF and CHA, and wraps only on the next character', () => {
      expect(shown(right('0123456789\rAB\r\n'))).toEqual(['AB23456789'])
      expect(shown(right('0123456789\bZ\r\n'))).toEqual(['012345678Z'])
      expect(shown(right('0123456789\x1b[DZ\r\n'))).toEqual(['012345678Z'])
      expect(shown(right('0123456789\x1b[CZ\r\n'))).toEqual(['012345678Z'])
      expect(shown(right('0123456789\x1b[3GZ\r\n'))).toEqual(['01Z3456789'])
      expect(shown(right('0123456789\r\nA\r\n'))).toEqual(['0123456789', 'A'])
    })

    it('keeps the wrap pending over EL 0, and blanks the row just written on EL 1', () => {
      expect(shown(right('0123456789\x1b[KZ\r\n'))).toEqual(['0123456789Z'])
      expect(shown(right('0123456789\x1b[1KZ\r\n'))).toEqual(['          Z'])
    })

    it('moves up from the row just written, onto the last column of the row above', () => {
      expect(shown(right('top\r\n0123456789\x1b[AZ\r\n\n'))).toEqual(['top      Z', '0123456789'])
    })

    it('keeps the line above when readline forces the wrap with a space and redraws the last column', () => {
      // bash 5.2 after a command line of exactly the width: `x \r`, up, forward to the last column, EL, `x`.
      const trace = right(`one\r\n$ 01234567 \r\x1b[A${CUF9}\x1b[K7\r\n\x1b[?2004l\rOUT\r\n`)
      expect(shown(trace)).toEqual(['one', '$ 01234567', 'OUT'])
    })

    it('acts on the cursor row of a wrapped line: CR, EL and a line feed onto the row below', () => {
      expect(shown(right('0123456789012\rZ\r\n'))).toEqual(['0123456789Z12'])
      expect(shown(right('0123456789abcdefghij\x1b[A\x1b[5G\x1b[K\r\nX\r\n'))).toEqual(['0123', 'Xbcdefghij'])
      expect(shown(right('0123456789abcdefghij\x1b[A\x1b[5G\x1b[1K\r\n\n'))).toEqual(['     56789', 'abcdefghij'])
      const trace = right('abcdefghijklmnopqrstuvwxyz\x1b[2A\x1b[3GX\r\n\n')
      expect(shown(trace)).toEqual(['abXdefghij', 'klmnopqrst'])
      expect(trace.partial).toBe('uvwxyz')
    })

    it('deletes and inserts cells on the cursor row only: blanks fill its end, cells past its end are lost', () => {
      expect(right('0123456789abcdefghij\x1b[A\x1b[3G\x1b[2P').partial).toBe('01456789  abcdefghij')
      expect(right('0123456789abcdefghij\x1b[A\x1b[3G\x1b[2@').partial).toBe('01  234567abcdefghij')
      expect(shown(right('0123456789abc\x1b[2D\x1b[P\r\n'))).toEqual(['0123456789ac'])
    })
  })

  describe('wide characters take two cells and marks none, as tmux shows them', () => {
    // Each case was checked against tmux 3.3a (`capture-pane -p`) fed the same bytes at 10 columns.
    const narrow = (input: string) => everySplit(input, { cols: 10 })

    it('wraps a wide character that would start in the last column whole onto the next row', () => {
      // Z is written over the left half of 中 on the second row; the last cell of the first stays blank.
      expect(shown(narrow('012345678中x\r\nY\x1b[A\rZ\r\n\n'))).toEqual(['012345678 Z x', 'Y'])
    })

    it('counts the rows of a line of wide characters when the cursor moves up into it', () => {
      // The line feed goes down onto the row `文`, which stays the current line (as for narrow text).
      expect(shown(narrow('top\r\n中文中文中文\x1b[AZ\r\n\n'))).toEqual(['top', '中Z 中文中', '文'])
    })

    it('returns to a row of wide characters just filled on CR and keeps the wrap pending over EL', () => {
      expect(shown(narrow('中文中文中\rX\r\n'))).toEqual(['X 文中文中'])
      expect(shown(narrow('中文中文中\x1b[KZ\r\n'))).toEqual(['中文中文中Z'])
      expect(shown(narrow('中文中文中文\rX\r\n'))).toEqual(['中文中文中X'])
      expect(shown(narrow('中文中文中\x1b[Dx\n'))).toEqual(['中文中文 x'])
    })

    it('blanks the other half of a wide character a write or an erase covers in part', () => {
      expect(shown(narrow('0123中\x1b[5GZ\n'))).toEqual(['0123Z'])
      expect(shown(narrow('ab😀\u0301c\x1b[3GX\n'))).toEqual(['abX c'])
      expect(shown(narrow('ab中cd\x1b[4G\x1b[1K\n'))).toEqual(['    cd'])
      // EL 0 from the right half keeps the character (tmux does).
      expect(shown(narrow('ab中cd\x1b[4G\x1b[K\n'))).toEqual(['ab中'])
      expect(shown(narrow('$ 中文abc\b\b\b\b\b\x1b[K\r\n'))).toEqual(['$ 中'])
    })

    it('shifts wide characters whole on DCH and ICH, and blanks the half of one they split', () => {
      expect(shown(narrow('中文字yz\x1b[6D\x1b[2P\n'))).toEqual(['中字yz'])
      expect(shown(narrow('中文字yz\x1b[6D\x1b[2@\n'))).toEqual(['中  文字yz'])
      // xterm.js, the screen model, does the same; tmux keeps the lone half in its grid.
      expect(shown(narrow('中文字yz\x1b[5D\x1b[P\n'))).toEqual(['中 字yz'])
      expect(shown(narrow('中文字yz\x1b[5D\x1b[@\n'))).toEqual(['中   字yz'])
      expect(shown(narrow('xxxxxxxx中\r\x1b[@\n'))).toEqual([' xxxxxxxx'])
    })

    it('gives combining marks and zero-width characters no cell', () => {
      expect(shown(narrow('e\u0301te\u0301\x1b[2DZ\n'))).toEqual(['e\u0301Ze\u0301'])
      // A mark belongs to the cell before it: it goes when that cell is written over.
      expect(shown(narrow('a\u200bb\u200dc\x1b[2DZ\n'))).toEqual(['a\u200bZc'])
    })

    it('reports the cursor after wide characters in cells', () => {
      const parser = new OutputParser({ rows: 5, cols: 10 })
      parser.feed(Buffer.from('中文'))
      expect(parser.cursorPosition()).toEqual({ row: 1, col: 5 })
      parser.feed(Buffer.from('中文中文'))
      expect(parser.cursorPosition()).toEqual({ row: 2, col: 3 })
      parser.feed(Buffer.from('\r\n012345678😀'))
      expect(parser.cursorPosition()).toEqual({ row: 4, col: 3 })
    })
  })

  it('stops at the top row of the screen', () => {
    const trace = everySplit('a\nb\nc\nd\n\x1b[5AX\n', { rows: 3 })
    expect(shown(trace)).toEqual(['a', 'b', 'X'])
    expect(trace.partial).toBe('d')
  })

  it('moves down over the lines it came up from on CUD, keeping the column', () => {
    expect(shown(everySplit('abc\ndef\n\x1b[2AX\x1b[BY\n\n'))).toEqual(['Xbc', 'dYf', ''])
  })

  it('keeps the lines below a cursor that stays up, as the screen shows them, and the rows down to them', () => {
    const parser = new OutputParser({ cols: 10 })
    parser.feed(Buffer.from('one\ntwo\nthree-and-more\n\x1b[3A'))
    expect([parser.partial, ...parser.linesBelow()]).toEqual(['two', 'three-and-more'])
    // The blank line the cursor came up from is left out; the wrapped line counts two rows.
    expect(parser.rowsBelowCursor()).toBe(2)
  })

  it('blanks the lines below on ED 0, erase below', () => {
    const trace = everySplit('one\ntwo\nthree\n\x1b[2Axyz\x1b[J\n\n')
    expect(shown(trace)).toEqual(['one', 'xyz', ''])
    const parser = new OutputParser()
    parser.feed(Buffer.from('one\ntwo\nthree\n\x1b[2Axyz\x1b[J'))
    expect([parser.partial, ...parser.linesBelow()]).toEqual(['xyz'])
  })
})

describe('unterminated strings are bounded', () => {
  it('abandons an OSC past maxStringBytes and prints the rest as text', () => {
    // Payload `0;` + 14 × a = 16 bytes; the 15th `a` overflows and it and the rest are text.
    const trace = everySplit(`\x1b]0;${'a'.repeat(20)}\x07tail\n`, { maxStringBytes: 16 })
    expect(trace.events).toEqual(['line 1: aaaaaatail'])
  })

  it('abandons a DCS past maxStringBytes so it cannot swallow later lines', () => {
    const trace = everySplit(`\x1bP${'x'.repeat(20)}\r\nrest\r\n\x1b\\`, { maxStringBytes: 16 })
    expect(lines(trace)).toEqual(['xxxx', 'rest'])
  })

  it('never splits a surrogate pair at the bound', () => {
    const trace = everySplit('\x1b]ab😀c\x07\n', { maxStringBytes: 4 })
    expect(lines(trace)).toEqual(['😀c'])
  })

  it('abandons an over-long CSI and prints the remaining parameter bytes', () => {
    const trace = everySplit(`\x1b[${'1;'.repeat(6)}mX\n`, { maxStringBytes: 8 })
    expect(lines(trace)).toEqual(['1;1;mX'])
  })

  it('shows an unterminated OSC body with a line break when the next escape ends it (every split point)', () => {
    const trace = everySplit('J\x1b]6973;K\r\n\x1b]6973;n;prompt;0\x07$ ')
    expect(trace.events).toEqual(['line 1: J6973;K', 'osc 6973;n;prompt;0 @ '])
    expect(trace.partial).toBe('$ ')
  })

  it('shows an unterminated DCS, SOS, PM or APC body with a line break when the next escape ends it (every split point)', () => {
    for (const introducer of ['P', 'X', '^', '_']) {
      const trace = everySplit(`P\x1b${introducer}Q54\r\n1\r\n2\r\n\x1b]6973;n;prompt;0\x07$ `)
      expect(trace.events, introducer).toEqual(['line 1: PQ54', 'line 2: 1', 'line 3: 2', 'osc 6973;n;prompt;0 @ '])
      expect(trace.partial).toBe('$ ')
    }
  })

  it('shows a DCS body with a line break that CAN cancels, and drops one that ST terminates', () => {
    expect(lines(everySplit('\x1bPa\nb\x18c\n'))).toEqual(['a', 'bc'])
    expect(lines(everySplit('\x1b_a\nb\x1b\\c\n'))).toEqual(['c'])
  })

  it('shows a DCS body with a line break left open across a pause', () => {
    let clock = 0
    const parser = new OutputParser({ stringTimeoutMs: 500, now: () => clock })
    const seen: string[] = []
    parser.onLine((text) => seen.push(text))
    parser.feed(Buffer.from('J\x1bPq\r\nmore'))
    clock += 500
    parser.feed(Buffer.from('X\n'))
    expect(seen).toEqual(['Jq', 'moreX'])
  })

  it('shows an OSC body with a bare CR as written: the CR returns to column 0', () => {
    const trace = everySplit('\x1b]0;ab\rX\n\x1b[0mrest\n')
    expect(lines(trace)).toEqual(['X;ab', 'rest'])
  })

  it('shows an OSC body with a line break that CAN cancels', () => {
    expect(lines(everySplit('\x1b]0;a\nb\x18c\n'))).toEqual(['0;a', 'bc'])
  })

  it('still dispatches an OSC body with a line break that ST terminates', () => {
    const trace = everySplit('\x1b]0;a\nb\x1b\\x\n')
    expect(trace.events).toEqual(['osc 0;ab @ ', 'line 1: x'])
  })

  it('bounds a body of controls after a line break by maxStringBytes', () => {
    const trace = everySplit(`\x1b]0\n${'\x00'.repeat(20)}tail\n`, { maxStringBytes: 8 })
    expect(lines(trace)).toEqual(['tail'])
  })

  it('keeps line breaks inside a DCS (sixel data) as payload', () => {
    const trace = everySplit('\x1bPq#0\r\n#1\x1b\\after\r\n')
    expect(lines(trace)).toEqual(['after'])
  })

  it('abandons a string left open across a pause of stringTimeoutMs, at every split point before the pause', () => {
    for (const introducer of ['\x1b]0;title', '\x1bPq#0;2;0', '\x1bXsos', '\x1b^pm', '\x1b_apc']) {
      const before = Buffer.from(`J${introducer}`)
      for (let cut = 0; cut <= before.length; cut++) {
        let clock = 0
        const parser = new OutputParser({ stringTimeoutMs: 500, now: () => clock })
        const seen: string[] = []
        const oscs: string[] = []
        parser.onLine((text) => seen.push(text))
        parser.onOsc((payload) => oscs.push(payload))
        parser.feed(before.subarray(0, cut))
        clock += 10
        parser.feed(before.subarray(cut))
        clock += 500
        parser.feed(Buffer.from('K\x07\r\nnext\r\n'))
        expect(seen, `${JSON.stringify(introducer)} split at ${cut}`).toEqual(['JK', 'next'])
        expect(oscs).toEqual([])
      }
    }
  })

  it('shows an OSC body with a line break left open across a pause', () => {
    let clock = 0
    const parser = new OutputParser({ stringTimeoutMs: 500, now: () => clock })
    const seen: string[] = []
    parser.onLine((text) => seen.push(text))
    parser.feed(Buffer.from('J\x1b]0;t\r\nmore'))
    clock += 500
    parser.feed(Buffer.from('X\n'))
    expect(seen).toEqual(['J0;t', 'moreX'])
  })

  it('keeps a string open across a pause shorter than stringTimeoutMs', () => {
    let clock = 0
    const parser = new OutputParser({ stringTimeoutMs: 500, now: () => clock })
    const oscs: string[] = []
    const seen: string[] = []
    parser.onOsc((payload) => oscs.push(payload))
    parser.onLine((text) => seen.push(text))
    parser.feed(Buffer.from('\x1b]0;ti'))
    clock += 499
    parser.feed(Buffer.from('tle\x07X\n'))
    expect(oscs).toEqual(['0;title'])
    expect(seen).toEqual(['X'])
  })

  it('keeps an unterminated string at the default bound from eating the session', () => {
    const parser = new OutputParser()
    const seen: string[] = []
    parser.onLine((text) => seen.push(text))
    parser.feed(Buffer.from('\x1b]0;'))
    parser.feed(Buffer.from('z'.repeat(70000)))
    parser.feed(Buffer.from('\r\nhello\r\n'))
    expect(seen).toEqual(['z'.repeat(70000 - (65536 - 2)), 'hello'])
  })
})

describe('lines', () => {
  it('keeps a long line whole instead of wrapping it at a terminal width', () => {
    const trace = run([Buffer.from(`${'x'.repeat(10000)}\r\n`)])
    expect(lines(trace)).toEqual(['x'.repeat(10000)])
  })

  it('commits a line longer than maxLineLength in pieces without splitting a surrogate pair', () => {
    const trace = everySplit('abcdefghij\nabc😀de\n', { maxLineLength: 4 })
    expect(lines(trace)).toEqual(['abcd', 'efgh', 'ij', 'abc', '😀de'])
  })

  it('cuts a line one code point at a time when maxLineLength is shorter than a surrogate pair', () => {
    const trace = everySplit('x😀😀ab\n', { maxLineLength: 1 })
    expect(lines(trace)).toEqual(['x', '😀', '😀', 'a', 'b'])
  })

  it('commits a whole CR LF line longer than maxLineLength on an empty line in pieces too', () => {
    const trace = everySplit('abcdefghij\r\nab\r\n\x1b[1mabcdefghi\x1b[0m\r\n', { maxLineLength: 4 })
    expect(lines(trace)).toEqual(['abcd', 'efgh', 'ij', 'ab', 'abcd', 'efgh', 'i'])
  })

  it('numbers committed lines from 1 and reports the partial line separately', () => {
    const parser = new OutputParser()
    parser.feed(Buffer.from('one\ntwo\nthr'))
    expect(parser.lineCount).toBe(2)
    expect(parser.partial).toBe('thr')
  })

  it('turns an incomplete UTF-8 sequence at flush into U+FFFD and drops an open OSC', () => {
    const parser = new OutputParser()
    const oscs: string[] = []
    parser.onOsc((p) => oscs.push(p))
    parser.feed(Buffer.from([0x61, 0xe4, 0xb8]))
    parser.flush()
    parser.feed(Buffer.from('\x1b]0;never'))
    parser.flush()
    parser.feed(Buffer.from('b'))
    expect(parser.partial).toBe('a\ufffdb')
    expect(oscs).toEqual([])
  })

  it('keeps parsing when a listener throws and rethrows the error after the chunk', () => {
    const parser = new OutputParser()
    const seen: string[] = []
    parser.onLine((text) => {
      if (text === 'bad') throw new Error('listener failed')
    })
    parser.onLine((text) => seen.push(text))
    expect(() => parser.feed(Buffer.from('ok\nbad\nafter\n'))).toThrow('listener failed')
    expect(seen).toEqual(['ok', 'bad', 'after'])
    parser.feed(Buffer.from('next\n'))
    expect(seen.at(-1)).toBe('next')
  })

  it('stops calling a listener after its disposer runs', () => {
    const parser = new OutputParser()
    const seen: string[] = []
    const off = parser.onLine((text) => seen.push(text))
    parser.feed(Buffer.from('a\n'))
    off()
    parser.feed(Buffer.from('b\n'))
    expect(seen).toEqual(['a'])
  })

  it('rejects a bound that is not a positive integer, naming the option', () => {
    expect(() => new OutputParser({ maxStringBytes: 0 })).toThrow('maxStringBytes')
    expect(() => new OutputParser({ maxLineLength: 1.5 })).toThrow('maxLineLength')
    expect(() => new OutputParser({ stringTimeoutMs: 0 })).toThrow('stringTimeoutMs')
  })
})

describe('marks and textSince', () => {
  const MARKER = '\x1b]633;P;nonce\x07'

  /** Feeds chunks; on every OSC carrying the nonce, replaces the mark (as the prompt detector does). */
  function detector(chunks: string[]) {
    const parser = new OutputParser()
    let mark: ReturnType<OutputParser['mark']> | undefined
    parser.onOsc((payload) => {
      if (!payload.endsWith('nonce')) return
      mark?.release()
      mark = parser.mark()
    })
    const after: string[] = []
    for (const chunk of chunks) {
      parser.feed(Buffer.from(chunk))
      after.push(mark === undefined ? '<none>' : parser.textSince(mark))
    }
    return { parser, after }
  }

  it('answers nothing yet when the marker arrived and the PS1 text has not', () => {
    expect(detector([MARKER, '$ ']).after).toEqual(['', '$ '])
  })

  it('answers the PS1 text when the marker landed mid-line after output without a newline', () => {
    const { parser, after } = detector([`partial output${MARKER}$ `])
    expect(after).toEqual(['$ '])
    expect(parser.partial).toBe('partial output$ ')
  })

  it('gives the same text since the marker at every split point', () => {
    const input = Buffer.from(`out\r\n\x1b]0;title\x07${MARKER}\x1b[?2004h$ `)
    for (let cut = 0; cut <= input.length; cut++) {
      const { after } = detector([input.subarray(0, cut).toString('latin1'), input.subarray(cut).toString('latin1')])
      expect(after.at(-1), `split at ${cut}`).toBe('$ ')
    }
  })

  it('includes lines committed after the mark, joined by newlines', () => {
    expect(detector([`${MARKER}$ echo hi\r\nhi\r\n$ `]).after).toEqual(['$ echo hi\nhi\n$ '])
  })

  it('follows the latest marker only', () => {
    expect(detector([`${MARKER}$ sleep 1\r\n`, `${MARKER}$ `]).after).toEqual(['$ sleep 1\n', '$ '])
  })

  it('moves a mark left when text is rewritten left of it after a CR', () => {
    const parser = new OutputParser()
    parser.feed(Buffer.from('abc'))
    const mark = parser.mark()
    parser.feed(Buffer.from('de'))
    expect(parser.textSince(mark)).toBe('de')
    parser.feed(Buffer.from('\rXY'))
    expect(parser.textSince(mark)).toBe('XYcde')
    expect(mark.column).toBe(0)
  })

  it('keeps at most maxMarkBytes of committed lines, newest first, and says so', () => {
    const parser = new OutputParser({ maxMarkBytes: 8 })
    const mark = parser.mark()
    parser.feed(Buffer.from('aaaa\nbbb\ncc\nd'))
    expect(parser.textSince(mark)).toBe('bbb\ncc\nd')
    expect(mark.truncated).toBe(true)
  })

  it('refuses a released mark whose line was committed, and a mark of another parser', () => {
    const parser = new OutputParser()
    const mark = parser.mark()
    parser.feed(Buffer.from('x'))
    mark.release()
    expect(parser.textSince(mark)).toBe('x')
    parser.feed(Buffer.from('\n'))
    expect(() => parser.textSince(mark)).toThrow('released')
    expect(() => new OutputParser().textSince(parser.mark())).toThrow('not made by this parser')
  })
})

describe('UTF-8 helpers', () => {
  it('keeps the longest tail that fits, cut on code points', () => {
    expect(utf8Suffix('abc😀é', 6)).toBe('😀é')
    expect(utf8Suffix('abc😀é', 5)).toBe('é')
    expect(utf8Suffix('abc', 3)).toBe('abc')
    expect(utf8Suffix('中中', 2)).toBe('')
    expect(utf8ByteLength('a😀')).toBe(5)
  })

  it('counts UTF-8 bytes as Buffer.byteLength does, lone surrogates included, short and long', () => {
    const units = ['a', '\x7f', '\x80', 'é', '\u07ff', '\u0800', '中', '\uffff', '😀', '\ud83d', '\ude00', '\ud83d\ud83d']
    let seed = 3
    for (let round = 0; round < 500; round++) {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
      const text = Array.from({ length: 1 + (seed % 40) }, (_, k) => units[(seed >>> (k % 16)) % units.length]!).join('')
      expect(utf8ByteLength(text), JSON.stringify(text)).toBe(Buffer.byteLength(text, 'utf8'))
    }
  })

  it('never produces a lone surrogate from any cut of emoji text', () => {
    const text = '😀x😀😀y'
    for (let max = 0; max <= utf8ByteLength(text); max++) {
      const tail = utf8Suffix(text, max)
      expect(utf8ByteLength(tail)).toBeLessThanOrEqual(max)
      expect(Buffer.from(tail, 'utf8').toString('utf8')).toBe(tail)
      noControls(tail)
    }
  })
})

describe('terminal queries and screens', () => {
  function queries(input: string): string[] {
    const bytes = Buffer.from(input, 'utf8')
    const runOnce = (chunks: Uint8Array[]) => {
      const parser = new OutputParser()
      const seen: string[] = []
      parser.onQuery((query) => seen.push(JSON.stringify(query)))
      for (const chunk of chunks) parser.feed(chunk)
      return seen
    }
    const whole = runOnce([bytes])
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(runOnce([bytes.subarray(0, cut), bytes.subarray(cut)]), `split at byte ${cut}`).toEqual(whole)
    }
    return whole
  }

  it('recognises each query at every split point, and only well-formed ones', () => {
    const found = queries('\x1b[5n\x1b[6n\x1b[?6n\x1b[c\x1b[0c\x1b[>c\x1b[>q\x1b[18t\x1b[?2004$p\x1b[4$p\x1b]10;?\x07\x1b]11;?\x1b\\\x1b]12;?\x07' + '\x1b[7n\x1b[1c\x1b[14t\x1b[?1;2$p\x1b]13;?\x07\x1b]10;#fff\x07')
    expect(found.map((q) => JSON.parse(q) as { kind: string })).toEqual([
      { kind: 'status' },
      { kind: 'cursor', private: false },
      { kind: 'cursor', private: true },
      { kind: 'primary-attributes' },
      { kind: 'primary-attributes' },
      { kind: 'secondary-attributes' },
      { kind: 'version' },
      { kind: 'text-area-size' },
      { kind: 'mode', mode: 2004, private: true },
      { kind: 'mode', mode: 4, private: false },
      { kind: 'color', index: 10, terminator: '\x07' },
      { kind: 'color', index: 11, terminator: '\x1b\\' },
      { kind: 'color', index: 12, terminator: '\x07' },
    ])
  })

  it('tracks DECSET and DECRST of several modes in one sequence', () => {
    const parser = new OutputParser()
    parser.feed(Buffer.from('\x1b[?2004;1h\x1b[?25l\x1b[4h'))
    expect(parser.privateModes.get(2004)).toBe(true)
    expect(parser.privateModes.get(1)).toBe(true)
    expect(parser.privateModes.get(25)).toBe(false)
    expect(parser.ansiModes.get(4)).toBe(true)
  })

  it('reports the line model cursor: the row of the current line (wraps counted) and its column', () => {
    const parser = new OutputParser({ rows: 5, cols: 10 })
    parser.feed(Buffer.from('one\r\n'))
    expect(parser.cursorPosition()).toEqual({ row: 2, col: 1 })
    parser.feed(Buffer.from(`${'x'.repeat(25)}\r\nab`))
    expect(parser.cursorPosition()).toEqual({ row: 5, col: 3 })
    parser.feed(Buffer.from('\r\n\r\n\r\nc'))
    expect(parser.cursorPosition()).toEqual({ row: 5, col: 2 })
  })

  it('asks for a screen at the alternate screen or cursor addressing, with the sequence, at every split point', () => {
    for (const [input, sequence, reason] of [
      ['ab\x1b[?1049hvim', '\x1b[?1049h', 'alternate'],
      ['ab\x1b[12;40Hx', '\x1b[12;40H', 'addressing'],
      ['ab\x1b[2Jx', '\x1b[2J', 'addressing'],
      ['ab\x1b[3;20rx', '\x1b[3;20r', 'addressing'],
    ] as const) {
      const bytes = Buffer.from(input)
      for (let cut = 0; cut <= bytes.length; cut++) {
        const parser = new OutputParser()
        const events: string[] = []
        const written: string[] = []
        parser.onScreen((event) => {
          events.push(JSON.stringify(event))
          if (event.kind === 'needed') parser.attachScreen({ write: (text) => written.push(text), cursor: () => ({ row: 1, col: 1 }) })
        })
        parser.feed(bytes.subarray(0, cut))
        parser.feed(bytes.subarray(cut))
        expect(events, `${JSON.stringify(input)} split at ${cut}`).toEqual([JSON.stringify({ kind: 'needed', reason, sequence })])
        expect(written.join('')).toBe(input.slice(input.indexOf(sequence) + sequence.length))
      }
    }
  })

  it('keeps alternate-screen text out of the lines while a screen is attached, and resumes lines after it', () => {
    const parser = new OutputParser()
    const lines: string[] = []
    parser.onLine((text) => lines.push(text))
    parser.onScreen((event) => {
      if (event.kind === 'needed') parser.attachScreen({ write: () => {}, cursor: () => ({ row: 1, col: 1 }) })
      else parser.detachScreen()
    })
    parser.feed(Buffer.from('$ vim\r\n\x1b[?1049h~\r\n~\r\n-- INSERT --\x1b[?1049l$ cat x\r\nhello\r\n'))
    expect(lines).toEqual(['$ vim', '$ cat x', 'hello'])
    expect(parser.attachedScreen).toBeUndefined()
  })

  it('keeps every text as lines when nobody attaches a screen', () => {
    const parser = new OutputParser()
    const lines: string[] = []
    parser.onLine((text) => lines.push(text))
    parser.feed(Buffer.from('\x1b[?1049hrow-1\r\nrow-2\r\n\x1b[?1049l'))
    expect(lines).toEqual(['row-1', 'row-2'])
  })
})

describe('fast paths against the table', () => {
  /** Pieces of terminal output the parser's fast paths and its table both see. */
  const PIECES = [
    'plain text', 'é中😀', '\t', '\r\n', '\r', '\n', '\b', '\x07', '\x1b[31m', '\x1b[0m', '\x1b[38;5;208m', '\x1b[K', '\x1b[1K', '\x1b[2K',
    '\x1b[5G', '\x1b[J', '\x1b[?2004h', '\x1b[?2004l', '\x1b[6n', '\x1b[>c', '\x1b[?1$p', '\x1b]0;title\x07', '\x1b]133;A;nonce\x07',
    '\x1b]11;?\x1b\\', '\x1bP1$r0m\x1b\\', '\x1b7', '\x1b8', '\x1b(B', '\x1b[3;4H', '\x1b[2J', '\x1b[?1049h', '\x1b[?1049l', '\x1b[1 q',
    '\x1b[3\r\n1m', '\x1b[', ';', '\x18', '\x7f', '\u0085', '\x1b\x1b[1m', '\x1b[A', '\x1b[2A', '\x1bM', '\x1b[B', '\x1b[3C', '\x1b[2D', '\x1bc',
  ]

  /** Every event, the partial line and its revision after each chunk, with a mark per nonce OSC and a screen on request. */
  function trace(chunks: Uint8Array[], options: OutputParserOptions): string[] {
    const parser = new OutputParser(options)
    const events: string[] = []
    let mark: ReturnType<OutputParser['mark']> | undefined
    parser.onLine((text, n) => events.push(`line ${n}: ${JSON.stringify(text)}`))
    parser.onRewind((n) => events.push(`rewind ${n}`))
    parser.onOsc((payload) => {
      events.push(`osc ${JSON.stringify(payload)} @ ${JSON.stringify(parser.partial)}`)
      if (!payload.endsWith('nonce')) return
      mark?.release()
      mark = parser.mark()
    })
    parser.onQuery((query) => events.push(`query ${JSON.stringify(query)} at ${JSON.stringify(parser.cursorPosition())}`))
    // A fresh screen per attachment (what it got after it was dropped does not count); its cursor
    // says how much it was written, so a query shows that the screen was brought up to it.
    let written = ''
    parser.onScreen((event) => {
      events.push(`screen ${JSON.stringify(event)}`)
      if (event.kind === 'needed') {
        written = ''
        parser.attachScreen({ write: (text) => (written += text), cursor: () => ({ row: 1, col: written.length + 1 }) })
      } else parser.detachScreen()
    })
    for (const chunk of chunks) {
      parser.feed(chunk)
      events.push(`partial ${JSON.stringify(parser.partial)}${mark === undefined ? '' : ` since ${JSON.stringify(parser.textSince(mark))}`}`)
    }
    if (parser.attachedScreen !== undefined) events.push(`screen text ${JSON.stringify(written)}`)
    return events
  }

  it('gives the same lines, strings, queries, marks and screens whole and byte by byte, for random streams', () => {
    let seed = 12
    const random = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
      return (seed >>> 8) % n
    }
    for (let round = 0; round < 300; round++) {
      const input = Buffer.from(Array.from({ length: 1 + random(40) }, () => PIECES[random(PIECES.length)]!).join(''), 'utf8')
      const options = round % 3 === 0 ? { maxStringBytes: 8, maxLineLength: 12 } : round % 3 === 1 ? { rows: 3, cols: 10 } : {}
      const whole = trace([input], options)
      const single = trace([...input].map((byte) => Uint8Array.of(byte)), options)
      // Byte by byte records the partial line after every byte: compare at the end of the input.
      const last = (events: string[]) => events.filter((e) => !e.startsWith('partial ')).concat(events.filter((e) => e.startsWith('partial ')).slice(-1))
      expect(last(single), JSON.stringify(input.toString('utf8'))).toEqual(last(whole))
    }
  })
})
