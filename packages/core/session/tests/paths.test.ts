/**
 * Where logs go and what the host refuses on the way there: attacks of a terminal that can
 * write near the log folder (symlinks, a FIFO, a swapped folder), run against the real file
 * system as the user the tests run as (root in CI).
 */
import { spawnSync } from 'node:child_process'
import { linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import SessionService, { SessionError } from '../src/index.ts'
import { defaultLogBase, workspaceId } from '../src/workspace.ts'

let root: string
let fiber: { dispose(): Promise<void> } | undefined
let savedState: string | undefined

async function boot(config: SessionService.Config): Promise<SessionService> {
  const ctx = new Context()
  ctx.logger.exporter({ export: () => {} })
  fiber = await ctx.plugin(SessionService, config)
  return ctx.sessions
}

function thrown(fn: () => unknown): SessionError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(SessionError)
    return error as SessionError
  }
  throw new Error('expected a SessionError')
}

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-paths-')))
  savedState = process.env['XDG_STATE_HOME']
})

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  if (savedState === undefined) delete process.env['XDG_STATE_HOME']
  else process.env['XDG_STATE_HOME'] = savedState
  rmSync(root, { recursive: true, force: true })
})

describe('the default log folder', () => {
  it('is <XDG_STATE_HOME>/conch/sessions/<slug>-<hash of the canonical workspace>, outside the workspace', async () => {
    const state = join(root, 'state')
    const workspace = join(root, 'My Project')
    mkdirSync(workspace)
    process.env['XDG_STATE_HOME'] = state
    const sessions = await boot({ persist: true })
    const log = sessions.create({ id: 'first', workspaceRoot: workspace })
    const id = workspaceId(workspace)
    expect(id).toMatch(/^my-project-[0-9a-f]{12}$/)
    expect(sessions.logDir(workspace)).toBe(join(state, 'conch', 'sessions', id))
    expect(readdirSync(join(state, 'conch', 'sessions', id))).toEqual(['first.jsonl'])
    expect(readdirSync(workspace)).toEqual([])
    log.append('x/y', { n: 1 })
    sessions.close('first')
    expect(sessions.open('first', { workspaceRoot: workspace }).events().map((event) => event.type)).toEqual(['session/start', 'x/y'])
  })

  it('gives two folders of the same name different ids, and one folder reached through a link the same id', () => {
    mkdirSync(join(root, 'a', 'app'), { recursive: true })
    mkdirSync(join(root, 'b', 'app'), { recursive: true })
    symlinkSync(join(root, 'a', 'app'), join(root, 'link'))
    expect(workspaceId(join(root, 'a', 'app'))).not.toBe(workspaceId(join(root, 'b', 'app')))
    expect(workspaceId(realpathSync(join(root, 'link')))).toBe(workspaceId(join(root, 'a', 'app')))
    expect(workspaceId('/')).toMatch(/^root-[0-9a-f]{12}$/)
  })

  it('falls back to ~/.local/state when XDG_STATE_HOME is unset or relative', () => {
    expect(defaultLogBase({ HOME: '/home/me' })).toBe('/home/me/.local/state/conch/sessions')
    expect(defaultLogBase({ HOME: '/home/me', XDG_STATE_HOME: 'rel/state' })).toBe('/home/me/.local/state/conch/sessions')
    expect(defaultLogBase({ HOME: '/home/me', XDG_STATE_HOME: '/var/state' })).toBe('/var/state/conch/sessions')
  })

  it('stays in memory without persist or dir', async () => {
    const sessions = await boot({})
    expect(sessions.logDir(root)).toBeUndefined()
    sessions.create({ id: 'mem', workspaceRoot: root })
    expect(readdirSync(root)).toEqual([])
  })
})

