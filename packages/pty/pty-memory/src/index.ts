/**
 * `@conch/pty-memory`: a deterministic `ctx.pty` backend. Its sessions run the memory shell
 * (see `shell.ts` and the README for the commands): fixed output, no processes, no timers —
 * for pinned snapshot scenarios and for tests of what the model sees.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import type { BackendSession, BackendSpawnRequest, PtyBackend } from '@conch/pty'
import { MemorySession } from './session.ts'
import { resolvePath } from './shell.ts'

export { MemorySession } from './session.ts'
export { MemoryShell } from './shell.ts'

export const name = 'pty-memory'
export const inject = ['pty']

const positive = () => z.number().int().positive().max(Number.MAX_SAFE_INTEGER)
const absolute = () => z.string().startsWith('/', 'must be an absolute path')

export const Config = z
  .strictObject({
    type: z.string().min(1).default('shell').describe('Session type registered on ctx.pty (`terminal_open {type}`).'),
    cwd: absolute().default('/workspace').describe('Working directory of a session opened without `cwd`. Directories are not checked: every path exists.'),
    home: absolute().default('/home/conch').describe('HOME, the target of a bare `cd` and of `~`.'),
    motd: z.string().default('').describe('Text a new session prints before its first prompt (the spawn result `motd`).'),
    idleSilenceMs: positive()
      .default(3000)
      .describe('`sleep N` with N·1000 below this finishes at once; longer sleeps settle `inferred_idle` and report this as `elapsedMs`. No timer runs.'),
    timeoutMs: positive().default(30000).describe('Reported as `elapsedMs` of a send that settles `timeout` (a running `yes`). No timer runs.'),
    yesLines: positive().default(20).describe('Lines `yes` prints each time a send settles on it.'),
    scrollbackLines: positive().default(10000).describe('Retained scrollback, in lines.'),
    maxReadBytes: positive().default(262144).describe('Bound of one read page and of one send viewport, in UTF-8 bytes; the newest bytes are kept.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>

/** The backend registered on ctx.pty. Spawns settle in a microtask; nothing is started. */
export class MemoryBackend implements PtyBackend {
  readonly type: string

  constructor(private readonly config: Config) {
    this.type = config.type
  }

  async spawn(request: BackendSpawnRequest): Promise<BackendSession> {
    await Promise.resolve()
    if (request.signal.aborted) throw request.signal.reason
    return new MemorySession({ ...this.config, sessionId: request.sessionId, cwd: resolvePath(this.config.cwd, request.cwd ?? '.') })
  }
}

export const apply = (ctx: Context, config: Config) => {
  ctx.pty.registerBackend(new MemoryBackend(config))
}
