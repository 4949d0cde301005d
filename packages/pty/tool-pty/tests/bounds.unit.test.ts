import { afterEach, describe, expect, it } from 'vitest'
import { fit, renderRead, renderScreen, renderSend, TRUNCATED } from '../src/index.ts'
import { boot, type Harness } from './harness.ts'

let harness: Harness

afterEach(async () => {
  const current = harness as Harness | undefined
  harness = undefined as never
  await current?.dispose()
})

const bytes = (text: string) => Buffer.byteLength(text, 'utf8')
const roundTrips = (text: string) => Buffer.from(text, 'utf8').toString('utf8') === text && !text.includes('\uFFFD')

/** The output part of a rendered send: everything before the first metadata line. */
function body(text: string): string {
  const index = text.search(/(^|\n)\[(?:wait|exit): /)
  return index <= 0 ? '' : text.slice(0, index)
}

describe('terminal_open', () => {
  it('refuses a name over 64 characters, naming the field and the bound, and opens nothing', async () => {
    harness = await boot()
    const result = await harness.call('terminal_open', { type: 'shell', name: 'x'.repeat(10_000) })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toMatch(/^invalid arguments for terminal_open:\n- name: name must be at most 64 characters\n/)
    expect(result.content[0]!.text.length).toBeLessThan(200)
    expect(await harness.text('terminal_list', {})).toBe('(no terminals; terminal_open starts one)')
  })
})

describe('results within maxOutputBytes', () => {
  it('keeps the head, the tail and every metadata line when a send is cut, and says what it left out', async () => {
    harness = await boot({ toolPty: { maxOutputBytes: 300 } })
    await harness.call('terminal_open', { type: 'shell' })
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 1000' })
    const text = result.content[0]!.text
    expect(bytes(text)).toBeLessThanOrEqual(300)
    const lines = text.split('\n')
    const at = lines.findIndex((line) => line.startsWith('[… '))
    const head = lines.slice(0, at).map(Number)
    const tail = lines.slice(at + 1, -1).map(Number)
    expect(head).toEqual(Array.from({ length: head.length }, (_, index) => index + 1))
    expect(tail).toEqual(Array.from({ length: tail.length }, (_, index) => 1000 - tail.length + 1 + index))
    const omitted = 1000 - head.length - tail.length
    expect(lines[at]).toBe(`[… ${Array.from({ length: omitted }, (_, index) => `${head.length + 1 + index}\n`).join('').length.toLocaleString('en-US')} bytes (${omitted} lines) omitted; terminal_read {offset: ${tail.length}, count: ${omitted}} pages them]`)
    expect(lines.at(-1)).toBe('[wait: stdin_read]')
    expect(result.meta).toMatchObject({ truncated: true })
  })

  it('honours maxOutputBytes per call up to maxResultBytes, and refuses more', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    const small = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 1000', maxOutputBytes: 200 })
    expect(bytes(small.content[0]!.text)).toBeLessThanOrEqual(200)
    const over = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 1', maxOutputBytes: 262145 })
    expect(over.isError).toBe(true)
    expect(over.content[0]!.text).toContain('maxOutputBytes')
  })

  it('cuts multi-byte and emoji output on code points, within the default budget', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    for (const [command, unit] of [
      ['repeat 300000 é', 'é'],
      ['repeat 100000 😀', '😀'],
      ['repeat 100000 中', '中'],
    ] as const) {
      const text = (await harness.call('terminal_send', { sessionId: 'pty-1', text: command })).content[0]!.text
      expect(bytes(text)).toBeLessThanOrEqual(30_000)
      expect(roundTrips(text)).toBe(true)
      expect(text.endsWith('\n[wait: stdin_read]')).toBe(true)
      // One long line: its first and its newest bytes are shown around the marker.
      const [head, marker, tail] = body(text).replace(/\n$/, '').split('\n')
      expect(marker).toMatch(/^\[… [\d,]+ bytes \(1 line\) omitted; terminal_read \{offset: 1, count: 1\} pages them\]$/)
      for (const part of [head!, tail!]) {
        expect(part.length).toBeGreaterThan(1000)
        expect(part.replaceAll(unit, '')).toBe('')
      }
    }
  })

  it('fits every bound from 64 bytes up, keeping all metadata once it fits', async () => {
    for (const maxResultBytes of [64, 65, 80, 100, 150, 250, 400]) {
      harness = await boot({ toolPty: { maxOutputBytes: maxResultBytes }, memory: { yesLines: 50 } })
      await harness.call('terminal_open', { type: 'shell' })
      const text = (await harness.call('terminal_send', { sessionId: 'pty-1', text: 'yes 😀é' })).content[0]!.text
      expect(bytes(text)).toBeLessThanOrEqual(maxResultBytes)
      expect(roundTrips(text)).toBe(true)
      if (maxResultBytes >= 100) {
        expect(text).toContain('[wait: timeout]\n[input: not_reading')
        expect(text).toMatch(/\[… [\d,]+ bytes \([\d,]+ lines\) omitted/)
      }
      await harness.dispose()
      harness = undefined as never
    }
  })

  it('bounds error results too', async () => {
    harness = await boot({ toolPty: { maxOutputBytes: 64 } })
    const result = await harness.call('terminal_send', { sessionId: `pty-${'9'.repeat(200)}`, text: 'ls' })
    expect(result.isError).toBe(true)
    expect(bytes(result.content[0]!.text)).toBeLessThanOrEqual(64)
    expect(result.content[0]!.text.startsWith('NO_SESSION: unknown PTY session pty-999')).toBe(true)
  })

  it('cuts a read page by whole lines from the oldest side and numbers what it shows', async () => {
    harness = await boot({ toolPty: { maxOutputBytes: 120 } })
    await harness.call('terminal_open', { type: 'shell' })
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 100' })
    const text = await harness.text('terminal_read', { sessionId: 'pty-1' })
    expect(bytes(text)).toBeLessThanOrEqual(120)
    const match = /\[lines: (\d+)-101 of 101\]/.exec(text)
    expect(match).not.toBeNull()
    const begin = Number(match![1])
    const shown = text.slice(0, text.indexOf('\n[lines: ')).split('\n')
    expect(shown).toEqual(Array.from({ length: 101 - begin + 1 }, (_, index) => String(begin - 1 + index)))
    // The lines left out are counted, with the offset that pages them, and the meta agrees with the text.
    expect(text).toMatch(new RegExp(`^\\[… ${begin - 1} older lines left out to fit the byte bound: terminal_read offset=${101 - begin + 1} shows them\\]$`, 'm'))
    expect(text).not.toContain(TRUNCATED)
    expect((await harness.call('terminal_read', { sessionId: 'pty-1' })).meta).toMatchObject({ lineBegin: begin, lineEnd: 101 })
  })
})

