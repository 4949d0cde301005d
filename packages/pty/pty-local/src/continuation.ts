/**
 * Secondary prompts, where a reader waits for the rest of a block: a send settling at one reports
 * `inputState: 'continuation'`. Each row's form is from the program's manual; the partial line is
 * matched whole, so one inside ordinary output does not count.
 */
export interface ContinuationPrompt {
  /** Who prints it, for documentation and tests. */
  program: string
  /** The whole partial line. */
  pattern: RegExp
  /** Counts only when the session's shell itself is the reader (bash's PS2 `> ` is also the Node REPL's primary prompt). */
  shellOnly?: boolean
}

export const CONTINUATION_PROMPTS: readonly ContinuationPrompt[] = [
  // bash(1), PROMPTING: PS2 defaults to "> ".
  { program: 'bash (PS2)', pattern: /^> $/, shellOnly: true },
  // python(1) sys.ps2 "... "; the Node REPL (node:repl) prints "... " for an open block; pdb and
  // the Python-based debuggers share sys.ps2.
  { program: 'python3, node, pdb', pattern: /^\.\.\. $/ },
  // IPython --simple-prompt: "...: "; default prompts: "   ...: ".
  { program: 'ipython', pattern: /^ *\.\.\.: $/ },
  // sqlite3(1): continuation prompt "   ...> "; jshell uses the same form ("   ...> ").
  { program: 'sqlite3, jshell', pattern: /^ +\.\.\.> $/ },
  // psql(1), PROMPT2 "%/%R%x%# ": %R is "-" for a continued statement, "'", '"' or "$" inside a
  // quote or dollar quote, "(" inside parentheses; "#" for a superuser, ">" otherwise.
  { program: 'psql', pattern: /^[^\s=]*[-'"$(][#>] $/ },
  // mysql(1): "    -> " for a continued statement, "    '> ", '    "> ', "    `> " inside quotes,
  // "   /*> " inside a comment.
  { program: 'mysql, mariadb', pattern: /^ +(?:->|'>|">|`>|\/\*>) $/ },
  // gdb(1): ">" while reading the body of `commands`, `define`, `if` or `while`.
  { program: 'gdb', pattern: /^>$/ },
  // R: continuation prompt option("continue") "+ ".
  { program: 'R', pattern: /^\+ $/ },
  // Lua stand-alone interpreter: "_PROMPT2" ">> ".
  { program: 'lua', pattern: /^>> $/ },
  // GHCi multi-line input (:{ … :}): "ghci| ".
  { program: 'ghci', pattern: /^ghci\| $/ },
]

/** Whether `partial` (the text after the last line break) is a secondary prompt; `shellReads`: the session's shell is the reader. */
export function isContinuation(partial: string, shellReads: boolean): boolean {
  return CONTINUATION_PROMPTS.some((row) => (shellReads || row.shellOnly !== true) && row.pattern.test(partial))
}
