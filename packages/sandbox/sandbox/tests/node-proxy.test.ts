/**
 * The Node preload that sends fetch through the egress proxy (node-proxy.cjs), in real node
 * processes: it routes fetch only where Node lacks env-proxy support and a proxy variable is set,
 * takes the variables at start, and never keeps a program from starting.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NODE_PROXY_PRELOAD, proxyEnvironment, UNDICI_FOLDER } from '../src/index.ts'

/** Runs `node [flags…] --require <preload> -e program` with only `env` and PATH (asynchronously: the proxy is served here). */
async function node(program: string, env: Record<string, string>, flags: string[] = []): Promise<{ stdout: string; stderr: string; status: number | null }> {
  const child = spawn(process.execPath, [...flags, '--require', NODE_PROXY_PRELOAD, '-e', program], { env: { PATH: process.env['PATH'] ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
  const [status] = (await once(child, 'close')) as [number | null]
  return { stdout, stderr, status }
}

/** A program that prints whether fetch is the preload's, then what a fetch of `url` gives. */
const probe = (url: string) => `console.log('ROUTED', fetch.toString().includes('route()')); fetch(${JSON.stringify(url)}).then((r) => r.text()).then((t) => console.log('BODY', t), (e) => console.log('FAILED', e.cause?.message ?? e.message))`

describe('the Node preload (node-proxy.cjs)', () => {
  let proxy: Server
  let site: Server
  let proxyUrl: string
  const seen: string[] = []
  let folder: string
  beforeAll(async () => {
    // A tunnelling proxy in miniature (undici tunnels http:// too): every CONNECT reaches `site`.
    site = createServer((request, response) => response.end(`VIA-PROXY ${request.headers.host}${request.url}`))
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
    proxy = createServer()
    proxy.on('connect', (request: IncomingMessage, client: Socket) => {
      seen.push(`CONNECT ${request.url}`)
      const upstream = connect((site.address() as AddressInfo).port, '127.0.0.1', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
        upstream.pipe(client).pipe(upstream)
      })
      upstream.on('error', () => client.destroy())
      client.on('error', () => upstream.destroy())
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`
    folder = mkdtempSync(join(tmpdir(), 'conch-node-proxy-'))
  })
  afterAll(async () => {
    proxy.closeAllConnections()
    site.closeAllConnections()
    await Promise.all([proxy, site].map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
    rmSync(folder, { recursive: true, force: true })
  })

  it('names itself in NODE_OPTIONS, quoted, and undici by its folder, with the proxy variables', () => {
    expect(UNDICI_FOLDER).toBeDefined()
    expect(proxyEnvironment(8080)).toMatchObject({ NODE_USE_ENV_PROXY: '1', NODE_OPTIONS: `--require "${NODE_PROXY_PRELOAD}"`, NODE_PROXY_UNDICI: UNDICI_FOLDER })
    expect(Object.keys(proxyEnvironment(8080, false))).not.toContain('NODE_OPTIONS')
  })

  it('routes fetch through the proxy the variables named at start, whatever the program sets later', async () => {
    const env = { ...proxyEnvironment(Number(new URL(proxyUrl).port)), HTTP_PROXY: proxyUrl, http_proxy: proxyUrl, NO_PROXY: '', no_proxy: '' }
    const run = await node(`process.env.HTTP_PROXY = process.env.http_proxy = 'http://127.0.0.1:1'; ${probe('http://site.test/page')}`, env)
    expect(run.stdout).toBe('ROUTED true\nBODY VIA-PROXY site.test/page\n')
    // undici's warning that EnvHttpProxyAgent is experimental is not the program's to see.
    expect(run.stderr).toBe('')
    expect(seen).toEqual(['CONNECT site.test:80'])
  })

  it('leaves fetch alone without a proxy variable, and on a Node with env-proxy support', async () => {
    expect((await node(`console.log('ROUTED', fetch.toString().includes('route()'))`, {})).stdout).toBe('ROUTED false\n')
    const newer = join(folder, 'node-24.cjs')
    writeFileSync(newer, `Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '24.0.0' } })\n`)
    const run = await node(`console.log('ROUTED', fetch.toString().includes('route()'))`, { HTTP_PROXY: proxyUrl, NODE_PROXY_UNDICI: UNDICI_FOLDER! }, ['--require', newer])
    expect(run.stdout).toBe('ROUTED false\n')
  })

  it('never keeps a program from starting: without undici fetch rejects saying why; without fetch nothing happens', async () => {
    for (const undici of [undefined, 'relative/undici', folder]) {
      const run = await node(probe('http://site.test/'), { HTTP_PROXY: proxyUrl, ...(undici !== undefined && { NODE_PROXY_UNDICI: undici }) })
      expect(run.status).toBe(0)
      expect(run.stdout).toMatch(new RegExp(`^ROUTED true\\nFAILED fetch cannot go through the network proxy \\(${proxyUrl.replaceAll('.', '\\.')}\\): undici is not loadable here: `))
    }
    const bare = await node(`console.log('STARTED', typeof fetch)`, { HTTP_PROXY: proxyUrl, NODE_PROXY_UNDICI: UNDICI_FOLDER! }, ['--no-experimental-fetch'])
    expect(bare).toMatchObject({ status: 0, stdout: 'STARTED undefined\n' })
  })
})
