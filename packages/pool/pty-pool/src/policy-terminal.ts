/**
 * The managed worker's conch terminals: a `TerminalFactory` over the worker's own `ctx.pty`. Each
 * (owner id, policy) gets a stand-in owner whose session log carries that policy, so the worker's
 * `ctx.sandboxPolicy` resolves exactly the main process's answer.
 */
import type { PtyOwner, PtyServiceApi } from '@conch/pty'
import type { OwnerPolicy } from './protocol.ts'
import { PoolOwner, ptyTerminals } from './pty-terminal.ts'
import type { TerminalFactory, TerminalSpawnOptions } from './terminal.ts'

type SessionLog = PtyOwner['session']

export interface PolicyTerminalOptions {
  pty: PtyServiceApi
  /** `ctx.sessions` of the worker: makes the stand-in owners' session logs. */
  sessions: { create(options: { workspaceRoot?: string }): SessionLog }
  /** `ctx.sandboxPolicy` of the worker: records each stand-in's mode. */
  sandboxPolicy: { setMode(session: SessionLog, mode: OwnerPolicy['mode']): void }
  /** `ctx.sandbox` of the worker: the policy's protected paths (and each CLI's folder) are protected with it. */
  sandbox?: { protect?(paths: readonly string[]): () => void; hide?(paths: readonly string[]): () => void }
  /** The backend type (`@conch/pty-local`: `shell`). */
  type?: string
}

/**
 * The factory and its close (which disposes every stand-in owner, closing what is left open).
 * A spawn without `owner.policy` is refused: a CLI never runs under a default policy here.
 */
export function policyTerminals(options: PolicyTerminalOptions): { terminals: TerminalFactory; close(): Promise<void> } {
  const owners = new Map<string, PoolOwner>()
  const protectedPaths = new Set<string>()
  const hiddenPaths = new Set<string>()
  const open = ptyTerminals({ pty: options.pty, ...(options.sandbox && { sandbox: options.sandbox }), ...(options.type && { type: options.type }) })
  const ownerFor = (id: string, policy: OwnerPolicy): PoolOwner => {
    const name = JSON.stringify([id, policy.mode, policy.workspaceRoot])
    let owner = owners.get(name)
    if (owner === undefined) {
      const session = options.sessions.create({ workspaceRoot: policy.workspaceRoot })
      options.sandboxPolicy.setMode(session, policy.mode)
      owner = new PoolOwner(id, session)
      owners.set(name, owner)
    }
    return owner
  }
  const terminals: TerminalFactory = async (spawn: TerminalSpawnOptions) => {
    const policy = spawn.owner?.policy
    if (spawn.owner === undefined || policy === undefined) throw new Error(`the pooled CLI of ${spawn.owner?.id ?? 'an unknown owner'} came without its owner's sandbox policy`)
    const fresh = policy.protectedPaths.filter((path) => !protectedPaths.has(path))
    if (fresh.length > 0 && options.sandbox?.protect) {
      options.sandbox.protect(fresh)
      for (const path of fresh) protectedPaths.add(path)
    }
    // Hidden in every sandbox of the worker (each CLI's own home is its writable path, and stays visible).
    const hide = (policy.hiddenPaths ?? []).filter((path) => !hiddenPaths.has(path))
    if (hide.length > 0 && options.sandbox?.hide) {
      options.sandbox.hide(hide)
      for (const path of hide) hiddenPaths.add(path)
    }
    return open({ ...spawn, owner: { ...spawn.owner, agent: ownerFor(spawn.owner.id, policy) } })
  }
  return {
    terminals,
    close: async () => {
      await Promise.all([...owners.values()].map((owner) => owner.dispose()))
      owners.clear()
    },
  }
}
