import { describe, expect, it } from 'vitest'
import { boundScreenText, CURSOR_MARK, parseScreenHeader } from '../src/index.ts'

const bytes = (text: string) => Buffer.byteLength(text, 'utf8')
const HEADER = '[screen: alternate 40x160, cursor 38,9]'
/** 40 rows of multi-byte text, the cursor on row 38. */
const SCREEN = [HEADER, ...Array.from({ length: 40 }, (_, i) => (i === 37 ? `$ prompt${CURSOR_MARK}` : `row ${i + 1} ${'中'.repeat(40)}`))].join('\n')

describe('boundScreenText', () => {
  it('keeps the header and the cursor row under every bound, numbering the rows it leaves out', () => {
    for (let maxBytes = bytes(HEADER) + 1 + bytes(`$ prompt${CURSOR_MARK}`) + 1 + bytes('[rows 1-37 not shown]'); maxBytes <= bytes(SCREEN); maxBytes += 7) {
      const bounded = boundScreenText(SCREEN, maxBytes)!
      expect(bytes(bounded.text), `bound ${maxBytes}`).toBeLessThanOrEqual(maxBytes)
      const lines = bounded.text.split('\n')
      expect(lines[0]).toBe(HEADER)
      expect(lines).toContain(`$ prompt${CURSOR_MARK}`)
      expect(bounded.text).not.toContain('\uFFFD')
      // Every kept row is whole and can be counted to its number.
      let row = 1
      for (const line of lines.slice(1)) {
        const gap = /^\[rows? (\d+)(?:-(\d+))? not shown\]$/.exec(line)
        if (gap) {
          expect(Number(gap[1])).toBe(row)
          row = Number(gap[2] ?? gap[1]) + 1
        } else {
          expect(line).toBe(row === 38 ? `$ prompt${CURSOR_MARK}` : `row ${row} ${'中'.repeat(40)}`)
          row++
        }
      }
    }
  })

  it('keeps the top rows in order and marks the rest', () => {
    const text = boundScreenText(SCREEN, 400)!.text.split('\n')
    expect(text[0]).toBe(HEADER)
    expect(text[1]).toMatch(/^row 1 /)
    expect(text.slice(-3)).toEqual([expect.stringMatching(/^\[rows \d+-37 not shown\]$/), `$ prompt${CURSOR_MARK}`, '[rows 39-40 not shown]'])
  })

  it('cuts a screen it already cut again without losing the cursor row or the numbering', () => {
    const once = boundScreenText(SCREEN, 900)!.text
    const twice = boundScreenText(once, 500)!.text
    expect(bytes(twice)).toBeLessThanOrEqual(500)
    expect(twice.split('\n')[0]).toBe(HEADER)
    expect(twice).toContain(`$ prompt${CURSOR_MARK}`)
    expect(twice).toMatch(/\n\[rows \d+-37 not shown\]\n/)
  })

  it('cuts the cursor row at its end, keeping the mark, when header and row alone do not fit', () => {
    const wide = [HEADER, ...Array.from({ length: 37 }, () => ''), `${'x'.repeat(150)}${CURSOR_MARK}`].join('\n')
    const bounded = boundScreenText(wide, bytes(HEADER) + 60)!
    const lines = bounded.text.split('\n')
    expect(lines[0]).toBe(HEADER)
    expect(lines.at(-1)!.endsWith(CURSOR_MARK)).toBe(true)
    expect(bytes(bounded.text)).toBeLessThanOrEqual(bytes(HEADER) + 60)
  })

  it('is not fooled by text that only looks like a screen', () => {
    expect(boundScreenText('[screen: normal 2x10, cursor 1,1]\na\nb\nc', 10)).toBeUndefined()
    expect(boundScreenText('output\n[screen: normal 2x10, cursor 1,1]', 10)).toBeUndefined()
    expect(parseScreenHeader(`${HEADER}\nrow`)).toEqual({ buffer: 'alternate', rows: 40, cols: 160, cursorRow: 38, cursorCol: 9 })
  })
})
