/**
 * run_code programs in an agent's container, against the real daemon as root: the program is a
 * process of the container (not of the host), it shares the loopback and /tmp of the agent's
 * terminals and calls tools as on the host, nothing of it is left after the run or the agent, and
 * it reaches neither the host's Docker socket nor another agent's channel.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Agent } from '@conch/agent'
import { startEgressProxy } from '@conch/sandbox'
import { naming } from '@conch/test-support/procs'
import { until } from '@conch/test-support/wait'
import { compose, containersOf, docker, dockerSkip } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

let box: Awaited<ReturnType<typeof compose>> | undefined
afterEach(async () => {
  await box?.dispose()
  box = undefined
})

/** Runs `code` through run_code as `agent`; the text of its result, which must not be an error. */
async function runCode(agent: Agent, code: string): Promise<string> {
  const result = await box!.call(agent, 'run_code', { code })
  const text = result.content.map((item) => item.text).join('\n')
  expect(result.isError, text).toBeUndefined()
  return text.slice(0, text.lastIndexOf('\n[run_code'))
}

async function containerOf(agent: Agent): Promise<string> {
  const info = await until(async () => (await containersOf(agent.session.id))[0], 10_000, `the container of ${agent.session.id}`)
  return info!.Id
}

/** The command lines of the processes in container `id` but its init and `sleep infinity`. */
async function leftIn(id: string): Promise<string[]> {
  const { Processes } = await docker.getContainer(id).top({ ps_args: '-o pid,args' })
  return (Processes ?? []).map((row: string[]) => row[1]!).filter((args: string) => !/^(\/sbin\/docker-init -- )?sleep infinity$/.test(args))
}

