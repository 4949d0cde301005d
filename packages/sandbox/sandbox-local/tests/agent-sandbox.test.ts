/**
 * One sandbox per agent, under real bubblewrap as root: the processes confined for one agent
 * share its loopback and /tmp, keep their own PID namespaces and modes, and end with it; another
 * agent reaches neither.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, type Server } from 'node:http'
import { networkInterfaces, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { NODE_PROXY_PRELOAD, type SandboxAgent } from '@conch/sandbox'
import { scrubbedEnv, type ChildHandle } from '@conch/subprocess'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { agentsFolderPath, inNamespace, nodeHostPaths, pinsFolderPath, startEgressProxy, type StartEgressProxy } from '../src/index.ts'
import { harness, hasBwrap, readOnly, type Harness } from './harness.ts'

const asRoot = hasBwrap && process.getuid?.() === 0

let workspace: string
let box: Harness
const children: ChildHandle[] = []
beforeAll(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-agent-ws-')))
})
afterAll(() => rmSync(workspace, { recursive: true, force: true }))
const runtimeDirs: string[] = []
afterEach(async () => {
  await Promise.all(children.splice(0).map((child) => child.terminate({ graceMs: 0, rootSignal: 'SIGKILL' })))
  await box?.dispose()
  for (const dir of runtimeDirs.splice(0)) removeRuntimeDir(dir)
})

/** Removes a runtime folder of a test's own, its pins folder unmounted first (conch keeps it mounted). */
function removeRuntimeDir(dir: string): void {
  while (mountPoint(pinsFolderPath(dir)) !== undefined && spawnSync('umount', [pinsFolderPath(dir)]).status === 0);
  rmSync(dir, { recursive: true, force: true })
}

/** The line of /proc/<pid>/mountinfo whose mount point is `path`, split into fields; undefined when none. */
function mountPoint(path: string, pid: number | 'self' = 'self'): string[] | undefined {
  return readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').map((line) => line.split(' ')).find((fields) => fields[4] === path)
}

/** The agents' folders in `base` (its pins folder left out). */
const agentFolders = (base: string): string[] => readdirSync(base).filter((name) => name !== 'pins')

/** A runtime folder of the test's own (removed after it): what it finds there is its own, never another test file's agents. */
function ownRuntimeDir(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-agent-runtime-')))
  runtimeDirs.push(dir)
  return dir
}

/** An owner whose `end()` runs what the sandbox registered, as an Agent's disposal does. */
function owner(key: string): SandboxAgent & { end(): Promise<void> } {
  const cleanups: Array<() => void | Promise<void>> = []
  return {
    key,
    owner: { onDispose: (cleanup) => (cleanups.push(cleanup), () => cleanups.splice(cleanups.indexOf(cleanup), 1)) },
    async end() {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
    },
  }
}

/** Starts `bash -c script` confined for `agent` and resolves once its stdout holds `token`. */
async function start(script: string, agent: SandboxAgent, token: string, mode: 'read-only' | 'workspace-write' = 'workspace-write'): Promise<ChildHandle> {
  const confined = await box.ctx.sandbox.confine(['bash', '-c', script], { mode, workspaceRoot: workspace, agent })
  const child = box.ctx.subprocess.spawn({ argv: confined.argv, env: scrubbedEnv(process.env) })
  children.push(child)
  let out = ''
  child.stdout.setEncoding('utf8')
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (text: string) => {
      out += text
      if (out.includes(token)) resolve()
    })
    void child.done.then(() => reject(new Error(`exited before printing ${token}: ${out}`)))
  })
  return child
}

/** A server on the agent's loopback port `port`, answered once it listens. */
const SERVER = (port: number) => `python3 -c "
import http.server, socketserver
s = socketserver.TCPServer(('127.0.0.1', ${port}), http.server.SimpleHTTPRequestHandler)
print('LISTENING', flush=True)
s.serve_forever()"`

const CURL = (port: number) => `curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:${port}/; echo "curl=$?"`

/**
 * A host whose program folders find first, in `bin`, a busybox with sh but no nsenter applet:
 * later processes join through /bin/sh and util-linux's nsenter.
 */
function withoutNsenterApplet(bin: string): typeof nodeHostPaths {
  writeFileSync(join(bin, 'busybox'), '#!/bin/sh\n[ "$1" = --list ] && { echo sh; echo true; exit 0; }\necho "busybox $1: applet not found" >&2\nexit 127\n', { mode: 0o755 })
  return { ...nodeHostPaths, programFolders: () => [bin, ...nodeHostPaths.programFolders()] }
}

/** The pin a joining launcher enters (`'--net=<pin>'` in its script). */
const pinOf = (argv: readonly string[]): string => /'--net=([^']+)'/.exec(argv[argv.indexOf('-c') + 1]!)![1]!

