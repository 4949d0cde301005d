/**
 * Pooled agent CLIs in the agent's container, against the real daemon: the real Claude Code and
 * Codex TUIs of `@conch/pty-pool` (in-process, `terminal: conch`) warm-claimed and invoked as
 * execs in their owner agent's container, their installations bound read-only and their homes in
 * the agent's own folder of the pool's state folder, both provisioned when the container is made
 * (at a terminal before any CLI, or at the CLI itself). They reach the fake model the only way out of
 * the container: the agent's network `allow`, through the egress proxy. Attacked as root from the
 * agents' terminals: the installation takes no write, and another agent sees no home.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent } from '@conch/agent'
import * as ptyPool from '@conch/pty-pool'
import { agentHome, startEgressProxy } from '@conch/sandbox'
import SubprocessService from '@conch/subprocess'
import type { FakeModelServer } from '@conch/test-support/fake-model'
import { alive } from '@conch/test-support/procs'
import { CLAUDE_BIN, CODEX_BIN, CONCH_BIN, claudeKind, codexKind, startModel, tempDir } from '@conch/test-support/products'
import { compose, containersOf, dockerSkip } from './harness.ts'

let box: Awaited<ReturnType<typeof compose>> | undefined
let model: FakeModelServer | undefined
const made: string[] = []
const saved: Record<string, string | undefined> = {}
afterEach(async () => {
  await box?.dispose()
  box = undefined
  await model?.close()
  model = undefined
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** Sets a variable of the server's environment (the pool reads its CLIs' variables there) until the test ends. */
function setEnv(name: string, value: string): void {
  if (!(name in saved)) saved[name] = process.env[name]
  process.env[name] = value
}

/** The model's host as the agent's allowlist names it: the egress proxy resolves it to the host's loopback. */
const MODEL_HOST = 'model.test'

/** A composition whose agents' network is `allow: [model.test:<the model's port>]`, with ctx.subprocess and the pool (in-process, conch terminals). */
async function composeWithPool(pool: Record<string, unknown> = {}) {
  model = await startModel()
  const port = new URL(model.url).port
  setEnv('ANTHROPIC_BASE_URL', `http://${MODEL_HOST}:${port}`)
  setEnv('ANTHROPIC_API_KEY', 'sk-test-0123456789abcdefghijklmnop')
  setEnv('FAKE_API_KEY', 'dummy')
  const resolve = async (host: string) => (host === MODEL_HOST ? ['127.0.0.1'] : [])
  box = await compose({ policy: { network: 'allow', allow: [`${MODEL_HOST}:${port}`] }, egress: (options) => startEgressProxy({ ...options, resolve }) })
  await box.ctx.plugin(SubprocessService, SubprocessService.Config.parse({}))
  const dir = tempDir('pool-docker-')
  made.push(dir)
  const stateDir = `${dir}/state`
  const kinds = {
    claude: claudeKind(model),
    codex: codexKind({ ...model, openaiBaseUrl: `http://${MODEL_HOST}:${port}/v1` } as FakeModelServer),
  }
  return { kinds, stateDir, config: { kinds, stateDir, ...pool } }
}

const keyOf = (agent: Agent, kind: string) => ({ owner: agent.id, conversation: agent.session.id, kind, model: '', account: '', bare: false })

/** The processes of container `id` (their cgroup names it) whose program is `bin`. */
function inContainer(id: string, bin: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(id) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === bin
      } catch {
        return false
      }
    })
}