describe.skipIf(dockerSkip)('run_code in an agent container (Docker, as root)', () => {
  it("a program runs as a process of the agent's container, with its stdout, stderr and result carried", async () => {
    box = await compose({ runCode: true })
    const agent = await box.agent()
    const go = join(box.workspace, 'go')
    const running = runCode(
      agent,
      [
        'const fs = require("node:fs")',
        'console.log("to stdout")',
        'console.error("to stderr")',
        'while (!fs.existsSync("go")) await new Promise((resolve) => setTimeout(resolve, 20))',
        'return { hostname: fs.readFileSync("/etc/hostname", "utf8").trim(), argv1: process.argv[1] }',
      ].join('\n'),
    )
    const container = await containerOf(agent)
    // The program's node, as the daemon lists the container's processes: its host pid is in the
    // container's cgroup, and it runs the host's node mounted there.
    const programs = await until(
      async () => {
        // Listed before it runs: top answers 409 (or 404) until the daemon has started it.
        const { Processes } = await docker
          .getContainer(container)
          .top({ ps_args: '-o pid,args' })
          .catch(() => ({ Processes: [] as string[][] }))
        const rows = (Processes ?? []).filter((row: string[]) => row[1]!.includes('bootstrap.cjs'))
        // Until the exec's `sh -c '… exec "$@"'` has become the shim, it names bootstrap.cjs too.
        if (rows.some((row: string[]) => row[1]!.startsWith('/bin/sh'))) return undefined
        return rows.length > 0 ? rows.map((row: string[]) => Number(row[0])) : undefined
      },
      10_000,
      "the program's node in the container",
    )
    for (const pid of programs!) {
      expect(readFileSync(`/proc/${pid}/cgroup`, 'utf8')).toContain(container)
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toMatch(/^\/run\/conch\/node\0/)
    }
    writeFileSync(go, '')
    const text = await running
    expect(text).toContain('to stdout')
    expect(text).toContain('to stderr')
    const value = JSON.parse(text.slice(text.indexOf('{'))) as { hostname: string; argv1: string }
    expect(container.startsWith(value.hostname)).toBe(true)
    expect(value.argv1).toMatch(/^\/run\/conch\/files\/[0-9a-f]{16}-bootstrap\.cjs$/)
    // The next program (through the spare booted meanwhile, when it is ready) runs there too.
    expect(await runCode(agent, 'return require("node:fs").readFileSync("/etc/hostname", "utf8").trim()')).toBe(JSON.stringify(value.hostname))
    await box.ctx.agents.dispose(agent)
    // The relays name the container in their argv: none is left on this host.
    expect(await containersOf(agent.session.id)).toEqual([])
    expect(naming(container)).toEqual([])
  })

  it('a process without a terminal gets its stdin to the end, its stdout and stderr apart, and its exit code', async () => {
    box = await compose({ runCode: true })
    const agent = await box.agent()
    const { argv } = await box.ctx.sandbox.confine(['/bin/sh', '-c', 'cat; echo "to stderr" >&2; exit 7'], {
      mode: 'workspace-write',
      workspaceRoot: box.workspace,
      agent: { key: agent.session.id, owner: agent },
    })
    const child = box.ctx.subprocess.spawn({ argv })
    const read = (stream: NodeJS.ReadableStream) => new Promise<string>((resolve) => {
      let text = ''
      stream.setEncoding('utf8')
      stream.on('data', (chunk: string) => (text += chunk))
      stream.on('end', () => resolve(text))
    })
    const [out, err] = [read(child.stdout), read(child.stderr)]
    child.write('from stdin\n')
    child.end()
    expect(await child.done).toEqual({ exitCode: 7, signal: null })
    expect(await out).toBe('from stdin\n')
    expect(await err).toBe('to stderr\n')
  })

  it("a program reaches a server a terminal started on the agent's loopback, reads its /tmp, and calls tools", async () => {
    box = await compose({ runCode: true })
    const agent = await box.agent()
    const text = await runCode(
      agent,
      [
        'const { meta } = await tools.terminal_open({ type: "shell" })',
        'const sessionId = meta!.sessionId as string',
        'await tools.terminal_send({ sessionId, text: "echo from-the-terminal > /tmp/note.txt && cd /tmp && (python3 -m http.server 8767 --bind 127.0.0.1 >/dev/null 2>&1 &)" })',
        'let page: string | undefined',
        'for (let tries = 0; page === undefined && tries < 500; tries++) {',
        '  page = await fetch("http://127.0.0.1:8767/note.txt").then((response) => response.text(), () => undefined)',
        '  if (page === undefined) await new Promise((resolve) => setTimeout(resolve, 20))',
        '}',
        'const file = require("node:fs").readFileSync("/tmp/note.txt", "utf8")',
        'await tools.terminal_close({ sessionId })',
        'return { page, file }',
      ].join('\n'),
    )
    expect(JSON.parse(text)).toEqual({ page: 'from-the-terminal\n', file: 'from-the-terminal\n' })
  })

  it('under network allow a program fetches an allowed host through the egress proxy, and a refused one is named', async () => {
    const upstream = createHttpServer((_request, response) => response.end('upstream-page'))
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const port = (upstream.address() as AddressInfo).port
    try {
      box = await compose({
        runCode: true,
        policy: { network: 'allow', allow: [`allowed.test:${port}`] },
        egress: (options) => startEgressProxy({ ...options, resolve: async (host) => (host.endsWith('.test') ? ['127.0.0.1'] : []) }),
      })
      const agent = await box.agent()
      const result = await box.call(agent, 'run_code', {
        code: [
          `const allowed = await (await fetch('http://allowed.test:${port}/')).text()`,
          `const refused = await fetch('http://refused.test:${port}/').then(() => 'reached', (error) => 'failed')`,
          'return { allowed, refused }',
        ].join('\n'),
      })
      const text = result.content.map((item) => item.text).join('\n')
      expect(text).toContain('"allowed": "upstream-page"')
      expect(text).toContain('"refused": "failed"')
      expect(text).toContain('[network: blocked refused.test')
    } finally {
      await new Promise((resolve) => upstream.close(resolve))
    }
  })

  it('nothing of a program is left in the container after its run, and nothing at all after the agent', async () => {
    // No spare: the container holds nothing but its init and sleep between runs.
    box = await compose({ runCode: true, ptc: { spare: false } })
    const agent = await box.agent()
    // A child, and a detached one in a session of its own, both still running when the program returns.
    const text = await runCode(
      agent,
      [
        'const { spawn } = require("node:child_process")',
        'const child = spawn("sleep", ["1001"], { stdio: "ignore" })',
        'const daemon = spawn("sleep", ["1002"], { stdio: "ignore", detached: true })',
        'daemon.unref()',
        'return [child.pid, daemon.pid]',
      ].join('\n'),
    )
    expect(JSON.parse(text)).toHaveLength(2)
    const container = await containerOf(agent)
    expect(await leftIn(container)).toEqual([])
    await box.ctx.agents.dispose(agent)
    expect(await containersOf(agent.session.id)).toEqual([])
    expect(naming(container)).toEqual([])
  })

  it("a program reaches neither the host's Docker socket nor another agent's channel folder", async () => {
    box = await compose({ runCode: true })
    const [one, other] = [await box.agent(), await box.agent()]
    await runCode(other, 'return 1')
    const otherContainer = await containerOf(other)
    const { Mounts } = await docker.getContainer(otherContainer).inspect()
    const otherFolder = Mounts.find((mount) => mount.Destination === '/run/conch')!.Source
    // A listener in the other agent's folder, as its channel is while its program starts.
    const probe = join(otherFolder, 'probe.sock')
    let reached = false
    const listener = createServer((socket) => {
      reached = true
      socket.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(probe, resolve))
    try {
      const text = await runCode(
        one,
        [
          'const net = require("node:net")',
          'const fs = require("node:fs")',
          'const attempt = (path: string) => new Promise((resolve) => {',
          '  const socket = net.connect(path)',
          '  socket.on("connect", () => { socket.destroy(); resolve("connected") })',
          '  socket.on("error", (error: NodeJS.ErrnoException) => resolve(error.code))',
          '})',
          `const targets = ["/var/run/docker.sock", "/run/docker.sock", ${JSON.stringify(probe)}, "/run/conch/probe.sock"]`,
          'const reached: Record<string, unknown> = {}',
          'for (const path of targets) reached[path] = await attempt(path)',
          'let written: string',
          'try { fs.writeFileSync("/run/conch/planted.sock", ""); written = "written" } catch (error) { written = (error as NodeJS.ErrnoException).code! }',
          `return { reached, written, folder: fs.existsSync(${JSON.stringify(otherFolder)}), mine: fs.readdirSync("/run/conch").sort() }`,
        ].join('\n'),
      )
      const value = JSON.parse(text) as { reached: Record<string, string>; written: string; folder: boolean; mine: string[] }
      for (const code of Object.values(value.reached)) expect(code).toBe('ENOENT')
      expect(value.written).toBe('EROFS')
      expect(value.folder).toBe(false)
      expect(value.mine).toEqual(['files', 'node', 'shim.cjs'])
      expect(reached).toBe(false)
      expect(existsSync(join(otherFolder, 'planted.sock'))).toBe(false)
    } finally {
      await new Promise((resolve) => listener.close(resolve))
    }
  })
})
