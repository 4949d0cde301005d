/**
 * `PoolTerminal` over `ctx.pty`: a pooled CLI runs as a conch terminal of its owner agent, under
 * that owner's sandbox policy, with the kind's `network` and its private home writable
 * (`writablePaths`). Writes are raw, the screen is `ctx.pty.screenState`, changes come from
 * `ctx.pty.onChange`.
 */
import { realpathSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, isAbsolute } from 'node:path'
import type { PtyOwner, PtyServiceApi, ScreenState, SessionStatus } from '@conch/pty'
import type { PoolTerminal, TerminalCloseReport, TerminalExit, TerminalFactory, TerminalSpawnOptions } from './terminal.ts'

export interface PtyTerminalOptions {
  pty: PtyServiceApi
  /**
   * The owner of a spawn that names none, or names this one's id without an agent; a spawn naming
   * another id and no agent is refused, so no CLI ever runs as somebody else.
   */
  owner?: PtyOwner
  /** The backend type that runs programs (`@conch/pty-local`: `shell`). Default `shell`. */
  type?: string
  /**
   * `ctx.sandbox`: each CLI executable's folder is protected (read-only in every sandbox), so a CLI
   * under /tmp or a home is still found and no confined CLI changes the binary the fresh-spawn
   * path later runs unconfined.
   */
  sandbox?: { protect?(paths: readonly string[]): () => void }
}

/**
 * The owner of an agent's pooled CLIs in `ctx.pty`: the agent's id and session log (so its sandbox
 * policy and mode fence), but another owner object, so the agent's terminal tools get
 * `FOREIGN_SESSION` for its pooled CLIs. The agent's disposal disposes it.
 */
export class PoolOwner implements PtyOwner {
  state: PtyOwner['state'] = 'live'
  /** Its CLIs are `pool-1`, `pool-2`, …: the model's own terminals stay `pty-1`, `pty-2`, … */
  readonly sessionPrefix = 'pool'
  private readonly controller = new AbortController()
  private readonly cleanups = new Set<() => void | Promise<void>>()

  constructor(readonly id: string, readonly session: PtyOwner['session']) {}

  get signal(): AbortSignal {
    return this.controller.signal
  }

  onDispose(cleanup: () => void | Promise<void>): () => void {
    this.cleanups.add(cleanup)
    return () => this.cleanups.delete(cleanup)
  }

  /** Closes the owner's terminals (the pty service registered their closing here). */
  async dispose(): Promise<void> {
    if (this.state !== 'live') return
    this.state = 'disposing'
    this.controller.abort(new Error(`the pooled CLIs of ${this.id} are closing`))
    await Promise.allSettled([...this.cleanups].map((cleanup) => cleanup()))
    this.state = 'disposed'
  }
}

/**
 * A `TerminalFactory` that opens each pooled CLI as a `ctx.pty` session of the `PoolOwner` of its
 * owner agent: the spawn's `owner.agent` (the key's owner agent), else `options.owner`.
 * @throws Error when no live owner agent is known for the spawn (the pool falls back, as for any spawn failure).
 */
export function ptyTerminals(options: PtyTerminalOptions): TerminalFactory {
  const protectedDirs = new Set<string>()
  const poolOwners = new WeakMap<PtyOwner, PoolOwner>()
  const poolOwnerOf = (agent: PtyOwner): PoolOwner => {
    if (agent instanceof PoolOwner) return agent
    if (agent.state !== 'live') throw new Error(`the owner agent ${agent.id} is ${agent.state}: its pooled CLI is not opened`)
    let owner = poolOwners.get(agent)
    if (owner === undefined) {
      const made = new PoolOwner(agent.id, agent.session)
      agent.onDispose(() => made.dispose())
      poolOwners.set(agent, made)
      owner = made
    }
    return owner
  }
  return async (spawn: TerminalSpawnOptions) => {
    const agent = spawn.owner?.agent ?? (spawn.owner === undefined || spawn.owner.id === options.owner?.id ? options.owner : undefined)
    if (agent === undefined) throw new Error(`no owner agent${spawn.owner ? ` ${spawn.owner.id}` : ''} to open the pooled CLI for: it runs only as a conch terminal of its owner`)
    const owner = poolOwnerOf(agent)
    const [command, ...args] = spawn.argv
    if (command !== undefined && isAbsolute(command) && options.sandbox?.protect !== undefined) {
      let folder: string | undefined
      try {
        folder = dirname(realpathSync(command))
      } catch {
        folder = undefined // missing: the spawn below fails and names it
      }
      if (folder !== undefined && !protectedDirs.has(folder)) {
        protectedDirs.add(folder)
        options.sandbox.protect([folder])
      }
    }
    const opened = await options.pty.spawn(owner, {
      type: options.type ?? 'shell',
      command,
      args,
      env: spawn.env,
      cwd: spawn.cwd,
      rows: spawn.rows,
      cols: spawn.cols,
      network: spawn.network ?? true,
      ...(spawn.home !== undefined && { writablePaths: [spawn.home] }),
    })
    return new PtyTerminal(options.pty, owner, opened.sessionId, opened.pid ?? -1)
  }
}

