/**
 * The terminal a pooled CLI runs in, reduced to what the pool needs: write keys, read the
 * rendered screen, learn about exits, and tear the whole process tree down with proof.
 *
 * `PoolTerminal` is the narrow seam. By default (`terminal: conch`) it is a conch terminal of the
 * CLI's owner (`ptyTerminals`, pty-terminal.ts; in a managed worker `policyTerminals`,
 * policy-terminal.ts). `spawnScreenTerminal` here is the explicit opt-out (`terminal:
 * unconfined`): node-pty and an `@xterm/headless` screen model (the same emulator behind VS
 * Code's terminal) with no sandbox, stopping the tree with `@conch/subprocess`'s teardown ladder
 * (TERM → grace → KILL → verify).
 */
import xtermHeadless from '@xterm/headless'

const { Terminal } = xtermHeadless
type Terminal = InstanceType<typeof Terminal>
import * as nodePty from 'node-pty'
import type { PtyOwner } from '@conch/pty'
import { createSessionTag, terminateTree, sweepTagged, type SessionTag } from '@conch/subprocess'
import type { OwnerPolicy } from './protocol.ts'

export interface TerminalExit {
  exitCode: number | null
  signal: number | null
}

export interface TerminalCloseReport {
  stopped: number[]
  survivors: number[]
}

/** A running program in a PTY with a rendered screen. */
export interface PoolTerminal {
  readonly pid: number
  /** Writes bytes to the program, as one write(2) to the PTY master. */
  write(data: string): void
  /** The rendered screen: the viewport rows (or, with `scrollback`, every retained row), trailing blanks trimmed. */
  screen(options?: { scrollback?: boolean }): string[]
  /** Whether the program enabled bracketed paste (DECSET 2004). */
  bracketedPaste(): boolean
  /** Called after each chunk of output has been applied to the screen. Returns a disposer. */
  onChange(listener: () => void): () => void
  /** Settles when the program exited. */
  readonly exited: Promise<TerminalExit>
  exitStatus(): TerminalExit | undefined
  /** Stops the program and every process it started; resolves with what was stopped and what survived. */
  close(graceMs?: number): Promise<TerminalCloseReport>
}

export interface TerminalSpawnOptions {
  argv: [string, ...string[]]
  cwd: string
  /** The complete environment (not merged). */
  env: Record<string, string>
  rows: number
  cols: number
  /** Scrollback rows kept by the screen model. */
  scrollback?: number
  /** Whether the program may use the network (the kind's `network`); a confining factory passes it to its sandbox. */
  network?: boolean
  /** The session's private home, which a confining factory makes writable inside its sandbox. */
  home?: string
  /** Whose CLI this is: a confining factory opens the terminal for this owner, under its sandbox policy. */
  owner?: TerminalOwner
}

/**
 * The owner of a pooled CLI, as the terminal factory needs it. In-process the factory opens the
 * terminal for `agent` (ctx.pty resolves its sandbox policy); in a managed worker, where the
 * agent object does not exist, it runs under `policy`, resolved by the main process.
 */
export interface TerminalOwner {
  /** The owner agent's id (the key's `owner`). */
  id: string
  /** The owner object of ctx.agents (in-process). */
  agent?: PtyOwner
  /** The owner's resolved sandbox policy (data; what the main process sends a managed worker). */
  policy?: OwnerPolicy
}

/** Spawns programs in terminals; injectable so pool logic can be tested on exact orderings. */
export type TerminalFactory = (options: TerminalSpawnOptions) => Promise<PoolTerminal>

const TAG_VARIABLE = 'CONCH_POOL_TAG'

/**
 * The unconfined factory (config `terminal: unconfined`): node-pty + @xterm/headless, no sandbox —
 * `owner`, `network` and `home` are ignored, and the CLI can read and write whatever conch can.
 */
export const spawnScreenTerminal: TerminalFactory = async (options) => {
  const tag = createSessionTag(TAG_VARIABLE)
  const screen = new Terminal({ rows: options.rows, cols: options.cols, scrollback: options.scrollback ?? 2000, allowProposedApi: true })
  const env = { ...options.env, [tag.name]: tag.value, TERM: options.env.TERM ?? 'xterm-256color' }
  const child = nodePty.spawn(options.argv[0], options.argv.slice(1), {
    name: 'xterm-256color',
    cols: options.cols,
    rows: options.rows,
    cwd: options.cwd,
    env,
  })
  return new ScreenTerminal(child, screen, tag)
}

class ScreenTerminal implements PoolTerminal {
  readonly pid: number
  readonly exited: Promise<TerminalExit>
  private readonly listeners = new Set<() => void>()
  private exit: TerminalExit | undefined
  private closing: Promise<TerminalCloseReport> | undefined
  /** Writes to the screen model are asynchronous; this chains them so listeners see applied output. */
  private pending = 0

  constructor(
    private readonly child: nodePty.IPty,
    private readonly term: Terminal,
    private readonly tag: SessionTag,
  ) {
    this.pid = child.pid
    // Answer the terminal queries the TUIs wait on (xterm.js answers DSR/DA itself through onData).
    term.onData((reply) => {
      if (this.exit === undefined) child.write(reply)
    })
    child.onData((data) => {
      this.pending++
      term.write(data, () => {
        this.pending--
        for (const listener of [...this.listeners]) listener()
      })
    })
    this.exited = new Promise((resolve) => {
      child.onExit(({ exitCode, signal }) => {
        this.exit = { exitCode: exitCode ?? null, signal: signal ?? null }
        // Let the last output reach the screen first.
        const settle = () => (this.pending === 0 ? resolve(this.exit!) : setTimeout(settle, 5))
        settle()
        for (const listener of [...this.listeners]) listener()
      })
    })
  }

  write(data: string): void {
    if (this.exit !== undefined) return
    this.child.write(data)
  }

  screen(options: { scrollback?: boolean } = {}): string[] {
    const buffer = this.term.buffer.active
    const start = options.scrollback ? 0 : buffer.viewportY
    const end = options.scrollback ? buffer.length : buffer.viewportY + this.term.rows
    const rows: string[] = []
    for (let y = start; y < end; y++) {
      const line = buffer.getLine(y)
      const text = line ? line.translateToString(true) : ''
      if (line?.isWrapped && rows.length > 0) rows[rows.length - 1] += text
      else rows.push(text)
    }
    while (rows.length > 0 && rows[rows.length - 1] === '') rows.pop()
    return rows
  }

  bracketedPaste(): boolean {
    return this.term.modes.bracketedPasteMode
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  exitStatus(): TerminalExit | undefined {
    return this.exit
  }

  close(graceMs = 2000): Promise<TerminalCloseReport> {
    this.closing ??= (async () => {
      // Stop the descendants first, then the CLI itself; a terminal's leader gets SIGHUP like a
      // hung-up line would (termios(3): a hangup on the controlling terminal).
      const report = await terminateTree({ rootPid: this.pid, includeRoot: true, rootSignal: 'SIGHUP', graceMs, tag: this.tag })
      const swept = await sweepTagged(this.tag, { graceMs })
      await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, graceMs))])
      this.term.dispose()
      return {
        stopped: [...report.stopped, ...swept.stopped].map((record) => record.pid),
        survivors: [...report.survivors, ...swept.survivors].map((record) => record.pid),
      }
    })()
    return this.closing
  }
}
