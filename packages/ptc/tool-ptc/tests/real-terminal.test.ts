/**
 * run_code driving a real bash (node-pty, under bubblewrap) from a real node process: the
 * program sends a loop of commands until a condition holds and returns a summary.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest'
import { RUN_CODE } from '../src/index.ts'
import { boot, type Harness } from './harness.ts'

// Every test starts real node processes (and bubblewrap); on a loaded 2-core machine one can take seconds.
vi.setConfig({ testTimeout: 60_000 })

let h: Harness
beforeAll(async () => {
  h = await boot({ terminals: 'local' })
})
afterAll(async () => {
  await h.dispose()
})

it('a program opens a real bash, loops sends until a file has three lines, and returns a summary', async () => {
  const code = [
    'const { meta } = await tools.terminal_open({ type: "shell" })',
    'const sessionId = meta!.sessionId as string',
    'let count = 0',
    'let sends = 0',
    'while (count < 3) {',
    '  await tools.terminal_send({ sessionId, text: `echo line-${sends} >> log.txt` })',
    '  sends++',
    '  const wc = await tools.terminal_send({ sessionId, text: "wc -l < log.txt" })',
    '  count = Number(wc.text.split("\\n").map((l) => l.trim()).find((l) => /^\\d+$/.test(l)))',
    '}',
    'await tools.terminal_close({ sessionId })',
    'return { sends, count, file: require("node:fs").readFileSync("log.txt", "utf8").trim().split("\\n") }',
  ].join('\n')
  const result = await h.call(RUN_CODE, { code })
  const text = result.content[0]!.text
  expect(result.isError, text).toBeUndefined()
  expect(JSON.parse(text.slice(0, text.lastIndexOf('\n[run_code')))).toEqual({ sends: 3, count: 3, file: ['line-0', 'line-1', 'line-2'] })
  expect(text).toMatch(/\[run_code: ok in \d+ ms, 8 tool calls\]$/)
})
