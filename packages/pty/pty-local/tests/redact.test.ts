import { describe, expect, it } from 'vitest'
import { MIN_SECRET_BYTES, SecretRedactor } from '../src/redact.ts'

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
