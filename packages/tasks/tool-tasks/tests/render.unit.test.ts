import { describe, expect, it } from 'vitest'
import type { TaskSnapshot } from '@conch/tasks'
import { renderList, renderSnapshot, statusLine } from '../src/render.ts'

function snapshot(overrides: Partial<TaskSnapshot> = {}): TaskSnapshot {
  return {
    id: 'task-1',
    kind: 'pty-send',
    label: 'pty-1: make',
    status: 'running',
    output: '',
    omitted: undefined,
    events: [],
    fields: {},
    meta: {},
    startedAt: '2025-01-01T00:00:00.000Z',
    ...overrides,
  }
}

const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

describe('statusLine', () => {
  it('puts the status first, then the fields in insertion order', () => {
    expect(statusLine('completed', { wait: 'stdin_read', exit: '0' })).toBe(
      '[status: completed, wait: stdin_read, exit: 0]',
    )
  })

  it('keeps a multi-line field value on one line', () => {
    expect(statusLine('failed', { reason: 'first\n  second\r\n' })).toBe('[status: failed, reason: first second]')
  })

  it('puts notes after the fields', () => {
    expect(statusLine('completed', { exit: '1' }, ['matched "Listening on"'])).toBe('[status: completed, exit: 1, matched "Listening on"]')
  })
})

describe('renderSnapshot', () => {
  it('says (no new output) when nothing was produced since the last read', () => {
    expect(renderSnapshot(snapshot(), { maxBytes: 4096 })).toBe('(no new output)\n[status: running]')
  })

  it('ends the output with a newline before the status line', () => {
    expect(renderSnapshot(snapshot({ output: 'compiling' }), { maxBytes: 4096 })).toBe('compiling\n[status: running]')
    expect(
      renderSnapshot(snapshot({ output: 'done\n', status: 'completed', fields: { wait: 'stdin_read' } }), {
        maxBytes: 4096,
      }),
    ).toBe('done\n[status: completed, wait: stdin_read]')
  })

  it('starts the output with a marker counting what the task dropped before the read', () => {
    expect(renderSnapshot(snapshot({ output: 'tail\n', omitted: { bytes: 299_999_000, lines: 1 } }), { maxBytes: 4096 })).toBe(
      '[… 299,999,000 bytes (1 line) omitted]\ntail\n[status: running]',
    )
  })

  it('counts what the task dropped and what the budget cuts in one marker', () => {
    const line = 'x'.repeat(100_000)
    const text = renderSnapshot(snapshot({ output: line, omitted: { bytes: 300_000_000 - 100_000, lines: 1 } }), { maxBytes: 2048 })
    expect(text.match(/omitted/g)).toHaveLength(1)
    const [, bytes] = /^\[… ([\d,]+) bytes \(\d+ lines?\) omitted\]\n/.exec(text)!
    const shown = text.split('\n')[1]!
    expect(Number(bytes!.replaceAll(',', '')) + shown.length).toBe(300_000_000)
  })

  it('shows the failure message of a failed task on one line', () => {
    expect(
      renderSnapshot(snapshot({ status: 'failed', error: 'spawn bash ENOENT\nat …' }), { maxBytes: 4096 }),
    ).toBe('(no new output)\n[status: failed]\n[error: spawn bash ENOENT at …]')
  })

  it('says how long a wait lasted when the task is still running, in its status line', () => {
    expect(renderSnapshot(snapshot({ output: '50%\n' }), { maxBytes: 4096, waitedMs: 30000 })).toBe('50%\n[status: running, waited 30000 ms]')
  })

  it('names the events the read is the first to show', () => {
    expect(renderSnapshot(snapshot({ output: 'Listening on :8080\n', events: ['matched "Listening on"'] }), { maxBytes: 4096 })).toBe(
      'Listening on :8080\n[status: running, matched "Listening on"]',
    )
  })

  it('keeps the head and the tail of the output and the whole trailer within the budget', () => {
    const output = Array.from({ length: 400 }, (_, i) => `line ${i} 😀\n`).join('')
    const text = renderSnapshot(snapshot({ output, status: 'completed', fields: { exit: '0' } }), { maxBytes: 1024 })
    expect(bytes(text)).toBeLessThanOrEqual(1024)
    expect(text).toMatch(/^line 0 😀\n/)
    expect(text).toMatch(/\n\[… [\d,]+ bytes \([\d,]+ lines\) omitted\]\n/)
    expect(text).toMatch(/line 399 😀\n\[status: completed, exit: 0\]$/)
    expect(text).not.toContain('\uFFFD')
  })

  it('keeps more of the tail when the command failed', () => {
    const output = Array.from({ length: 400 }, (_, i) => `line ${i}\n`).join('')
    const tailOf = (exit: string) => {
      const text = renderSnapshot(snapshot({ output, status: 'completed', fields: { exit } }), { maxBytes: 1024 })
      return text.slice(text.indexOf('omitted]')).split('\n').length
    }
    expect(tailOf('2')).toBeGreaterThan(tailOf('0'))
  })
})
