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
