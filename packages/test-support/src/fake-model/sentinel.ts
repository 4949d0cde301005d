/**
 * Sentinel framing: a harness that drives an interactive agent CLI can ask the model, in the
 * system prompt, to close every answer with a marker it then waits for on the screen. The
 * fake model honours such a request (or, on purpose, does not) so both paths can be tested.
 */

/**
 * The default sentinel request: the first `<<<NAME>>>` token in the system text (letters,
 * digits, `_`, `-`, `.`, `:`), e.g. `End every answer with the line <<<DONE-7f3a>>>.`
 */
export const DEFAULT_SENTINEL_PATTERN = /<<<[A-Za-z0-9_.:-]+>>>/

/** Default framing: the text, a newline (unless the text is empty or ends with one), the sentinel. */
export function defaultFrame(text: string, sentinel: string): string {
  if (text === '' || text.endsWith('\n')) return `${text}${sentinel}`
  return `${text}\n${sentinel}`
}

/**
 * Pair framing, what `@conch/pty-pool` asks for: the sentinel, the text and the sentinel again, each
 * on lines of their own (the pool takes the text between the last complete pair).
 */
export function pairFrame(text: string, sentinel: string): string {
  return `${sentinel}\n${text}${text.endsWith('\n') ? '' : '\n'}${sentinel}`
}

/**
 * The sentinel an answer closes with: `'omit'` → none; an explicit string → that string;
 * `'auto'` → the first match of `pattern` in `system`, if any.
 */
export function chooseSentinel(setting: 'auto' | 'omit' | string | undefined, system: string, pattern: RegExp): string | undefined {
  if (setting === 'omit') return undefined
  if (setting !== undefined && setting !== 'auto') return setting
  const match = new RegExp(pattern.source, pattern.flags.replace('g', '')).exec(system)
  return match?.[0]
}
