/**
 * Terminals under the real sandbox: the pty-local plugin composed with ctx.pty, the bubblewrap
 * provider and ctx.sandboxPolicy, driven through ctx.pty as tools do.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import path from 'node:path'
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import AgentService from '@conch/agent'
import type { Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService from '@conch/pty'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import { until } from '@conch/test-support/wait'
import * as ptyLocal from '../src/index.ts'

let workspace: string
let errors: unknown[]
/** Fibers of the composition, disposed in reverse order after each test. */
let fibers: { dispose(): Promise<void> }[] = []

beforeEach(() => {
  workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-sandboxed-')))
  errors = []
})

afterEach(async () => {
  for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
  rmSync(workspace, { recursive: true, force: true })
})

async function compose(options: { mode: 'read-only' | 'workspace-write' | 'danger-full-access'; runnerCommand?: string }) {
  const root = new Context()
  root.logger.exporter({ export: (message) => void (message.type === 'error' && errors.push(message.args)) })
  const load = async (plugin: unknown, config: unknown) => {
    fibers.push(await root.plugin(plugin as never, config as never))
  }
  await load(SessionService, {})
  await load(ToolsService, {})
  await load(LlmService, {})
  await load(AgentService, {})
  await load(SandboxService, {})
  await load(sandboxLocal, options.runnerCommand ? { runnerCommand: options.runnerCommand } : {})
  await load(SandboxPolicyService, { mode: options.mode, workspaceRoot: workspace })
  await load(PtyService, {})
  await load(ptyLocal, {})
  const agent = await root.agents.create()
  return { pty: root.pty, agent, policy: root.sandboxPolicy, agents: root.agents }
}

async function send(pty: PtyService, agent: Agent, id: string, text: string) {
  return pty.startSend(agent, id, { text, submit: true }).done
}

const lines = (text: string) => text.split('\n')

describe('a workspace-write terminal', () => {
  it('writes inside the workspace, gets the shell’s own error for /etc, and writes $HOME only in its private copy', async () => {
    const { pty, agent, agents } = await compose({ mode: 'workspace-write' })
    const opened = await pty.spawn(agent, { type: 'shell' })
    const inside = await send(pty, agent, opened.sessionId, `echo data > ${workspace}/inside.txt && cat ${workspace}/inside.txt`)
    expect(lines(inside.viewport)).toContain('data')
    const etc = await send(pty, agent, opened.sessionId, 'touch /etc/conch-denied')
    expect(etc.viewport).toContain('Read-only file system')
    const marker = `conch-private-${process.pid}`
    const home = await send(pty, agent, opened.sessionId, `touch ${homedir()}/${marker} && echo "home-$((6*7))"`)
    expect(lines(home.viewport)).toContain('home-42')
    expect(existsSync(path.join(homedir(), marker))).toBe(false)
    await agents.dispose(agent)
  })

  it('keeps exact readiness inside the sandbox: a Python REPL and a pager', async () => {
    const { pty, agent, agents } = await compose({ mode: 'workspace-write' })
    const { sessionId } = await pty.spawn(agent, { type: 'shell' })
    expect((await send(pty, agent, sessionId, 'python3 -q')).waitReason).toBe('stdin_read')
    const answer = await send(pty, agent, sessionId, '6*7')
    expect(answer.waitReason).toBe('stdin_read')
    expect(lines(answer.viewport)).toContain('42')
    await send(pty, agent, sessionId, 'exit()')
    const paged = await send(pty, agent, sessionId, 'seq 1 300 | less')
    expect(paged.waitReason).toBe('stdin_read')
    expect(lines(paged.viewport)).toContain('20')
    expect((await pty.startSend(agent, sessionId, { text: 'q', submit: false }).done).waitReason).toBe('stdin_read')
    await agents.dispose(agent)
  })

  it('does not take a read of a pty in the sandbox’s own devpts, numbered like the terminal, for a read of the terminal', async () => {
    // bwrap --dev mounts a devpts instance of its own, numbered from 0 again: the program opens
    // ptys there until one has the terminal's device number, then blocks reading that one.
    writeFileSync(path.join(workspace, 'fakepty.py'), [
      'import os',
      'want = os.fstat(0).st_rdev',
      'keep = []',
      'for _ in range(os.minor(want) + 1):',
      '    master, slave = os.openpty()',
      '    keep.append((master, slave))',
      '    if os.fstat(slave).st_rdev == want:',
      '        print("fake-pty", "fd", slave, flush=True)',
      '        os.read(slave, 1)',
      'print("no pty with that number", flush=True)',
      '',
    ].join('\n'))
    const { pty, agent, agents } = await compose({ mode: 'workspace-write' })
    const { sessionId, pid } = await pty.spawn(agent, { type: 'shell' })
    const blocked = await pty.startSend(agent, sessionId, { text: `python3 ${workspace}/fakepty.py`, submit: true, idleMs: 500 }).done
    // Never proved ready (the send may settle before the program blocks, on a loaded machine).
    expect(blocked.waitReason).toBe('inferred_idle')
    let fd: string | undefined
    await until(() => (fd = /^fake-pty fd (\d+)$/m.exec(pty.read(agent, sessionId, { offset: 0, count: 50 }).text)?.[1]) !== undefined)
    // What the kernel shows from the host: the program's fd 0 is the terminal exactly as the
    // session recorded it at spawn (the wrapper's fd 0, outside the sandbox); the fake has the
    // same device number in another devpts instance.
    const [program] = runningPids(new RegExp(`python3 ${workspace}/fakepty\\.py$`))
    expect(program).toBeDefined()
    const identity = (file: string) => {
      const { dev, rdev } = statSync(file)
      return { dev, rdev }
    }
    const terminal = identity(`/proc/${pid}/fd/0`)
    expect(identity(`/proc/${program}/fd/0`)).toEqual(terminal)
    const fake = identity(`/proc/${program}/fd/${fd}`)
    expect(fake.rdev).toBe(terminal.rdev)
    expect(fake.dev).not.toBe(terminal.dev)
    // With the program blocked on the fake, the next text is reported as typed to nobody.
    const ahead = await pty.startSend(agent, sessionId, { text: 'echo typed-ahead', submit: true, idleMs: 300, timeoutMs: 2000 }).done
    expect(ahead.waitReason).not.toBe('stdin_read')
    expect(ahead.inputState).toBe('not_reading')
    await pty.signal(agent, sessionId, 'SIGINT')
    await agents.dispose(agent)
  })

  it('closing leaves nothing running, including a setsid daemon', async () => {
    const { pty, agent, agents } = await compose({ mode: 'workspace-write' })
    const { sessionId } = await pty.spawn(agent, { type: 'shell' })
    await send(pty, agent, sessionId, 'setsid sleep 2701 & nohup sleep 2702 >/dev/null 2>&1 & sleep 2703 &')
    await until(() => running(/^sleep 270[123]$/).length === 3)
    const closed = await pty.close(agent, sessionId)
    expect(closed.survivors).toEqual([])
    expect(running(/^sleep 270[123]$/)).toEqual([])
    await agents.dispose(agent)
  })

  it('refuses a sandbox-mode change while a terminal is open, and allows it after the close', async () => {
    const { pty, agent, agents, policy } = await compose({ mode: 'workspace-write' })
    const { sessionId } = await pty.spawn(agent, { type: 'shell' })
    expect(() => policy.setMode(agent.session, 'danger-full-access')).toThrowError(/close them first|close it first|pty-1/)
    expect(policy.resolve({ session: agent.session }).mode).toBe('workspace-write')
    policy.setMode(agent.session, 'workspace-write')
    await pty.close(agent, sessionId)
    policy.setMode(agent.session, 'danger-full-access')
    expect(policy.resolve({ session: agent.session }).mode).toBe('danger-full-access')
    await agents.dispose(agent)
  })

  it('starts the shell without secrets from the environment', async () => {
    process.env.CONCH_TEST_API_KEY = 'sk-should-not-leak'
    try {
      const { pty, agent, agents } = await compose({ mode: 'workspace-write' })
      const { sessionId } = await pty.spawn(agent, { type: 'shell' })
      const env = await send(pty, agent, sessionId, 'env')
      expect(env.viewport).not.toContain('sk-should-not-leak')
      await agents.dispose(agent)
    } finally {
      delete process.env.CONCH_TEST_API_KEY
    }
  })
})

