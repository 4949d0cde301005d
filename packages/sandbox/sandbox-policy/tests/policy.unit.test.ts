import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context, Service, type Message } from 'cordis'
import type { Agent, PromptSection } from '@conch/agent'
import SessionService, { type SessionLog } from '@conch/session'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import SandboxPolicyService, { SandboxPolicyError, describePolicy, type ModeFence } from '../src/index.ts'

let dir: string
let root: Context
let logs: Message[]
let fibers: Array<{ dispose(): Promise<void> }> = []

beforeAll(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-policy-')))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))
afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  fibers = []
  expect(logs.filter((message) => message.type === 'error').map((message) => message.args)).toEqual([])
})

async function boot(config: Record<string, unknown> = {}, sessions: Record<string, unknown> = {}): Promise<SandboxPolicyService> {
  root = new Context()
  logs = []
  root.logger.exporter({ export: (message) => void logs.push(message) })
  fibers.push(await root.plugin(SessionService, sessions as SessionService.Config))
  fibers.push(await root.plugin(SandboxPolicyService, config as SandboxPolicyService.Config))
  return root.sandboxPolicy
}

function refusal(fn: () => unknown): SandboxPolicyError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(SandboxPolicyError)
    return error as SandboxPolicyError
  }
  throw new Error('expected a SandboxPolicyError')
}

/** A fence whose busy reasons the test sets per session. */
function fakeFence(): ModeFence & { busyFor: Map<string, string> } {
  const busyFor = new Map<string, string>()
  return { name: 'terminals', busyFor, busy: (sessionId) => busyFor.get(sessionId) }
}

describe('resolve', () => {
  it('uses the configured mode and workspace until the session says otherwise', async () => {
    const policy = await boot({ mode: 'workspace-write', workspaceRoot: dir })
    const session = root.sessions.create()
    expect(policy.resolve({ session })).toEqual({ mode: 'workspace-write', workspaceRoot: dir, sessionId: session.id, network: { mode: 'none' }, expose: [] })
  })

  it('takes the latest sandbox/mode event and the workspace of session/start', async () => {
    const policy = await boot()
    const session = root.sessions.create({ workspaceRoot: dir })
    policy.setMode(session, 'workspace-write')
    policy.setMode(session, 'danger-full-access')
    expect(policy.resolve({ session })).toEqual({ mode: 'danger-full-access', workspaceRoot: dir, sessionId: session.id, network: { mode: 'full' }, expose: [] })
    expect(session.last('sandbox/mode')?.data).toEqual({ mode: 'danger-full-access' })
  })

  it('replays the same policy when a persisted session is opened again', async () => {
    const logDir = join(dir, 'logs')
    let policy = await boot({}, { dir: logDir, allowInsideWorkspace: true })
    const session = root.sessions.create({ id: 'replayed', workspaceRoot: dir })
    policy.setMode(session, 'workspace-write')
    for (const fiber of fibers.reverse()) await fiber.dispose()
    fibers = []

    policy = await boot({}, { dir: logDir, allowInsideWorkspace: true })
    expect(policy.resolve({ session: root.sessions.open('replayed') })).toMatchObject({ mode: 'workspace-write', workspaceRoot: dir })
  })
})

describe('config', () => {
  async function loadError(config: Record<string, unknown>): Promise<string> {
    const ctx = new Context()
    await ctx.plugin(SessionService, {})
    return ctx.plugin(SandboxPolicyService, config as SandboxPolicyService.Config).then(
      () => 'loaded',
      (error: unknown) => String(error),
    )
  }

  it('defaults to read-only on the canonical working directory', async () => {
    const policy = await boot()
    expect(policy.config).toEqual({ mode: 'read-only', workspaceRoot: realpathSync(process.cwd()), network: 'none', allow: [], expose: [] })
  })

  it('makes the workspace root absolute and canonical, resolving symlinks', async () => {
    const target = join(dir, 'real-root')
    const link = join(dir, 'linked-root')
    mkdirSync(target, { recursive: true })
    symlinkSync(target, link)
    const policy = await boot({ workspaceRoot: link })
    expect(policy.config.workspaceRoot).toBe(target)
  })

  it('fails to load with a missing workspace root or an unknown mode, naming the field', async () => {
    expect(await loadError({ workspaceRoot: join(dir, 'nope') })).toMatch(/nope does not exist \(at workspaceRoot\)/)
    expect(await loadError({ mode: 'yolo' })).toMatch(/\(at mode\)/)
  })
})

