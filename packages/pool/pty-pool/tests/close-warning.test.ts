/**
 * The warning a session's close gives about processes it left: only for a process that is really
 * there. An owner disposed before the pool's shutdown (as at every composition's disposal) has
 * closed its CLI with the terminal backend's proof; the pool's own close then finds the terminal
 * gone, and says nothing. A reported survivor that is still running is named.
 */
import { spawn } from 'node:child_process'
import { afterEach, describe, expect, it } from 'vitest'
import { alive } from '@conch/test-support/procs'
import { until } from '@conch/test-support/wait'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, ptyTerminals, type PoolKey, type TerminalFactory } from '../src/index.ts'
import { sentinelRepl } from './repl.ts'
import { poolScratch, terminalStack, unconfinedTerminals } from './stack.ts'

const scratch = poolScratch()
const unconfined = unconfinedTerminals()
const generic = (repl: string) => ({ generic: { command: repl, env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' } })
const keyOf = (owner: string): PoolKey => ({ owner, conversation: 'c', kind: 'generic', model: '', account: '', bare: false })
const leftBehind: number[] = []
afterEach(() => {
  for (const pid of leftBehind.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL')
})

describe('the warning about processes a closed session left', { timeout: 60_000 }, () => {
  it('is not given when the owner’s disposal already closed the CLI and nothing is left', async () => {
    const dir = scratch.folder('pool-close-warning-')
    const { root } = await terminalStack(scratch.fibers, { mode: 'workspace-write', workspaceRoot: dir })
    const warnings: string[] = []
    const pool = new PtyPool(loadPoolConfig({ kinds: generic(sentinelRepl(dir)), stateDir: `${dir}/state`, cwd: dir }, {}, BUILTIN_KINDS), {
      terminals: ptyTerminals({ pty: root.pty }),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      warn: (message) => warnings.push(message),
    })
    const agent = await root.agents.create({ workspaceRoot: dir })
    expect(await pool.acquireAndInvoke(keyOf(agent.id), 'hello', { owner: agent })).toMatchObject({ path: 'booted', text: 'echo: hello' })
    const [pid] = pool.pids()
    await root.agents.dispose(agent)
    expect(alive(pid!)).toBe(false)
    await pool.shutdown()
    expect(warnings.filter((message) => message.includes('left processes'))).toEqual([])
  })

  it('names a survivor that is still running, and only it', async () => {
    const dir = scratch.folder('pool-close-survivor-')
    const survivor = spawn('sleep', ['300'], { stdio: 'ignore' })
    leftBehind.push(survivor.pid!)
    const gone = spawn('true', [], { stdio: 'ignore' })
    await new Promise((resolve) => gone.once('exit', resolve))
    // A terminal whose close reports two processes left: one running, one that has exited.
    const terminals: TerminalFactory = async (options) => {
      const terminal = await unconfined(options)
      const close = terminal.close.bind(terminal)
      return Object.assign(terminal, { close: async () => ({ ...(await close()), survivors: [survivor.pid!, gone.pid!] }) })
    }
    const warnings: string[] = []
    const pool = new PtyPool(loadPoolConfig({ terminal: 'unconfined', kinds: generic(sentinelRepl(dir)), stateDir: `${dir}/state`, cwd: dir }, {}, BUILTIN_KINDS), {
      terminals,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      warn: (message) => warnings.push(message),
    })
    expect(await pool.acquireAndInvoke(keyOf('a'), 'hello')).toMatchObject({ path: 'booted' })
    await pool.shutdown()
    expect(warnings).toEqual([`pool: closing the generic session left processes ${survivor.pid}`])
    await until(() => alive(survivor.pid!), 1000, 'the survivor')
  })
})
