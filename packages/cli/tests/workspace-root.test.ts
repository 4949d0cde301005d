/**
 * The folders no agent may have as its workspace — `/`, the system's own folders, conch's state
 * and log folders, the sandbox's runtime folder, and links to any of them — refused by the real
 * `conch acp` at `session/new` (`CWD_REFUSED`, invalid params) and by `conch run --cwd` (exit 2)
 * with one rule, before any terminal could write there.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { tempFolders } from '@conch/test-support/homes'
import { acpRequest, CLI_ROOT, jsonLines, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 120_000 })

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

const stateHome = tempFolders('conch-state-', '/var/tmp')
let ws: Workspace
/** The state home conch runs with (under /var/tmp: not a system folder, and not the sandbox's private /tmp). */
let state: string

beforeEach(() => {
  ws = workspace()
  state = stateHome()
})

afterEach(() => {
  ws.remove()
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
    const yml = writeComposition(ws.dir, terminalComposition({ script: ws.write('s.jsonl', `${step('hi')}\n`), mode: 'workspace-write', sessions: { dir: logs, allowInsideWorkspace: true } }))
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
    const yml = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write' }))
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
    const yml = writeComposition(ws.dir, terminalComposition({ script: ws.write('s.jsonl', `${step('hi')}\n`), mode: 'workspace-write' }))
    const linked = await runConch(['run', '--config', yml, '--cwd', join(ws.dir, 'etc-link'), 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    expect(linked.code).toBe(2)
    expect(linked.stderr).toContain(`--cwd ${join(ws.dir, 'etc-link')} cannot be the workspace under the sandbox mode workspace-write: ${join(ws.dir, 'etc-link')} (/etc) is the system folder /etc`)
    const run = await runConch(['run', '--config', yml, '--cwd', project, 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('hi')
  })
})

const startDockerd = join(CLI_ROOT, '..', '..', 'scripts', 'start-dockerd.sh')

/**
 * `/run` holds the host's service sockets (Docker's is root on the host), the folders that hold
 * others' folders, and a home's dot-folders (keys, credentials, settings other programs run): each
 * refused as a workspace by `conch run --cwd` and `session/new`, before anything is created for it.
 */
describe.runIf(hasBwrap)('runtime folders, holding folders and a home\'s dot-folders', () => {
  const REFUSED: [string, RegExp][] = [
    ['/run', /is the system folder \/run/],
    ['/run/docker', /inside the system folder \/run/],
    ['/var/run', /the system folder \/var/],
    ['/home', /is \/home, the folder that holds other users' or programs' folders/],
    ['/root/.config', /is \/root\/\.config, a home's own dot-folder/],
    ['/root', /is \/root, a home folder itself/],
    [`/home/conch-test-${process.pid}`, /is \/home\/conch-test-\d+, a home folder itself, .*Work in a project folder below it/],
  ]
  const sessionFolders = () => (existsSync(join(state, 'conch', 'sessions')) ? readdirSync(join(state, 'conch', 'sessions')) : [])
  const made: string[] = []
  afterEach(() => {
    for (const path of made.splice(0)) rmSync(path, { recursive: true, force: true })
  })
  /** Folders made for the test under /home and /srv, removed after it (only those it made). */
  const project = (path: string) => {
    let top = path
    while (dirname(top) !== '/' && !existsSync(dirname(top))) top = dirname(top)
    if (!existsSync(top)) made.push(top)
    mkdirSync(path, { recursive: true })
    return path
  }

  it('conch run --cwd refuses each with CWD_REFUSED (exit 2) creating no session folder, and runs in /home/<x>/proj, /root/<proj> and /srv/app', async () => {
    for (const path of ['/run/docker', '/root/.config', `/home/conch-test-${process.pid}`]) project(path)
    const yml = writeComposition(ws.dir, terminalComposition({ script: ws.write('s.jsonl', `${step('hi')}\n`), mode: 'workspace-write', sessions: { persist: true } }))
    for (const [cwd, reason] of REFUSED) {
      const run = await runConch(['run', '--config', yml, '--cwd', cwd, 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
      expect(run.code, `${cwd}: ${run.stderr}`).toBe(2)
      expect(run.stderr, cwd).toMatch(reason)
      expect(run.stderr, cwd).toMatch(/Pass --cwd a folder of your own\.\n$/)
      expect(sessionFolders(), cwd).toEqual([])
    }
    // A HOME of /var or /var/lib is no home of its own: the host's folders below it stay refused.
    for (const [home, cwd] of [['/var', '/var/spool'], ['/var/lib', '/var/lib/dpkg']]) {
      const run = await runConch(['run', '--config', yml, '--cwd', cwd!, 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state, HOME: home! } })
      expect(run.code, `${cwd}: ${run.stderr}`).toBe(2)
      expect(run.stderr, cwd).toContain(`${cwd} is inside the system folder /var`)
    }
    const home = project(`/home/conch-test-${process.pid}/proj`)
    for (const cwd of [home, project(`/root/conch-test-${process.pid}`), project(`/srv/conch-test-${process.pid}/app`)]) {
      const run = await runConch(['run', '--config', yml, '--cwd', cwd, 'task'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
      expect(run.code, `${cwd}: ${run.stderr}`).toBe(0)
      expect(run.stdout).toContain('hi')
    }
  })

  it('conch acp session/new refuses each with CWD_REFUSED, and serves /home/<x>/proj and /srv/app', async () => {
    for (const path of ['/run/docker', '/root/.config', `/home/conch-test-${process.pid}`]) project(path)
    const yml = writeComposition(ws.dir, terminalComposition({ script: ws.write('s.jsonl', `${step('hi')}\n`), mode: 'workspace-write', sessions: { persist: true } }))
    const conch = startConch(['acp', '--config', yml], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    let id = 0
    for (const [cwd, reason] of REFUSED) {
      const answer = await acpRequest(conch, ++id, 'session/new', { cwd, mcpServers: [] })
      expect(answer, cwd).toMatchObject({ id, error: { code: -32602, data: { errorCode: 'CWD_REFUSED', cwd } } })
      expect(String((answer['error'] as { message: string }).message), cwd).toMatch(reason)
    }
    expect(sessionFolders()).toEqual([])
    for (const cwd of [project(`/home/conch-test-${process.pid}/proj`), project(`/srv/conch-test-${process.pid}/app`)]) {
      expect(await acpRequest(conch, ++id, 'session/new', { cwd, mcpServers: [] }), cwd).toMatchObject({ id, result: { sessionId: expect.any(String) } })
    }
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
  })

  it("a terminal of conch run --cwd /home/<x> cannot write the home's .bashrc or .ssh/authorized_keys: the run is refused", async () => {
    const home = project(`/home/conch-test-${process.pid}`)
    project(join(home, '.ssh'))
    writeFileSync(join(home, '.bashrc'), '# v\n')
    const script = ws.write(
      's.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: "echo 'echo PWNED' >> .bashrc && echo 'ssh-ed25519 AAAAattacker' >> .ssh/authorized_keys; echo wrote-$((6*7))" } }]),
        step('Done.'),
      ].join('\n'),
    )
    const yml = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write' }))
    const run = await runConch(['run', '--config', yml, '--cwd', home, '--output', 'text', 'plant'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    expect(readFileSync(join(home, '.bashrc'), 'utf8')).toBe('# v\n')
    expect(existsSync(join(home, '.ssh', 'authorized_keys'))).toBe(false)
    expect(run.stdout).not.toContain('wrote-42')
    expect(run.code, run.stderr).toBe(2)
    expect(run.stderr).toContain(`conch: --cwd ${home} cannot be the workspace under the sandbox mode workspace-write: ${home} is ${home}, a home folder itself`)
  })

  it.runIf(process.getuid?.() === 0 && spawnSync(startDockerd, { stdio: 'inherit' }).status === 0)(
    "a terminal of conch run --cwd /run cannot reach dockerd's socket: the run is refused before it starts",
    async () => {
      const script = ws.write(
        's.jsonl',
        [
          step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
          step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'curl -sS --unix-socket /run/docker.sock http://x/version; echo " version=$?"' } }]),
          step('Done.'),
        ].join('\n'),
      )
      const yml = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write' }))
      const run = await runConch(['run', '--config', yml, '--cwd', '/run', '--output', 'stream-json', 'version'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
      expect(run.stdout).not.toContain('ApiVersion')
      expect(run.code, run.stderr).toBe(2)
      expect(run.stderr).toContain('conch: --cwd /run cannot be the workspace under the sandbox mode workspace-write: /run is the system folder /run')
      expect(jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result')).toEqual([])
    },
  )

  it("a readWritePaths entry is judged by the workspace rule: [/run] fails the boot naming it and the rule, before a terminal reaches dockerd's socket", async () => {
    const script = ws.write(
      's.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'curl -sS --unix-socket /run/docker.sock http://x/version; echo " version=$?"' } }]),
        step('Done.'),
      ].join('\n'),
    )
    const cwd = join(ws.dir, 'project')
    mkdirSync(cwd)
    for (const [entry, reason] of [['/run', /\/run is the system folder \/run/], [`/home/conch-test-${process.pid}`, /a home folder itself/], ['/root/.ssh', /a home's own dot-folder/]] as const) {
      project(entry)
      const yml = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sandboxLocal: { readWritePaths: [entry] } }))
      const run = await runConch(['run', '--config', yml, '--cwd', cwd, '--output', 'stream-json', 'version'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
      expect(run.stdout).not.toContain('ApiVersion')
      expect(run.code, run.stderr).toBe(1)
      expect(run.stderr, entry).toContain('entry "sandbox-local" (@conch/sandbox-local): invalid config:')
      expect(run.stderr, entry).toMatch(new RegExp(`- ${entry.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} cannot be made writable: .*\\(at readWritePaths\\.0\\)`))
      expect(run.stderr, entry).toMatch(reason)
      expect(jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result')).toEqual([])
    }
  })
})