describe('fit', () => {
  it('never exceeds the bound and keeps a prefix and a suffix of the body, for every bound', () => {
    const body = 'héllo 😀 wörld 中文 '.repeat(20)
    const meta = [{ text: '[wait: stdin_read]' }, { text: '[session: running]' }, { text: '[note: a long explanatory line here]', short: '' }]
    for (let maxBytes = 0; maxBytes <= bytes(body) + 120; maxBytes++) {
      const { text } = fit({ body, meta, noticeAt: 2, truncated: false, maxBytes })
      expect(bytes(text)).toBeLessThanOrEqual(maxBytes)
      expect(roundTrips(text)).toBe(true)
      if (maxBytes >= 60) expect(text).toMatch(/\[wait: stdin_read\]\n\[session: running\]/)
      const kept = text.slice(0, text.indexOf('[wait: ')).replace(/\n$/, '')
      const cut = /^(.*)\n?\[… [\d,]+ bytes \(1 line\) omitted\]\n(.*)$/.exec(kept)
      if (cut !== null) {
        expect(body.startsWith(cut[1]!)).toBe(true)
        expect(body.endsWith(cut[2]!)).toBe(true)
      }
      if (maxBytes >= 150 && bytes(body) + 60 > maxBytes) expect(cut).not.toBeNull()
    }
  })

  it('leaves a result that fits untouched', () => {
    expect(fit({ body: 'ok', meta: [{ text: '[a]' }], noticeAt: 1, truncated: false, maxBytes: 100 })).toEqual({ text: 'ok\n[a]', truncated: false, cut: false })
    expect(fit({ body: '', empty: '(none)', meta: [{ text: '[a]' }], noticeAt: 1, truncated: false, maxBytes: 100 }).text).toBe('(none)\n[a]')
  })

  it('shows the notice when the backend already cut the output, even if it fits', () => {
    const rendered = renderSend(
      { viewport: 'tail', waitReason: 'stdin_read', sessionStatus: { state: 'running' }, truncated: true, evidence: { tier: 'fixed', detail: '' }, elapsedMs: 0 },
      1000,
    )
    expect(rendered.text).toBe(`${TRUNCATED}\ntail\n[wait: stdin_read]`)
  })

  it('names network none after the failed lookups of curl, git, Node, Go and glibc, and only under it', () => {
    const failures = [
      'curl: (6) Could not resolve host: pypi.org',
      "fatal: unable to access 'https://github.com/x/': Could not resolve host: github.com",
      'Error: getaddrinfo ENOTFOUND registry.npmjs.org',
      'dial tcp: lookup proxy.golang.org on 10.0.0.1:53: no such host',
      'ping: example.com: Name or service not known',
      'connect: Network is unreachable',
    ]
    for (const viewport of failures) {
      const result = { viewport, waitReason: 'stdin_read' as const, sessionStatus: { state: 'running' as const }, truncated: false, evidence: { tier: 'fixed' as const, detail: '' }, elapsedMs: 0 }
      expect(renderSend(result, 1000, { networkNone: true }).text).toBe(`${viewport}\n[wait: stdin_read]\n[network: none — this sandbox has no network beyond loopback, so no host name resolves]`)
      expect(renderSend(result, 1000).text).toBe(`${viewport}\n[wait: stdin_read]`)
    }
  })

  it('falls back to short metadata forms before dropping output', () => {
    const result = { viewport: 'x', waitReason: 'inferred_idle' as const, sessionStatus: { state: 'running' as const }, truncated: false, inputState: 'continuation' as const, evidence: { tier: 'fixed' as const, detail: '' }, elapsedMs: 0 }
    expect(renderSend(result, 64).text).toBe('x\n[wait: inferred_idle]\n[input: continuation]')
  })

  it('puts the end of an earlier command among the metadata when the backend could not place it, keeping it when the bound is tight', () => {
    const result = {
      viewport: 'x',
      waitReason: 'stdin_read' as const,
      sessionStatus: { state: 'running' as const },
      truncated: true,
      inputState: 'not_reading' as const,
      earlier: { program: 'bash', exitStatus: 7 },
      exitStatus: 0,
      evidence: { tier: 'fixed' as const, detail: '' },
      elapsedMs: 0,
    }
    expect(renderSend(result, 1000).text).toBe(`${TRUNCATED}\nx\n[exit: 0]\n[input: not_reading — typed ahead while bash ran]\n[earlier command ended, exit: 7]`)
    expect(renderSend(result, 92).text).toBe(`${TRUNCATED}\nx\n[exit: 0]\n[input: not_reading]\n[earlier command ended, exit: 7]`)
    // A REPL prints no prompt marker: settled at its read again, the input typed ahead was read.
    const { exitStatus: _, ...unended } = result
    const repl = { ...unended, viewport: 'woke\n>>> f(5)\n10\n>>> ', truncated: false, earlier: { program: 'python3' } }
    expect(renderSend(repl, 1000).text).toBe('woke\n>>> f(5)\n10\n>>> \n[wait: stdin_read]\n[input: not_reading — typed ahead while python3 was busy; read since]')
    expect(renderSend({ ...repl, waitReason: 'inferred_idle' }, 1000).text).toContain('[input: not_reading — typed ahead while python3 runs; whatever reads the terminal next gets it]')
  })

  it('cuts a screen result to its header, its cursor row and its top rows, not its tail', () => {
    const rows = Array.from({ length: 40 }, (_, i) => (i === 37 ? '$ ready  ← cursor' : `row ${i + 1} ${'é'.repeat(60)}`))
    const viewport = ['[screen: alternate 40x160, cursor 38,9]', ...rows].join('\n')
    const result = { viewport, waitReason: 'stdin_read' as const, sessionStatus: { state: 'running' as const }, truncated: false, evidence: { tier: 'fixed' as const, detail: '' }, elapsedMs: 0 }
    for (const maxBytes of [160, 300, 1000, 4000]) {
      for (const rendered of [renderSend(result, maxBytes), renderScreen(viewport, maxBytes)]) {
        expect(bytes(rendered.text)).toBeLessThanOrEqual(maxBytes)
        expect(rendered.truncated).toBe(true)
        const lines = rendered.text.split('\n')
        expect(lines[0]).toBe('[screen: alternate 40x160, cursor 38,9]')
        expect(lines).toContain('$ ready  ← cursor')
        expect(lines.indexOf('$ ready  ← cursor')).toBeGreaterThan(1)
        expect(lines).toContain(TRUNCATED)
      }
    }
    expect(renderSend(result, 1000).text).toMatch(/\n\$ ready {2}← cursor\n\[rows 39-40 not shown\]\n\[wait: stdin_read\]\n\[… output omitted\]$/)
  })

  it('renders a page that fits with its numbers', () => {
    expect(renderRead({ text: 'a\nb', totalLines: 2, firstRetainedLine: 1, lineBegin: 1, lineEnd: 2, truncated: false }, 1000)).toEqual({ text: 'a\nb\n[lines: 1-2 of 2]', truncated: false, lineBegin: 1 })
  })
})
