/**
 * Sessions opened with a `command`: a program instead of the shell, under the real sandbox
 * (bubblewrap through ctx.sandbox), with its own variables over the scrubbed environment, a
 * per-terminal network setting, a private writable folder, raw writes and the full screen model.
 */
import { mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService, { PtyError } from '@conch/pty'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import { linuxProcessTable, treeOf } from '@conch/subprocess'
import * as ptyLocal from '../src/index.ts'

let workspace: string
let own: string
let fibers: { dispose(): Promise<void> }[] = []
const HOST_SECRET = `host-secret-${process.pid}-${Math.random().toString(36).slice(2)}`

beforeEach(() => {
  workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-program-ws-')))
  own = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-program-own-')))
  process.env.PROGRAM_TEST_API_TOKEN = HOST_SECRET
})

afterEach(async () => {
  delete process.env.PROGRAM_TEST_API_TOKEN
  for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
  rmSync(workspace, { recursive: true, force: true })
  rmSync(own, { recursive: true, force: true })
})

async function compose(mode: 'read-only' | 'workspace-write' = 'read-only', localConfig: Record<string, unknown> = {}) {
  const root = new Context()
  const load = async (plugin: unknown, config: unknown) => {
    fibers.push(await root.plugin(plugin as never, config as never))
  }
  await load(SessionService, {})
  await load(ToolsService, {})
  await load(LlmService, {})
  await load(AgentService, {})
  await load(SandboxService, {})
  await load(sandboxLocal, {})
  await load(SandboxPolicyService, { mode, workspaceRoot: workspace })
  await load(PtyService, {})
  await load(ptyLocal, localConfig)
  const agent = await root.agents.create()
  return { pty: root.pty as PtyService, agent }
}

/** Resolves once `predicate` holds for the session's full screen (checked after each change). */
function screenUntil(pty: PtyService, agent: Agent, id: string, predicate: (rows: string[]) => boolean, options: { scrollback?: boolean } = {}): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const rows = pty.screenState(agent, id, options).rows
      if (predicate(rows)) {
        dispose()
        resolve(rows)
        return true
      }
      const status = pty.list(agent).find((info) => info.sessionId === id)?.status
      if (status?.state === 'exited') {
        dispose()
        reject(new Error(`the program exited before the screen matched:\n${rows.join('\n')}`))
        return true
      }
      return false
    }
    const dispose = pty.onChange(agent, id, () => void check())
    check()
  })
}

const has = (token: string) => (rows: string[]) => rows.some((row) => row.includes(token))