describe('other modes', () => {
  it('read-only refuses writes to the workspace but gives a private writable /tmp', async () => {
    const { pty, agent, agents } = await compose({ mode: 'read-only' })
    const { sessionId } = await pty.spawn(agent, { type: 'shell' })
    expect((await send(pty, agent, sessionId, `touch ${workspace}/denied`)).viewport).toContain('Read-only file system')
    expect(lines((await send(pty, agent, sessionId, 'echo ok > /tmp/private && cat /tmp/private')).viewport)).toContain('ok')
    await agents.dispose(agent)
  })

  it('danger-full-access runs the shell unwrapped', async () => {
    const { pty, agent, agents } = await compose({ mode: 'danger-full-access' })
    const { sessionId, pid } = await pty.spawn(agent, { type: 'shell' })
    const result = await send(pty, agent, sessionId, `touch ${workspace}/../conch-unconfined-$$ && echo wrote && rm ${workspace}/../conch-unconfined-$$`)
    expect(lines(result.viewport)).toContain('wrote')
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain('bwrap')
    await agents.dispose(agent)
  })

  it('fails closed with a clear error when no sandbox runner is available', async () => {
    mkdirSync(path.join(workspace, 'bin'))
    const { pty, agent, agents } = await compose({ mode: 'workspace-write', runnerCommand: path.join(workspace, 'bin', 'no-such-bwrap') })
    await expect(pty.spawn(agent, { type: 'shell' })).rejects.toMatchObject({
      code: 'SPAWN_FAILED',
      message: expect.stringMatching(/bubblewrap|bwrap/),
    })
    expect(pty.list(agent)).toEqual([])
    await agents.dispose(agent)
  })
})

/** Pids of running processes whose command line matches `pattern`. */
function runningPids(pattern: RegExp): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ')
      if (pattern.test(cmdline)) found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}

/** Command lines of running processes matching `pattern`. */
function running(pattern: RegExp): string[] {
  const found: string[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ')
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (pattern.test(cmdline) && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z') found.push(cmdline)
    } catch {
      // gone
    }
  }
  return found
}
