/**
 * What a send's result shows when the line it starts on already holds text, when a program
 * redraws its input by moving the cursor up, and when output scrolls off the top of a screen:
 * real bash 5.2, ipython and jshell.
 */
import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { linesEqual, openSession, send } from './local-harness.ts'

const runs = (program: string, args: string[]) => spawnSync(program, args, { stdio: 'ignore', timeout: 20_000 }).status === 0

describe('a send at the shell prompt', () => {
  it('shows text an earlier send left on the line with the input, as the shell runs it', async () => {
    const session = await openSession()
    const typed = await session.startSend({ text: 'q', submit: false }).done
    expect(typed.viewport).toBe('q')
    const result = await send(session, 'echo hi')
    expect(result.viewport.split('\n')[0]).toBe('qecho hi')
    expect(result.viewport).toContain('qecho: command not found')
    expect(linesEqual(result.viewport, 'hi')).toBe(0)
  }, 30_000)

  it('keeps lines that scrolled off the top of the screen during the send above it', async () => {
    const session = await openSession({ rows: 10, cols: 40 })
    const result = await send(session, "printf '\\033[H\\033[2JRow one\\n\\033[10;1Hbottom\\n'")
    expect(result.waitReason).toBe('stdin_read')
    const lines = result.viewport.split('\n')
    const header = lines.findIndex((line) => line.startsWith('[screen: normal 10x40'))
    expect(header).toBeGreaterThan(0)
    expect(lines.slice(0, header)).toContain('Row one')
    expect(lines.slice(header + 1)).not.toContain('Row one')
  }, 30_000)

  it('shows a multi-line paste once though bash 5.2 redraws it', async () => {
    const session = await openSession()
    const result = await send(session, 'for f in a b; do\n  echo "file $f"\ndone')
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport.match(/for f in a b; do/g)).toHaveLength(1)
    expect(result.viewport).not.toContain('dofor')
    expect(linesEqual(result.viewport, 'file a')).toBe(1)
  }, 30_000)

  it('shows a heredoc once though bash 5.2 redraws it', async () => {
    const session = await openSession()
    const result = await send(session, "cat > /dev/null <<'EOF'\nfirst\nsecond\nEOF")
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport.match(/<<'EOF'/g)).toHaveLength(1)
    expect(result.viewport.match(/^first$/gm)).toHaveLength(1)
  }, 30_000)
})

describe('a send at a REPL prompt', () => {
  const repls = [
    { name: 'python3', command: 'python3 -q', echo: /^qecho hi$/ },
    { name: 'the Node REPL', command: 'node', echo: /^qecho hi$/ },
    // prompt_toolkit writes the whole line again, its prompt included.
    { name: 'ipython', command: 'ipython3 --no-banner --colors=NoColor --no-confirm-exit --HistoryManager.enabled=False', echo: /^In \[1\]: qecho hi$/ },
  ]
  for (const repl of repls) {
    it.skipIf(!runs(repl.command.split(' ')[0]!, ['--version']))(`shows text an earlier send left on the line with the input at ${repl.name}'s prompt`, async () => {
      const session = await openSession({ idleSilenceMs: 5000 })
      await session.startSend({ text: repl.command, submit: true, idleMs: 30_000 }).done
      await session.startSend({ text: 'q', submit: false }).done
      const result = await send(session, 'echo hi')
      expect(result.viewport.split('\n')[0]).toMatch(repl.echo)
      // The next line starts fresh.
      const next = await send(session, '6*7')
      expect(next.viewport.split('\n')[0]).toMatch(/^(In \[2\]: )?6\*7$/)
    }, 60_000)
  }
})

describe('REPLs that redraw a multi-line definition', () => {
  it.skipIf(!runs('ipython3', ['--version']))('ipython shows a definition once', async () => {
    const session = await openSession({ idleSilenceMs: 5000 })
    const started = await session.startSend({ text: 'ipython3 --no-banner --colors=NoColor --no-confirm-exit --HistoryManager.enabled=False', submit: true, idleMs: 30_000 }).done
    expect(started.viewport).toMatch(/In \[1\]:/)
    const result = await send(session, 'def twice(x):\n    return 2 * x\n')
    expect(result.viewport.match(/def twice\(x\):/g)).toHaveLength(1)
    await send(session, 'exit')
  }, 60_000)

  it.skipIf(!runs('jshell', ['--version']))('jshell shows a method definition once', async () => {
    const session = await openSession({ idleSilenceMs: 5000 })
    const started = await session.startSend({ text: 'jshell', submit: true, idleMs: 30_000 }).done
    expect(started.viewport).toMatch(/jshell> $/)
    const result = await send(session, 'int twice(int x) {\n  return 2 * x;\n}')
    expect(result.viewport.match(/int twice\(int x\)/g)).toHaveLength(1)
    expect(result.viewport).toContain('created method twice(int)')
    await send(session, '/exit')
  }, 90_000)
})
