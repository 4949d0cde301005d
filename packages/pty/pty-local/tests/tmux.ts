/**
 * The reference terminal of the differential tests: a detached tmux pane of the same size,
 * running the same bash (same prompt, `TERM`, locale) and given the same input, read with
 * `capture-pane -p`. tmux is what a person would see; a conch session's screen is compared with
 * it row by row (`screenRows`, `paneRows`).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { CURSOR_MARK } from '@conch/pty'
import { until } from '@conch/test-support/wait'

export const hasTmux = spawnSync('sh', ['-c', 'command -v tmux'], { stdio: 'ignore' }).status === 0

/** One tmux server (its own socket) with one pane; `close()` ends the server. */
export class TmuxPane {
  private readonly socket = `conch-diff-${randomBytes(6).toString('hex')}`

  /**
   * Starts `bash --noprofile --norc -i` with `PS1='$ '`, `TERM=xterm-256color` and
   * `LANG=C.UTF-8` in a `cols` × `rows` pane, in `cwd`, and waits for its first prompt.
   */
  static async open(options: { rows: number; cols: number; cwd: string }): Promise<TmuxPane> {
    const pane = new TmuxPane()
    const env = `env -i HOME=${process.env.HOME ?? '/root'} PATH=${process.env.PATH ?? '/usr/bin:/bin'} TERM=xterm-256color LANG=C.UTF-8 PS1='$ ' PAGER=cat HISTFILE= bash --noprofile --norc -i`
    pane.tmux('-f', '/dev/null', 'new-session', '-d', '-x', String(options.cols), '-y', String(options.rows), '-c', options.cwd, env)
    pane.tmux('set-option', '-g', 'status', 'off')
    pane.tmux('set-option', '-g', 'escape-time', '0')
    await pane.waitFor((rows) => rows.at(-1) === '$')
    return pane
  }

  private tmux(...args: string[]): string {
    return execFileSync('tmux', ['-L', this.socket, ...args], { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] })
  }

  /** Types `text` literally (no key names), then Enter when `submit`. */
  type(text: string, submit = true): void {
    if (text !== '') this.tmux('send-keys', '-l', text)
    if (submit) this.tmux('send-keys', 'Enter')
  }

  /** Sends tmux key names (`Escape`, `C-c`, `Up`, …). */
  keys(...names: string[]): void {
    this.tmux('send-keys', ...names)
  }

  /** Pastes `text` as one bracketed paste when the program asked for it (as conch sends a multi-line text), then Enter. */
  paste(text: string, submit = true): void {
    execFileSync('tmux', ['-L', this.socket, 'load-buffer', '-b', 'conch', '-'], { input: text })
    this.tmux('paste-buffer', '-p', '-d', '-b', 'conch')
    if (submit) this.tmux('send-keys', 'Enter')
  }

  /** The pane's rows as `capture-pane -p` prints them (trailing blanks trimmed), trailing empty rows dropped. */
  rows(): string[] {
    return trimTail(this.tmux('capture-pane', '-p').replace(/\n$/, '').split('\n'))
  }

  /** The pane's lines as `capture-pane -p -J` prints them: rows the terminal wrapped joined, trailing blanks trimmed. */
  joinedRows(): string[] {
    return trimTail(this.tmux('capture-pane', '-p', '-J').replace(/\n$/, '').split('\n'))
  }

  /** Polls the pane until `ready(rows)` holds, and returns those rows; fails showing the last rows after `timeoutMs`. */
  async waitFor(ready: (rows: string[]) => boolean, timeoutMs = 15_000): Promise<string[]> {
    let rows: string[] = []
    await until(() => ready((rows = this.rows())), timeoutMs, 'the tmux pane', () => rows.join('\n'))
    return rows
  }

  /** Waits until the bottom non-empty row is the shell's prompt `$` again and `count` prompts are on the pane in all. */
  waitForPrompt(count = 1): Promise<string[]> {
    return this.waitFor((rows) => rows.at(-1) === '$' && rows.filter((row) => row.startsWith('$')).length >= count)
  }

  close(): void {
    spawnSync('tmux', ['-L', this.socket, 'kill-server'], { stdio: 'ignore' })
  }
}

/** A conch rendered screen (`session.screen()`) as rows: no header, no cursor mark, trailing empty rows dropped. */
export function screenRows(rendered: string): string[] {
  const [header, ...rows] = rendered.split('\n')
  if (!/^\[screen: /.test(header ?? '')) throw new Error(`not a rendered screen: ${rendered.slice(0, 200)}`)
  return trimTail(rows.map((row) => (row.endsWith(CURSOR_MARK) ? row.slice(0, -CURSOR_MARK.length) : row).replace(/ +$/, '')))
}

function trimTail(rows: string[]): string[] {
  const kept = rows.map((row) => row.replace(/ +$/, ''))
  while (kept.length > 0 && kept.at(-1) === '') kept.pop()
  return kept
}
