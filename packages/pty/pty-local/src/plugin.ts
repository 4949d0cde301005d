/**
 * The `@conch/pty-local` plugin: registers the node-pty backend on ctx.pty and a fence on
 * ctx.sandboxPolicy that refuses sandbox-mode changes while an owner has terminals.
 */
import type { Context } from 'cordis'
import type { AgentServiceApi } from '@conch/agent'
import { LocalBackend } from './backend.ts'
import { Config } from './config.ts'
import { linuxInspector, macosInspector, type TerminalInspector } from './inspector.ts'
import type { TerminalProcess } from './terminal.ts'

export const name = 'pty-local'
export const inject = ['pty', 'sandbox', 'sandboxPolicy']
export { Config }

export const apply = (ctx: Context, config: Config): void => {
  const backend = new LocalBackend({
    config,
    sandbox: ctx.sandbox,
    sandboxPolicy: ctx.sandboxPolicy,
    inspect: inspectorFor,
  })
  ctx.pty.registerBackend(backend)
  ctx.sandboxPolicy.fence({
    name: 'terminals',
    busy(sessionId) {
      const agents = ctx.get('agents') as AgentServiceApi | undefined
      const owner = agents?.list().find((agent) => agent.session.id === sessionId)
      if (owner === undefined) return undefined
      const ids = ctx.pty.activity(owner)
      return ids.length ? `terminal${ids.length > 1 ? 's' : ''} ${ids.join(', ')} ${ids.length > 1 ? 'are' : 'is'} open or opening` : undefined
    },
  })
}

/** The platform inspector; only Linux has the exact /proc tier. */
export function inspectorFor(terminal: TerminalProcess): TerminalInspector {
  if (process.platform === 'linux') return linuxInspector({ pid: terminal.pid, rdev: terminal.slave.rdev, path: terminal.slavePath })
  return macosInspector(terminal.pid)
}
