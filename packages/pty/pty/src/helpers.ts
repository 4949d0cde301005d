/**
 * Small helpers every terminal backend and tool shares: waiting with a bound, a process name and
 * a list of processes as the model may see them, and whether Enter follows a text.
 */
/** Resolves after `ms` milliseconds. */
export function delay(ms: number): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), ms))
}

/** `promise`, or undefined after `ms` — without leaving a timer behind when the promise wins. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)))])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * A process name or command line as the model may see it: a program chooses its own name
 * (prctl(2) PR_SET_NAME, `exec -a`, argv), so nothing in it may read as a line of a result.
 * Backslash and every control character — C0, DEL, C1, and the Unicode line and paragraph
 * separators — are written as escapes (`\\`, `\n`, `\r`, `\t`, `\x1b`, `\u2028`), and the text is
 * cut at `maxChars` code points with `…`.
 */
export function displayName(name: string, maxChars = 64): string {
  let out = ''
  let count = 0
  for (const char of name) {
    if (count >= maxChars) return `${out}…`
    out += escapeChar(char)
    count++
  }
  return out
}

/**
 * Processes as the model may see them: `3 processes: sleep ×2, bash` — each name once with how many
 * bore it, in the order given, the first `maxNames` named and the rest counted (`and 4 more names`).
 * No pids: the host's mean nothing to a program in its own PID namespace and tell it about the host.
 */
export function processNames(processes: readonly { name: string }[], maxNames = 20): string {
  const counts = new Map<string, number>()
  for (const { name } of processes) {
    const shown = displayName(name, 32)
    counts.set(shown, (counts.get(shown) ?? 0) + 1)
  }
  const named = [...counts].slice(0, maxNames).map(([name, count]) => (count === 1 ? name : `${name} ×${count}`))
  const rest = counts.size - named.length
  const head = `${processes.length} process${processes.length === 1 ? '' : 'es'}: ${named.join(', ')}`
  return rest === 0 ? head : `${head} and ${rest} more name${rest === 1 ? '' : 's'}`
}

const NAMED_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }

function escapeChar(char: string): string {
  const named = NAMED_ESCAPES[char]
  if (named !== undefined) return named
  const code = char.codePointAt(0)!
  if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return `\\x${code.toString(16).padStart(2, '0')}`
  if (code === 0x2028 || code === 0x2029) return `\\u${code.toString(16)}`
  return char
}

/**
 * Whether Enter follows a send's `text` (`SendPayload`): with `submit`, unless the text is only
 * signal characters (^C, ^\, ^Z: VINTR, VQUIT, VSUSP at their termios(3) defaults), which a
 * person presses alone and the line discipline turns into signals (ISIG), or ends in ESC, which
 * leaves an editor's insert mode: an Enter after it would move vim's cursor a line down.
 */
export function entersAfter(text: string, submit: boolean): boolean {
  return submit && !/^[\x03\x1c\x1a]+$/.test(text) && !text.endsWith('\x1b')
}

/**
 * The shell prompt a send that settled at the shell's own prompt ends with (`SendResult.exitStatus`
 * set): the PS1 a backend's controlled prompt sets (pty-local, "Readiness").
 */
export const CONTROLLED_PS1 = '$ '

/**
 * `viewport` without the controlled prompt ending it, and the line break before it: `foo` for
 * `foo$ ` (after `printf foo`), `a\nb` for `a\nb\n$ `. A viewport that does not end with it is
 * returned as it is.
 */
export function beforePrompt(viewport: string): string {
  return viewport.endsWith(CONTROLLED_PS1) ? viewport.slice(0, viewport.length - CONTROLLED_PS1.length).replace(/\n$/, '') : viewport
}
