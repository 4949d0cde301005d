/**
 * The egress proxy with real curl: curl reaches the proxy's unix socket through a TCP relay on
 * the host's loopback, the upstream servers listen on the host's own addresses, and names are
 * mapped to them by the proxy's `resolve` (no real network traffic, no DNS).
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { connect, createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hostPatternProblem, isHostOwnAddress, startEgressProxy, type EgressProxy, type EgressProxyOptions } from '../src/index.ts'

/** A non-loopback address of this machine (undefined when there is none). */
const outward = Object.values(networkInterfaces())
  .flat()
  .find((entry) => entry !== undefined && entry.family === 'IPv4' && !entry.internal)?.address

let folder: string
let upstream: Server
let outwardServer: Server | undefined
let upstreamPort: number
let outwardPort: number
const seen: IncomingHttpHeaders[] = []

const listen = (server: Server | TcpServer, host: string): Promise<number> =>
  new Promise((resolve) => server.listen(0, host, () => resolve((server.address() as AddressInfo).port)))

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'conch-egress-'))
  const serve = (label: string) =>
    createServer((req, res) => {
      seen.push(req.headers)
      res.setHeader('keep-alive', 'timeout=5')
      res.end(`${label} ${req.method} ${req.url}`)
    })
  upstream = serve('loopback')
  upstreamPort = await listen(upstream, '127.0.0.1')
  if (outward !== undefined) {
    outwardServer = serve('outward')
    outwardPort = await listen(outwardServer, outward)
  }
})

afterAll(async () => {
  await new Promise((resolve) => upstream.close(resolve))
  if (outwardServer) await new Promise((resolve) => outwardServer!.close(resolve))
  rmSync(folder, { recursive: true, force: true })
})

const names: Record<string, string[]> = {
  'api.example.test': ['127.0.0.1'],
  'sub.wild.test': outward ? [outward] : ['192.0.2.1'],
  'loop.wild.test': ['127.0.0.1'],
  'meta.wild.test': ['169.254.169.254'],
  'mapped.wild.test': ['::ffff:127.0.0.1'],
}
const resolve = async (host: string): Promise<string[]> => names[host] ?? []

interface Running {
  proxy: EgressProxy
  relayPort: number
  refused: string[]
  stop(): Promise<void>
}

/** The proxy on a fresh socket, and a TCP relay to it on the host's loopback for curl. */
async function running(allow: string[], extra: Partial<EgressProxyOptions> = {}): Promise<Running> {
  const refused: string[] = []
  const socketPath = join(folder, `proxy-${Math.random().toString(36).slice(2)}.sock`)
  const proxy = await startEgressProxy({ socketPath, allow, resolve, onRefused: (host) => refused.push(host), ...extra })
  const relay = createTcpServer((client) => {
    const inner = connect(socketPath)
    client.pipe(inner).pipe(client)
    inner.on('error', () => client.destroy())
    client.on('error', () => inner.destroy())
  })
  const relayPort = await listen(relay, '127.0.0.1')
  return {
    proxy,
    relayPort,
    refused,
    async stop() {
      await proxy.close()
      await new Promise((done) => relay.close(done))
    },
  }
}

interface Curl {
  code: number
  status: string
  body: string
  stderr: string
}

/** curl through the proxy: `tunnel` sends CONNECT (-p), otherwise a plain absolute-URI request. */
function curl(proxyPort: number, url: string, args: string[] = []): Promise<Curl> {
  return new Promise((done) => {
    execFile(
      'curl',
      ['-sS', '--max-time', '20', '--noproxy', '', '-x', `http://127.0.0.1:${proxyPort}`, '-w', '\n%{http_code} %{http_connect}', ...args, url],
      { env: { PATH: process.env['PATH'] } },
      (error, stdout, stderr) => {
        const lines = stdout.split('\n')
        const status = lines.pop() ?? ''
        done({ code: typeof error?.code === 'number' ? error.code : 0, status, body: lines.join('\n'), stderr })
      },
    )
  })
}

