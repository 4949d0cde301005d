/**
 * The status listener and /metrics, with a real REPL of the generic kind in the pool (a shell
 * loop that answers with the sentinel framing), and a peer in a network namespace with its
 * own address for the loopback boundary.
 */
import { execFileSync, execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { tempDir } from '@conch/test-support/products'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, startStatusListener, type PoolKey, type StatusListener } from '../src/index.ts'
import { sentinelRepl } from './repl.ts'
import { unconfinedTerminals } from './stack.ts'

const run = promisify(execFile)
const dir = tempDir('pool-status-')
const repl = sentinelRepl(dir)
const terminals = unconfinedTerminals()

const pool = new PtyPool(
  loadPoolConfig({
    // The endpoint is under test, not the terminal: a bare one.
    terminal: 'unconfined',
    kinds: { generic: { command: repl, env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' } },
    stateDir: `${dir}/state`,
    cwd: dir,
    stallMs: 800,
  }, {}, BUILTIN_KINDS),
  { terminals, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, fallback: async ({ prompt }) => `fresh: ${prompt}` },
)
const key: PoolKey = { owner: 'a', conversation: 'c', kind: 'generic', model: '', account: '', bare: false }
let listener: StatusListener

// A namespace whose only route to 127.0.0.1 leads over a veth pair into this host: its packets
// reach the listener with the peer address 10.231.x.2 (route_localnet lets 127/8 cross the link).
const ns = `poolst${process.pid % 100000}`
const hostIf = `pvh${process.pid % 100000}`
const octet = 16 + (process.pid % 200)
function sh(...argv: string[]) {
  execFileSync(argv[0]!, argv.slice(1), { stdio: 'pipe' })
}

beforeAll(async () => {
  listener = await startStatusListener(pool, { host: '127.0.0.1', port: 0 })
  sh('ip', 'netns', 'add', ns)
  sh('ip', 'link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'pvn0', 'netns', ns)
  sh('ip', 'addr', 'add', `10.231.${octet}.1/30`, 'dev', hostIf)
  sh('ip', 'link', 'set', hostIf, 'up')
  sh('sysctl', '-qw', `net.ipv4.conf.${hostIf}.route_localnet=1`)
  sh('ip', '-n', ns, 'addr', 'add', `10.231.${octet}.2/30`, 'dev', 'pvn0')
  sh('ip', '-n', ns, 'link', 'set', 'pvn0', 'up')
  sh('ip', 'netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=1', 'net.ipv4.conf.pvn0.route_localnet=1')
  sh('ip', '-n', ns, 'route', 'add', '127.0.0.1/32', 'via', `10.231.${octet}.1`, 'dev', 'pvn0', 'src', `10.231.${octet}.2`)
})

afterAll(async () => {
  await listener?.close()
  await pool.shutdown()
  try {
    sh('ip', 'link', 'del', hostIf)
  } catch {
    // already gone with the namespace
  }
  sh('ip', 'netns', 'del', ns)
})

async function get(path: string) {
  const response = await fetch(`http://127.0.0.1:${listener.port}${path}`)
  return { status: response.status, text: await response.text() }
}

describe('status endpoint and metrics', { timeout: 30_000 }, () => {
  it('counts what the pool did, in the status JSON and in /metrics', async () => {
    for (let n = 1; n <= 3; n++) expect((await pool.acquireAndInvoke(key, `hello ${n}`)).text).toBe(`echo: hello ${n}`)
    pool.setKillSwitch(true)
    expect(await pool.acquireAndInvoke(key, 'while off')).toMatchObject({ bypass: 'kill-switch' })
    let status = JSON.parse((await get('/api/runtime/status')).text)
    expect(status.kill_switch_active).toBe(true)
    pool.setKillSwitch(false)
    expect(await pool.acquireAndInvoke(key, 'STALL here')).toMatchObject({ fallback: { reason: 'stall' } })
    expect(await pool.acquireAndInvoke(key, 'after')).toMatchObject({ path: 'booted', text: 'echo: after' })

    const response = await get('/api/runtime/status')
    expect(response.status).toBe(200)
    status = JSON.parse(response.text)
    expect(status).toMatchObject({
      kill_switch_active: false,
      pool: { acquires_cache_hit_total: 3, acquires_spawn_total: 2, evicted_unhealthy_total: 1, invokes_ok_total: 4, invokes_empty_total: 0 },
      fallbacks: { stall: 1, boot: 0 },
    })

    const metrics = await get('/metrics')
    expect(metrics.status).toBe(200)
    const families = new Map(parsePrometheusTextFormat(metrics.text).map((family: any) => [family.name, family]))
    const value = (name: string, labels?: Record<string, string>) => {
      const family: any = families.get(name)
      expect(family, name).toBeDefined()
      const sample = family.metrics.find((metric: any) => !labels || Object.entries(labels).every(([k, v]) => metric.labels?.[k] === v))
      return Number(sample.value ?? sample.count)
    }
    expect(value('pty_pool_acquires_cache_hit_total')).toBe(3)
    expect(value('pty_pool_acquires_spawn_total')).toBe(2)
    expect(value('pty_pool_evicted_idle_total')).toBe(0)
    expect(value('pty_pool_evicted_unhealthy_total')).toBe(1)
    expect(value('pty_pool_evicted_shutdown_total')).toBe(0)
    expect(value('pty_pool_invokes_ok_total')).toBe(4)
    expect(value('pty_pool_invokes_empty_total')).toBe(0)
    expect(value('pty_pool_fallbacks_total', { reason: 'stall' })).toBe(1)
    expect(value('pty_pool_fallbacks_total', { reason: 'no_sentinel' })).toBe(0)
    expect(value('pty_pool_invoke_duration_seconds')).toBe(5)
    expect(value('worker_health_misses_total')).toBe(0)
    expect(value('worker_restarts_total')).toBe(0)
    expect(value('pty_pool_managed_worker_active')).toBe(0)
  })

  it('answers 403 to a peer that is not a loopback address', async () => {
    const { stdout } = await run('ip', ['netns', 'exec', ns, 'curl', '-s', '-m', '5', '-w', '\n%{http_code}', `http://127.0.0.1:${listener.port}/api/runtime/status`])
    const [body, code] = stdout.split('\n')
    expect(code).toBe('403')
    expect(JSON.parse(body!)).toMatchObject({ error: 'FORBIDDEN' })
    const { stdout: metrics } = await run('ip', ['netns', 'exec', ns, 'curl', '-s', '-m', '5', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${listener.port}/metrics`])
    expect(metrics).toBe('403')
  })

  it('refuses to bind anything but loopback', async () => {
    await expect(startStatusListener(pool, { host: '0.0.0.0', port: 0 })).rejects.toMatchObject({ code: 'CONFIG_INVALID' })
    await expect(startStatusListener(pool, { host: `10.231.${octet}.1`, port: 0 })).rejects.toMatchObject({ code: 'CONFIG_INVALID' })
  })
})
