/**
 * terminal_read against a real bash (pty-local, unconfined) whose scrollback keeps little: a page
 * that reaches into dropped lines returns none in their place and says which of the lines asked
 * for are gone and which are kept; a page cut to the byte bound counts what it left out, and its
 * meta names the lines its text shows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TRUNCATED } from '../src/index.ts'
import { bootCase, type CaseHarness } from './cases/harness.ts'

describe('terminal_read paging (real bash)', () => {
  let harness: CaseHarness
  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access', ptyLocal: { scrollbackLines: 100, scrollbackHeadLines: 20, maxReadBytes: 4096 } })
  })
  afterAll(async () => {
    await harness?.dispose()
  })

  it('an offset into the dropped lines returns no other lines, and names the dropped and the kept', async () => {
    const sessionId = await harness.open()
    await harness.send(sessionId, 'seq 1 3000')
    const page = await harness.read(sessionId, { offset: 1000, count: 5 })
    const total = page.meta.totalLines as number
    const last = total - 1000
    expect(page.text).toMatch(/^\(no lines\)\n/)
    expect(page.meta.lineBegin).toBe((page.meta.lineEnd as number) + 1)
    const dropped = new RegExp(`^\\[dropped: 5 lines asked for \\(${last - 4}-${last}\\) no longer retained; retained: (\\d+)-(\\d+) and (\\d+)-${total}\\]$`, 'm').exec(page.text)
    expect(dropped, page.text).not.toBeNull()
    // What it names as kept is there: the flood's first lines and the newest ones.
    const [headFirst, headLast, newestFirst] = dropped!.slice(1).map(Number) as [number, number, number]
    const head = await harness.read(sessionId, { offset: total - headLast, count: headLast - headFirst + 1 })
    expect(head.meta).toMatchObject({ lineBegin: headFirst, lineEnd: headLast })
    expect(head.text).not.toMatch(/^\[dropped: \d+ lines asked for/m)
    // The newest 100 committed lines (the prompt, not yet committed, is line `total`).
    expect(newestFirst).toBe(total - 100)
  })

  it('names the gap a flood left only on a page that reaches back to it', async () => {
    const sessionId = await harness.open()
    await harness.send(sessionId, 'seq 1 3000')
    for (const n of [1, 2, 3, 4, 5]) await harness.send(sessionId, `echo after-$((${n}*11))`)
    const GAP = /^\[dropped: lines (\d+)-(\d+) are no longer retained; terminal_read with offset=(\d+) shows the lines before them\]$/m
    // The newest lines, far past the gap: the pointer to older lines, and no note of the gap.
    const newest = await harness.read(sessionId, { offset: 0, count: 5 })
    expect(newest.text).toMatch(/^after-55$/m)
    expect(newest.text).not.toContain('[dropped:')
    const total = newest.meta.totalLines as number
    const first = newest.meta.firstRetainedLine as number
    expect(newest.text).toMatch(new RegExp(`^\\[older: terminal_read with offset=5 shows the lines before ${total - 4}\\]$`, 'm'))
    // A page that begins with the first line after the gap names it (and has nothing older to point to) …
    const oldest = await harness.read(sessionId, { offset: total - first - 4, count: 5 })
    expect(oldest.meta).toMatchObject({ lineBegin: first, lineEnd: first + 4 })
    const gap = GAP.exec(oldest.text)
    expect(gap, oldest.text).not.toBeNull()
    expect(Number(gap![2])).toBe(first - 1)
    expect(oldest.text).not.toContain('[older:')
    // … as does one that asked for lines inside it; one that begins a line later does not.
    expect((await harness.read(sessionId, { offset: total - first - 1, count: 5 })).text).toMatch(GAP)
    const later = await harness.read(sessionId, { offset: total - first - 5, count: 5 })
    expect(later.meta).toMatchObject({ lineBegin: first + 1 })
    expect(later.text).not.toContain('[dropped:')
    expect(later.text).toMatch(new RegExp(`^\\[older: terminal_read with offset=${total - first} shows the lines before ${first + 1}\\]$`, 'm'))
    // The gap's offset pages the flood's first lines, up to the line before the gap.
    const head = await harness.read(sessionId, { offset: Number(gap![3]), count: 3 })
    expect(head.meta).toMatchObject({ lineEnd: Number(gap![1]) - 1 })
  })

  it('a page cut to the bound counts the lines and bytes it left out, and its meta agrees with its text', async () => {
    const sessionId = await harness.open()
    // Eighteen lines of 1500 characters and one of 273, then the prompt; the page asks for the ten
    // before the short one, more than the backend's 4096-byte page holds.
    await harness.send(sessionId, "yes abcdefghij | head -c 30000 | tr -d '\\n' | fold -w 1500; echo")
    const read = (maxOutputBytes: number) => harness.call('terminal_read', { sessionId, offset: 2, count: 10, maxOutputBytes })
    for (const maxOutputBytes of [4000, 1000]) {
      const page = await read(maxOutputBytes)
      expect(page.text).not.toContain(TRUNCATED)
      const shown = /^\[lines: (\d+)-(\d+) of \d+\]$/m.exec(page.text)
      expect(shown, page.text).not.toBeNull()
      expect(page.meta).toMatchObject({ lineBegin: Number(shown![1]), lineEnd: Number(shown![2]), truncated: true })
      const begin = Number(shown![1])
      // Lines 10-19 asked for: every one before the first shown is counted.
      expect(page.text).toMatch(new RegExp(`^\\[… ${begin - 10} older lines left out to fit the byte bound: terminal_read offset=${21 - begin + 1} shows them\\]$`, 'm'))
    }
    // At 1000 bytes not even one line fits whole: its head is cut, and the count says by how much.
    const small = await read(1000)
    const tail = small.text.slice(0, small.text.indexOf('\n[lines: '))
    const cut = /^\[… line \d+: its first (\d+) bytes omitted\]$/m.exec(small.text)
    expect(cut, small.text).not.toBeNull()
    expect(Number(cut![1]) + tail.length).toBe(1500)
  })
})