class PtyTerminal implements PoolTerminal {
  readonly exited: Promise<TerminalExit>
  private exit: TerminalExit | undefined
  /** The last screen read, kept for reads after the session was closed (the service forgets it). */
  private last: ScreenState = { buffer: 'normal', rows: [], cursorRow: 1, cursorCol: 1, decModes: {} }
  private lastScrollback: string[] = []
  private readonly listeners = new Set<() => void>()
  private closing: Promise<TerminalCloseReport> | undefined
  private readonly stopWatching: () => void

  constructor(
    private readonly pty: PtyServiceApi,
    private readonly owner: PtyOwner,
    readonly sessionId: string,
    readonly pid: number,
  ) {
    let settle!: (exit: TerminalExit) => void
    this.exited = new Promise((resolve) => (settle = resolve))
    const onChange = () => {
      if (this.exit === undefined) {
        const status = this.status()
        // A session the service no longer lists was closed (by its owner's disposal, say): gone.
        if (status === undefined || status.state === 'exited') {
          this.exit = status === undefined ? { exitCode: null, signal: null } : toExit(status)
          settle(this.exit)
        }
      }
      for (const listener of [...this.listeners]) listener()
    }
    this.stopWatching = pty.onChange(owner, sessionId, onChange)
    onChange()
  }

  write(data: string): void {
    if (this.exit !== undefined || this.closing !== undefined) return
    // Queued synchronously, so writes stay in order; one that meets an exit is dropped.
    this.pty.write(this.owner, this.sessionId, data).catch(() => {})
  }

  screen(options: { scrollback?: boolean } = {}): string[] {
    if (this.closing === undefined) {
      try {
        const state = this.pty.screenState(this.owner, this.sessionId, { scrollback: options.scrollback === true })
        if (options.scrollback === true) this.lastScrollback = state.rows
        else this.last = state
        return state.rows
      } catch {
        // closed meanwhile: the last read stands
      }
    }
    return options.scrollback === true ? this.lastScrollback : this.last.rows
  }

  bracketedPaste(): boolean {
    this.screen()
    return this.last.decModes[2004] === true
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  exitStatus(): TerminalExit | undefined {
    return this.exit
  }

  /** Closes the session through `ctx.pty` (the backend's teardown ladder, its grace and its proof). */
  close(): Promise<TerminalCloseReport> {
    this.closing ??= (async () => {
      this.screen()
      this.screen({ scrollback: true })
      try {
        const result = await this.pty.close(this.owner, this.sessionId)
        this.exit ??= toExit(result.status)
        return { stopped: result.stopped.map((entry) => entry.pid), survivors: [] }
      } catch (error) {
        const survivors = (error as { survivors?: { pid: number }[] }).survivors
        return { stopped: [], survivors: survivors?.map((entry) => entry.pid) ?? [this.pid] }
      } finally {
        this.stopWatching()
      }
    })()
    return this.closing
  }

  private status(): SessionStatus | undefined {
    return this.pty.list(this.owner).find((info) => info.sessionId === this.sessionId)?.status
  }
}

function toExit(status: SessionStatus): TerminalExit {
  if (status.state !== 'exited') return { exitCode: null, signal: null }
  const signal = status.signal === null ? null : ((constants.signals as Record<string, number>)[status.signal] ?? null)
  return { exitCode: status.exitCode, signal }
}
