/**
 * Results sized for a model, through the tools on real bash: a flood keeps its head and its tail
 * around a marker that names what was dropped and the terminal_read call that pages it; a
 * failing command keeps a larger tail; binary output is summarised; the inferred-idle note says
 * how to keep waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, type CaseHarness } from './cases/harness.ts'

const MARKER = /^\[… ([\d,]+) bytes \(([\d,]+) lines\) omitted; terminal_read \{offset: (\d+), count: (\d+)\} pages them\]$/m
/** The marker when the scrollback no longer keeps all the omitted lines: the page offered, then how many are gone. */
const MARKER_PART = /^\[… ([\d,]+) bytes \(([\d,]+) lines\) omitted; terminal_read \{offset: (\d+), count: (\d+)\} pages the last ([\d,]+); the ([\d,]+) before those are no longer kept\]$/m

describe('result budget', () => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('keeps the head and the tail of seq 1 200000 within 30 000 bytes, and the marker pages the middle', async () => {
    const id = await harness.open()
    const seen = await harness.call('terminal_send', { sessionId: id, text: 'seq 1 200000', timeoutMs: 60_000 })
    expect(Buffer.byteLength(seen.text)).toBeLessThanOrEqual(30_000)
    const lines = seen.text.split('\n')
    const at = lines.findIndex((line) => MARKER_PART.test(line))
    expect(at, seen.text.slice(0, 400)).toBeGreaterThan(0)
    // The head is 1, 2, 3, … (the echo of the command is left out); the tail ends with 200000 and the prompt's metadata.
    expect(lines.slice(0, 4)).toEqual(['1', '2', '3', '4'])
    expect(seen.text).toMatch(/\n199999\n200000\n/)
    expect(seen.text).toMatch(/\n\[exit: 0\]$/)
    const [, , omittedLines, offset, count, last, gone] = MARKER_PART.exec(lines[at]!)!
    const plain = (digits: string) => Number(digits.replace(/,/g, ''))
    const lastHead = Number(lines[at - 1])
    const firstTail = Number(lines[at + 1])
    expect(firstTail - lastHead - 1).toBe(plain(omittedLines!))
    // The scrollback keeps its newest 10 000 lines: the marker offers only those, and counts the rest as gone.
    expect(plain(last!)).toBe(Number(count))
    expect(plain(last!) + plain(gone!)).toBe(plain(omittedLines!))

    // The paging call the marker names returns lines from the middle, ending right before the kept
    // tail, and none older than the marker offered.
    const page = await harness.call('terminal_read', { sessionId: id, offset: Number(offset), count: Number(count) })
    expect(page.isError).toBe(false)
    const numbers = page.text.split('\n').filter((line) => /^\d+$/.test(line)).map(Number)
    expect(numbers.length).toBeGreaterThan(100)
    expect(numbers.at(-1)).toBe(firstTail - 1)
    expect(numbers[0]!).toBeGreaterThanOrEqual(firstTail - Number(count))

    // The scrollback kept the flood's beginning too: the gap's note names the read that shows it.
    const oldest = await harness.call('terminal_read', { sessionId: id, offset: 9990, count: 20 })
    const dropped = /\[dropped: lines (\d+)-(\d+) are no longer retained; terminal_read with offset=(\d+) shows the lines before them\]/.exec(oldest.text)
    expect(dropped, oldest.text).not.toBeNull()
    const before = await harness.call('terminal_read', { sessionId: id, offset: Number(dropped![3]), count: 5 })
    const head = before.text.split('\n').filter((line) => /^\d+$/.test(line)).map(Number)
    // The last of the 2000 lines kept from the flood's beginning (scrollbackHeadLines), less the command line.
    expect(head).toEqual([1995, 1996, 1997, 1998, 1999])
  })

  it('honours maxOutputBytes per call and keeps a larger tail for a failing command', async () => {
    const id = await harness.open()
    const flood = 'for i in $(seq 1 5000); do echo "line $i"; done'
    const passing = await harness.call('terminal_send', { sessionId: id, text: `${flood}; true`, maxOutputBytes: 4000 })
    const failing = await harness.call('terminal_send', { sessionId: id, text: `${flood}; false`, maxOutputBytes: 4000 })
    for (const seen of [passing, failing]) {
      expect(Buffer.byteLength(seen.text)).toBeLessThanOrEqual(4000)
      expect(seen.text).toMatch(MARKER)
    }
    expect(failing.text).toMatch(/\n\[exit: 1\]$/)
    const tailLines = (text: string) => Number(MARKER.exec(text)![3])
    expect(tailLines(failing.text)).toBeGreaterThan(tailLines(passing.text))
  })

  it('keeps the head and the tail of what a flood printed before a signal stopped it', async () => {
    const id = await harness.open()
    const started = await harness.call('terminal_send', { sessionId: id, text: 'yes flood-line', timeoutMs: 500 })
    expect(started.meta.waitReason).toBe('timeout')
    // Let it print 5 000 more lines (55 KB) after the send returned: the signal's result shows them.
    const lines = async () => (await harness.call('terminal_read', { sessionId: id, count: 1 })).meta['totalLines'] as number
    const from = await lines()
    while ((await lines()) < from + 5000) await new Promise((resolve) => setImmediate(resolve))
    const stopped = await harness.signal(id, 'SIGINT')
    expect(Buffer.byteLength(stopped.text)).toBeLessThanOrEqual(30_000)
    // It starts where the send's result left off, maybe inside a line.
    expect(stopped.text).toMatch(/^[a-z-]*\nflood-line\n/)
    expect(stopped.text).toMatch(/^\[… [\d,]+ bytes \([\d,]+ lines\) omitted; terminal_read \{offset: \d+, count: \d+\} pages them\]$/m)
    expect(stopped.text).toMatch(/\n\[signal: SIGINT delivered to yes /)
  })

  it('bounds task_output of a background flood to its budget around the omission marker', async () => {
    const id = await harness.open()
    const taskId = await harness.sendBackground(id, 'seq 1 200000')
    const done = await harness.taskDone(taskId)
    expect(Buffer.byteLength(done.text)).toBeLessThanOrEqual(30_000)
    expect(done.text).toMatch(/^\[… [\d,]+ bytes \([\d,]+ lines\) omitted\]$/m)
    expect(done.text).toMatch(/\n199999\n200000\n/)
    expect(done.text).toMatch(/\[status: completed, exit: 0\]$/)
  })

  it('summarises binary output instead of dumping it', async () => {
    const id = await harness.open()
    // 2048 bytes that are no UTF-8 at all (lone continuation and lead bytes), and no control characters.
    const seen = await harness.send(id, `python3 -c "import sys; sys.stdout.buffer.write(bytes(range(128, 256)) * 16)"; echo; echo after`)
    expect(seen.text).toMatch(/^\[binary: 2,048 bytes, 2,048 invalid UTF-8\]$/m)
    expect(seen.text).toMatch(/\nafter\n/)
    expect(seen.text).not.toContain('\ufffd')
    // A read of the scrollback summarises the line too, keeping the line numbers.
    const page = await harness.call('terminal_read', { sessionId: id, count: 3 })
    expect(page.text).toMatch(/^\[binary: [\d,]+ bytes, [\d,]+ invalid UTF-8\]\nafter\n/m)
    expect(page.text).not.toContain('\ufffd')
  })

  it('says in the inferred-idle note how to keep waiting, and that send keeps waiting', async () => {
    const id = await harness.open()
    const seen = await harness.call('terminal_send', { sessionId: id, text: 'sleep 2; echo done-waiting', idleMs: 300 })
    expect(seen.meta.waitReason).toBe('inferred_idle')
    expect(seen.text).toContain('send {"text":"","submit":false,"idleMs":N}')
    // Usually it returns at the prompt; on a slow machine the sleep may have ended before it started.
    const more = await harness.call('terminal_send', { sessionId: id, text: '', submit: false, idleMs: 10_000 })
    expect(more.text).toContain('done-waiting')
  })
})