describe('egress proxy', () => {
  it('forwards plain HTTP to an allowed host without the hop-by-hop headers', async () => {
    const run = await running([`api.example.test:${upstreamPort}`])
    try {
      seen.length = 0
      const result = await curl(run.relayPort, `http://api.example.test:${upstreamPort}/x?y=1`, [
        '-H',
        'Proxy-Authorization: Basic c2VjcmV0',
        '-H',
        'Connection: close, X-Private',
        '-H',
        'X-Private: 1',
      ])
      expect(result.body).toBe('loopback GET /x?y=1')
      expect(result.status).toBe('200 000')
      expect(seen[0]?.['host']).toBe(`api.example.test:${upstreamPort}`)
      expect(seen[0]).not.toHaveProperty('proxy-authorization')
      expect(seen[0]).not.toHaveProperty('x-private')
      expect(seen[0]).not.toHaveProperty('proxy-connection')
    } finally {
      await run.stop()
    }
  })

  it('tunnels CONNECT to an allowed host', async () => {
    const run = await running([`api.example.test:${upstreamPort}`])
    try {
      const result = await curl(run.relayPort, `http://api.example.test:${upstreamPort}/tunnelled`, ['-p'])
      expect(result.body).toBe('loopback GET /tunnelled')
      expect(result.status).toBe('200 200')
    } finally {
      await run.stop()
    }
  })

  it('allows 443 through CONNECT and 80 for http:// to a pattern without a port, and refuses any other port naming it', async () => {
    const run = await running(['api.example.test', `*.wild.test:${upstreamPort}`])
    try {
      const tunnel = await curl(run.relayPort, `http://api.example.test:${upstreamPort}/`, ['-p'])
      expect(tunnel.status).toBe('000 403')
      const plain = await curl(run.relayPort, `http://api.example.test:${upstreamPort}/`)
      expect(plain.status).toBe('403 000')
      expect(plain.body).toBe(`blocked api.example.test — port ${upstreamPort} is not in the allowlist (http:// reaches 80 unless a pattern names host:port)`)
      // A plain request to 443, or a tunnel to 80, is another port than the default for its kind.
      expect((await curl(run.relayPort, 'http://api.example.test:443/')).status).toBe('403 000')
      expect((await curl(run.relayPort, 'http://api.example.test:80/', ['-p'])).status).toBe('000 403')
      expect(run.refused).toEqual(['api.example.test', 'api.example.test', 'api.example.test', 'api.example.test'])
      // The default ports pass the allowlist (nothing listens there: the proxy's 502 or the server's answer, never a 403).
      expect((await curl(run.relayPort, 'http://api.example.test:443/', ['-p'])).status).not.toMatch(/403/)
      expect((await curl(run.relayPort, 'http://api.example.test/')).status).not.toMatch(/403/)
      expect(run.refused).toHaveLength(4)
      // A wildcard with a port allows that port alone (the name then meets the check of its address), and no default one.
      expect((await curl(run.relayPort, `http://loop.wild.test:${upstreamPort}/`)).body).toMatch(/^blocked loop\.wild\.test — resolves to the host's own address/)
      expect((await curl(run.relayPort, 'http://loop.wild.test/')).body).toBe('blocked loop.wild.test — port 80 is not in the allowlist (http:// reaches 80 unless a pattern names host:port)')
    } finally {
      await run.stop()
    }
  })

  it('refuses a host outside the allowlist with 403 and names it once', async () => {
    const run = await running([`api.example.test:${upstreamPort}`])
    try {
      const plain = await curl(run.relayPort, `http://evil.example.test:${upstreamPort}/`)
      expect(plain.status).toBe('403 000')
      expect(plain.body).toBe('blocked evil.example.test — not in the allowlist')
      const tunnel = await curl(run.relayPort, `http://Evil.Example.Test:${upstreamPort}/`, ['-p', '-v'])
      expect(tunnel.code).toBe(56) // curl: CONNECT refused
      expect(tunnel.status).toBe('000 403')
      expect(run.refused).toEqual(['evil.example.test', 'evil.example.test'])
    } finally {
      await run.stop()
    }
  })

  it('matches hosts case-insensitively, without the trailing dot', async () => {
    const run = await running([`API.example.TEST:${upstreamPort}`])
    try {
      for (const args of [[], ['-p']]) {
        const result = await curl(run.relayPort, `http://Api.Example.Test.:${upstreamPort}/dot`, args)
        expect(result.body).toBe('loopback GET /dot')
      }
      expect(run.refused).toEqual([])
    } finally {
      await run.stop()
    }
  })

  it('lets *.name match subdomains only, never the name itself', async () => {
    // The host's outward address stands for a remote one here: none of its interfaces counts as its own.
    const run = await running([`*.wild.test:${upstreamPort}`, ...(outward === undefined ? [] : [`*.wild.test:${outwardPort}`])], { interfaceAddresses: () => [] })
    try {
      const bare = await curl(run.relayPort, `http://wild.test:${upstreamPort}/`, ['-p'])
      expect(bare.status).toBe('000 403')
      expect(run.refused).toEqual(['wild.test'])
      const evil = await curl(run.relayPort, `http://evilwild.test:${upstreamPort}/`)
      expect(evil.body).toBe('blocked evilwild.test — not in the allowlist')
      if (outward !== undefined) {
        const sub = await curl(run.relayPort, `http://sub.wild.test:${outwardPort}/sub`, ['-p'])
        expect(sub.body).toBe('outward GET /sub')
      }
    } finally {
      await run.stop()
    }
  })

  it("refuses a wildcard-matched name that resolves to the host's own loopback or metadata address", async () => {
    const run = await running([`*.wild.test:${upstreamPort}`])
    try {
      for (const [host, address] of [
        ['loop.wild.test', '127.0.0.1'],
        ['meta.wild.test', '169.254.169.254'],
        ['mapped.wild.test', '::ffff:127.0.0.1'],
      ] as const) {
        for (const args of [[], ['-p']]) {
          const result = await curl(run.relayPort, `http://${host}:${upstreamPort}/`, args)
          expect(result.status).toMatch(/403/)
          if (args.length === 0) {
            expect(result.body).toBe(`blocked ${host} — resolves to the host's own address ${address}; only an exact pattern (not a wildcard) reaches it`)
          }
        }
      }
      expect(run.refused).toHaveLength(6)
    } finally {
      await run.stop()
    }
  })

  it.runIf(outward !== undefined)("refuses a wildcard-matched name that resolves to an address of the host's own interfaces", async () => {
    const run = await running([`*.wild.test:${outwardPort}`])
    try {
      for (const args of [[], ['-p']]) {
        const result = await curl(run.relayPort, `http://sub.wild.test:${outwardPort}/`, args)
        expect(result.status).toMatch(/403/)
        if (args.length === 0) expect(result.body).toBe(`blocked sub.wild.test — resolves to the host's own address ${outward}; only an exact pattern (not a wildcard) reaches it`)
      }
      expect(run.refused).toEqual(['sub.wild.test', 'sub.wild.test'])
    } finally {
      await run.stop()
    }
  })

  it('reaches an IP literal only when the allowlist lists that address', async () => {
    const closed = await running([`api.example.test:${upstreamPort}`, `*.wild.test:${upstreamPort}`])
    try {
      for (const host of ['127.0.0.1', '2130706433', '127.1', '0x7f.1', '[::1]', '[::ffff:127.0.0.1]', 'localhost']) {
        for (const args of [[], ['-p']]) {
          const result = await curl(closed.relayPort, `http://${host}:${upstreamPort}/`, args)
          expect(result.body, `${host} ${args}`).not.toMatch(/^loopback/)
          expect(result.status, `${host} ${args}`).toMatch(/403/)
        }
      }
    } finally {
      await closed.stop()
    }
    const open = await running([`127.0.0.1:${upstreamPort}`])
    try {
      for (const args of [[], ['-p']]) expect((await curl(open.relayPort, `http://127.0.0.1:${upstreamPort}/ip`, args)).body).toBe('loopback GET /ip')
    } finally {
      await open.stop()
    }
  })

  it('answers an oversized request head with 431 and keeps serving', async () => {
    const run = await running([`api.example.test:${upstreamPort}`])
    try {
      const big = await curl(run.relayPort, `http://api.example.test:${upstreamPort}/`, ['-H', `X-Big: ${'a'.repeat(20_000)}`])
      expect(big.status).toBe('431 000')
      const next = await curl(run.relayPort, `http://api.example.test:${upstreamPort}/after`)
      expect(next.body).toBe('loopback GET /after')
    } finally {
      await run.stop()
    }
  })

  it('refuses an IPv6 literal with a zone, and keeps serving', async () => {
    const run = await running([`api.example.test:${upstreamPort}`])
    try {
      const socket = connect(run.proxy.socketPath)
      socket.end('CONNECT [fe80::1%eth0]:80 HTTP/1.1\r\nHost: x\r\n\r\n')
      const answer = await new Promise<string>((done) => {
        let text = ''
        socket.on('data', (chunk) => (text += chunk))
        socket.on('close', () => done(text))
      })
      expect(answer).toMatch(/^HTTP\/1\.1 403 /)
      expect(answer).toContain('blocked fe80::1%eth0 — not in the allowlist')
      expect((await curl(run.relayPort, `http://api.example.test:${upstreamPort}/after`)).body).toBe('loopback GET /after')
    } finally {
      await run.stop()
    }
  })

  it('answers a request that is not for a proxy with 400', async () => {
    const run = await running([`api.example.test:${upstreamPort}`])
    try {
      const socket = connect(run.proxy.socketPath)
      socket.end('GET /local HTTP/1.1\r\nHost: api.example.test\r\n\r\n')
      const answer = await new Promise<string>((done) => {
        let text = ''
        socket.on('data', (chunk) => (text += chunk))
        socket.on('close', () => done(text))
      })
      expect(answer).toMatch(/^HTTP\/1\.1 400 /)
      expect(answer).toContain('this is a proxy: send an absolute http:// URI')
    } finally {
      await run.stop()
    }
  })

  it('close() ends a tunnel in flight and removes the socket', async () => {
    const sink = createTcpServer((socket) => socket.on('data', (chunk) => socket.write(chunk)))
    const port = await listen(sink, '127.0.0.1')
    const run = await running([`api.example.test:${port}`])
    try {
      const client: Socket = connect(run.proxy.socketPath)
      const established = new Promise<void>((done) => {
        let text = ''
        client.on('data', (chunk) => {
          text += chunk
          if (text.includes('\r\n\r\nping')) done()
        })
      })
      client.write(`CONNECT api.example.test:${port} HTTP/1.1\r\nHost: api.example.test:${port}\r\n\r\nping`)
      await established
      const ended = new Promise<void>((done) => client.on('close', () => done()))
      await run.stop()
      await ended
      expect(() => statSync(run.proxy.socketPath)).toThrow()
    } finally {
      await new Promise((done) => sink.close(done))
    }
  })

  it('listens on a socket only its user can open, in a private folder only', async () => {
    const run = await running([])
    try {
      expect(statSync(run.proxy.socketPath).mode & 0o777).toBe(0o600)
    } finally {
      await run.stop()
    }
    const open = join(folder, 'shared')
    mkdirSync(open, { mode: 0o755 })
    await expect(startEgressProxy({ socketPath: join(open, 'p.sock'), allow: [] })).rejects.toMatchObject({ code: 'EGRESS_SOCKET_UNSAFE' })
  })

  it('refuses a bad pattern at start, naming it', async () => {
    await expect(startEgressProxy({ socketPath: join(folder, 'bad.sock'), allow: ['ok.test', 'https://x.test'] })).rejects.toMatchObject({
      code: 'INVALID_POLICY',
      message: expect.stringContaining('"https://x.test" is not a host pattern'),
    })
  })
})

describe('hostPatternProblem', () => {
  it.each(['example.com', 'EXAMPLE.com.', '*.example.com', 'localhost', 'a_b.example', '127.0.0.1', '::1', '[::1]', 'xn--bcher-kva.example', 'example.com:8443', '*.example.com:22', '127.0.0.1:5432', '[::1]:8080', '2001:db8::1'])(
    'accepts %s',
    (pattern) => expect(hostPatternProblem(pattern)).toBeUndefined(),
  )
  it.each(['', '*', '*.', '**.example.com', 'a.*.example.com', 'ex*ample.com', 'example.com:0', 'example.com:65536', '[::1]:', 'http://example.com', 'example.com/x', '*.127.0.0.1', '2130706433', '127.1', 'a..b', '-a.example', 'user@example.com'])(
    'refuses %j',
    (pattern) => expect(hostPatternProblem(pattern)).toMatch(/is not a host pattern: .+ \(write example\.com/),
  )
})

describe('isHostOwnAddress', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.8.9.10', true],
    ['0.0.0.0', true],
    ['169.254.169.254', true],
    ['::1', true],
    ['::', true],
    ['fe80::1', true],
    ['fd00:ec2::254', true],
    ['::ffff:127.0.0.1', true],
    ['::ffff:a9fe:a9fe', true],
    ['10.0.0.1', false],
    ['192.0.2.1', false],
    ['2001:db8::1', false],
  ])('%s: %s', (address, own) => expect(isHostOwnAddress(address)).toBe(own))

  it("counts the host's interface addresses, in IPv4-mapped form too", () => {
    for (const address of ['192.0.2.2', '::ffff:192.0.2.2', '::ffff:c000:202']) expect(isHostOwnAddress(address, ['192.0.2.2'])).toBe(true)
    expect(isHostOwnAddress('2001:db8::1', ['2001:DB8:0::1'])).toBe(true)
    expect(isHostOwnAddress('192.0.2.3', ['192.0.2.2'])).toBe(false)
  })
})
