/**
 * A program under network `allow`, under real bubblewrap as root: its fetch, and that of a node it
 * starts, goes through the agent's egress proxy (Node 20's fetch ignores HTTP_PROXY by itself; the
 * sandbox's Node preload routes it), an allowed host answers, and a refused one gets the proxy's
 * 403 and is named in the result.
 */
import { spawnSync } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startEgressProxy } from '@conch/sandbox'
import { boot, type Harness } from './harness.ts'

const asRoot = process.platform === 'linux' && process.getuid?.() === 0 && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

describe.runIf(asRoot)('fetch under network allow (bubblewrap, as root)', () => {
  let site: Server
  let port: number
  let h: Harness
  beforeAll(async () => {
    site = createServer((request, response) => response.end(`SITE-REACHED ${request.headers.host}`))
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
    port = (site.address() as { port: number }).port
    h = await boot({
      network: { network: 'allow', allow: [`allowed.test:${port}`] },
      // Names ending in .test resolve to the host's loopback, where the site listens: no real network.
      egress: { startEgressProxy: (options) => startEgressProxy({ ...options, resolve: async (host) => [host.endsWith('.test') ? '127.0.0.1' : host] }) },
    })
  })
  afterAll(async () => {
    await h?.dispose()
    await new Promise<void>((resolve) => site.close(() => resolve()))
  })

  it('an allowed host answers through the proxy; a refused one gets the 403 and is named in the result', async () => {
    const result = await h.run(`
      const allowed = await fetch('http://allowed.test:${port}/')
      const refused = await fetch('http://refused.test:${port}/').then((r) => r.status, (e) => e.message + ': ' + e.cause?.message)
      const child = require('node:child_process').execFileSync(process.execPath, ['-e', "fetch('http://allowed.test:${port}/').then((r) => r.text()).then(console.log)"], { encoding: 'utf8' }).trim()
      return { allowed: [allowed.status, await allowed.text()], refused, child }
    `)
    expect(result.ok ? result.value : result.failure).toEqual({
      allowed: [200, `SITE-REACHED allowed.test:${port}`],
      child: `SITE-REACHED allowed.test:${port}`,
      // undici tunnels http:// through the proxy too (CONNECT): the refused host's 403 fails the
      // tunnel, and undici words it as a cancelled request; the result names the host instead.
      refused: expect.stringMatching(/^fetch failed: /),
    })
    expect(result.sandbox.refused).toEqual(['refused.test'])
  })

  it('a program that rewrites the proxy variables or skips the proxy reaches neither the refused host nor the host loopback', async () => {
    const result = await h.run(`
      process.env.NO_PROXY = process.env.no_proxy = '*'
      process.env.HTTP_PROXY = process.env.http_proxy = 'http://127.0.0.1:1'
      const outcome = (promise) => promise.then((r) => r.status ?? r, (e) => e.cause?.code ?? e.code ?? e.message)
      const http = require('node:http')
      const get = (url) => new Promise((resolve, reject) => http.get(url, (r) => resolve(r.statusCode)).on('error', reject))
      return {
        // The proxy the sandbox named was taken at boot: the rewrite changes nothing.
        allowed: await outcome(fetch('http://allowed.test:${port}/')),
        refused: await fetch('http://refused.test:${port}/').then((r) => r.status, () => 'rejected'),
        // Around the proxy: the agent's own loopback, and no resolver.
        loopback: await outcome(get('http://127.0.0.1:${port}/')),
        direct: await outcome(get('http://refused.test:${port}/')),
      }
    `)
    expect(result.ok ? result.value : result.failure).toEqual({ allowed: 200, refused: 'rejected', loopback: 'ECONNREFUSED', direct: expect.stringMatching(/^(EAI_AGAIN|ENOTFOUND)$/) })
    expect(result.sandbox.refused).toEqual(['refused.test'])
  })

  it("with no proxy variables fetch is Node's own, and a host outside the sandbox stays out of reach", async () => {
    const none = await boot({ network: { network: 'none' } })
    try {
      const result = await none.run(`return [fetch.toString().includes('route()'), await fetch('http://127.0.0.1:${port}/').then((r) => r.status, (e) => e.cause?.code)]`)
      expect(result.ok ? result.value : result.failure).toEqual([false, 'ECONNREFUSED'])
      expect(result.sandbox.refused).toBeUndefined()
    } finally {
      await none.dispose()
    }
  })
})
