/**
 * The status listener as the pooled CLIs and every terminal with network access see it: a peer on
 * loopback. Idle connections past `status.maxConnections` are closed as they arrive, so they
 * cannot take the descriptors a terminal needs; and what a pooled CLI reads there names no other
 * owner, conversation or process. Real processes: the pool in a composition with bubblewrap-
 * confined conch terminals, a client process holding hundreds of idle connections, and a pooled
 * REPL that runs the fetch itself.
 */
import { spawn, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import * as ptyPool from '../src/index.ts'
import type { PtyPool, PtyPoolService } from '../src/index.ts'
import { poolScratch, terminalStack } from './stack.ts'

const scratch = poolScratch()

/** A REPL of the generic kind that runs each line with sh and answers its output between sentinels. */
function commandRepl(dir: string): string {
  const repl = path.join(dir, 'run.sh')
  writeFileSync(repl, `#!/bin/sh
printf '> '
while IFS= read -r line; do
  out=$(sh -c "$line" 2>&1)
  printf '%s\\n%s\\n%s\\n> ' "$POOL_SENTINEL" "$out" "$POOL_SENTINEL"
done
`)
  chmodSync(repl, 0o755)
  return repl
}

async function compose(status: Record<string, unknown>) {
  const dir = scratch.folder('pool-status-bounds-')
  const wsA = scratch.folder('pool-status-a-')
  const wsB = scratch.folder('pool-status-b-')
  const { root, load } = await terminalStack(scratch.fibers, { mode: 'workspace-write', workspaceRoot: wsA })
  await load(ptyPool, {
    kinds: { generic: { command: commandRepl(dir), env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' } },
    stateDir: `${dir}/state`,
    status,
  })
  const service = root.ptyPool as PtyPoolService
  await service.ready
  const a = await root.agents.create({ workspaceRoot: wsA })
  const b = await root.agents.create({ workspaceRoot: wsB })
  return { root, pool: service.pool as PtyPool, port: service.statusPort()!, a, b, wsB }
}

describe('the status listener as a loopback peer sees it', { timeout: 90_000 }, () => {
  it('closes idle connections past maxConnections, so a terminal still opens', async () => {
    const { root, port, a } = await compose({ maxConnections: 16, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 })
    const clients = 400
    // Another process holds the connections (its descriptors are its own), and reports each close.
    const holder = spawn(process.execPath, ['-e', `
      const net = require('node:net')
      let connected = 0, closed = 0
      for (let i = 0; i < ${clients}; i++) {
        const socket = net.connect(${port}, '127.0.0.1')
        socket.on('connect', () => { if (++connected === ${clients}) console.log('connected') })
        socket.on('error', () => {})
        socket.on('close', () => console.log('closed ' + ++closed))
      }
      setInterval(() => {}, 60000)`], { stdio: ['ignore', 'pipe', 'inherit'] })
    const saved = spawnSync('prlimit', ['--pid', String(process.pid), '--nofile', '--raw', '--noheadings', '--output', 'SOFT,HARD'], { encoding: 'utf8' }).stdout.trim().split(/\s+/)
    try {
      let closed = 0
      let connected = false
      createInterface({ input: holder.stdout! }).on('line', (line) => {
        if (line === 'connected') connected = true
        else closed = Number(line.split(' ')[1])
      })
      // This process may hold 200 more descriptors than it has open: fewer than the clients.
      const limit = readdirSync('/proc/self/fd').length + 200
      spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${limit}:${saved[1]}`])
      await until(() => connected, 30_000, 'the clients to connect')
      await until(() => closed >= clients - 16, 30_000, `the listener to close ${clients - 16} connections past its cap (closed so far: ${closed})`)
      const opened = await root.pty.spawn(a, { type: 'shell' })
      const done = await root.pty.startSend(a, opened.sessionId, { text: 'echo opened-$((6*7))', submit: true }).done
      expect(done.viewport).toContain('opened-42')
      await root.pty.close(a, opened.sessionId)
      expect(closed).toBe(clients - 16)
    } finally {
      spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${saved[0]}:${saved[1]}`])
      holder.kill('SIGKILL')
    }
  })

  it('shows a pooled CLI no owner, conversation or process of any session', async () => {
    const { pool, port, a, b, wsB } = await compose({})
    const keyOf = (agent: typeof a) => ({ owner: agent.id, conversation: agent.session.id, kind: 'generic', model: '', account: '', bare: false })
    expect(await pool.acquireAndInvoke(keyOf(a), 'echo a-is-here', { owner: a })).toMatchObject({ text: 'a-is-here' })
    const [pidA] = pool.pids()
    const file = path.join(wsB, 'status.json')
    const fetchIt = `node -e "fetch(process.argv[1]).then((r) => r.text()).then((t) => require('fs').writeFileSync(process.argv[2], t))" http://127.0.0.1:${port}/api/runtime/status ${file} && echo fetched`
    expect(await pool.acquireAndInvoke(keyOf(b), fetchIt, { owner: b })).toMatchObject({ text: 'fetched' })
    const body = readFileSync(file, 'utf8')
    const status = JSON.parse(body)
    expect(status.sessions).toEqual([
      { kind: 'generic', model: '', bare: false, state: 'idle', turns: 1 },
      { kind: 'generic', model: '', bare: false, state: 'busy', turns: 0 },
    ])
    for (const secret of [a.id, a.session.id, b.id, b.session.id, String(pidA)]) expect(body).not.toContain(secret)
  })
})
