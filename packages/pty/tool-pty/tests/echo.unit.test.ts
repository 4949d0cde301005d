import { describe, expect, it } from 'vitest'
import { EchoFilter, withoutEcho } from '../src/echo.ts'

/** The filter's output for `output` fed in the pieces `cuts` splits it into. */
function filtered(output: string, typed: string, cuts: number[], submitted = true): string {
  const filter = new EchoFilter(typed, submitted)
  let shown = ''
  let from = 0
  for (const cut of [...cuts, output.length]) {
    shown += filter.feed(output.slice(from, cut))
    from = cut
  }
  return shown + filter.flush()
}

describe('the echo of a send', () => {
  const cases: Array<{ name: string; output: string; typed: string; shown: string; submitted?: boolean }> = [
    { name: 'a line after the prompt of an earlier result', output: 'echo hi\nhi\n$ ', typed: 'echo hi', shown: 'hi\n$ ' },
    { name: 'a line after its own prompt', output: '$ echo hi\nhi\n$ ', typed: 'echo hi', shown: 'hi\n$ ' },
    { name: 'a line ended by CR LF', output: 'echo hi\r\nhi\r\n$ ', typed: 'echo hi', shown: 'hi\r\n$ ' },
    { name: 'continuation prompts before later lines', output: 'for i in x:\n...     print(i)\n... \nx\n>>> ', typed: 'for i in x:\n    print(i)\n', shown: 'x\n>>> ' },
    { name: 'bash continuation prompts', output: 'cat <<E\n> a\n> E\na\n$ ', typed: 'cat <<E\na\nE', shown: 'a\n$ ' },
    { name: 'an echo the shell changed', output: 'echo "xy"\nxy\n$ ', typed: 'echo "x\ty"', shown: 'echo "xy"\nxy\n$ ' },
    { name: 'a control character shown as ^C', output: '^C\n$ ', typed: '\u0003', shown: '^C\n$ ' },
    { name: 'a block whose second line differs keeps the first', output: 'a\n> c\n$ ', typed: 'a\nb', shown: 'a\n> c\n$ ' },
    { name: 'output that only ends with the text, with no prompt before it', output: 'xls\n$ ', typed: 'ls', shown: 'xls\n$ ' },
    { name: 'an echo cut short', output: 'echo h', typed: 'echo hi', shown: 'echo h' },
    { name: 'a command still running: the output ends with its echo', output: '$ sleep 300', typed: 'sleep 300', shown: '' },
    { name: 'a block still running after its last echoed line', output: 'a\n> sleep 300', typed: 'a\nsleep 300', shown: '' },
    { name: 'output that ends with the text after no prompt', output: 'xsleep 300', typed: 'sleep 300', shown: 'xsleep 300' },
    { name: 'a last line not submitted stays', output: 'ls', typed: 'ls', submitted: false, shown: 'ls' },
    { name: 'submitted lines before one that is not', output: 'a\nb', typed: 'a\nb', submitted: false, shown: 'b' },
    { name: 'an empty send', output: 'x\n$ ', typed: '', submitted: false, shown: 'x\n$ ' },
    { name: 'a bare Enter after its prompt was shown', output: '\n$ ', typed: '', shown: '$ ' },
    { name: 'a bare Enter after output not yet shown', output: 'Press Enter \nok\n$ ', typed: '', shown: 'Press Enter \nok\n$ ' },
    { name: 'an empty line closing a block after its continuation prompt', output: 'if x:\n...     y\n... \n>>> ', typed: 'if x:\n    y\n', shown: '>>> ' },
  ]

  for (const { name, output, typed, shown, submitted } of cases) {
    it(`${name}: the same at every split point`, () => {
      for (let cut = 0; cut <= output.length; cut++) expect(filtered(output, typed, [cut], submitted), `cut at ${cut}`).toBe(shown)
      expect(filtered(output, typed, [...output].map((_, index) => index), submitted)).toBe(shown)
    })
  }

  it('counts the lines it left out, all of them or none', () => {
    expect(withoutEcho('a\n> b\nout\n', 'a\nb')).toEqual({ text: 'out\n', lines: 2 })
    expect(withoutEcho('a\n> c\n', 'a\nb')).toEqual({ text: 'a\n> c\n', lines: 0 })
  })

  it('gives up on a line far longer than the text without holding it to the end', () => {
    const filter = new EchoFilter('ls')
    expect(filter.feed('x'.repeat(1000))).toBe('x'.repeat(1000))
    expect(filter.feed('\nls\n')).toBe('\nls\n')
  })
})
