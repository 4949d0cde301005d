/**
 * Terminals in an agent's container, against the real daemon as root: state across sends,
 * readiness proved by the kernel for programs in the container, the agent's shared loopback and
 * /tmp (and nothing shared across agents), the modes, the network, the deny-write list, the
 * limits, and teardown with proof.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { networkInterfaces } from 'node:os'
import { basename, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent } from '@conch/agent'
import { startEgressProxy } from '@conch/sandbox'
import { childrenNaming, naming } from '@conch/test-support/procs'
import { until } from '@conch/test-support/wait'
import { compose, containersOf, docker, dockerSkip } from './harness.ts'

let box: Awaited<ReturnType<typeof compose>> | undefined
afterEach(async () => {
  await box?.dispose()
  box = undefined
})

async function open(agent: Agent): Promise<string> {
  return (await box!.pty.spawn(agent, { type: 'shell' })).sessionId
}

/** Whether host pid `pid` is a process of the container (its cgroup names it). */
function inContainer(pid: number, id: string): boolean {
  return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(id)
}

/** The host pids of the processes in container `id` (its cgroup's procs). */
async function processesOf(id: string): Promise<number[]> {
  const { Processes } = await docker.getContainer(id).top({ ps_args: '-o pid,args' })
  return (Processes ?? []).map((row: string[]) => Number(row[0]))
}

/** An address of this host's own that is not loopback, if it has one. */
function networkAddress(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal)?.address
}

/** The network relays this process started: other test files run theirs at the same time. */
const ownNetRelays = (): number[] => childrenNaming('net-relay.cjs')

async function containerOf(agent: Agent): Promise<string> {
  const [info] = await containersOf(agent.session.id)
  return info!.Id
}