describe('a session opened with a command, in the real sandbox', () => {
  it('runs the program under bubblewrap in its own PID namespace, with the caller’s variables, no host secret, its private folder writable and the workspace not', async () => {
    const { pty, agent } = await compose('read-only')
    const script = path.join(own, 'probe.sh')
    writeFileSync(
      script,
      [
        'printf "env:%s:%s:%s\\n" "${PROGRAM_TEST_API_TOKEN-unset}" "$MY_VAR" "${PS1-unset}"',
        'echo "pidns:$(readlink /proc/self/ns/pid)"',
        'echo "netns:$(readlink /proc/self/ns/net)"',
        'echo mine > "$OWN/f" && echo own-written',
        'echo x > "$WS/f" 2>/dev/null || echo ws-refused',
        'echo "probe-ready:$$"',
        'read -r line; echo "got:$line"',
      ].join('\n'),
    )
    const opened = await pty.spawn(agent, {
      type: 'shell',
      command: 'bash',
      args: ['--norc', '--noprofile', script],
      env: { MY_VAR: 'mine', OWN: own, WS: workspace },
      writablePaths: [own],
      network: false,
    })
    expect(opened.motd).toBe('')
    const rows = await screenUntil(pty, agent, opened.sessionId, has('probe-ready:'))
    expect(rows).toContain('env:unset:mine:unset')
    expect(rows).toContain('own-written')
    expect(rows).toContain('ws-refused')
    expect(readFileSync(path.join(own, 'f'), 'utf8')).toBe('mine\n')
    expect(existsSync(path.join(workspace, 'f'))).toBe(false)
    expect(rows.join('\n')).not.toContain(HOST_SECRET)
    const hostPidNs = readlinkSync('/proc/self/ns/pid')
    const hostNetNs = readlinkSync('/proc/self/ns/net')
    expect(rows.find((row) => row.startsWith('pidns:'))).not.toBe(`pidns:${hostPidNs}`)
    expect(rows.find((row) => row.startsWith('netns:'))).not.toBe(`netns:${hostNetNs}`)

    // From the host: the probe's bash is a descendant of the session, with a second pid inside
    // bubblewrap's namespace (NSpid, proc(5)), and its environment holds no host secret.
    const entries = await linuxProcessTable().snapshot()
    const tree = treeOf(entries, opened.pid!, { includeRoot: false })
    const probe = tree.find((entry) => {
      try {
        return readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8').split('\0').includes(script)
      } catch {
        return false
      }
    })
    expect(probe).toBeDefined()
    const nspid = /^NSpid:\s+(.+)$/m.exec(readFileSync(`/proc/${probe!.pid}/status`, 'utf8'))![1]!.trim().split(/\s+/)
    expect(nspid.length).toBeGreaterThan(1)
    const inner = rows.find((row) => row.startsWith('probe-ready:'))!.slice('probe-ready:'.length)
    expect(nspid.at(-1)).toBe(inner)
    const environ = readFileSync(`/proc/${probe!.pid}/environ`, 'utf8')
    expect(environ).not.toContain(HOST_SECRET)
    expect(environ.split('\0')).toContain('MY_VAR=mine')

    // A raw write reaches the program's read as it is.
    await pty.write(agent, opened.sessionId, 'typed raw\r')
    await screenUntil(pty, agent, opened.sessionId, has('got:typed raw'))
  })

  it('keeps the host network namespace when the terminal asks for the network', async () => {
    const { pty, agent } = await compose('read-only')
    const opened = await pty.spawn(agent, { type: 'shell', command: '/bin/sh', args: ['-c', 'echo "netns:$(readlink /proc/self/ns/net)"; echo done-net; read x'], network: true })
    const rows = await screenUntil(pty, agent, opened.sessionId, has('done-net'))
    expect(rows).toContain(`netns:${readlinkSync('/proc/self/ns/net')}`)
  })

  it('renders scrollback rows above the viewport and reports bracketed paste (DECSET 2004) as the program sets it', async () => {
    const { pty, agent } = await compose('read-only', { programScrollbackRows: 500 })
    const opened = await pty.spawn(agent, {
      type: 'shell',
      command: '/bin/sh',
      args: ['-c', "seq 1 100 | sed 's/^/row-/'; printf '\\033[?2004h'; echo paste-on; read x; printf '\\033[?2004l'; echo paste-off; read y"],
      rows: 24,
      cols: 80,
    })
    const { sessionId } = opened
    await screenUntil(pty, agent, sessionId, has('paste-on'))
    expect(pty.screenState(agent, sessionId).decModes[2004]).toBe(true)
    const viewport = pty.screenState(agent, sessionId).rows
    expect(viewport.length).toBeLessThanOrEqual(24)
    expect(viewport).not.toContain('row-1')
    const all = pty.screenState(agent, sessionId, { scrollback: true }).rows
    expect(all.slice(0, 3)).toEqual(['row-1', 'row-2', 'row-3'])
    expect(all).toContain('row-100')
    await pty.write(agent, sessionId, '\r')
    await screenUntil(pty, agent, sessionId, has('paste-off'))
    expect(pty.screenState(agent, sessionId).decModes[2004]).toBe(false)
  })

  it('refuses a raw write while a send is in flight, and writes nothing', async () => {
    const { pty, agent } = await compose('read-only')
    const opened = await pty.spawn(agent, { type: 'shell', command: '/bin/sh', args: ['-c', 'echo ready-1; while read -r line; do echo "got:$line"; done'] })
    const { sessionId } = opened
    await screenUntil(pty, agent, sessionId, has('ready-1'))
    const send = pty.startSend(agent, sessionId, { text: 'first', submit: true })
    const refused = await pty.write(agent, sessionId, 'second\r').catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(PtyError)
    expect((refused as PtyError).code).toBe('SEND_ACTIVE')
    await send.done
    await screenUntil(pty, agent, sessionId, has('got:first'))
    await pty.write(agent, sessionId, 'third\r')
    const rows = await screenUntil(pty, agent, sessionId, has('got:third'))
    expect(rows.some((row) => row.includes('second'))).toBe(false)
  })

  it('fails the open naming a command that is not on PATH, and refuses malformed program fields before starting anything', async () => {
    const { pty, agent } = await compose('read-only')
    const missing = await pty.spawn(agent, { type: 'shell', command: 'conch-no-such-program' }).catch((error: unknown) => error)
    expect((missing as PtyError).code).toBe('SPAWN_FAILED')
    expect((missing as PtyError).message).toContain('conch-no-such-program')
    for (const options of [{ args: ['x'] }, { command: 'sh', env: { 'A=B': 'x' } }, { command: 'sh', writablePaths: ['relative'] }, { command: 'sh', network: 'yes' }]) {
      const error = await pty.spawn(agent, { type: 'shell', ...(options as object) }).catch((reason: unknown) => reason)
      expect((error as PtyError).code).toBe('INVALID_INPUT')
    }
    expect(pty.list(agent)).toEqual([])
  })

  it('keeps no full screen model for a shell session', async () => {
    const { pty, agent } = await compose('read-only')
    const { sessionId } = await pty.spawn(agent, { type: 'shell' })
    expect(() => pty.screenState(agent, sessionId)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }))
  })
})
