/**
 * `@conch/pty-pool` — ctx.ptyPool: warm interactive agent CLIs in real terminals;
 * `ctx.ptyPool.pool` is the `PtyPool`, its fresh-spawn runner set through `setFallback`.
 */
import { realpathSync } from 'node:fs'
import { dirname } from 'node:path'
import { type Context, Service } from 'cordis'
import { z } from 'zod'
import type { SandboxServiceApi } from '@conch/sandbox'
import { resolveExecutable } from '@conch/subprocess'
import { loadPoolConfig, type PoolConfig } from './config.ts'
import { PoolError } from './errors.ts'
import { BUILTIN_KINDS } from './kinds.ts'
import type { PtyOwner, PtyServiceApi } from '@conch/pty'
import { type FallbackRunner, type PoolDeps, PtyPool } from './pool.ts'
import type { OwnerPolicy } from './protocol.ts'
import { policyTerminals, type PolicyTerminalOptions } from './policy-terminal.ts'
import { ptyTerminals } from './pty-terminal.ts'
import { startStatusListener, type StatusListener } from './status.ts'

export * from './config.ts'
export * from './errors.ts'
export * from './sentinel.ts'
export { BUILTIN_KINDS } from './kinds.ts'
export { PoolMetrics } from './metrics.ts'
export { PtyPool, poolNote, type FallbackRunner, type FailureLine, type InvokeOptions, type InvokePath, type InvokeResult, type PoolDeps } from './pool.ts'
export { TranscriptReader, TRANSCRIPT_WALK_DEPTH, TRANSCRIPT_WALK_ENTRIES, type TranscriptReaderOptions } from './transcript.ts'
export { createHomeFile, makeHomeDir, appendNoFollow, readNoFollow, newestFileBeneath } from './home-fs.ts'
export { PoolSession, keyString, redactKey, prepareLaunch, typeableText, type PoolKey, type SessionState, type TurnPhases } from './session.ts'
export { startStatusListener, statusBody, type StatusListener } from './status.ts'
export { WarmSessions, type SessionBackend, type WarmAnswer, type AttemptOptions } from './warm.ts'
export { WorkerSupervisor, type SupervisorState, type SupervisorDeps } from './supervisor.ts'
export { runPoolWorker, WORKER_CHANNEL_FD, type PoolWorkerOptions, type WorkerTerminals } from './worker.ts'
export { LineDecoder, encodeLine, workerMessageSchema, MainMessageSchema, OwnerPolicySchema, TerminalSectionsSchema, WORKER_COUNTERS, type WorkerMessage, type MainMessage, type SessionInfo, type OwnerPolicy, type TerminalSections } from './protocol.ts'
export { unconfinedPolicy, type PoolTerminal, type TerminalFactory, type TerminalOwner, type TerminalSpawnOptions } from './terminal.ts'
export { ptyTerminals, type PtyTerminalOptions } from './pty-terminal.ts'
export { policyTerminals, type PolicyTerminalOptions } from './policy-terminal.ts'

declare module 'cordis' {
  interface Context {
    ptyPool: PtyPoolService
  }
}

export class PtyPoolService extends Service {
  /** Checked by `loadPoolConfig` (fields named in errors); see the README's table. */
  static Config = z.unknown()
  readonly pool: PtyPool
  /** Resolves when the status listener (if configured) is bound. */
  readonly ready: Promise<void>
  private readonly holder: { fallback: FallbackRunner | undefined; listener: StatusListener | undefined } = { fallback: undefined, listener: undefined }

  constructor(ctx: Context, input: unknown) {
    super(ctx, 'ptyPool')
    const workspaces = workspacesOf(ctx)
    const config: PoolConfig = loadPoolConfig(input, process.env, BUILTIN_KINDS, workspaces)
    const holder = this.holder
    this.pool = new PtyPool(config, {
      // `ctx.subprocess` spawns the managed worker; only `worker: managed` needs it.
      ...(config.worker === 'managed' && { subprocess: ctx.get('subprocess') }),
      ...terminalDeps(ctx, config),
      workspaces,
      fallback: (request) => (holder.fallback ? holder.fallback(request) : Promise.reject(new Error('no fresh-spawn path is registered (mount @conch/subagent-cli-pool)'))),
      warn: (message) => ctx.logger.warn(message),
    })
    const status = config.status
    this.ready = status
      ? startStatusListener(this.pool, status).then((listener) => {
          holder.listener = listener
        })
      : Promise.resolve()
    this.ready.catch((error: unknown) => ctx.logger.warn('pool: the status listener did not start', error))
    ctx.effect(() => () => this.stop(), 'ptyPool.dispose')
    // Hidden in every sandbox: no terminal reads or rewrites another owner's CLI config or transcripts.
    const stateDir = this.pool.stateDir
    ctx.inject(['sandbox'], (scope) => {
      const sandbox = scope.get('sandbox') as Pick<SandboxServiceApi, 'hide' | 'provision'> | undefined
      if (sandbox?.hide === undefined) {
        scope.logger.warn(`pool: ctx.sandbox cannot hide paths; confined terminals may read the pooled CLIs' homes in ${stateDir}`)
        return
      }
      sandbox.hide([stateDir])
      // A sandbox with mounts fixed at its first process (a container) gets them up front.
      const homes = this.pool.agentHomes
      if (homes !== undefined) sandbox.provision?.({ programs: installations(config, process.env, workspaces), homes: [homes] })
    })
  }

