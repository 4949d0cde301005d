/**
 * The Terminal-Bench runner's splitter (examples/terminal-bench/split.ts) against bash's own
 * parser: one send per top-level command, compound commands whole.
 */
import { describe, expect, it } from 'vitest'
import { parseVerdict, splitCommands } from '../examples/terminal-bench/split.ts'

const texts = (script: string) => splitCommands(script).map((send) => send.text)

describe('splitting a solution script into sends', () => {
  it('sends each simple command on its own and skips blank lines, comments and the shebang', () => {
    const sends = splitCommands('#!/bin/bash\n# set up\ncd /app\n\nls -l\necho "a # b"  # trailing\n')
    expect(sends).toEqual([
      { text: 'cd /app', line: 3 },
      { text: 'ls -l', line: 5 },
      { text: 'echo "a # b"  # trailing', line: 6 },
    ])
  })

  it('keeps a heredoc whole, with a body that looks like commands and an indented terminator', () => {
    const heredoc = "cat > /app/conf <<'EOF'\nif then\n$HOME `x`\nEOF"
    const tabbed = 'cat <<-END\n\tone\n\tEND'
    expect(texts(`${heredoc}\n${tabbed}\necho done`)).toEqual([heredoc, tabbed, 'echo done'])
  })

  it('keeps multi-line if, for, while, functions, subshells and pipelines whole', () => {
    const ifBlock = 'if [ -f x ]; then\n  echo yes\nelse\n  echo no\nfi'
    const forBlock = 'for f in a b; do\n  echo "$f"\ndone'
    const fn = 'greet() {\n  echo "hi $1"\n}'
    const sub = '(\n  cd /tmp\n  pwd\n)'
    const pipe = 'printf "a\\nb\\n" |\n  sort -r &&\n  echo sorted'
    const whileBlock = 'while read -r line; do\n  echo "$line"\ndone < /etc/hostname'
    expect(texts([ifBlock, forBlock, fn, sub, pipe, whileBlock].join('\n\n'))).toEqual([ifBlock, forBlock, fn, sub, pipe, whileBlock])
  })

  it('keeps a line continuation and a multi-line quote whole', () => {
    const continued = 'gcc -O2 \\\n  -o prog \\\n  prog.c'
    const quoted = 'echo "one\n\ntwo"'
    expect(texts(`${continued}\n${quoted}\necho 'a\\\\'`)).toEqual([continued, quoted, "echo 'a\\\\'"])
  })

  it('sends a line bash cannot parse on its own, for the program in front', () => {
    expect(texts('python3\nx = 6 * 7\nprint(x)\nexit()\necho back')).toEqual(['python3', 'x = 6 * 7', 'print(x)', 'exit()', 'echo back'])
  })

  it('sends the first line alone when the lines after it never complete it', () => {
    // `exit()` opens a function definition for bash; `cd /app` is no function body.
    expect(texts('exit()\ncd /app')).toEqual(['exit()', 'cd /app'])
    expect(texts("s = 'unterminated\npwd")).toEqual(["s = 'unterminated", 'pwd'])
  })

  it('tells complete, incomplete and invalid input apart as bash does', () => {
    expect(parseVerdict('echo a')).toBe('complete')
    expect(parseVerdict('echo a \\')).toBe('incomplete')
    expect(parseVerdict('echo a \\\\')).toBe('complete')
    expect(parseVerdict('cat <<EOF\nx')).toBe('incomplete')
    expect(parseVerdict('if true; then')).toBe('incomplete')
    expect(parseVerdict('echo "abc')).toBe('incomplete')
    expect(parseVerdict('print(x)')).toBe('invalid')
  })
})
