import { describe, expect, it } from 'vitest'
import type { SendResult } from '@conch/pty'
import { renderSend } from '../src/index.ts'

/** A 10x40 alternate screen: rows `row N`, the cursor on row `cursor` (marked), any row replaced by `rows`. */
function screen(cursor: number, rows: Record<number, string> = {}, header = `[screen: alternate 10x40, cursor ${cursor},1]`): string {
  const lines = Array.from({ length: 10 }, (_, index) => rows[index + 1] ?? `row ${index + 1}`)
  lines[cursor - 1] += '  ← cursor'
  return [header, ...lines].join('\n')
}

function send(viewport: string, truncated = false): SendResult {
  return { viewport, waitReason: 'stdin_read', sessionStatus: { state: 'running' }, truncated, evidence: { tier: 'fixed', detail: '' }, elapsedMs: 0 }
}

describe('a screen like the one shown before', () => {
  it('says which runs of three or more rows are unchanged, keeping the header, the cursor row and the changed rows', () => {
    const before = screen(10)
    const now = screen(10, { 2: 'row 2 edited', 6: 'row 6 edited', 7: 'row 7 edited', 9: '' })
    const rendered = renderSend(send(now), 30_000, { shown: before })
    expect(rendered.text).toBe(['[screen: alternate 10x40, cursor 10,1]', 'row 1', 'row 2 edited', '[rows 3-5 unchanged]', 'row 6 edited', 'row 7 edited', 'row 8', '', 'row 10  ← cursor', '[wait: stdin_read]'].join('\n'))
    expect(rendered).toMatchObject({ truncated: false, shown: now })
  })

  it('keeps the cursor row when it did not change, and shows the row the cursor left', () => {
    const rendered = renderSend(send(screen(5)), 30_000, { shown: screen(4) })
    expect(rendered.text).toBe(['[screen: alternate 10x40, cursor 5,1]', '[rows 1-3 unchanged]', 'row 4', 'row 5  ← cursor', '[rows 6-10 unchanged]', '[wait: stdin_read]'].join('\n'))
  })

  it('shows rows that became empty at the end as empty lines, not as unchanged', () => {
    const now = ['[screen: alternate 10x40, cursor 1,1]', 'row 1  ← cursor', 'row 2', 'row 3', 'row 4', 'row 5'].join('\n')
    const rendered = renderSend(send(now), 30_000, { shown: screen(1) })
    expect(rendered.text).toBe(['[screen: alternate 10x40, cursor 1,1]', 'row 1  ← cursor', '[rows 2-5 unchanged]', '', '', '', '', '', '[wait: stdin_read]'].join('\n'))
  })

  it('shows the whole screen after one of another size or buffer, and remembers it', () => {
    for (const header of ['[screen: normal 10x40, cursor 10,1]', '[screen: alternate 11x40, cursor 10,1]', '[screen: alternate 10x41, cursor 10,1]']) {
      const now = screen(10, {}, header)
      expect(renderSend(send(now), 30_000, { shown: screen(10) })).toEqual({ text: `${now}\n[wait: stdin_read]`, truncated: false, shown: now })
    }
  })

  it('shows a screen cut by the byte bound or by the backend as before, and remembers neither', () => {
    const now = screen(10, { 1: 'x'.repeat(300) })
    const cut = renderSend(send(now), 200, { shown: screen(10, { 1: 'y'.repeat(300) }) })
    expect(cut.truncated).toBe(true)
    expect(cut.text).not.toContain('unchanged')
    expect(cut.shown).toBeUndefined()
    const byBackend = renderSend(send(screen(10), true), 30_000, { shown: screen(10) })
    expect(byBackend.text).not.toContain('unchanged')
    expect(byBackend.shown).toBeUndefined()
  })

  it('shows lines, and remembers nothing, when the output is not a screen', () => {
    expect(renderSend(send('$ ls\nfile'), 30_000, { shown: screen(10) })).toEqual({ text: '$ ls\nfile\n[wait: stdin_read]', truncated: false })
  })
})
