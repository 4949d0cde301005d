/**
 * Real bubblewrap runs, started through ctx.subprocess the way the terminal backend starts
 * them. They need a working `bwrap` (CI installs it with apt-get); without one they are skipped,
 * and the fail-closed test below still runs.
 */
import { spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context, type Message } from 'cordis'
import SandboxService, { SandboxError, type SandboxPolicy } from '@conch/sandbox'
import SubprocessService, { linuxProcessTable, scrubbedEnv, treeOf, type ChildHandle } from '@conch/subprocess'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import * as local from '../src/index.ts'

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0
// util-linux script(1) provides the PTY for the job-control test (Debian: bsdutils, always installed).
const hasScript = hasBwrap && spawnSync('script', ['--version']).status === 0
const table = linuxProcessTable()

let workspace: string
let ctx: Context
let logs: Message[]
let fibers: Array<{ dispose(): Promise<void> }> = []

beforeAll(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-ws-')))
})
afterAll(() => rmSync(workspace, { recursive: true, force: true }))
afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  fibers = []
  expect(logs.filter((message) => message.type === 'error').map((message) => message.args)).toEqual([])
})

async function boot(config: Partial<local.Config> = {}): Promise<Context> {
  ctx = new Context()
  logs = []
  ctx.logger.exporter({ export: (message) => void logs.push(message) })
  fibers.push(await ctx.plugin(SubprocessService, { graceMs: 2000, killWaitMs: 2000 }))
  fibers.push(await ctx.plugin(SandboxService, {}))
  fibers.push(await ctx.plugin(local, config as local.Config))
  return ctx
}

interface Run {
  child: ChildHandle
  stdout: Promise<string>
  stderr: Promise<string>
}

function collect(stream: NodeJS.ReadableStream): Promise<string> {
  let text = ''
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => void (text += chunk))
  return new Promise((resolve) => stream.on('end', () => resolve(text)))
}

/** Confines `bash -c script` under `policy` and starts it through ctx.subprocess. */
async function start(script: string, policy: Partial<SandboxPolicy> = {}, env?: Record<string, string>): Promise<Run> {
  const confined = await ctx.sandbox.confine(['bash', '-c', script], { mode: 'workspace-write', workspaceRoot: workspace, ...policy })
  const child = ctx.subprocess.spawn({ argv: confined.argv, env: env ?? scrubbedEnv(process.env) })
  return { child, stdout: collect(child.stdout), stderr: collect(child.stderr) }
}

async function run(script: string, policy: Partial<SandboxPolicy> = {}, env?: Record<string, string>) {
  const started = await start(script, policy, env)
  const [exit, stdout, stderr] = await Promise.all([started.child.done, started.stdout, started.stderr])
  return { ...exit, stdout, stderr }
}

/** The message bash prints for a denied redirection (`bash: line N: <path>: Read-only file system`). */
const readOnly = (path: string) =>
  new RegExp(`^bash: (line \\d+: )?${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Read-only file system$`, 'm')
