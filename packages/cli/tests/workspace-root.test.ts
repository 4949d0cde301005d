/**
 * The folders no agent may have as its workspace — `/`, the system's own folders, conch's state
 * and log folders, the sandbox's runtime folder, and links to any of them — refused by the real
 * `conch acp` at `session/new` (`CWD_REFUSED`, invalid params) and by `conch run --cwd` (exit 2)
 * with one rule, before any terminal could write there.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { acpRequest, jsonLines, runConch, startConch, step, terminalComposition, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 120_000 })

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

let ws: Workspace
/** The state home conch runs with (under /var/tmp: not a system folder, and not the sandbox's private /tmp). */
let state: string

beforeEach(() => {
  ws = workspace()
  state = mkdtempSync('/var/tmp/conch-state-')
})

afterEach(() => {
  ws.remove()
  rmSync(state, { recursive: true, force: true })
})

const SYSTEM = ['/', '/proc', '/sys', '/dev', '/etc', '/usr', '/boot', '/bin', '/sbin', '/lib', '/var', '/var/lib', '/etc/cron.d', '/proc/self']

describe.runIf(hasBwrap)('a workspace root conch refuses', () => {
  it('conch acp answers session/new in a system folder, a link to one, or a folder of conch\'s own with CWD_REFUSED (invalid params), and serves a project folder', async () => {
    const project = join(ws.dir, 'project')
    const logs = join(ws.dir, 'other', '.conch')
    mkdirSync(join(logs, 'inside'), { recursive: true })
    mkdirSync(project)
    symlinkSync('/etc', join(ws.dir, 'etc-link'))
    symlinkSync('/proc', join(ws.dir, 'proc-link'))
    const runtime = join(tmpdir(), `conch-sandbox-${process.getuid?.() ?? 0}`)
    mkdirSync(runtime, { recursive: true, mode: 0o700 })
    // Logs allowed inside workspaces on purpose: another workspace's log folder must still not be one.
    const yml = ws.write('cordis.yml', terminalComposition({ script: ws.write('s.jsonl', `${step('hi')}\n`), mode: 'workspace-write', sessions: { dir: logs, allowInsideWorkspace: true } }))
    const conch = startConch(['acp', '--config', yml], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    const refused: [string, RegExp][] = [
      ...SYSTEM.filter((path) => existsSync(path)).map((path): [string, RegExp] => [path, path === '/' ? /is the root folder/ : /the system folder \//]),
      [join(ws.dir, 'etc-link'), /\(\/etc\) is the system folder \/etc/],
      [join(ws.dir, 'proc-link'), /\(\/proc\) is the system folder \/proc/],
      [state, /is .*, a folder conch keeps its own state in/],
      [join(logs, 'inside'), /lies inside .*\.conch, a folder conch keeps its own state in/],
      [logs, /is .*\.conch, a folder conch keeps its own state in/],
      [runtime, /conch-sandbox-\d+, a folder conch keeps its own state in/],
    ]
    let id = 1
    for (const [cwd, reason] of refused) {
      const answer = await acpRequest(conch, ++id, 'session/new', { cwd, mcpServers: [] })
      expect(answer, cwd).toMatchObject({ id, error: { code: -32602, data: { errorCode: 'CWD_REFUSED', cwd } } })
      const message = String((answer['error'] as { message: string }).message)
      expect(message, cwd).toMatch(reason)
      expect(message, cwd).toMatch(new RegExp(`^cwd ${cwd.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} cannot be the workspace under the sandbox mode workspace-write: .*Send a folder of your own as the session's cwd$`))
    }
    expect(await acpRequest(conch, ++id, 'session/new', { cwd: project, mcpServers: [] })).toMatchObject({ id, result: { sessionId: expect.any(String) } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
  })

  it('conch run --cwd /etc exits 2 naming the rule, before a terminal could write a file there', async () => {
    const mark = `conch-planted-${process.pid}-${Date.now()}`
    const script = ws.write(
      's.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `echo x > ${mark}; echo wrote-$((6*7))` } }]),
        step('Done.'),
      ].join('\n'),
    )
    const yml = ws.write('cordis.yml', terminalComposition({ script, mode: 'workspace-write' }))
    try {
      const run = await runConch(['run', '--config', yml, '--cwd', '/etc', '--output', 'stream-json', 'plant'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
      expect(run.code, run.stderr).toBe(2)
      expect(run.stderr).toContain(
        "conch: --cwd /etc cannot be the workspace under the sandbox mode workspace-write: /etc is the system folder /etc, not a workspace: an agent's terminals would write the host's own files there",
      )
      expect(run.stderr).toMatch(/Pass --cwd a folder of your own\.\n$/)
      const lines = jsonLines(run.stdout)
      expect(lines.filter((line) => line['type'] === 'tool_result')).toEqual([])
      expect(existsSync(join('/etc', mark))).toBe(false)
    } finally {
      rmSync(join('/etc', mark), { force: true })
    }
  })

  it('conch run --cwd a link to /etc is refused like /etc, and a project folder still runs', async () => {
    symlinkSync('/etc', join(ws.dir, 'etc-link'))
    const project = join(ws.dir, 'project')
    mkdirSync(project)
    const yml = ws.write('cordis.yml', terminalComposition({ script: ws.write('s.jsonl', `${step('hi')}\n`), mode: 'workspace-write' }))
    const linked = await runConch(['run', '--config', yml, '--cwd', join(ws.dir, 'etc-link'), 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    expect(linked.code).toBe(2)
    expect(linked.stderr).toContain(`--cwd ${join(ws.dir, 'etc-link')} cannot be the workspace under the sandbox mode workspace-write: ${join(ws.dir, 'etc-link')} (/etc) is the system folder /etc`)
    const run = await runConch(['run', '--config', yml, '--cwd', project, 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('hi')
  })
})