describe.skipIf(dockerSkip)('pooled CLIs in the agent container', { timeout: 180_000 }, () => {
  it('warm Claude Code and Codex run in the agent container, made before them or for them, reach the model through the allowlist, cannot write their installation and leave nothing', async () => {
    const { config, stateDir } = await composeWithPool()
    await box!.ctx.plugin(ptyPool, config)
    const pool = box!.ctx.ptyPool.pool
    const a = await box!.agent()
    const b = await box!.agent()
    // The agent's first process is a terminal: its container is made before the pool asks for a CLI.
    const { sessionId: shell } = await box!.pty.spawn(a, { type: 'shell' })
    expect(await pool.acquireAndInvoke(keyOf(a, 'claude'), 'Q1: claude in the container', { owner: a, cwd: box!.workspace })).toMatchObject({ path: 'booted', text: 'answer 1: claude in the container' })
    expect(await pool.acquireAndInvoke(keyOf(a, 'codex'), 'Q2: codex in the container', { owner: a, cwd: box!.workspace })).toMatchObject({ path: 'booted', text: 'answer 2: codex in the container' })
    expect(await pool.acquireAndInvoke(keyOf(a, 'claude'), 'Q3: claude warm', { owner: a, cwd: box!.workspace })).toMatchObject({ path: 'warm', text: 'answer 3: claude warm' })
    expect(await pool.acquireAndInvoke(keyOf(a, 'codex'), 'Q4: codex warm', { owner: a, cwd: box!.workspace })).toMatchObject({ path: 'warm', text: 'answer 4: codex warm' })
    expect(pool.readFailures()).toEqual([])

    // Each CLI is a process of the agent's one container (its cgroup), at its installation's canonical path.
    const [container] = await containersOf(a.session.id)
    expect(container).toBeDefined()
    const claudeBin = realpathSync(CLAUDE_BIN)
    const codexBin = realpathSync(CODEX_BIN)
    const clis = [...inContainer(container!.Id, claudeBin), ...inContainer(container!.Id, codexBin)]
    expect(clis).toHaveLength(2)
    // Its home is in the agent's own folder of the state folder.
    const homes = agentHome(join(stateDir, 'agents'), a.session.id)
    expect(readdirSync(homes).filter((name) => name.startsWith('home-'))).toHaveLength(2)

    // Root in the agent's terminal cannot change either installation. The probes change nothing
    // where they succeed (the installation is shared): a new file's name, and a file of it (not the
    // running binary, which answers ETXTBSY whatever the mount) opened for appending, nothing written.
    const planted = `planted-${process.pid}-${Date.now()}`
    const files = [join(dirname(claudeBin), planted), join(dirname(claudeBin), 'package.json'), join(dirname(codexBin), planted), join(dirname(codexBin), 'codex-code-mode-host')]
    try {
      const attack = await box!.send(a, shell, `for file in ${files.join(' ')}; do : >> "$file"; done 2>&1 | sed 's/^/attack: /'; echo attack-done`)
      expect(attack.viewport).toContain('attack-done')
      expect(attack.viewport.match(/attack: .*Read-only file system/g)?.length).toBe(4)
      expect(files.filter((file) => file.endsWith(planted)).filter((file) => existsSync(file))).toEqual([])
    } finally {
      for (const file of files.filter((file) => file.endsWith(planted))) rmSync(file, { force: true })
    }

    // Another agent whose first process is its CLI: its container is made for the CLI, and has its own homes only.
    expect(await pool.acquireAndInvoke(keyOf(b, 'claude'), 'Q5: claude first', { owner: b, cwd: box!.workspace })).toMatchObject({ path: 'booted', text: 'answer 5: claude first' })
    const [containerB] = await containersOf(b.session.id)
    clis.push(...inContainer(containerB!.Id, claudeBin))
    expect(clis).toHaveLength(3)
    // Its terminal has no way to the first agent's homes: not its folder, not the state folder.
    const { sessionId: other } = await box!.pty.spawn(b, { type: 'shell' })
    const peek = await box!.send(b, other, `ls -a ${homes} ${stateDir} 2>&1 | sed 's/^/peek: /'; ls ${join(stateDir, 'agents')} 2>&1 | sed 's/^/list: /'; echo peek-done`)
    expect(peek.viewport).toContain('peek-done')
    expect(peek.viewport).toContain(`peek: ls: cannot access '${homes}': No such file or directory`)
    expect(peek.viewport).not.toContain('home-')
    // It has a folder of its own there, and sees nothing else of the folder.
    expect(peek.viewport).toContain(`list: ${basename(agentHome(stateDir, b.session.id))}`)
    expect(peek.viewport).not.toContain(`list: ${basename(homes)}`)

    // The end of the composition removes the containers and every process in them.
    await box!.dispose()
    box = undefined
    expect(await containersOf(a.session.id)).toEqual([])
    expect(await containersOf(b.session.id)).toEqual([])
    expect(clis.filter(alive)).toEqual([])
  })

  it('a managed worker, which cannot join the agent container, is refused at load naming worker in-process', async () => {
    const { config } = await composeWithPool({ worker: 'managed', supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'] } })
    expect(() => new ptyPool.PtyPoolService(box!.ctx, config)).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringContaining('set worker: "in-process" (each CLI then runs in its agent\'s container)') }),
    )
  })
})