/** The two ways a later process joins, and the start of its argv. */
const JOINERS: Array<[string, unknown[]]> = [
  ['busybox', [expect.stringMatching(/^\/.*\/busybox$/), 'sh', '-c']],
  ['util-linux', ['/bin/sh', '-c', expect.stringMatching(/LC_ALL=C exec '\/[^']*\/nsenter' '--net=/)]],
]

describe.runIf(asRoot)('one sandbox per agent (bubblewrap, as root)', () => {
  it('processes of one agent share its loopback and /tmp; another agent reaches neither', async () => {
    box = await harness(workspace)
    const one = owner('session-one')
    const two = owner('session-two')
    await start(`echo shared-note > /tmp/note; ${SERVER(8767)}`, one, 'LISTENING')

    const sibling = await box.run(`${CURL(8767)}; cat /tmp/note`, { agent: one })
    expect(sibling.stdout).toContain('code=200')
    expect(sibling.stdout).toContain('shared-note')
    const readOnlySibling = await box.run(`${CURL(8767)}; cat /tmp/note`, { mode: 'read-only', agent: one })
    expect(readOnlySibling.stdout).toContain('code=200')
    expect(readOnlySibling.stdout).toContain('shared-note')

    const stranger = await box.run(`${CURL(8767)}; cat /tmp/note`, { agent: two })
    expect(stranger.stdout).toContain('curl=7')
    expect(stranger.stderr).toMatch(/\/tmp\/note: No such file or directory/)
    await Promise.all([one.end(), two.end()])
  })

  it("one agent's end leaves the placeholder .git to another agent of the workspace, until that one ends too", async () => {
    box = await harness(workspace)
    const first = owner('session-git-first')
    const second = owner('session-git-second')
    expect((await box.run('ls -A .git; echo listed', { agent: first })).stdout).toBe('listed\n')
    // The second agent's process is placed (its sandbox made) but not started when the first agent ends.
    const confined = await box.ctx.sandbox.confine(['bash', '-c', 'git init -q . && git log 2>&1 | head -c 0; echo made > .git/mine && echo inited'], { mode: 'workspace-write', workspaceRoot: workspace, agent: second })
    await first.end()
    expect(readdirSync(join(workspace, '.git'))).toEqual([])
    const child = box.ctx.subprocess.spawn({ argv: confined.argv, env: scrubbedEnv(process.env) })
    let stdout = ''
    child.stdout.setEncoding('utf8').on('data', (text: string) => void (stdout += text))
    await child.done
    expect(stdout).toBe('inited\n')
    // The repository is the second agent's own; the host's .git is still the empty placeholder, removed at the last end.
    expect(readdirSync(join(workspace, '.git'))).toEqual([])
    expect((await box.run('cat .git/mine', { agent: second })).stdout).toBe('made\n')
    await second.end()
    expect(existsSync(join(workspace, '.git'))).toBe(false)
  })

  it("a read-only process cannot write the workspace through what a writable sibling left in the shared /tmp", async () => {
    box = await harness(workspace)
    const agent = owner('session-modes')
    const made = await box.run(`ln -s ${workspace} /tmp/ws && exec 3>${workspace}/open.txt && echo linked`, { agent })
    expect(made.stdout).toContain('linked')
    const reader = await box.run('echo planted > /tmp/ws/planted.txt; echo planted >> /tmp/ws/open.txt; echo tmp-ok > /tmp/own.txt && cat /tmp/own.txt', { mode: 'read-only', agent })
    expect(reader.stderr).toMatch(readOnly('/tmp/ws/planted.txt'))
    expect(reader.stderr).toMatch(readOnly('/tmp/ws/open.txt'))
    expect(reader.stdout).toContain('tmp-ok')
    expect(existsSync(join(workspace, 'planted.txt'))).toBe(false)
    await agent.end()
  })

  it("ending one process ends its tree only, and the agent's end leaves no process, daemon included, no holder and no /tmp", async () => {
    const runtimeDir = ownRuntimeDir()
    box = await harness(workspace, { runtimeDir })
    const agent = owner('session-end')
    const base = agentsFolderPath(runtimeDir)
    const [first, second] = [80_000 + Math.floor(Math.random() * 9_999), 90_000 + Math.floor(Math.random() * 9_999)]
    const one = await start(`setsid nohup sleep ${first} >/dev/null 2>&1 & ${SERVER(8768)}`, agent, 'LISTENING')
    await start(`setsid nohup sleep ${second} >/dev/null 2>&1 & ${SERVER(8769)}`, agent, 'LISTENING')
    const made = agentFolders(base)
    expect(made).toHaveLength(1)
    expect(sleeping(first)).toHaveLength(1)

    await one.terminate({ graceMs: 0, rootSignal: 'SIGKILL' })
    const after = await box.run(`${CURL(8768)}; ${CURL(8769)}; readlink /proc/self/ns/net`, { agent })
    expect(after.stdout).toMatch(/curl=7[\s\S]*code=200/)
    expect(sleeping(first)).toEqual([])
    expect(sleeping(second)).toHaveLength(1)
    const inode = Number(after.stdout.match(/net:\[(\d+)\]/)![1])
    expect(inNamespace(inode).length).toBeGreaterThan(0)

    await agent.end()
    expect(inNamespace(inode)).toEqual([])
    expect(sleeping(second)).toEqual([])
    expect(existsSync(join(base, made[0]!))).toBe(false)
  })

  it("an agent's holder that lost the mount table's race before its program started is started again", async () => {
    const runtimeDir = ownRuntimeDir()
    const bin = realpathSync(mkdtempSync(join(tmpdir(), 'conch-racing-runner-')))
    runtimeDirs.push(bin)
    const starts = join(bin, 'holder-starts')
    const bwrap = spawnSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim()
    // As bubblewrap does when a mount goes between its bind of / and the remount: the pid first
    // (here conch's own, which lives), then the failure, once, for the holder (`--info-fd`) only.
    const race = `bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/gone": Invalid argument`
    writeFileSync(
      join(bin, 'bwrap'),
      `#!/bin/sh\ncase " $* " in *" --info-fd "*) echo start >> ${starts}; if [ "$(wc -l < ${starts})" -eq 1 ]; then printf '{"child-pid": %s}' "$PPID" >&3; echo ${JSON.stringify(race).replaceAll('`', '')} >&2; exit 1; fi;; esac\nexec ${bwrap} "$@"\n`,
      { mode: 0o755 },
    )
    box = await harness(workspace, { runtimeDir, runnerCommand: join(bin, 'bwrap') })
    const agent = owner('session-race')
    const result = await box.run('echo RAN; readlink /proc/self/ns/net', { agent })
    expect(result.stdout.split('\n')[0]).toBe('RAN')
    expect(readFileSync(starts, 'utf8')).toBe('start\nstart\n')
    // It joined the holder that started, not the namespace the lost one reported.
    expect(result.stdout).not.toContain(readlinkSync('/proc/self/ns/net'))
    await agent.end()
  })

  it('runs no launcher program planted in the working directory, named by PATH as an empty entry or by its absolute path', async () => {
    const planted = realpathSync(mkdtempSync(join(tmpdir(), 'conch-planted-')))
    const path = process.env['PATH']
    try {
      for (const name of ['busybox', 'nsenter', 'bwrap', 'stat', 'readlink']) writeFileSync(join(planted, name), `#!/bin/sh\necho "planted ${name} ran" >&2\nexit 1\n`, { mode: 0o755 })
      // conch's own PATH holds the workspace first, as `$PWD/node_modules/.bin` or a `.venv/bin` would.
      process.env['PATH'] = `${planted}:${path}`
      box = await harness(planted)
      const agent = owner('session-planted')
      await box.run('true', { agent }) // the holder starts
      const confined = await box.ctx.sandbox.confine(['bash', '-c', 'echo inside'], { mode: 'workspace-write', workspaceRoot: planted, agent })
      // An empty entry (a trailing or doubled colon) is the working directory to execvp(3) and sh.
      const child = box.ctx.subprocess.spawn({ argv: confined.argv, cwd: planted, env: { ...scrubbedEnv(process.env), PATH: `:${process.env['PATH']}` } })
      let stdout = ''
      let stderr = ''
      child.stdout.setEncoding('utf8').on('data', (text: string) => void (stdout += text))
      child.stderr.setEncoding('utf8').on('data', (text: string) => void (stderr += text))
      await child.done
      expect(stderr).not.toMatch(/planted/)
      expect(stdout).toBe('inside\n')
      expect(confined.argv.join(' ')).not.toMatch(new RegExp(`${planted}/(?:bwrap|busybox|nsenter)`))
      await agent.end()
    } finally {
      process.env['PATH'] = path
      // Its placeholders and ledger go with the provider, before their folders do.
      await Promise.all(children.splice(0).map((child) => child.terminate({ graceMs: 0, rootSignal: 'SIGKILL' })))
      await box.dispose()
      rmSync(planted, { recursive: true, force: true })
    }
  })

  it("joins the agent's loopback through util-linux's nsenter when the busybox on PATH has no nsenter applet", async () => {
    const bin = realpathSync(mkdtempSync(join(tmpdir(), 'conch-busybox-')))
    runtimeDirs.push(bin)
    box = await harness(workspace, {}, { startEgressProxy, host: withoutNsenterApplet(bin) })
    const agent = owner('session-no-applet')
    await start(`echo shared-note > /tmp/note; ${SERVER(8768)}`, agent, 'LISTENING')
    const sibling = await box.run(`${CURL(8768)}; cat /tmp/note`, { agent })
    expect(sibling.stderr).not.toMatch(/applet not found/)
    expect(sibling.stdout).toContain('code=200')
    expect(sibling.stdout).toContain('shared-note')
    await agent.end()
  })

  describe.each(JOINERS)("a process that joins the agent's loopback through %s", (joiner, launcher) => {
    it('gets the environment a process in a sandbox of its own gets: LC_ALL and SHLVL as the caller had them or none', async () => {
      const bin = realpathSync(mkdtempSync(join(tmpdir(), 'conch-busybox-')))
      runtimeDirs.push(bin)
      box = await harness(workspace, {}, joiner === 'busybox' ? undefined : { startEgressProxy, host: withoutNsenterApplet(bin) })
      const agent = owner(`session-environment-${joiner}`)
      expect((await box.ctx.sandbox.confine(['true'], { mode: 'workspace-write', workspaceRoot: workspace, agent })).argv.slice(0, 3)).toEqual(launcher)
      const env: Record<string, string> = { ...scrubbedEnv(process.env), LANG: 'C.UTF-8' }
      delete env['LC_ALL']
      delete env['SHLVL']
      for (const more of [{}, { LC_ALL: 'C.UTF-8' }, { LC_ALL: '' }, { LC_ALL: "it's --unsetenv LANG" }, { SHLVL: '1' }, { SHLVL: '3' }]) {
        // Each process carries a tag of its own (@conch/subprocess).
        const show = 'env | grep -v "^CONCH_SUBPROCESS_TAG=" | sort'
        const own = await box.run(show, {}, { ...env, ...more })
        expect(own.stdout).toMatch(/^GIT_CONFIG_COUNT=4$/m)
        if ('LC_ALL' in more) expect(own.stdout).toContain(`\nLC_ALL=${more.LC_ALL}\n`)
        // bash counts itself: one more than the caller's, or 1.
        expect(own.stdout).toContain(`\nSHLVL=${Number('SHLVL' in more ? more.SHLVL : 0) + 1}\n`)
        expect((await box.run(show, { agent }, { ...env, ...more })).stdout).toBe(own.stdout)
      }
      await agent.end()
    })

    it('ends before bubblewrap runs when its filter cannot be opened', async () => {
      const bin = realpathSync(mkdtempSync(join(tmpdir(), 'conch-counting-runner-')))
      runtimeDirs.push(bin)
      const ran = join(bin, 'ran')
      const bwrap = spawnSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim()
      // The runner notes the command it was given (its last argument), then becomes bubblewrap.
      writeFileSync(join(bin, 'bwrap'), `#!/bin/sh\nfor arg; do last=$arg; done\necho "$last" >> ${ran}\nexec ${bwrap} "$@"\n`, { mode: 0o755 })
      box = await harness(workspace, { runnerCommand: join(bin, 'bwrap') }, joiner === 'busybox' ? undefined : { startEgressProxy, host: withoutNsenterApplet(bin) })
      const agent = owner(`session-no-filter-${joiner}`)
      const { argv } = await box.ctx.sandbox.confine(['bash', '-c', 'echo confined-ran'], { mode: 'workspace-write', workspaceRoot: workspace, agent })
      expect(argv.slice(0, 3)).toEqual(launcher)
      const filter = argv.indexOf('conch-sandbox') + 1
      const run = async (args: string[]) => {
        const child = box.ctx.subprocess.spawn({ argv: args as [string, ...string[]], env: scrubbedEnv(process.env) })
        let stdout = ''
        let stderr = ''
        child.stdout.setEncoding('utf8').on('data', (text: string) => void (stdout += text))
        child.stderr.setEncoding('utf8').on('data', (text: string) => void (stderr += text))
        return { ...(await child.done), stdout, stderr }
      }
      const missing = join(bin, 'no-such-filter.bpf')
      const failed = await run(argv.map((arg, at) => (at === filter ? missing : arg)))
      expect(failed.exitCode).not.toBe(0)
      expect(failed.stdout).toBe('')
      expect(failed.stderr).toContain(missing)
      expect(readFileSync(ran, 'utf8')).not.toContain('echo confined-ran')
      // The same argv with its filter runs.
      expect((await run(argv)).stdout).toBe('confined-ran\n')
      expect(readFileSync(ran, 'utf8')).toContain('echo confined-ran')
      await agent.end()
    })
  })

  it("a process confined before its holder ended joins the agent's namespace, never the one a reused pid names", async () => {
    box = await harness(workspace)
    const agent = owner('session-reused-pid')
    const inside = await box.run('readlink /proc/self/ns/net', { agent })
    const agentNet = inside.stdout.trim()
    const confined = await box.ctx.sandbox.confine(['bash', '-c', 'readlink /proc/self/ns/net'], { mode: 'workspace-write', workspaceRoot: workspace, agent })
    // Nothing in the argv names a process: the kernel cannot give it to another one (here, this one).
    expect(confined.argv.filter((arg) => /\/proc\/\d+\//.test(arg))).toEqual([])
    // The holder ends (its pid free to be reused) before the confined process starts.
    const inode = Number(agentNet.match(/net:\[(\d+)\]/)![1])
    const holders = inNamespace(inode)
    expect(holders.length).toBeGreaterThan(0)
    for (const pid of holders) process.kill(pid, 'SIGKILL')
    while (inNamespace(inode).length > 0) await delay(5)
    const child = box.ctx.subprocess.spawn({ argv: confined.argv, env: scrubbedEnv(process.env) })
    let stdout = ''
    child.stdout.setEncoding('utf8').on('data', (text: string) => void (stdout += text))
    await child.done
    expect(stdout).not.toContain(readlinkSync('/proc/self/ns/net'))
    expect(stdout.trim()).toBe(agentNet)
    await agent.end()
  })

  it("the agent's end unmounts its pin here and removes no mount from a sandbox made while it lived", async () => {
    box = await harness(workspace)
    const agent = owner('session-pin')
    const confined = await box.ctx.sandbox.confine(['true'], { mode: 'workspace-write', workspaceRoot: workspace, agent })
    const pin = pinOf(confined.argv)
    // The pins folder is a mount of its own, private: unmounting a pin there reaches no other mount namespace.
    const pins = mountPoint(dirname(pin))!
    expect(pins.slice(6, pins.indexOf('-'))).toEqual([])
    // Another agent's process made while the pin exists: its mount namespace copies the host's.
    const seconds = 70_000 + Math.floor(Math.random() * 9_999)
    await start(`echo OTHER-READY; sleep ${seconds}`, owner('session-pin-other'), 'OTHER-READY')
    // The sandboxed sleep, not bubblewrap's process on the host.
    const [other] = sleeping(seconds).filter((pid) => readlinkSync(`/proc/${pid}/ns/mnt`) !== readlinkSync('/proc/self/ns/mnt'))
    const before = readFileSync(`/proc/${other}/mountinfo`, 'utf8')
    expect(mountPoint(pin)).toBeDefined()
    expect(mountPoint(pin, other)).toBeDefined()
    await agent.end()
    expect(mountPoint(pin)).toBeUndefined()
    // No mount goes from under a sandbox (one starting would fail: bubblewrap issue #650); the file stays for the next agent.
    expect(readFileSync(`/proc/${other}/mountinfo`, 'utf8')).toBe(before)
    expect(existsSync(pin)).toBe(true)
    const next = owner('session-pin-next')
    const again = await box.ctx.sandbox.confine(['true'], { mode: 'workspace-write', workspaceRoot: workspace, agent: next })
    expect(pinOf(again.argv)).toBe(pin)
    await next.end()
  })
})

/** The host pids of `sleep <seconds>` processes. */
function sleeping(seconds: number): number[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
  return ps.stdout.split('\n').filter((line) => line.trim().endsWith(`sleep ${seconds}`)).map((line) => Number.parseInt(line, 10))
}

/** The host's egress proxy, with names ending in `.test` resolved to the host's loopback (no real network). */
const testProxy: StartEgressProxy = (options) => startEgressProxy({ ...options, resolve: async (host) => [host.endsWith('.test') ? '127.0.0.1' : host] })

describe.runIf(asRoot)('the network of an agent (bubblewrap, as root)', () => {
  let site: Server
  let sitePort: number
  beforeAll(async () => {
    site = createHttpServer((_, res) => res.end('SITE-REACHED\n'))
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
    sitePort = (site.address() as { port: number }).port
  })
  afterAll(() => new Promise<void>((resolve) => site.close(() => resolve())))

  it('allow: an allowed host is reached through the proxy, another is refused and named, and nothing leaves around it', async () => {
    const refused: string[] = []
    box = await harness(workspace, {}, { startEgressProxy: testProxy, onRefused: (_, host) => void refused.push(host) })
    const agent = { ...owner('session-allow'), network: { mode: 'allow' as const, hosts: [`allowed.test:${sitePort}`, `mirror.pkg.test:${sitePort}`] } }
    const result = await box.run(
      [
        `curl -s http://allowed.test:${sitePort}/`,
        `curl -s http://mirror.pkg.test:${sitePort}/`,
        `curl -s -w ' code=%{http_code}\\n' http://refused.test:${sitePort}/`,
        `curl -s --noproxy '*' http://127.0.0.1:${sitePort}/; echo "direct=$?"`,
        'echo "proxy=$HTTPS_PROXY no=$NO_PROXY"',
      ].join('; '),
      { agent },
    )
    expect(result.stdout.match(/SITE-REACHED/g)).toHaveLength(2)
    expect(result.stdout).toMatch(/^blocked refused\.test — not in the allowlist code=403$/m)
    expect(result.stdout).toMatch(/^direct=7$/m)
    expect(result.stdout).toMatch(/^proxy=http:\/\/127\.0\.0\.1:\d+ no=localhost,127\.0\.0\.1,::1$/m)
    expect(refused).toEqual(['refused.test'])
    await agent.end()
  })

  it("allow: node's fetch goes through the proxy, after the process's own NODE_OPTIONS; node:http, not routed, stays inside", async () => {
    const refused: string[] = []
    box = await harness(workspace, {}, { startEgressProxy: testProxy, onRefused: (_, host) => void refused.push(host) })
    const agent = { ...owner('session-node'), network: { mode: 'allow' as const, hosts: [`allowed.test:${sitePort}`] } }
    const fetched = (host: string) => `fetch('http://${host}:${sitePort}/').then((r) => r.text()).then((t) => console.log('BODY', t.trim()), (e) => console.log('FAILED', e.cause?.message ?? e.message))`
    const got = (url: string) => `require('node:http').get('${url}', (r) => console.log('HTTP', r.statusCode)).on('error', (e) => console.log('HTTP', e.code))`
    const result = await box.run(
      [
        `node -e "${fetched('allowed.test')}"`,
        `node -e "${fetched('refused.test')}"`,
        `node -e "${got(`http://allowed.test:${sitePort}/`)}"`,
        `node -e "${got(`http://127.0.0.1:${sitePort}/`)}"`,
        `node -e "console.log('OPTIONS', process.env.NODE_OPTIONS, v8.getHeapStatistics().heap_size_limit < 200 * 2 ** 20)"`,
      ].join('; '),
      { agent },
      { ...scrubbedEnv(process.env), NODE_OPTIONS: '--max-old-space-size=99' },
    )
    expect(result.stdout.split('\n')).toEqual([
      'BODY SITE-REACHED',
      // undici tunnels http:// too (CONNECT), and words the proxy's 403 as a cancelled request.
      'FAILED Request was cancelled.',
      expect.stringMatching(/^HTTP (EAI_AGAIN|ENOTFOUND)$/),
      'HTTP ECONNREFUSED',
      `OPTIONS --max-old-space-size=99 --require "${NODE_PROXY_PRELOAD}" true`,
      '',
    ])
    expect(result.stderr).toBe('')
    expect(refused).toEqual(['refused.test'])
    await agent.end()
  })

  it('allow: a workspace-write agent whose workspace holds the Node preload can neither rewrite nor replace it, nor undici', async () => {
    const folder = dirname(NODE_PROXY_PRELOAD)
    const before = readFileSync(NODE_PROXY_PRELOAD)
    box = await harness(folder, {}, { startEgressProxy: testProxy })
    const agent = { ...owner('session-preload'), network: { mode: 'allow' as const, hosts: [`allowed.test:${sitePort}`] } }
    try {
      const result = await box.run(
        [
          'echo planted > node-proxy.cjs; echo "rewrite=$?"',
          'echo planted > .planted-$$ && mv -f .planted-$$ node-proxy.cjs; echo "replace=$?"; rm -f .planted-$$',
          'echo planted > "$NODE_PROXY_UNDICI/index.js"; echo "undici=$?"',
          'touch .written-$$ && rm .written-$$ && echo workspace=writable',
          `node -e "fetch('http://allowed.test:${sitePort}/').then((r) => r.text()).then((t) => console.log('BODY', t.trim()))"`,
        ].join('; '),
        { agent },
      )
      expect(result.stdout).toMatch(/^rewrite=1\nreplace=1\nundici=1\nworkspace=writable\nBODY SITE-REACHED\n$/)
    } finally {
      await agent.end()
      if (!readFileSync(NODE_PROXY_PRELOAD).equals(before)) {
        writeFileSync(NODE_PROXY_PRELOAD, before)
        expect.unreachable('a confined process rewrote the Node preload')
      }
    }
  })

  it('none: the host loopback is out of reach; full: it is the host network', async () => {
    box = await harness(workspace)
    const none = owner('session-none')
    const full = { ...owner('session-full'), network: { mode: 'full' as const } }
    const curl = `curl -s http://127.0.0.1:${sitePort}/; echo "curl=$?"`
    const isolated = await box.run(curl, { agent: none })
    expect(isolated.stdout, JSON.stringify(isolated)).toMatch(/^curl=7$/m)
    const open = await box.run(curl, { agent: full })
    expect(open.stdout, JSON.stringify(open)).toContain('SITE-REACHED')
    await Promise.all([none.end(), full.end()])
  })

  it("a process that asks for the network itself (a sub-agent's model API) gets the host's, and keeps the agent's /tmp", async () => {
    box = await harness(workspace)
    const agent = owner('session-own-network')
    await box.run('echo agent-note > /tmp/note', { agent })
    const result = await box.run(`curl -s http://127.0.0.1:${sitePort}/; cat /tmp/note`, { agent, network: true })
    expect(result.stdout).toContain('SITE-REACHED')
    expect(result.stdout).toContain('agent-note')
    await agent.end()
  })

  it('a process confined while its agent sandbox is torn down gets the next one', async () => {
    box = await harness(workspace)
    const first = owner('session-again')
    await box.run('echo old > /tmp/note', { agent: first })
    const next = owner('session-again')
    const ending = first.end()
    const result = await box.run('echo new > /tmp/new && cat /tmp/new; cat /tmp/note', { agent: next })
    await ending
    expect(result.stdout).toContain('new')
    expect(result.stderr).toMatch(/\/tmp\/note: No such file or directory/)
    await next.end()
  })

  it("a runtime folder outside /tmp shows no agent another agent's /tmp or sockets", async () => {
    const runtimeDir = realpathSync(mkdtempSync('/var/tmp/conch-runtime-'))
    try {
      box = await harness(workspace, { runtimeDir })
      const agents = agentsFolderPath(runtimeDir)
      const look = `cat ${agents}/agent-*/tmp/secret; for s in ${agents}/agent-*/sockets/expose-8781.sock; do curl -s --unix-socket "$s" http://x/index.html; done; echo looked`
      // The spy's first process starts before the victim's sandbox exists, and waits for it.
      const spy = owner('session-spy')
      const early = await start(`echo SPY-READY; for i in $(seq 100); do [ -S ${agents}/agent-*/sockets/expose-8781.sock ] 2>/dev/null && break; sleep 0.1; done; ${look}; sleep 600`, spy, 'SPY-READY')
      let earlyOut = ''
      early.stdout.on('data', (text: string) => void (earlyOut += text))
      const victim = { ...owner('session-victim'), expose: [8781] }
      await start(`echo victim-secret > /tmp/secret; echo victim-page > /tmp/index.html; cd /tmp; ${SERVER(8781)}`, victim, 'LISTENING')
      const late = await box.run(look, { agent: spy })
      expect(late.stdout).toBe('looked\n')
      await new Promise<void>((resolve) => (earlyOut.includes('looked') ? resolve() : early.stdout.on('data', () => earlyOut.includes('looked') && resolve())))
      expect(earlyOut).toBe('looked\n')
      await spy.end()
      await victim.end()
    } finally {
      // Its placeholders and ledger go with the provider, before their folders do.
      await Promise.all(children.splice(0).map((child) => child.terminate({ graceMs: 0, rootSignal: 'SIGKILL' })))
      await box.dispose()
      removeRuntimeDir(runtimeDir)
    }
  })

  it('an owner that ended while its sandbox was being made leaves nothing behind', async () => {
    const runtimeDir = ownRuntimeDir()
    box = await harness(workspace, { runtimeDir })
    const ended = { key: 'session-ended', owner: { onDispose: (): never => { throw new Error('the agent is disposing') } } }
    await expect(box.ctx.sandbox.confine(['true'], { mode: 'read-only', workspaceRoot: workspace, agent: ended })).rejects.toThrow('the agent is disposing')
    expect(agentFolders(agentsFolderPath(runtimeDir))).toEqual([])
  })

  it('expose: an agent port is reached from a host loopback port conch reports, and from no other address', async () => {
    box = await harness(workspace)
    const agent = { ...owner('session-expose'), expose: [8780] }
    await start(`echo exposed-page > /tmp/index.html; cd /tmp; ${SERVER(8780)}`, agent, 'LISTENING')
    const confined = await box.ctx.sandbox.confine(['true'], { mode: 'read-only', workspaceRoot: workspace, agent })
    expect(confined.exposed).toHaveLength(1)
    const { port, hostPort } = confined.exposed![0]!
    expect(port).toBe(8780)
    expect(await (await fetch(`http://127.0.0.1:${hostPort}/index.html`)).text()).toBe('exposed-page\n')
    const other = Object.values(networkInterfaces()).flat().find((entry) => entry?.family === 'IPv4' && !entry.internal)?.address
    if (other !== undefined) await expect(fetch(`http://${other}:${hostPort}/`)).rejects.toThrow()
    await agent.end()
    await expect(fetch(`http://127.0.0.1:${hostPort}/`)).rejects.toThrow()
  })

  it('expose: an agent cannot open host listeners without bound, one request after another', async () => {
    box = await harness(workspace, { maxExposedPorts: 3 })
    const agent = owner('session-expose-many')
    const confine = (expose: number[]) => box.ctx.sandbox.confine(['true'], { mode: 'read-only', workspaceRoot: workspace, agent: { ...agent, expose } })
    expect((await confine([9001, 9002])).exposed).toHaveLength(2)
    expect((await confine([9002, 9003])).exposed).toHaveLength(2)
    await expect(confine([9004])).rejects.toMatchObject({ code: 'AGENT_SANDBOX_FAILED', message: expect.stringContaining('cannot expose port 9004: the agent exposes 3 ports already (maxExposedPorts)') })
    expect((await confine([9001])).exposed).toEqual([expect.objectContaining({ port: 9001 })])
    await agent.end()
  })
})

/**
 * Runs `script` (an ES module; `HARNESS` names harness.ts) with node and tsx in a PID namespace of
 * its own with its own /proc, as a conch in a container that shares the runtime folder would run;
 * resolves to its last stdout line, parsed.
 */
async function inOwnPidNamespace(script: string): Promise<Record<string, unknown>> {
  const module = `const HARNESS = ${JSON.stringify(new URL('./harness.ts', import.meta.url).pathname)};\n${script}`
  const child = spawn('unshare', ['--pid', '--fork', '--mount-proc', '--', process.execPath, '--import', 'tsx', '--input-type=module', '-e', module], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...scrubbedEnv(process.env), TSX_TSCONFIG_PATH: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (text: string) => void (stdout += text))
  child.stderr.setEncoding('utf8').on('data', (text: string) => void (stderr += text))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  expect(code, stderr).toBe(0)
  return JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>
}

describe.runIf(asRoot)("the agents' folders of another PID namespace (bubblewrap, as root)", () => {
  it("a sweep in a PID namespace of its own leaves a live conch's agent folder and pin, and removes a dead one's of its namespace", async () => {
    const runtimeDir = ownRuntimeDir()
    const agents = agentsFolderPath(runtimeDir)
    box = await harness(workspace, { runtimeDir })
    const live = owner('session-live')
    const net = (await box.run('echo live-note > /tmp/note; readlink /proc/self/ns/net', { agent: live })).stdout
    const [folder] = agentFolders(agents)
    const [pinName] = readdirSync(pinsFolderPath(runtimeDir))
    const pin = join(pinsFolderPath(runtimeDir), pinName!)
    const pinned = () => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((line) => line.split(' ')[4] === pin)
    expect(pinned()).toBe(true)
    // There a conch makes an agent's sandbox and is killed with SIGKILL; then another one sweeps.
    const options = JSON.stringify({ runtimeDir })
    const maker = `const { harness } = await import(HARNESS)
      const box = await harness(${JSON.stringify(workspace)}, ${options})
      await box.run('true', { agent: { key: 'session-killed', owner: { onDispose: () => () => {} } } })
      console.log('MADE')
      setInterval(() => {}, 1 << 30)`
    const answer = await inOwnPidNamespace(`
      const { spawn } = await import('node:child_process')
      const { readdirSync } = await import('node:fs')
      const before = readdirSync(${JSON.stringify(agents)}).filter((name) => name !== 'pins')
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', 'const HARNESS = ' + JSON.stringify(HARNESS) + ';\\n' + ${JSON.stringify(maker)}], { stdio: ['ignore', 'pipe', 'inherit'] })
      const exited = new Promise((resolve) => child.on('exit', resolve))
      await Promise.race([exited, new Promise((resolve) => child.stdout.setEncoding('utf8').on('data', (text) => text.includes('MADE') && resolve()))])
      const made = readdirSync(${JSON.stringify(agents)}).filter((name) => name !== 'pins' && !before.includes(name))
      child.kill('SIGKILL')
      await exited
      const { harness } = await import(HARNESS)
      const box = await harness(${JSON.stringify(workspace)}, ${options})
      const { removed } = await box.ctx.sandbox.sweep()
      await box.dispose()
      console.log(JSON.stringify({ made, removed: removed.map((item) => item.name) }))`)
    const made = answer['made'] as string[]
    expect(made).toHaveLength(1)
    expect(answer['removed']).toEqual([join(agents, made[0]!)])
    expect(agentFolders(agents)).toEqual([folder])
    expect(pinned()).toBe(true)
    expect((await box.run('cat /tmp/note; readlink /proc/self/ns/net', { agent: live })).stdout).toBe(`live-note\n${net.trim()}\n`)
    await live.end()
    expect(agentFolders(agents)).toEqual([])
  })
})