describe.skipIf(dockerSkip)('terminals in an agent container (Docker, as root)', () => {
  it('a terminal keeps its shell state across sends', async () => {
    box = await compose()
    const agent = await box.agent()
    const id = await open(agent)
    await box.send(agent, id, 'X=41; cd /tmp; mkdir -p here && cd here')
    const result = await box.send(agent, id, 'echo value=$((X+1)) dir=$PWD')
    expect(result.viewport).toContain('value=42 dir=/tmp/here')
    expect(result.waitReason).toBe('stdin_read')
  })

  it.each([
    ['python3', 'python3 -q', 'print(6*7)', '42'],
    ['node', 'node', 'console.log(6*7)', '42'],
    ['gdb', 'gdb -q -nx', 'print 6*7', '$1 = 42'],
    ['bash read', 'read -r line; echo "got=$line"', 'hello', 'got=hello'],
  ])('%s in the container is proved ready by the kernel', async (_name, start, input, output) => {
    box = await compose()
    const agent = await box.agent()
    const id = await open(agent)
    const container = await containerOf(agent)
    const started = await box.send(agent, id, start)
    expect(started.waitReason).toBe('stdin_read')
    expect(started.evidence).toMatchObject({ tier: 'proc' })
    const pid = (started.evidence as { process: { pid: number } }).process.pid
    expect(inContainer(pid, container)).toBe(true)
    const answered = await box.send(agent, id, input)
    expect(answered.viewport).toContain(output)
    expect(answered.waitReason).toBe('stdin_read')
  })

  it("a send is not proved ready while its input is still in the relay, even when the container's reader wakes for something else", async () => {
    box = await compose()
    const agent = await box.agent()
    const id = await open(agent)
    const container = await containerOf(agent)
    execFileSync('mkfifo', [join(box.workspace, 'wake.fifo')])
    // bash waits in `read`; a background job it will reap (waking it, SIGCHLD) waits on the fifo.
    const reading = await box.send(agent, id, 'cat wake.fifo >/dev/null & read -r line; echo "got=$line"')
    expect(reading.evidence).toMatchObject({ tier: 'proc', process: { name: 'bash', syscall: 'read' } })
    const [relay] = naming(container).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[1]?.endsWith('relay.cjs'))
    expect(relay).toBeDefined()
    // The relay stopped: the input stays on this host while bash wakes, reaps cat and reads again.
    process.kill(relay!, 'SIGSTOP')
    let held: Awaited<ReturnType<typeof box.send>>
    try {
      const send = box.pty.startSend(agent, id, { text: 'hello\r', submit: false, idleMs: 2000 })
      await writeFile(join(box.workspace, 'wake.fifo'), 'go')
      held = await send.done
    } finally {
      process.kill(relay!, 'SIGCONT')
    }
    expect(held.viewport).not.toContain('got=hello')
    expect(held.waitReason).toBe('inferred_idle')
    // Once the relay runs again the input arrives and bash reads it. A send without input may
    // settle before that (bash still waits in the read the held bytes are for: the gap pty-local's
    // README names for input that follows one the relay still holds), so the output is waited for.
    const delivered = await until(async () => {
      const page = await box!.pty.startSend(agent, id, { text: '', submit: false }).done
      return page.viewport.includes('got=hello') ? page : undefined
    }, 10_000, 'got=hello once the relay runs')
    expect(delivered!.waitReason).toBe('stdin_read')
  })

  it("SIGINT reaches the container's foreground program, and a resize reaches its terminal", async () => {
    box = await compose()
    const agent = await box.agent()
    const id = await open(agent)
    const sleeping = box.pty.startSend(agent, id, { text: 'sleep 300', submit: true })
    const container = await containerOf(agent)
    const row = await until(async () => ((await docker.getContainer(container).top({ ps_args: '-o pid,args' })).Processes ?? []).find((row: string[]) => row[1] === 'sleep 300'), 10_000, 'sleep 300 in the container')
    const signalled = await box.pty.signal(agent, id, 'SIGINT')
    // The group signalled is the container's sleep, by its host pid (its own group's leader).
    expect(signalled).toMatchObject({ delivered: true, target: 'sleep', targetPgid: Number(row[0]) })
    expect((await sleeping.done).waitReason).toBe('stdin_read')
    box.pty.resize(agent, id, { rows: 33, cols: 101 })
    await until(async () => (await box!.send(agent, id, 'stty size')).viewport.includes('33 101'), 10_000, 'the new size in the container')
  })

  it("two terminals of one agent share its loopback and /tmp; another agent's reach neither", async () => {
    box = await compose()
    const one = await box.agent()
    const two = await box.agent()
    const server = await open(one)
    await box.send(one, server, 'echo shared-note > /tmp/note; python3 -m http.server 8767 --bind 127.0.0.1 >/dev/null 2>&1 &')
    const sibling = await open(one)
    const curl = `for i in $(seq 50); do curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:8767/ && break; sleep 0.1; done; cat /tmp/note`
    const near = await box.send(one, sibling, curl)
    expect(near.viewport).toContain('code=200')
    expect(near.viewport).toContain('shared-note')
    const stranger = await open(two)
    const far = await box.send(two, stranger, `curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:8767/; echo curl=$?; cat /tmp/note`)
    expect(far.viewport).toContain('curl=7')
    expect(far.viewport).toContain('No such file or directory')
  })

  it('workspace-write writes the workspace on the host; read-only writes neither it nor the root filesystem', async () => {
    box = await compose()
    const writer = await box.agent()
    const id = await open(writer)
    await box.send(writer, id, 'echo from-container > written.txt')
    expect(readFileSync(join(box.workspace, 'written.txt'), 'utf8')).toBe('from-container\n')
    await box.dispose()

    box = await compose({ mode: 'read-only' })
    const reader = await box.agent()
    const ro = await open(reader)
    const result = await box.send(reader, ro, 'echo x > denied.txt; echo x > /etc/denied; echo x > /tmp/allowed && echo tmp-ok')
    expect(result.viewport).toContain('Read-only file system')
    expect(result.viewport).toContain('tmp-ok')
    expect(existsSync(join(box.workspace, 'denied.txt'))).toBe(false)
  })

  it("the container's own files are read-only under workspace-write unless writableRoot, and the prompt says which", async () => {
    for (const writableRoot of [false, true]) {
      box = await compose({ docker: { writableRoot } })
      const agent = await box.agent()
      const id = await open(agent)
      const result = await box.send(agent, id, 'echo x > /etc/conch-probe && echo root-$((1+1))-written')
      expect(result.viewport.includes('root-2-written')).toBe(writableRoot)
      expect(box.ctx.agents.systemPrompt(agent)).toContain(writableRoot ? "a container's own copy, writable too" : 'everything else is read-only except /tmp')
      await box.dispose()
      box = undefined
    }
  })

  it('a terminal opened without a cwd starts in workingDir; one naming a cwd starts there', async () => {
    box = await compose({ docker: { workingDir: '/usr/share' } })
    mkdirSync(join(box.workspace, 'sub'))
    const agent = await box.agent()
    const plain = await open(agent)
    expect((await box.send(agent, plain, 'pwd')).viewport.split('\n')).toContain('/usr/share')
    const named = (await box.pty.spawn(agent, { type: 'shell', cwd: 'sub' })).sessionId
    expect((await box.send(agent, named, 'pwd')).viewport.split('\n')).toContain(join(box.workspace, 'sub'))
  })

  it("a process asking another mode than its agent's container is refused with AGENT_SANDBOX_MODE_FIXED", async () => {
    box = await compose()
    const agent = await box.agent()
    const id = await open(agent)
    await box.pty.close(agent, id)
    box.ctx.sandboxPolicy.setMode(agent.session, 'read-only')
    const error = await box.pty.spawn(agent, { type: 'shell' }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'SPAWN_FAILED' })
    expect((error as Error).message).toContain('was made workspace-write and its mounts cannot change')
    expect((error as { cause?: { code?: string } }).cause?.code).toBe('AGENT_SANDBOX_MODE_FIXED')
    expect(await containersOf(agent.session.id)).toHaveLength(1)
  })

  it('network none leaves the container only its loopback', async () => {
    box = await compose()
    const agent = await box.agent()
    const id = await open(agent)
    const result = await box.send(agent, id, 'ls /sys/class/net; curl -s --max-time 2 http://172.17.0.1/; echo curl=$?')
    expect(result.viewport.split('\n')).toContain('lo')
    expect(result.viewport).not.toContain('eth0')
    expect(result.viewport).toMatch(/curl=(7|28)/)
  })

  it('network allow lets only the listed hosts out, through the egress proxy, and names a refused one', async () => {
    const upstream = createServer((_request, response) => response.end('upstream-page\n'))
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const port = (upstream.address() as AddressInfo).port
    const names: Record<string, string[]> = { 'allowed.test': ['127.0.0.1'], 'refused.test': ['127.0.0.1'] }
    try {
      box = await compose({
        policy: { network: 'allow', allow: [`allowed.test:${port}`] },
        egress: (options) => startEgressProxy({ ...options, resolve: async (host) => names[host] ?? [] }),
      })
      const refused: string[] = []
      box.ctx.sandbox.onRefused!((refusal) => refused.push(refusal.host))
      const agent = await box.agent()
      const id = await open(agent)
      const result = await box.send(
        agent,
        id,
        `curl -s http://allowed.test:${port}/; curl -s -o /dev/null -w 'refused=%{http_code}\\n' http://refused.test:${port}/; curl -s --noproxy '*' --max-time 2 http://127.0.0.1:${port}/; echo direct=$?; echo ifaces=$(ls /sys/class/net | tr '\\n' ,)`,
      )
      expect(result.viewport).toContain('upstream-page')
      expect(result.viewport).toContain('refused=403')
      expect(result.viewport).toMatch(/direct=(7|28)/)
      // No way out but the proxy: Docker's `none` network, loopback alone (a bridge would route
      // a program that ignores HTTP_PROXY straight out).
      expect(result.viewport).toContain('ifaces=lo,')
      expect(refused).toEqual(['refused.test'])
      // The image's own node (Debian's Node 18) gets the Node preload and undici, read-only at their host paths.
      // The prompt's return settles the send: undici's first load can be silent for seconds.
      const text = `timeout 30 node -e "fetch('http://allowed.test:${port}/').then((r) => r.text()).then((t) => console.log('NODE', t.trim()))"; echo planted > "$NODE_PROXY_UNDICI/index.js"; echo "undici=$?"`
      const node = await box.ctx.pty.startSend(agent, id, { text, submit: true, idleMs: 60_000, timeoutMs: 60_000 }).done
      expect(node.viewport, JSON.stringify(node)).toMatch(/^NODE upstream-page$/m)
      expect(node.viewport).toMatch(/^undici=[12]$/m)
      expect(ownNetRelays()).toHaveLength(1)
      await box.agents.dispose(agent)
      expect(ownNetRelays()).toEqual([])
    } finally {
      await new Promise((resolve) => upstream.close(resolve))
    }
  })

  it("expose makes a port of the agent's loopback reachable on a host 127.0.0.1 port until the agent ends", async () => {
    box = await compose({ policy: { expose: [8768] } })
    const agent = await box.agent()
    const opened = await box.pty.spawn(agent, { type: 'shell' })
    const hostPort = opened.exposed?.find((port) => port.port === 8768)?.hostPort
    expect(hostPort).toBeGreaterThan(0)
    await box.send(agent, opened.sessionId, "mkdir -p /tmp/site && echo exposed-page > /tmp/site/p.html && python3 -m http.server 8768 --bind 127.0.0.1 -d /tmp/site >/dev/null 2>&1 &")
    // Each look is bounded: one that hangs must fail the wait, not the test's own timeout.
    const page = await until(() => fetch(`http://127.0.0.1:${hostPort}/p.html`, { signal: AbortSignal.timeout(5000) }).then((response) => response.text(), () => undefined), 10_000, 'the exposed page')
    expect(page).toBe('exposed-page\n')
    const other = networkAddress()
    if (other !== undefined) await expect(fetch(`http://${other}:${hostPort}/p.html`, { signal: AbortSignal.timeout(2000) })).rejects.toThrow()
    expect(ownNetRelays()).toHaveLength(1)
    await box.agents.dispose(agent)
    // Refused, not merely unanswered: nothing listens there any more.
    await expect(fetch(`http://127.0.0.1:${hostPort}/p.html`, { signal: AbortSignal.timeout(5000) })).rejects.toMatchObject({ cause: { code: 'ECONNREFUSED' } })
    expect(ownNetRelays()).toEqual([])
  })

  it('deny-write paths stay unwritable inside a writable workspace, as root, existing or not', async () => {
    const made = await compose()
    box = made
    mkdirSync(join(made.workspace, '.git', 'hooks'), { recursive: true })
    writeFileSync(join(made.workspace, '.bashrc'), 'original\n')
    writeFileSync(join(made.workspace, '.git', 'config'), '[core]\n')
    const agent = await made.agent()
    const id = await open(agent)
    const result = await made.send(
      agent,
      id,
      'echo evil >> .bashrc; echo evil > .git/hooks/pre-commit; echo evil >> .git/config; echo evil > .mcp.json; echo script-shell=/tmp/x > .npmrc; mkdir -p .vscode/x; rm -f .bashrc; mv .git/config .git/config.old; echo done',
    )
    expect(result.viewport).toContain('done')
    expect(readFileSync(join(made.workspace, '.bashrc'), 'utf8')).toBe('original\n')
    expect(readFileSync(join(made.workspace, '.git', 'config'), 'utf8')).toBe('[core]\n')
    expect(existsSync(join(made.workspace, '.git', 'hooks', 'pre-commit'))).toBe(false)
    expect(existsSync(join(made.workspace, '.git', 'config.old'))).toBe(false)
    expect(statSync(join(made.workspace, '.npmrc')).isDirectory()).toBe(true)
    await made.agents.dispose(agent)
    expect(existsSync(join(made.workspace, '.npmrc'))).toBe(false)
    // The empty folders that held missing entries are gone with the container.
    expect(existsSync(join(made.workspace, '.mcp.json'))).toBe(false)
    expect(existsSync(join(made.workspace, '.vscode'))).toBe(false)
  })

  it("the host's git runs no config a process leads it to through .git/commondir or config.worktree, as root", async () => {
    const made = await compose()
    box = made
    const hostGit = (...args: string[]) => execFileSync('git', ['-C', made.workspace, ...args], { env: { PATH: process.env['PATH'] }, stdio: 'pipe' }).toString()
    hostGit('init', '-q')
    const marker = join(made.workspace, 'host-git-ran')
    const config = `printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch ${marker}; false"\\n'`
    const agent = await made.agent()
    const id = await open(agent)
    const result = await made.send(
      agent,
      id,
      `cd .git && mkdir -p x && ln -s ../objects x/objects && ln -s ../refs x/refs && ${config} > x/config && echo x > commondir; cd ..; ${config} > .git/config.worktree; echo tried-$((4+4))`,
    )
    expect(result.viewport).toContain('tried-8')
    expect(readFileSync(join(made.workspace, '.git', 'commondir'), 'utf8')).toBe('.\n')
    expect(readFileSync(join(made.workspace, '.git', 'config.worktree'), 'utf8')).toBe('')
    expect(hostGit('status', '--short')).toBe('')
    hostGit('-c', 'extensions.worktreeConfig=true', 'status')
    expect(existsSync(marker)).toBe(false)
    await made.agents.dispose(agent)
    expect(existsSync(join(made.workspace, '.git', 'commondir'))).toBe(false)
    expect(existsSync(join(made.workspace, '.git', 'config.worktree'))).toBe(false)
    expect(readdirSync(join(made.workspace, '.git', 'hooks')).length).toBeGreaterThan(0)
  })

  it("the host's git runs no config a process leads it to by rewriting a linked worktree's .git file, as root", async () => {
    const made = await compose()
    box = made
    const main = join(made.workspace, '..', `${basename(made.workspace)}-main`)
    const hostGit = (...args: string[]) => execFileSync('git', args, { env: { PATH: process.env['PATH'] }, stdio: 'pipe' }).toString()
    try {
      hostGit('init', '-q', main)
      hostGit('-C', main, '-c', 'user.name=h', '-c', 'user.email=h@h', 'commit', '-q', '--allow-empty', '-m', 'host')
      hostGit('-C', main, 'worktree', 'add', '-q', '--detach', made.workspace)
      const gitfile = readFileSync(join(made.workspace, '.git'), 'utf8')
      const marker = join(made.workspace, 'host-git-ran')
      const agent = await made.agent()
      const id = await open(agent)
      const result = await made.send(
        agent,
        id,
        `git init -q .g; printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch ${marker}; false"\\n' > .g/config; echo 'gitdir: .g' > .git; rm -f .git; echo tried-$((5+5))`,
      )
      expect(result.viewport).toContain('tried-10')
      expect(readFileSync(join(made.workspace, '.git'), 'utf8')).toBe(gitfile)
      hostGit('-C', made.workspace, 'status', '--short')
      expect(existsSync(marker)).toBe(false)
      await made.agents.dispose(agent)
    } finally {
      rmSync(main, { recursive: true, force: true })
    }
  })

  it('no set-ID file and no device file can be made in the workspace, nor a namespace, as root; bash and ordinary modes still work', async () => {
    const made = await compose()
    box = made
    const agent = await made.agent()
    const id = await open(agent)
    const result = await made.send(
      agent,
      id,
      `cp /bin/bash rootsh; chmod 4755 rootsh; echo chmod=$?; chmod g+s rootsh; echo g+s=$?; python3 -c "import os; os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755)" 2>&1 | tail -n 1; mknod disk b 8 0; echo mknod=$?; unshare -r true; echo unshare=$?; chmod 755 rootsh && ./rootsh -c 'echo bash-$((6+6))'`,
    )
    expect(result.viewport).toContain('bash-12')
    expect(result.viewport).toMatch(/^chmod=1$/m)
    expect(result.viewport).toMatch(/^g\+s=1$/m)
    expect(result.viewport).toContain("PermissionError: [Errno 1] Operation not permitted: 'made'")
    expect(result.viewport).toMatch(/^mknod=1$/m)
    // The profile replaces Docker's default one: what that one denies stays denied.
    expect(result.viewport).toMatch(/^unshare=1$/m)
    expect(statSync(join(made.workspace, 'rootsh')).mode & 0o7777).toBe(0o755)
    expect(existsSync(join(made.workspace, 'made'))).toBe(false)
    expect(existsSync(join(made.workspace, 'disk'))).toBe(false)
  })

  it('a deny-write path whose folder is missing is held: what a process makes there, a repository with hooks included, never reaches the host, as root', async () => {
    const made = await compose()
    box = made
    const agent = await made.agent()
    const id = await open(agent)
    const planted = await made.send(agent, id, 'mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; echo planted-$((1+1))')
    expect(planted.viewport).toContain('planted-2')
    expect(existsSync(join(made.workspace, '.git', 'hooks', 'pre-commit'))).toBe(false)
    const repository = await made.send(
      agent,
      id,
      "rm -rf .git/hooks; git init -q && printf '#!/bin/sh\\necho planted\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && git config alias.st '!echo planted' && echo inited-$((2+2))",
    )
    // git works in the container: the repository is the container's own.
    expect(repository.viewport).toContain('inited-4')
    expect(existsSync(join(made.workspace, '.git', 'hooks'))).toBe(false)
    expect(existsSync(join(made.workspace, '.git', 'config'))).toBe(false)
    await made.agents.dispose(agent)
    // The folder the container held is gone with it.
    expect(existsSync(join(made.workspace, '.git'))).toBe(false)
  })

  it('a deny-write path missing two folders deep is held by its topmost missing folder, which cannot be renamed away', async () => {
    const made = await compose({ docker: { denyWrite: ['sub/deep/hooks/'] } })
    box = made
    mkdirSync(join(made.workspace, 'sub'))
    const agent = await made.agent()
    const id = await open(agent)
    const result = await made.send(agent, id, 'mkdir -p sub/deep/hooks && echo evil > sub/deep/hooks/x; mv sub sub-old; rm -rf sub/deep; mkdir -p sub/deep/hooks && echo evil > sub/deep/hooks/y; echo tried-$((3+3))')
    expect(result.viewport).toContain('tried-6')
    expect(existsSync(join(made.workspace, 'sub', 'deep', 'hooks'))).toBe(false)
    expect(existsSync(join(made.workspace, 'sub-old'))).toBe(false)
    await made.agents.dispose(agent)
    expect(existsSync(join(made.workspace, 'sub', 'deep'))).toBe(false)
  })

  it('a folder holding a deny-write path cannot be renamed away and rebuilt, as root', async () => {
    const made = await compose()
    box = made
    mkdirSync(join(made.workspace, '.git', 'hooks'), { recursive: true })
    writeFileSync(join(made.workspace, '.git', 'config'), '[core]\n')
    const agent = await made.agent()
    const id = await open(agent)
    const result = await made.send(
      agent,
      id,
      "mv .git .git-old; rm -rf .git/hooks; mkdir -p .git/hooks; printf '#!/bin/sh\\necho planted\\n' > .git/hooks/pre-commit; echo '[alias] st = !echo planted' > .git/config; echo objects > .git/written; echo done",
    )
    expect(result.viewport).toContain('done')
    expect(existsSync(join(made.workspace, '.git-old'))).toBe(false)
    expect(existsSync(join(made.workspace, '.git', 'hooks', 'pre-commit'))).toBe(false)
    expect(readFileSync(join(made.workspace, '.git', 'config'), 'utf8')).toBe('[core]\n')
    // The fenced folder itself stays writable (git writes its objects there).
    expect(readFileSync(join(made.workspace, '.git', 'written'), 'utf8')).toBe('objects\n')
  })

  it('a container has the configured limits; a fork bomb stays inside its pids limit and conch keeps serving another agent', async () => {
    box = await compose({ docker: { pids: 64, memoryMb: 256, cpus: 0.5 } })
    const bomber = await box.agent()
    const calm = await box.agent()
    const bomb = await open(bomber)
    const container = await containerOf(bomber)
    const { HostConfig } = await docker.getContainer(container).inspect()
    expect(HostConfig).toMatchObject({ PidsLimit: 64, Memory: 256 * 2 ** 20, MemorySwap: 256 * 2 ** 20, NanoCpus: 5e8 })
    box.pty.startSend(bomber, bomb, { text: 'b(){ b|b& }; b', submit: true }).done.catch(() => {})
    const other = await open(calm)
    const result = await box.send(calm, other, 'echo still-served')
    expect(result.viewport).toContain('still-served')
    const stats = await docker.getContainer(container).stats({ stream: false })
    expect(stats.pids_stats?.current ?? 0).toBeLessThanOrEqual(64)
    await box.agents.dispose(bomber)
    expect(await containersOf(bomber.session.id)).toHaveLength(0)
  })

  it("closing a terminal ends its tree in the container, daemons included, and leaves its sibling's", async () => {
    box = await compose()
    const agent = await box.agent()
    const keep = await open(agent)
    await box.send(agent, keep, 'sleep 3001 &')
    const closing = await open(agent)
    await box.send(agent, closing, 'sleep 3002 & setsid nohup sleep 3003 >/dev/null 2>&1 & (setsid sleep 3004 &)')
    const container = await containerOf(agent)
    const args = async (): Promise<string[]> => ((await docker.getContainer(container).top({ ps_args: '-o pid,args' })).Processes ?? []).map((row: string[]) => row[1]!)
    // `(setsid sleep 3004 &)` may start after the prompt is back: wait for all four.
    await until(async () => (await args()).filter((line) => /^sleep 300[1-4]$/.test(line)).length === 4, 10_000, 'the four sleeps in the container')
    const closed = await box.pty.close(agent, closing)
    // It names what the model started in the container, not the host relay it runs through.
    expect(closed.stopped.map((process) => process.name).sort()).toEqual(['bash', 'sleep', 'sleep', 'sleep'])
    expect(closed.status).toMatchObject({ state: 'exited', signal: 'SIGHUP' })
    const left = await args()
    expect(left.filter((line) => /^sleep 300[2-4]$/.test(line))).toEqual([])
    expect(left).toContain('sleep 3001')
    await box.agents.dispose(agent)
    expect(await containersOf(agent.session.id)).toHaveLength(0)
    for (const pid of await processesOf(container).catch(() => [])) expect(pid).toBeUndefined()
  })
})
