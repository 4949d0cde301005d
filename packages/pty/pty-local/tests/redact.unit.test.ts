import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import { cleanProbe, type ReadProbe } from '../src/inspector.ts'
import { LiveTextRedactor, MIN_SECRET_BYTES, PROCESS_PIECE_CHARS, SecretRedactor } from '@conch/pty'

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

describe('the forms conch writes a value in', () => {
  it('replaces each line of a multi-line value where util.inspect splits it, at any depth; a line under the minimum stays', () => {
    const value = ['-----BEGIN TEST KEY-----', 'MIIEowIBAAKCAQEA7v2Yq+bXk3Lw9sQpZtN', "it's-a-line\tZq9", 'short', '-----END TEST KEY-----'].join('\n')
    const redactor = new SecretRedactor()
    redactor.add('KEY', value)
    for (const shown of [inspect({ key: value }), inspect([value]), inspect({ a: { b: [value] } })]) {
      expect(shown).toContain(" +\n")
      const redacted = redactor.redactText(shown)
      for (const line of value.split('\n').filter((line) => line.length >= MIN_SECRET_BYTES)) expect(redacted).not.toContain(inspect(line).slice(1, -1))
      expect(redacted).toContain("'short\\n' +")
    }
  })

  it('replaces its bytes spelled in hex as a Buffer shows them, and in decimal on one line or wrapped into columns', () => {
    const value = 'hunter2-bytes-Zq9'
    const redactor = new SecretRedactor()
    redactor.add('DEMO', value)
    const bytes = Buffer.from(`${value}\n`)
    expect(redactor.redactText(inspect(bytes))).toBe('<Buffer [secret DEMO] 0a>')
    expect(redactor.redactText([...bytes].join(', '))).toBe('[secret DEMO], 10')
    expect(redactor.redactText(JSON.stringify([...bytes]))).toBe('[[secret DEMO],10]')
    // A Buffer shows its first 50 bytes: a longer value, cut there, is still replaced.
    redactor.add('LONG', 'x'.repeat(40) + value)
    expect(redactor.redactText(inspect(Buffer.from('x'.repeat(40) + value)))).toBe('<Buffer [secret LONG] ... 7 more bytes>')
    // A byte spelling's pieces say nothing of a process name.
    expect(redactor.redactProcessText('68 75 6e')).toBe('68 75 6e')
    // A typed array wrapped into aligned columns, as one text and as rows.
    const columns = inspect({ bytes: new Uint8Array(bytes) })
    expect(columns).toContain(',\n')
    expect(redactor.redactText(columns)).toBe('{\n  bytes: Uint8Array(18) [\n    [secret DEMO]\n\n,  10\n  ]\n}')
    expect(redactor.redactRows(columns.split('\n')).join('\n')).toBe(redactor.redactText(columns))
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

describe('the process-text pass', () => {
  const redactor = new SecretRedactor()
  redactor.add('DEMO', 'hunter2-S3cretValue')
  redactor.add('SHORT', 'pw-12-chars!')

  it('replaces a name holding a value whole, or a piece of one, by the secret', () => {
    expect(redactor.redactProcessText('pw-12-chars!')).toBe('[secret SHORT]')
    // A 19-character value as a process name: cut to 15 bytes, or split over two names.
    expect(redactor.redactProcessText('hunter2-S3cretV')).toBe('[secret DEMO]')
    expect(redactor.redactProcessText('hunter2-S3cr')).toBe('[secret DEMO]')
    expect(redactor.redactProcessText('etValue')).toBe('[secret DEMO]')
    // The whole text goes, not just the piece: what is around it is the program's to choose.
    expect(redactor.redactProcessText('/tmp/w/x-S3cretV-y.fifo fd 3')).toBe('[secret DEMO]')
  })

  it(`keeps names that share fewer than ${PROCESS_PIECE_CHARS} characters with every value`, () => {
    for (const name of ['bash', 'hunte', 'Value', 'S3cre', 'chars', 'python3', 'perl']) expect(redactor.redactProcessText(name), name).toBe(name)
    expect(redactor.redactProcessText('hunter')).toBe('[secret DEMO]')
    expect(redactor.redactProcessText('chars!')).toBe('[secret SHORT]')
    expect(new SecretRedactor().redactProcessText('hunter2-S3cretV')).toBe('hunter2-S3cretV')
  })

  it('cleans every process text of a probe, and its detail line built from them', () => {
    const clean = (text: string) => redactor.redactProcessText(text)
    const raw: ReadProbe = {
      verdict: 'reading',
      tpgid: 50,
      tasks: [
        { pid: 50, tid: 50, name: 'hunter2-S3cretV', state: 'S', syscall: 'pselect6', switches: 1, fds: [0, 3], terminalFd: 0, sources: ['/w/hunter2-S3cretValue.fifo fd 3'] },
        { pid: 50, tid: 51, name: 'hunter2-S3cretV', state: 'S', syscall: 'read', switches: 1, fds: [] },
        { pid: 52, tid: 52, name: 'cat', state: 'S', syscall: 'read', switches: 1, fds: [] },
      ],
      reader: { name: 'hunter2-S3cretV', pid: 50, tid: 50, syscall: 'pselect6', fd: 0, path: '/dev/pts/0' },
      detail: 'hunter2-S3cretV[50] pselect6 fd0 /dev/pts/0',
      sources: ['/w/hunter2-S3cretValue.fifo fd 3'],
    }
    const cleaned = cleanProbe(raw, clean)
    expect(cleaned.detail).toBe('[secret DEMO][50] pselect6 fd0 /dev/pts/0')
    expect(cleaned.reader).toEqual({ ...raw.reader, name: '[secret DEMO]' })
    expect(cleaned.tasks.map((task) => task.name)).toEqual(['[secret DEMO]', '[secret DEMO]', 'cat'])
    expect(cleaned.tasks[0]!.sources).toEqual(['[secret DEMO]'])
    expect(cleaned.tasks[2]).toBe(raw.tasks[2])
    expect(cleaned.sources).toEqual(['[secret DEMO]'])
    const plain: ReadProbe = { ...raw, tasks: [raw.tasks[2]!], reader: { ...raw.reader!, name: 'cat' }, detail: 'cat[52] read fd0 /dev/pts/0', sources: [] }
    expect(cleanProbe(plain, clean)).toBe(plain)
  })
})
