import { describe, expect, it } from 'vitest'
import { LiveTextRedactor, MIN_SECRET_BYTES, SecretRedactor } from '../src/redact.ts'

const VALUE = 'hunter2-Correct-Horse'

function through(redactor: SecretRedactor, chunks: string[]): string {
  let out = ''
  for (const chunk of chunks) out += redactor.push(Buffer.from(chunk)).toString()
  return out + redactor.flush().toString()
}

describe('secret redaction', () => {
  it('passes output through untouched while no value is registered', () => {
    const redactor = new SecretRedactor()
    const chunk = Buffer.from(`x ${VALUE} y`)
    expect(redactor.push(chunk)).toBe(chunk)
    expect(redactor.active).toBe(false)
  })

  it('replaces a value with its name, at every split point of the output', () => {
    const text = `before ${VALUE} middle ${VALUE}${VALUE} after h`
    const expected = 'before [secret DEMO] middle [secret DEMO][secret DEMO] after h'
    for (let a = 0; a <= text.length; a++) {
      for (const b of [a, Math.min(text.length, a + 1), Math.min(text.length, a + 7)]) {
        const redactor = new SecretRedactor()
        redactor.add('DEMO', VALUE)
        expect(through(redactor, [text.slice(0, a), text.slice(a, b), text.slice(b)]), `${a}/${b}`).toBe(expected)
      }
    }
  })

  it('byte by byte, the value never appears and nothing else is lost', () => {
    const redactor = new SecretRedactor()
    redactor.add('DEMO', VALUE)
    const text = `echo: ${VALUE}\r\nhunter2 is not it\r\n`
    const out = through(redactor, [...text])
    expect(out).toBe('echo: [secret DEMO]\r\nhunter2 is not it\r\n')
  })

  it('holds back only a tail that could begin a value, and releases it on flush', () => {
    const redactor = new SecretRedactor()
    redactor.add('DEMO', VALUE)
    expect(redactor.push(Buffer.from('prompt> hunt')).toString()).toBe('prompt> ')
    expect(redactor.holding).toBe(true)
    expect(redactor.flush().toString()).toBe('hunt')
    expect(redactor.holding).toBe(false)
    expect(redactor.push(Buffer.from('prompt> ')).toString()).toBe('prompt> ')
    expect(redactor.holding).toBe(false)
  })

  it('replaces several values, the longer first when one contains another, and multi-byte values split inside a character', () => {
    const redactor = new SecretRedactor()
    redactor.add('SHORT', 'abcdefgh')
    redactor.add('LONG', 'xxabcdefghxx')
    redactor.add('UNI', 'pässwört-€€')
    const text = 'xxabcdefghxx abcdefgh pässwört-€€'
    const bytes = Buffer.from(text)
    let out = ''
    for (let i = 0; i < bytes.length; i += 3) out += redactor.push(bytes.subarray(i, i + 3)).toString('latin1')
    out += redactor.flush().toString('latin1')
    expect(Buffer.from(out, 'latin1').toString()).toBe('[secret LONG] [secret SHORT] [secret UNI]')
  })

  it(`refuses values shorter than ${MIN_SECRET_BYTES} bytes`, () => {
    expect(() => new SecretRedactor().add('PIN', '1234')).toThrow(RangeError)
  })
})

describe('the text pass', () => {
  const redactor = new SecretRedactor()
  redactor.add('DEMO', VALUE)

  it('finds a value cut across lines and keeps the line count, at every cut point', () => {
    for (let at = 1; at < VALUE.length; at++) {
      const text = `pad "${VALUE.slice(0, at)}\n${VALUE.slice(at)}" end\nnext`
      expect(redactor.redactText(text), `${at}`).toBe('pad "[secret DEMO]\n" end\nnext')
    }
    expect(redactor.redactText(`a${VALUE.slice(0, 3)}\n\n${VALUE.slice(3, 9)}\n${VALUE.slice(9)}b`)).toBe('a[secret DEMO]\n\n\nb')
  })

  it('removes the part of a value inside a text whose rest is in the context around it', () => {
    expect(redactor.redactText(`${VALUE.slice(9)} tail\nmore`, { before: `line before ${VALUE.slice(0, 9)}` })).toBe('[secret DEMO] tail\nmore')
    expect(redactor.redactText(`head ${VALUE.slice(0, 4)}`, { after: `${VALUE.slice(4)} after` })).toBe('head [secret DEMO]')
    expect(redactor.redactText('nothing here', { before: VALUE, after: VALUE })).toBe('nothing here')
  })

  it('redacts screen rows that run on from one to the next, and keeps their number', () => {
    expect(redactor.redactRows(['xx hunte', 'r2-Correct-Horse yy', 'zz'])).toEqual(['xx [secret DEMO]', ' yy', 'zz'])
    expect(redactor.redactRows(['xx hunte  ', 'r2-Correct-Horse yy'])).toEqual(['xx hunte  ', 'r2-Correct-Horse yy'])
  })
})

describe('the live text pass', () => {
  function live(pieces: string[]): string[] {
    const redactor = new SecretRedactor()
    redactor.add('DEMO', VALUE)
    const stream = new LiveTextRedactor(redactor)
    return [...pieces.map((piece) => stream.push(piece)), stream.push('', true)]
  }

  it('holds a tail that could begin a value until the next piece decides it, at every split point', () => {
    const text = `out: ${VALUE}\nh then ${VALUE.slice(0, 7)}\n${VALUE.slice(7)} done\nhunter`
    for (let a = 0; a <= text.length; a++) {
      for (const b of [a, Math.min(text.length, a + 3)]) {
        const shown = live([text.slice(0, a), text.slice(a, b), text.slice(b)])
        expect(shown.join(''), `${a}/${b}`).toBe('out: [secret DEMO]\nh then [secret DEMO]\n done\nhunter')
        for (const piece of shown) expect(piece).not.toContain(VALUE.slice(0, 9))
      }
    }
  })

  it('holds only what could begin a value, and releases it as it was when the stream ends', () => {
    expect(live(['prompt> hunt', 'er2 is not it\n'])).toEqual(['prompt> ', 'hunter2 is not it\n', ''])
    expect(live(['a:hunter2-'])).toEqual(['a:', 'hunter2-'])
    expect(live(['no secret here\n'])).toEqual(['no secret here\n', ''])
  })
})