describe('the mode-change veto', () => {
  it('refuses a change of the effective mode while a fence is busy, with the reason and what to do', async () => {
    const policy = await boot({ mode: 'workspace-write', workspaceRoot: dir })
    const fence = fakeFence()
    policy.fence(fence)
    const session = root.sessions.create()
    fence.busyFor.set(session.id, 'terminals pty-1 are open or opening')
    const before = session.events().length

    const error = refusal(() => policy.setMode(session, 'danger-full-access'))
    expect(error.code).toBe('MODE_CHANGE_REFUSED')
    expect(error.message).toBe(
      'cannot change the sandbox mode from workspace-write to danger-full-access while terminals pty-1 are open or opening; close them first (terminal_close) and try again',
    )
    expect(session.events()).toHaveLength(before)
    expect(policy.resolve({ session }).mode).toBe('workspace-write')
  })

  it('allows the change once the fence is no longer busy', async () => {
    const policy = await boot({ mode: 'workspace-write', workspaceRoot: dir })
    const fence = fakeFence()
    policy.fence(fence)
    const session = root.sessions.create()
    fence.busyFor.set(session.id, 'terminals pty-1 are open or opening')
    refusal(() => policy.setMode(session, 'read-only'))
    fence.busyFor.delete(session.id)
    policy.setMode(session, 'read-only')
    expect(policy.resolve({ session }).mode).toBe('read-only')
  })

  it('allows an event that keeps the effective mode while busy', async () => {
    const policy = await boot({ mode: 'workspace-write', workspaceRoot: dir })
    const fence = fakeFence()
    policy.fence(fence)
    const session = root.sessions.create()
    fence.busyFor.set(session.id, 'terminals pty-1 are open or opening')
    policy.setMode(session, 'workspace-write')
    expect(session.last('sandbox/mode')?.data).toEqual({ mode: 'workspace-write' })
  })

  it('only asks about the session whose mode changes', async () => {
    const policy = await boot()
    const fence = fakeFence()
    policy.fence(fence)
    const busy = root.sessions.create()
    const idle = root.sessions.create()
    fence.busyFor.set(busy.id, 'terminals pty-3 are open or opening')
    policy.setMode(idle, 'danger-full-access')
    expect(refusal(() => policy.setMode(busy, 'danger-full-access')).code).toBe('MODE_CHANGE_REFUSED')
  })

  it('applies the same veto to sandbox/mode events appended directly, and joins the reasons of several fences', async () => {
    const policy = await boot()
    const terminals = fakeFence()
    const tasks: ModeFence = { name: 'tasks', busy: () => 'task-2 is running' }
    policy.fence(terminals)
    policy.fence(tasks)
    const session = root.sessions.create()
    terminals.busyFor.set(session.id, 'terminal pty-1 is open or opening')
    const error = refusal(() => session.append('sandbox/mode', { mode: 'workspace-write' }))
    expect(error.message).toBe(
      'cannot change the sandbox mode from read-only to workspace-write while terminal pty-1 is open or opening and task-2 is running; close them first (terminal_close) and try again',
    )
  })

  it('refuses when a fence cannot answer', async () => {
    const policy = await boot()
    policy.fence({
      name: 'terminals',
      busy: () => {
        throw new Error('pty service is gone')
      },
    })
    const error = refusal(() => policy.setMode(root.sessions.create(), 'workspace-write'))
    expect(error.message).toContain('terminals could not be checked (pty service is gone)')
  })

  it('rejects an unknown mode with INVALID_MODE, through setMode and through a direct append', async () => {
    const policy = await boot()
    const session = root.sessions.create()
    expect(refusal(() => policy.setMode(session, 'yolo' as never)).code).toBe('INVALID_MODE')
    const error = refusal(() => session.append('sandbox/mode', { mode: 'full' }))
    expect(error.code).toBe('INVALID_MODE')
    expect(error.message).toBe(`unknown sandbox mode "full" for session ${session.id}: expected one of read-only, workspace-write, danger-full-access`)
    expect(session.last('sandbox/mode')).toBeUndefined()
  })

  it('stops consulting a fence when the plugin that registered it is disposed', async () => {
    const policy = await boot()
    const fence = fakeFence()
    const plugin = await root.plugin({
      name: 'fence-owner',
      inject: ['sandboxPolicy'],
      apply: (ctx: Context) => {
        ctx.sandboxPolicy.fence(fence)
      },
    })
    const session = root.sessions.create()
    fence.busyFor.set(session.id, 'terminals pty-1 are open or opening')
    refusal(() => policy.setMode(session, 'workspace-write'))
    await plugin.dispose()
    policy.setMode(session, 'workspace-write')
    expect(policy.resolve({ session }).mode).toBe('workspace-write')
  })
})

/** A stand-in for ctx.agents that only records prompt sections. */
class FakeAgents extends Service {
  readonly sections: PromptSection[] = []
  constructor(ctx: Context) {
    super(ctx, 'agents')
  }
  section(section: PromptSection): () => void {
    return this.ctx.effect(() => {
      this.sections.push(section)
      return () => void this.sections.splice(this.sections.indexOf(section), 1)
    }, 'agents.section')
  }
}

const agentWith = (session: SessionLog): Agent => ({ session }) as Agent