describe('refusals', () => {
  it('refuses a dir inside the session\'s workspace, naming both, unless allowed on purpose', async () => {
    const workspace = join(root, 'ws')
    mkdirSync(workspace)
    const sessions = await boot({ dir: join(workspace, '.conch', 'sessions') })
    const error = thrown(() => sessions.create({ workspaceRoot: workspace }))
    expect(error.code).toBe('LOG_IN_WORKSPACE')
    expect(error.message).toContain(`session log folder ${join(workspace, '.conch', 'sessions')} is inside the workspace ${workspace}`)
    expect(readdirSync(workspace)).toEqual([])
    await fiber?.dispose()
    const allowed = await boot({ dir: join(workspace, '.conch', 'sessions'), allowInsideWorkspace: true })
    allowed.create({ id: 'ok', workspaceRoot: workspace })
    expect(readdirSync(join(workspace, '.conch', 'sessions'))).toEqual(['ok.jsonl'])
  })

  it('refuses a log folder replaced by a symlink, and writes nothing where it points', async () => {
    const target = join(root, 'target')
    mkdirSync(target)
    mkdirSync(join(root, 'logs', '.conch'), { recursive: true })
    symlinkSync(target, join(root, 'logs', '.conch', 'sessions'))
    const sessions = await boot({ dir: join(root, 'logs', '.conch', 'sessions') })
    const error = thrown(() => sessions.create({ id: 'redirected' }))
    expect(error.code).toBe('LOG_DIR_SYMLINK')
    expect(error.message).toContain(`${join(root, 'logs', '.conch', 'sessions')} is a symbolic link`)
    expect(readdirSync(target)).toEqual([])
  })

  it('refuses a symlink in any parent component, and creates nothing through it', async () => {
    const target = join(root, 'target')
    mkdirSync(target)
    mkdirSync(join(root, 'logs'))
    symlinkSync(target, join(root, 'logs', '.conch'))
    const sessions = await boot({ dir: join(root, 'logs', '.conch', 'sessions') })
    const error = thrown(() => sessions.create({ id: 'redirected' }))
    expect(error.code).toBe('LOG_DIR_SYMLINK')
    expect(error.message).toContain(`component ${join(root, 'logs', '.conch')} is a symbolic link`)
    expect(readdirSync(target)).toEqual([])
  })

  it('refuses a symlink in place of a log file when replaying or appending, and leaves its target alone', async () => {
    const dir = join(root, 'logs')
    const sessions = await boot({ dir })
    sessions.create({ id: 'real' })
    sessions.close('real')
    const victim = join(root, 'victim')
    writeFileSync(victim, 'precious\n')
    rmSync(join(dir, 'real.jsonl'))
    symlinkSync(victim, join(dir, 'real.jsonl'))
    const error = thrown(() => sessions.open('real'))
    expect(error.code).toBe('LOG_NOT_REGULAR')
    expect(error.message).toContain(join(dir, 'real.jsonl'))
    expect(readFileSync(victim, 'utf8')).toBe('precious\n')
    symlinkSync(victim, join(dir, 'planted.jsonl'))
    // A new session never writes through a planted link either (O_EXCL | O_NOFOLLOW).
    expect(thrown(() => sessions.create({ id: 'planted' })).code).toBe('DUPLICATE_SESSION')
    expect(readFileSync(victim, 'utf8')).toBe('precious\n')
  })

  it('refuses a log that is another name of a host file (a hard link), and leaves that file alone', async () => {
    const dir = join(root, 'logs')
    const sessions = await boot({ dir })
    sessions.create({ id: 'real' })
    sessions.close('real')
    const victim = join(root, 'victim')
    writeFileSync(victim, '{"seq":1,"ts":"2026-01-01T00:00:00.000Z","sessionId":"real","type":"session/start","data":{}}\n')
    rmSync(join(dir, 'real.jsonl'))
    linkSync(victim, join(dir, 'real.jsonl'))
    const before = readFileSync(victim, 'utf8')
    expect(thrown(() => sessions.open('real')).code).toBe('LOG_NOT_REGULAR')
    expect(readFileSync(victim, 'utf8')).toBe(before)
  })

  it('refuses a FIFO in place of a log file without blocking', async () => {
    const dir = join(root, 'logs')
    mkdirSync(dir)
    expect(spawnSync('mkfifo', [join(dir, 'pipe.jsonl')]).status).toBe(0)
    const sessions = await boot({ dir })
    expect(thrown(() => sessions.open('pipe')).code).toBe('LOG_NOT_REGULAR')
  })
})
