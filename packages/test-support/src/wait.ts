/**
 * Waiting for a state a test cannot subscribe to — a process appearing in /proc, a line in a
 * scrollback, a counter reaching a value — by looking again every `POLL_MS`. A wait for a token,
 * never a sleep: it returns as soon as the state holds, and the bound only turns a hang into a
 * failure that names what was awaited.
 */

/** How often a probe is looked at again (ms). */
export const POLL_MS = 20

/**
 * Resolves with `probe()`'s first truthy answer, looking every `POLL_MS`. After `timeoutMs`
 * rejects with `timed out after <timeoutMs> ms waiting for <what>`, followed by `detail()` when
 * given (what the test saw instead). A probe that throws rejects at once.
 */
export async function until<T>(probe: () => T | Promise<T>, timeoutMs = 10_000, what = 'the condition', detail?: () => string): Promise<T> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const answer = await probe()
    if (answer) return answer
    if (performance.now() > deadline) throw new WaitTimeout(`timed out after ${timeoutMs} ms waiting for ${what}${detail ? `\n${detail()}` : ''}`)
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
}

/** `until`'s rejection when the state did not come in time. */
export class WaitTimeout extends Error {}

/** `until` for a test that asserts on the outcome: true once `probe()` holds, false after `timeoutMs`. */
export function eventually(probe: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  return until(probe, timeoutMs).then(
    () => true,
    (error: unknown) => {
      if (error instanceof WaitTimeout) return false
      throw error
    },
  )
}
