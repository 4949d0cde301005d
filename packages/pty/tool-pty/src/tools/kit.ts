/**
 * What every terminal tool module shares: the services, the config, the result helpers and the
 * `sessionId` field.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import { PtyError, type PtyOwner, type PtyServiceApi, type SpawnOptions, type SpawnResult } from '@conch/pty'
import type { SessionLog } from '@conch/session'
import { MIN_RESULT_BYTES, type ToolResult, type ToolsServiceApi } from '@conch/tools'
import type { Config } from '../config.ts'
import { renderError } from '../render.ts'
import { readableSecrets } from '../secrets.ts'

export interface ToolKit {
  ctx: Context
  pty: PtyServiceApi
  tools: ToolsServiceApi
  config: Config
  /** Spread into every registration: the bound of its results. */
  limits: { maxResultBytes: number }
  /** An error result for a PtyError (anything else is thrown on). */
  error(caught: unknown): ToolResult
  /** A text result with optional meta. */
  text(value: string, meta?: Record<string, unknown>): ToolResult
  /**
   * Starts collecting the hosts the network refused to the agent whose sandbox key (session id)
   * is `agent`; `stop` ends it and returns them, each once, in order.
   */
  refusals(agent: string): { stop(): string[] }
  /**
   * The agent's policy as ctx.sandboxPolicy resolves it (undefined without it): its network
   * mode, and the workspace root its system-prompt section names.
   */
  policy(agent: { session: SessionLog }): { network: { mode: string }; workspaceRoot: string } | undefined
  /**
   * Terminals the owner itself closed (`terminal_close`), keyed by owner: a background send ended
   * by that close was stopped by the model, so its task ends `killed` and wakes no one.
   */
  closedByOwner: WeakMap<object, Set<string>>
  screens: ShownScreens
  /** Opens a terminal as terminal_open does (the configured secrets redacted in it). */
  open(agent: PtyOwner, options: Omit<SpawnOptions, 'redact'>, signal?: AbortSignal): Promise<SpawnResult>
  /**
   * The terminal a call means: `sessionId` when given; omitted, the agent's shell — the shell an
   * earlier id-less send opened. `open` says what an id-less call does without a running one:
   * `shell` (a foreground send) opens a new shell as the agent's shell, `own` (a background send)
   * opens a shell of its own every time, and without `open` the agent's last shell is meant, exited
   * or not. `replaced` names the agent's shell that had exited when `shell` opened another.
   * @throws PtyError `INVALID_INPUT` without `open` when the agent never opened a shell this way;
   * what terminal_open throws.
   */
  terminal(agent: PtyOwner, sessionId: string | undefined, options?: { open?: 'shell' | 'own'; signal?: AbortSignal }): Promise<{ sessionId: string; opened?: SpawnResult; replaced?: string }>
}

/**
 * Per owner and terminal, the screen a foreground terminal_send last showed the model whole
 * (`renderSend`'s `shown`), which the next one's screen is compared with. Every other result
 * about the terminal forgets it, so the screen after it is shown whole.
 */
export class ShownScreens {
  private readonly byOwner = new WeakMap<object, Map<string, string>>()

  /** The screen last shown, and forgets it: a result that shows none leaves nothing to compare with. */
  take(owner: object, sessionId: string): string | undefined {
    const shown = this.byOwner.get(owner)?.get(sessionId)
    this.forget(owner, sessionId)
    return shown
  }

  remember(owner: object, sessionId: string, screen: string): void {
    const screens = this.byOwner.get(owner) ?? this.byOwner.set(owner, new Map()).get(owner)!
    screens.set(sessionId, screen)
  }

  forget(owner: object, sessionId: string): void {
    this.byOwner.get(owner)?.delete(sessionId)
  }
}

/** What tool-pty uses of `ctx.sandbox` (optional): its refusal feed (`SandboxServiceApi.onRefused`). */
interface RefusalFeed {
  onRefused?(listener: (refusal: { agent: string; host: string }) => void): () => void
}

/** What tool-pty uses of `ctx.sandboxPolicy` (optional): `SandboxPolicyServiceApi.resolve`. */
interface AgentPolicy {
  resolve(options: { session: SessionLog }): { network: { mode: string }; workspaceRoot: string }
}