describe('the system-prompt section', () => {
  it('tells the model its mode in one line, registered once ctx.agents is available', async () => {
    const policy = await boot({ mode: 'workspace-write', workspaceRoot: dir })
    const agentsFiber = await root.plugin(FakeAgents)
    fibers.push(agentsFiber)
    const agents = root.get('agents') as unknown as FakeAgents
    expect(agents.sections.map((section) => section.id)).toEqual(['sandbox'])
    const session = root.sessions.create()
    expect(agents.sections[0]!.render(agentWith(session))).toBe(
      `Sandbox: workspace-write — files under ${dir} are writable except the files that configure shells, git and editors (.bashrc, .git/hooks, .git/config, .vscode, .mcp.json and the like; an empty folder with such a name is a guard); everything else is read-only except /tmp; your terminals and programs share one /tmp and one loopback (a server one starts on 127.0.0.1 is reachable from the others); no network beyond that loopback.`,
    )
    policy.setMode(session, 'read-only')
    expect(agents.sections[0]!.render(agentWith(session))).toMatch(/^Sandbox: read-only — /)
  })

  it('states the network policy: loopback only, an allowlist and the refusal the model will see, or the host network', async () => {
    const render = async (config: object) => {
      await boot({ mode: 'workspace-write', workspaceRoot: dir, ...config })
      fibers.push(await root.plugin(FakeAgents))
      return (root.get('agents') as unknown as FakeAgents).sections[0]!.render(agentWith(root.sessions.create()))
    }
    expect(await render({})).toMatch(/; no network beyond that loopback\.$/)
    expect(await render({ network: 'allow', allow: ['registry.npmjs.org', '*.pypi.org'] })).toMatch(
      /; network only to registry\.npmjs\.org, \*\.pypi\.org through a proxy \(HTTP_PROXY and HTTPS_PROXY are set; HTTPS on 443 and http:\/\/ on 80 unless a host names its port\); a refused host shows in the result as \[network: blocked <host> — not in the allowlist\]\.$/,
    )
    expect(await render({ network: 'full' })).toMatch(/; network allowed\.$/)
  })

  it('refuses network: allow without a host, and a malformed host pattern, naming the field', async () => {
    const parse = (config: object) => SandboxPolicyService.Config.safeParse({ workspaceRoot: dir, ...config })
    expect(parse({ network: 'allow' }).error?.issues[0]).toMatchObject({ path: ['allow'], message: expect.stringContaining('needs at least one host pattern') })
    expect(parse({ network: 'allow', allow: ['http://x.org'] }).error?.issues[0]?.path).toEqual(['allow', 0])
    expect(parse({ network: 'allow', allow: ['*.example.com', 'example.com'] }).success).toBe(true)
    expect(parse({ network: 'allow', allow: ['example.com:8443', '*.example.com:65535'] }).success).toBe(true)
    for (const pattern of ['example.com:0', 'example.com:65536', 'example.com:', 'example.com:443:1']) {
      expect(parse({ network: 'allow', allow: ['ok.example', pattern] }).error?.issues[0]?.path, pattern).toEqual(['allow', 1])
    }
  })

  it('removes the section when the policy service unloads', async () => {
    root = new Context()
    logs = []
    root.logger.exporter({ export: (message) => void logs.push(message) })
    fibers.push(await root.plugin(SessionService, {}))
    fibers.push(await root.plugin(FakeAgents))
    const policyFiber = await root.plugin(SandboxPolicyService, {} as SandboxPolicyService.Config)
    const agents = root.get('agents') as unknown as FakeAgents
    expect(agents.sections).toHaveLength(1)
    await policyFiber.dispose()
    expect(agents.sections).toHaveLength(0)
  })

  it('describes every mode', () => {
    const base = { workspaceRoot: '/work/x', sessionId: 's', network: { mode: 'none' as const }, expose: [] }
    expect(describePolicy({ ...base, mode: 'workspace-write', network: { mode: 'full' } })).toBe(
      'Sandbox: workspace-write — files under /work/x are writable except the files that configure shells, git and editors (.bashrc, .git/hooks, .git/config, .vscode, .mcp.json and the like; an empty folder with such a name is a guard); everything else is read-only except /tmp; your terminals and programs share one /tmp and one loopback (a server one starts on 127.0.0.1 is reachable from the others); network allowed.',
    )
    expect(describePolicy({ ...base, mode: 'read-only' })).toBe(
      'Sandbox: read-only — files (the workspace, /work/x, and the rest) can be read but not written (except in /tmp); your terminals and programs share one /tmp and one loopback (a server one starts on 127.0.0.1 is reachable from the others); no network beyond that loopback.',
    )
    expect(describePolicy({ ...base, mode: 'read-only' }, false)).toBe(
      'Sandbox: read-only — files (the workspace, /work/x, and the rest) can be read but not written (except in /tmp); your terminals and programs share one /tmp, but each has a loopback of its own (a server one starts on 127.0.0.1 is not reachable from the others); no network beyond loopback.',
    )
    expect(describePolicy({ ...base, mode: 'workspace-write' }, true, true)).toContain(
      "(.bashrc, .git/hooks, .git/config, .vscode, .mcp.json and the like; an empty folder with such a name is a guard); the rest of the system's files are a container's own copy, writable too and gone when you end; ",
    )
    expect(describePolicy({ ...base, mode: 'danger-full-access' })).toBe(
      'Sandbox: danger-full-access — no sandbox: every file you can write is writable and the network is open; stay inside /work/x.',
    )
  })
})
