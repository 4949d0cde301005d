/**
 * run_code and a terminal's node under network `allow`, under real bubblewrap as root: fetch
 * reaches an allowed host through the agent's egress proxy (Node 20's own fetch ignores the proxy
 * variables: the sandbox's Node preload routes it, for both), and a host the proxy refuses is
 * named in the result.
 */
import { spawnSync } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startEgressProxy } from '@conch/sandbox'
import { RUN_CODE } from '../src/index.ts'
import { boot, type Harness } from './harness.ts'

const asRoot = process.platform === 'linux' && process.getuid?.() === 0 && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

describe.runIf(asRoot)('run_code under network allow (bubblewrap, as root)', () => {
  let site: Server
  let port: number
  let h: Harness
  beforeAll(async () => {
    site = createServer((request, response) => response.end(`SITE-REACHED ${request.headers.host}`))
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
    port = (site.address() as { port: number }).port
    h = await boot({
      terminals: 'local',
      network: { network: 'allow', allow: [`allowed.test:${port}`] },
      // Names ending in .test resolve to the host's loopback, where the site listens: no real network.
      egress: { startEgressProxy: (options) => startEgressProxy({ ...options, resolve: async (host) => [host.endsWith('.test') ? '127.0.0.1' : host] }) },
    })
  })
  afterAll(async () => {
    await h?.dispose()
    await new Promise<void>((resolve) => site.close(() => resolve()))
  })

  it('fetch reaches the allowed host; the refused one is a [network: blocked …] note and meta.networkRefused', async () => {
    const code = [
      `console.log(await (await fetch('http://allowed.test:${port}/')).text())`,
      `await fetch('http://refused.test:${port}/').catch((e) => console.log('refused:', e.message))`,
      'return null',
    ].join('\n')
    const result = await h.call(RUN_CODE, { code })
    const text = result.content.map((part) => ('text' in part ? part.text : '')).join('')
    expect(text).toMatch(new RegExp(`^SITE-REACHED allowed\\.test:${port}\\nrefused: fetch failed\\nnull\\n\\[network: blocked refused\\.test — not in the allowlist\\]\\n\\[run_code: ok in \\d+ ms, 0 tool calls\\]$`))
    expect(result.meta).toMatchObject({ status: 'ok', networkRefused: ['refused.test'] })
  })

  it("a terminal's node fetches the allowed host through the proxy; the refused one fails with the proxy's refusal named", async () => {
    const opened = await h.call('terminal_open', { type: 'shell' })
    const sessionId = String((opened.meta as { sessionId: string }).sessionId)
    const fetched = (host: string) => `fetch('http://${host}:${port}/').then((r) => r.text()).then((t) => console.log('BODY', t), (e) => console.log('FAILED', e.cause?.message ?? e.message))`
    const allowed = await h.text('terminal_send', { sessionId, text: `node -e "${fetched('allowed.test')}"`, timeoutMs: 30_000 })
    expect(allowed).toMatch(new RegExp(`^BODY SITE-REACHED allowed\\.test:${port}$`, 'm'))
    const refused = await h.text('terminal_send', { sessionId, text: `node -e "${fetched('refused.test')}"`, timeoutMs: 30_000 })
    // undici tunnels http:// through the proxy too (CONNECT) and words the 403 as a cancelled
    // request; the send's result names the host the proxy refused.
    expect(refused).toMatch(/^FAILED Request was cancelled\.$/m)
    expect(refused).toMatch(/^\[network: blocked refused\.test — not in the allowlist\]$/m)
  })
})
