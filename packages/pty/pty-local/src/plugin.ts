/** The `@conch/pty-local` plugin: registers the node-pty backend on ctx.pty. */
import type { Context } from 'cordis'
import { LocalBackend } from './backend.ts'
import { Config } from './config.ts'
import { linuxInspector, macosInspector, type TerminalInspector } from './inspector.ts'
import { procFiles } from './proc-files.ts'
import { helperTermiosReader } from './termios.ts'
import type { TerminalView } from './backend.ts'

export const name = 'pty-local'
export const inject = ['pty', 'sandbox', 'sandboxPolicy']
export { Config }

export const apply = (ctx: Context, config: Config): void => {
  // One termios helper for all of this backend's terminals, started on the first query.
  const termios = helperTermiosReader()
  ctx.effect(() => () => termios.close(), 'pty-local.termios')
  // The /proc descriptors the inspectors keep open (proc-files.ts) close with the plugin.
  ctx.effect(() => () => procFiles.close(), 'pty-local.proc-files')
  const backend = new LocalBackend({
    config,
    sandbox: ctx.sandbox,
    sandboxPolicy: ctx.sandboxPolicy,
    inspect: inspectorFor,
    termios,
  })
  ctx.pty.registerBackend(backend)
}

/** The platform inspector; only Linux has the exact /proc tier. */
export function inspectorFor(terminal: TerminalView): TerminalInspector {
  if (process.platform === 'linux') return linuxInspector({ pid: terminal.pid, ...terminal.slave, path: terminal.slavePath, relayed: terminal.relayed === true })
  return macosInspector(terminal.pid)
}