  /** Sets the fresh-spawn runner; returns its disposer. */
  setFallback(fallback: FallbackRunner): () => void {
    this.holder.fallback = fallback
    return () => {
      if (this.holder.fallback === fallback) this.holder.fallback = undefined
    }
  }

  /** The status listener's port, once it is up. */
  statusPort(): number | undefined {
    return this.holder.listener?.port
  }

  private async stop(): Promise<void> {
    await this.ready.catch(() => {})
    await this.holder.listener?.close()
    await this.pool.shutdown()
  }
}

/**
 * The terminals the pool needs from the composition, all through `ctx.pty` (see `PoolDeps`).
 * Missing services fail in `PtyPool`'s constructor (conch) or at spawn (unconfined).
 */
function terminalDeps(ctx: Context, config: PoolConfig): Partial<PoolDeps> {
  const sandbox = ctx.get('sandbox') as Pick<SandboxServiceApi, 'protect' | 'protectedPaths' | 'hiddenPaths' | 'fixedMounts'> | undefined
  const policies = ctx.get('sandboxPolicy') as (PolicyTerminalOptions['sandboxPolicy'] & { resolve(options: { session: PtyOwner['session'] }): { mode: OwnerPolicy['mode']; workspaceRoot: string } }) | undefined
  if (config.worker === 'managed') {
    if (config.terminal !== 'conch' || policies === undefined) return {}
    if (sandbox?.fixedMounts?.() === true) {
      throw new PoolError('CONFIG_INVALID', {
        field: 'pool config: worker',
        problem:
          '"managed" runs each CLI in a sandbox the worker makes itself (bubblewrap), but here each agent\'s sandbox is one place this process makes at the agent\'s first process (a container) and no other process can join: ' +
          'set worker: "in-process" (each CLI then runs in its agent\'s container), or terminal: "unconfined"',
      })
    }
    return {
      // Read at invoke time: ctx.agents is usually mounted after the pool.
      owners: (id) => (ctx.get('agents') as { get(id: string): PtyOwner | undefined } | undefined)?.get(id),
      policyOf: (owner) => {
        const { mode, workspaceRoot } = policies.resolve({ session: owner.session })
        return { mode, workspaceRoot, protectedPaths: sandbox?.protectedPaths?.() ?? [], hiddenPaths: sandbox?.hiddenPaths?.() ?? [] }
      },
    }
  }
  const pty = ctx.get('pty') as PtyServiceApi | undefined
  if (pty === undefined) return {}
  if (config.terminal === 'conch') {
    return {
      owners: (id) => (ctx.get('agents') as { get(id: string): PtyOwner | undefined } | undefined)?.get(id),
      terminals: ptyTerminals({ pty, ...(sandbox && { sandbox }) }),
      agentHomes: sandbox?.fixedMounts?.() === true,
    }
  }
  const sessions = ctx.get('sessions') as PolicyTerminalOptions['sessions'] | undefined
  if (sessions === undefined || policies === undefined) return {}
  return { terminals: policyTerminals({ pty, sessions, sandboxPolicy: policies }).terminals }
}

/** The folder of each kind's binary (canonical) that is there, outside `writable`. */
function installations(config: PoolConfig, env: NodeJS.ProcessEnv, writable: readonly string[]): string[] {
  return Object.values(config.kinds).flatMap((kind) => {
    const command = resolveExecutable(kind.command, env.PATH ?? '', writable)
    try {
      return command === undefined ? [] : [dirname(realpathSync(command))]
    } catch {
      return []
    }
  })
}

/** `PoolDeps.workspaces`: the sandbox policy's configured root and the sandbox's `readWritePaths`, of those mounted. */
function workspacesOf(ctx: Context): string[] {
  const root = (ctx.get('sandboxPolicy') as { config?: { workspaceRoot?: unknown } } | undefined)?.config?.workspaceRoot
  const sandbox = ctx.get('sandbox') as Pick<SandboxServiceApi, 'readWritePaths'> | undefined
  return [...(typeof root === 'string' ? [root] : []), ...(sandbox?.readWritePaths?.() ?? [])]
}

export const name = 'pty-pool'
/** `ctx.subprocess` spawns the managed worker (`worker: managed`); the pool goes before it at disposal. */
export const inject = ['subprocess']
export const apply = (ctx: Context, config: unknown) => {
  ctx.plugin(PtyPoolService, config)
}
