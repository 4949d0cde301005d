/**
 * Waiting on a terminal's screen as text: the `[screen: …]` header, then the rows (the format of
 * `screenHeader` / `parseScreenHeader` in `@conch/pty`), as a local session's `screen()` and
 * `terminal_read {screen: true}` return it.
 */
import { parseScreenHeader } from '@conch/pty'
import { until } from './wait.ts'

/**
 * Resolves once `screen()` shows `line` typed and its Enter echoed: the cursor at column 1 and
 * the row above it ending in `line`. Before the Enter is written the row shows the line's text
 * alone with the cursor after it, so a test that types a line ahead of a running program knows
 * the whole input (Enter included) sits in the terminal's input queue. Rejects after `timeoutMs`
 * (ms) with the last screen seen.
 */
export async function untilEnterEchoed(screen: () => string | Promise<string>, line: string, timeoutMs = 15_000): Promise<void> {
  let last = ''
  await until(
    async () => {
      last = await screen()
      const header = parseScreenHeader(last)
      return header !== undefined && header.cursorCol === 1 && last.split('\n')[header.cursorRow - 1]?.endsWith(line) === true
    },
    timeoutMs,
    `${JSON.stringify(line)} and its Enter echoed`,
    () => last,
  )
}