const unique = (label: string) => `${label}-${process.pid}-${Math.random().toString(36).slice(2)}`
const quote = (arg: string) => `'${arg.replaceAll("'", `'\\''`)}'`

// On Linux only bubblewrap can serve, so a missing runner leaves nothing (macOS would use sandbox-exec).
describe.runIf(process.platform === 'linux')('a missing runner', () => {
  it('fails closed with SANDBOX_UNAVAILABLE naming the runner, the install command and the explicit opt-out', async () => {
    await boot({ runnerCommand: '/nonexistent/bwrap' })
    const error = await ctx.sandbox.confine(['bash'], { mode: 'workspace-write', workspaceRoot: workspace }).catch((reason: unknown) => reason)
    expect(error).toBeInstanceOf(SandboxError)
    expect((error as SandboxError).code).toBe('SANDBOX_UNAVAILABLE')
    expect((error as SandboxError).message).toContain('bubblewrap: /nonexistent/bwrap was not found')
    expect((error as SandboxError).message).toContain('apt-get install bubblewrap')
    expect((error as SandboxError).message).toContain('danger-full-access')
  })
})

describe.runIf(hasBwrap)('a runtime folder owned by another user', () => {
  it('is refused with SANDBOX_UNAVAILABLE naming the folder and its fix, not an install hint', async () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'conch-runtime-')))
    try {
      const folder = join(base, `conch-sandbox-${process.getuid!()}`)
      mkdirSync(folder, { mode: 0o700 })
      chownSync(folder, 65534, 65534) // nobody's: as root, the attack is planting it first
      await boot({ runtimeDir: base })
      const error = await ctx.sandbox.confine(['bash'], { mode: 'workspace-write', workspaceRoot: workspace }).catch((reason: unknown) => reason)
      expect(error).toBeInstanceOf(SandboxError)
      expect((error as SandboxError).code).toBe('SANDBOX_UNAVAILABLE')
      expect((error as SandboxError).message).toContain(`bubblewrap: ${folder} is not a private directory of uid ${process.getuid!()}`)
      expect((error as SandboxError).message).toContain('set runtimeDir to another folder')
      expect((error as SandboxError).message).not.toContain('apt-get install')
      expect((error as SandboxError).message).not.toContain('Install a sandbox')
    } finally {
      rmSync(base, { recursive: true, force: true })
    }
  })
})

describe.runIf(hasBwrap)('bubblewrap, for real', () => {
  it('under workspace-write, writes inside the workspace and gets the shell’s own Read-only file system error for /etc', async () => {
    await boot()
    const name = unique('w')
    const result = await run(
      `echo inside > ${quote(join(workspace, name))} && cat ${quote(join(workspace, name))}
       echo x > /etc/${name}`,
    )
    expect(result.stdout).toBe('inside\n')
    expect(result.stderr).toMatch(readOnly(`/etc/${name}`))
    expect(readFileSync(join(workspace, name), 'utf8')).toBe('inside\n')
    expect(existsSync(`/etc/${name}`)).toBe(false)
  })

  it('without a private home, the real $HOME is read-only', async () => {
    await boot({ privateHome: false })
    const name = unique('h')
    const home = process.env.HOME ?? '/root'
    const result = await run(`echo y > "$HOME/${name}"`)
    expect(result.stderr).toMatch(readOnly(`${home}/${name}`))
    expect(existsSync(join(home, name))).toBe(false)
  })

  it('lets a $HOME inside the workspace be written under workspace-write', async () => {
    await boot()
    const home = join(workspace, unique('home'))
    const result = await run('mkdir -p "$HOME" && echo z > "$HOME/f" && cat "$HOME/f"', {}, { ...scrubbedEnv(process.env), HOME: home })
    expect(result.stdout).toBe('z\n')
    expect(readFileSync(join(home, 'f'), 'utf8')).toBe('z\n')
  })

  it('under read-only, refuses workspace writes with Read-only file system', async () => {
    await boot()
    const name = unique('r')
    const result = await run(`echo x > ${quote(join(workspace, name))}; cat /etc/hostname >/dev/null && echo can-read`, { mode: 'read-only' })
    expect(result.stderr).toMatch(readOnly(join(workspace, name)))
    expect(result.stdout).toBe('can-read\n')
    expect(existsSync(join(workspace, name))).toBe(false)
  })

  it('makes a policy’s writablePaths writable even under read-only, as the host’s folder under the private /tmp, and nothing next to them', async () => {
    await boot()
    const own = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-own-')))
    const sibling = join(tmpdir(), unique('sibling'))
    const name = unique('o')
    try {
      const result = await run(
        `echo mine > ${quote(join(own, 'f'))} && cat ${quote(join(own, 'f'))}
         echo x > ${quote(join(workspace, name))}
         echo y > ${quote(sibling)}; test -e ${quote(sibling)} && echo sibling-inside-only`,
        { mode: 'read-only', writablePaths: [own] },
      )
      expect(result.stdout).toBe('mine\nsibling-inside-only\n')
      expect(readFileSync(join(own, 'f'), 'utf8')).toBe('mine\n')
      expect(result.stderr).toMatch(readOnly(join(workspace, name)))
      expect(existsSync(join(workspace, name))).toBe(false)
      expect(existsSync(sibling)).toBe(false)
    } finally {
      rmSync(own, { recursive: true, force: true })
    }
  })

  it('refuses writablePaths that are relative or /', async () => {
    await boot()
    for (const writablePaths of [['relative/dir'], ['/']]) {
      const error = await ctx.sandbox.confine(['true'], { mode: 'read-only', workspaceRoot: workspace, writablePaths }).catch((reason: unknown) => reason)
      expect((error as SandboxError).code).toBe('INVALID_POLICY')
      expect((error as SandboxError).message).toContain('writablePaths')
    }
  })

  it('gives the sandbox a private, writable /tmp that the host does not share', async () => {
    await boot()
    const hostFile = join('/tmp', unique('host'))
    const innerFile = join('/tmp', unique('inner'))
    writeFileSync(hostFile, 'host')
    try {
      const result = await run(`test -e ${hostFile} || echo host-file-hidden; echo ok > ${innerFile} && cat ${innerFile}`, { mode: 'read-only' })
      expect(result.stdout).toBe('host-file-hidden\nok\n')
      expect(existsSync(innerFile)).toBe(false)
    } finally {
      rmSync(hostFile, { force: true })
    }
  })

  it('keeps a root user from remounting / writable: all capabilities are dropped', async () => {
    await boot()
    const name = unique('cap')
    const result = await run(`grep CapEff /proc/self/status; mount -o remount,rw / 2>/dev/null || echo remount-refused; echo x > /etc/${name}`)
    expect(result.stdout).toBe('CapEff:\t0000000000000000\nremount-refused\n')
    expect(result.stderr).toMatch(readOnly(`/etc/${name}`))
    expect(existsSync(`/etc/${name}`)).toBe(false)
  })

  it('by default (network false), leaves only the loopback interface', async () => {
    await boot()
    const interfaces = (await run(`tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)).stdout.trim().split('\n')
    expect(interfaces).toEqual(['lo'])
    expect(ctx.sandbox.networkAllowed()).toBe(false)
  })

  it('with the network allowed, sees the host’s interfaces', async () => {
    await boot({ network: true })
    const host = readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).map((line) => line.split(':')[0]!.trim()).filter(Boolean)
    const inside = (await run(`tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)).stdout.trim().split('\n')
    expect(inside.sort()).toEqual(host.sort())
  })

  it('runs in its own PID namespace where bubblewrap is PID 1 and host processes are invisible', async () => {
    await boot()
    const result = await run(`cat /proc/1/comm; test -e /proc/${process.pid}/stat || echo host-hidden`)
    expect(result.stdout).toBe('bwrap\nhost-hidden\n')
  })

  it('ending the sandboxed root process ends a setsid-daemonised child inside it', async () => {
    await boot()
    const started = await start(`setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo started; exec sleep 1001`)
    let seen = ''
    started.child.stdout.on('data', (chunk: Buffer) => void (seen += chunk.toString()))
    await vi.waitFor(() => expect(seen).toContain('started'))
    const root = await table.get(started.child.pid)
    let sleepers: Array<{ pid: number; startTime: string }> = []
    await vi.waitFor(async () => {
      sleepers = treeOf(await table.snapshot(), started.child.pid, { includeRoot: false }).filter((e) => e.comm === 'sleep')
      expect(sleepers).toHaveLength(2)
    })
    // The daemon left the shell's session, but it is still inside the sandbox's PID namespace.
    process.kill(root!.pid, 'SIGKILL')
    await vi.waitFor(async () => {
      const left = await Promise.all(sleepers.map((s) => table.get(s.pid)))
      expect(left.filter((e, i) => e && e.startTime === sleepers[i]!.startTime && e.state !== 'Z')).toEqual([])
    })
    expect((await started.child.done).signal).toBe('SIGKILL')
  })

  it('terminate() on a sandboxed child stops everything inside and reports no survivors', async () => {
    await boot()
    const started = await start(`(setsid sleep 1002 &) ; trap '' TERM; echo started; sleep 1003`)
    let seen = ''
    started.child.stdout.on('data', (chunk: Buffer) => void (seen += chunk.toString()))
    await vi.waitFor(() => expect(seen).toContain('started'))
    const report = await started.child.terminate({ graceMs: 300 })
    expect(report.survivors).toEqual([])
    // bwrap and what runs inside it; the names inside may still be forked copies of bash.
    expect(report.stopped.map((r) => r.comm)).toContain('bwrap')
    expect(report.stopped.length).toBeGreaterThanOrEqual(3)
  })

  it('passes the scrubbed environment through: no secret-looking variable reaches the sandbox', async () => {
    await boot()
    const parent = { ...process.env, FOO_TOKEN: 'token-value', MY_API_KEY: 'key-value', VISIBLE_SETTING: 'shown' }
    const result = await run('env', {}, scrubbedEnv(parent))
    expect(result.stdout).toContain('VISIBLE_SETTING=shown')
    expect(result.stdout).not.toContain('FOO_TOKEN')
    expect(result.stdout).not.toContain('MY_API_KEY')
    expect(result.stdout).not.toContain('token-value')
  })

  it.runIf(hasScript)('gives an interactive bash on a PTY job control inside the sandbox', async () => {
    await boot()
    const confined = await ctx.sandbox.confine(['bash', '--norc', '--noprofile', '-i'], { mode: 'workspace-write', workspaceRoot: workspace })
    const child = ctx.subprocess.spawn({ argv: ['script', '-qefc', confined.argv.map(quote).join(' '), '/dev/null'] })
    const output = collect(child.stdout)
    // `wait $!` gives the job's status (128 + SIGTERM) also when bash reaped it first; whether the
    // `Terminated` notice shows depends on which came first, so it is not asserted.
    child.write('sleep 100 &\njobs\nkill %1\nwait $!; echo "waited-$?"\n[[ $- == *m* ]] && echo "jobctl-$((40+2))"\ntty\nexit\n')
    // Drop carriage returns and bash's bracketed-paste toggles (ESC[?2004h / ESC[?2004l).
    const text = (await output).replaceAll('\r', '').replaceAll(/\x1b\[\?2004[hl]/g, '')
    expect((await child.done).exitCode).toBe(0)
    expect(text).not.toContain('no job control')
    expect(text).not.toContain('cannot set terminal process group')
    expect(text).toMatch(/\[1\]\+\s+Running\s+sleep 100 &/)
    expect(text).toMatch(/^waited-143$/m)
    expect(text).toContain('jobctl-42')
    // bubblewrap binds the inherited terminal at /dev/console.
    expect(text).toMatch(/^\/dev\/console$/m)
  })
})