export function toolKit(ctx: Context, config: Config): ToolKit {
  const watchers = new Set<{ agent: string; hosts: Set<string> }>()
  ctx.inject(['sandbox'], (scope) => {
    ;(scope.get('sandbox') as RefusalFeed | undefined)?.onRefused?.((refusal) => {
      for (const watcher of watchers) if (watcher.agent === refusal.agent) watcher.hosts.add(refusal.host)
    })
  })
  // Per agent, its shell's id: one an id-less send opened (while opening, the open in flight).
  const shells = new WeakMap<PtyOwner, Promise<string>>()
  const open: ToolKit['open'] = (agent, options, signal) => {
    const redact = readableSecrets(config.secrets)
    return ctx.pty.spawn(agent, { ...options, ...(redact.length > 0 && { redact }) }, signal)
  }
  return {
    open,
    async terminal(agent, sessionId, options = {}) {
      if (sessionId !== undefined) return { sessionId }
      if (options.open === 'own') {
        const opened = await open(agent, { type: 'shell' }, options.signal)
        return { sessionId: opened.sessionId, opened }
      }
      const previous = shells.get(agent)?.catch(() => undefined)
      if (options.open === undefined) {
        const held = await previous
        if (held === undefined) throw new PtyError('INVALID_INPUT', { reason: 'no sessionId given, and you have no shell yet (terminal_send without sessionId opens one)' })
        return { sessionId: held }
      }
      // Chained at once, so calls made together share one shell.
      let outcome: { opened?: SpawnResult; replaced?: string } = {}
      const next = (async () => {
        const held = await previous
        if (held !== undefined && ctx.pty.list(agent).some((session) => session.sessionId === held && session.status.state === 'running')) return held
        const opened = await open(agent, { type: 'shell' }, options.signal)
        outcome = { opened, ...(held !== undefined && { replaced: held }) }
        return opened.sessionId
      })()
      shells.set(agent, next)
      return { sessionId: await next, ...outcome }
    },
    closedByOwner: new WeakMap(),
    screens: new ShownScreens(),
    refusals(agent) {
      const watcher = { agent, hosts: new Set<string>() }
      watchers.add(watcher)
      return {
        stop: () => {
          watchers.delete(watcher)
          return [...watcher.hosts]
        },
      }
    },
    policy: (agent) => (ctx.get('sandboxPolicy') as AgentPolicy | undefined)?.resolve({ session: agent.session }),
    ctx,
    pty: ctx.pty,
    tools: ctx.tools,
    config,
    limits: { maxResultBytes: config.maxResultBytes },
    error(caught) {
      if (!(caught instanceof PtyError)) throw caught
      return { content: [{ type: 'text', text: renderError(caught, config.maxOutputBytes) }], isError: true, meta: { errorCode: caught.code } }
    },
    text: (value, meta) => ({ content: [{ type: 'text', text: value }], ...(meta && { meta }) }),
  }
}

/** A terminal's id; omitted, the agent's shell (`ToolKit.terminal`). */
export const sessionId = z.string().min(1, 'sessionId must name a terminal, e.g. "pty-1"').optional()

/** The per-call result budget (`maxOutputBytes`), up to the configured `maxResultBytes`. */
export function outputBudget(config: Config) {
  return z.number().int().min(MIN_RESULT_BYTES).max(config.maxResultBytes).optional().describe(`Default ${config.maxOutputBytes}`)
}

/** The first non-blank line of `text` for titles and task labels: control characters as ^X, at most 80 characters. */
export function firstLine(text: string): string {
  const line = (text.split(/\r?\n/).find((part) => part.trim() !== '') ?? '').trim()
  const visible = line.replace(/[\x00-\x1f\x7f]/g, (char) => (char === '\x7f' ? '^?' : `^${String.fromCharCode(char.charCodeAt(0) + 64)}`))
  if (visible === '') return '(empty line)'
  const points = [...visible]
  return points.length > 80 ? `${points.slice(0, 79).join('')}…` : visible
}
