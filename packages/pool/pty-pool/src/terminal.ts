/**
 * The terminal a pooled CLI runs in, reduced to what the pool needs: write keys, read the
 * screen, learn about exits, and tear the process tree down with proof. Under `terminal: conch`
 * it is an owner's terminal (`ptyTerminals`); in a managed worker or under `unconfined` it runs
 * under a policy (`policyTerminals`).
 */
import type { PtyOwner } from '@conch/pty'
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
  close(): Promise<TerminalCloseReport>
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

/** The owner of a pooled CLI: in-process its `agent`; in a managed worker its `policy`, resolved by the main process. */
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

/**
 * The policy of a CLI under `terminal: unconfined`: `danger-full-access` (no sandbox: the CLI can
 * read and write whatever conch can) in its working directory, nothing protected or hidden.
 */
export function unconfinedPolicy(cwd: string): OwnerPolicy {
  return { mode: 'danger-full-access', workspaceRoot: cwd, protectedPaths: [], hiddenPaths: [] }
}
