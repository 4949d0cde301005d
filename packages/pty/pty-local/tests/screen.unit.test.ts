import { beforeAll, describe, expect, it } from 'vitest'
import { cellWidth } from '../src/line.ts'
import { OutputParser } from '../src/output.ts'
import { loadScreenModel, ScreenModel } from '../src/screen.ts'

beforeAll(() => loadScreenModel())

describe('the screen model counts cells as the line model does', () => {
  it('gives wide characters and emoji two cells and combining marks none', () => {
    const screen = new ScreenModel({ rows: 3, cols: 10 })
    const parser = new OutputParser({ rows: 3, cols: 10 })
    for (const [text, col] of [['中😀e\u0301\u200bx', 7], ['012345678中', 3], ['\u{1F44D}\u{1F3FB}\u2600', 6]] as const) {
      screen.write(`\x1b[H\x1b[2J${text}`)
      parser.feed(Buffer.from(`\r\n${text}`))
      expect([screen.cursor().col, parser.cursorPosition().col], text).toEqual([col, col])
    }
    expect([0x4e2d, 0x1f600, 0x301, 0x200b, 0x2600, 0xfe0f, 0x1f3fb].map(cellWidth)).toEqual([2, 2, 0, 0, 1, 0, 2])
    screen.dispose()
  })

  it('reads the text before the cursor on its row by cells', () => {
    const screen = new ScreenModel({ rows: 3, cols: 20 })
    screen.write('中文> ab\x1b[2D')
    expect(screen.textBeforeCursor()).toBe('中文> ')
    screen.write('\x1b[2C   ')
    expect(screen.textBeforeCursor()).toBe('中文> ab')
    expect(screen.textBeforeCursor(5)).toBe('> ab')
    screen.dispose()
  })
})
