/**
 * Bad input fails at the first confined process with one error that names the fix, and leaves
 * nothing running: an image the daemon does not have, a daemon that does not answer, a socket
 * this user may not open.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer, connect, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { daemonOptions } from '../src/index.ts'
import { compose, containersOf, dockerSkip, IMAGE } from './harness.ts'

let box: Awaited<ReturnType<typeof compose>> | undefined
afterEach(async () => {
  await box?.dispose()
  box = undefined
})

async function openError(config: Record<string, unknown>, policy: Record<string, unknown> = {}): Promise<{ error: Error & { code?: string; cause?: { code?: string } | undefined }; key: string }> {
  box = await compose({ docker: config, policy })
  const agent = await box.agent()
  const error = await box.pty.spawn(agent, { type: 'shell' }).then(
    () => {
      throw new Error('the terminal opened')
    },
    (caught: Error & { code?: string; cause?: { code?: string } }) => caught,
  )
  return { error, key: agent.session.id }
}

describe.skipIf(dockerSkip)('bad input to the Docker provider', () => {
  it('an image the daemon does not have fails with CONTAINER_IMAGE_MISSING naming docker pull, and makes no container', async () => {
    const { error, key } = await openError({ image: 'conch-no-such-image:never' })
    expect(error.code).toBe('SPAWN_FAILED')
    expect(error.cause?.code).toBe('CONTAINER_IMAGE_MISSING')
    expect(error.message).toContain('the image conch-no-such-image:never is not on the Docker daemon; build or pull it (`docker pull conch-no-such-image:never`')
    expect(await containersOf(key)).toEqual([])
  })

  it('a daemon that does not answer fails with CONTAINER_ENGINE_UNAVAILABLE naming how to start it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-no-daemon-'))
    try {
      const { error, key } = await openError({ host: `unix://${dir}/docker.sock` })
      expect(error.cause?.code).toBe('CONTAINER_ENGINE_UNAVAILABLE')
      expect(error.message).toContain(`cannot reach the Docker daemon: nothing answers at ${dir}/docker.sock (ENOENT); start dockerd`)
      expect(await containersOf(key)).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a socket this user may not open fails with CONTAINER_ENGINE_UNAVAILABLE naming the docker group', () => {
    // The daemon's socket is root:docker 0660: nobody (uid 65534) may not connect to it.
    const provider = new URL('../src/provider.ts', import.meta.url).pathname
    const script = `
      const { dockerProvider } = await import(${JSON.stringify(provider)})
      const { Config } = await import(${JSON.stringify(new URL('../src/config.ts', import.meta.url).pathname)})
      const box = dockerProvider(Config.parse({ image: ${JSON.stringify(IMAGE)} }))
      const agent = { key: 'session-nobody', owner: { onDispose: () => () => {} } }
      try {
        await box.confine(['bash'], { mode: 'workspace-write', workspaceRoot: '/tmp', protectedPaths: [], agent })
        console.log(JSON.stringify({ opened: true }))
      } catch (error) {
        console.log(JSON.stringify({ code: error.code, message: error.message }))
      }`
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      uid: 65534,
      gid: 65534,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: '/tmp', TSX_TSCONFIG_PATH: '' },
      cwd: new URL('..', import.meta.url).pathname,
      timeout: 60_000,
    })
    const answer = JSON.parse(run.stdout.trim().split('\n').pop() || '{}') as { code?: string; message?: string }
    expect(answer.code, run.stderr).toBe('CONTAINER_ENGINE_UNAVAILABLE')
    expect(answer.message).toContain('permission denied on /var/run/docker.sock (EACCES); run conch as a user in the docker group')
  })

  it('a program only this host has (a pooled CLI) does not run in the container: its open fails or it exits 127', async () => {
    box = await compose()
    const agent = await box.agent()
    // A program in a host folder outside the workspace, as a pooled CLI's installation is.
    const dir = mkdtempSync(join(tmpdir(), 'conch-host-only-'))
    const program = join(dir, 'cli')
    writeFileSync(program, '#!/bin/sh\necho ran\n', { mode: 0o755 })
    try {
      // The exec's shell fails to find it: seen by the open (the exec ended) or as the program's exit.
      const outcome = await box.pty.spawn(agent, { type: 'shell', command: program }).then(
        async ({ sessionId }) => {
          const exited = await until(async () => (await box!.pty.list(agent)).find((session) => session.sessionId === sessionId && session.status.state === 'exited'))
          return JSON.stringify(exited!.status)
        },
        (error: Error) => error.message,
      )
      // A third way it shows: the exec is gone before the open has read its terminal from /proc
      // (`cannot start … ENOENT … /proc/<pid>/fd/0`), a race of the open with a process that ends at once.
      expect(outcome).toMatch(/could not start a process in its container \(exit 127\)|"exitCode":127|cannot start a workspace-write terminal: ENOENT: .*\/proc\/\d+\/fd\/0/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('with a daemon reached over tcp, a run_code program fails at once naming the local daemon it needs', async () => {
    // The local daemon behind a tcp listener: this host cannot bind-mount its folder for it.
    const socket = daemonOptions(undefined).socketPath ?? '/var/run/docker.sock'
    const proxy = createServer((client) => client.pipe(connect(socket)).pipe(client))
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    try {
      box = await compose({ runCode: true, docker: { host: `tcp://127.0.0.1:${(proxy.address() as AddressInfo).port}` } })
      const agent = await box.agent()
      const result = await box.call(agent, 'run_code', { code: 'return 1' })
      expect(result.isError).toBe(true)
      expect(result.content[0]!.text).toContain('run_code programs need a Docker daemon on this host (a unix:// socket)')
    } finally {
      await box?.dispose()
      box = undefined
      proxy.close()
    }
  })

  it('a process asking for the network in an agent whose network is none fails naming network allow', async () => {
    box = await compose()
    const agent = await box.agent()
    const error = await box.pty.spawn(agent, { type: 'shell', network: true }).then(
      () => new Error('the terminal opened'),
      (caught: Error & { cause?: { code?: string } }) => caught,
    )
    expect((error as { cause?: { code?: string } }).cause?.code).toBe('AGENT_SANDBOX_FAILED')
    expect(error.message).toContain("cannot give one process the network: its container's network is the agent's, none (in sandbox-policy, allow the hosts it needs with network allow, or set network full)")
    expect(await containersOf(agent.session.id)).toEqual([])
  })

  it('more exposed ports than maxExposedPorts fail the open naming the bound', async () => {
    const { error } = await openError({ maxExposedPorts: 1 }, { expose: [8770, 8771] })
    expect(error.cause?.code).toBe('AGENT_SANDBOX_FAILED')
    expect(error.message).toContain('cannot expose port 8771: it exposes 1 ports already (maxExposedPorts)')
  })
})
