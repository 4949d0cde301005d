/**
 * The egress proxy: the one way out of a sandbox whose network is an allowlist. On a unix socket
 * it serves HTTP CONNECT (RFC 9110 §9.3.6) and absolute-form HTTP (RFC 9112 §3.2.2) for the hosts
 * a pattern names. Its matching, resolution, ports and bounds: @conch/sandbox-local's README ("Egress proxy").
 */
import { lookup } from 'node:dns/promises'
import { chmodSync, lstatSync, rmSync, type Stats } from 'node:fs'
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect, isIP, type Socket } from 'node:net'
import { networkInterfaces } from 'node:os'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Duplex } from 'node:stream'
import { SandboxError } from './types.ts'

export interface EgressProxyOptions {
  /** Absolute path of the unix socket to listen on (created 0600; the folder must be private). */
  socketPath: string
  /** Host patterns allowed: exact `example.com`, or `*.example.com` for subdomains only; either may end in `:port`. */
  allow: readonly string[]
  /** Called once per refused request with the host asked for (and why, in the words of the 403 body). */
  onRefused?: (host: string, reason: string) => void
  /** Resolves a host name to its addresses (default: getaddrinfo(3) through `dns.lookup`). */
  resolve?: (host: string) => Promise<string[]>
  /** The addresses of the host's own interfaces, read at each request (default: `os.networkInterfaces()`). */
  interfaceAddresses?: () => string[]
}

export interface EgressProxy {
  readonly socketPath: string
  close(): Promise<void>
}

/** The largest request head accepted, in bytes (larger: `431`). */
const MAX_HEADER_BYTES = 16 * 1024
/** Simultaneous client connections served (more are dropped on arrival). */
const MAX_CONNECTIONS = 256

const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/
/** A last label read as a number by URL parsers and resolvers (decimal, hex, octal). */
const NUMERIC = /^(0x[0-9a-f]*|[0-9]+)$/

/** The port a pattern without one allows: 443 through CONNECT, 80 for a plain `http://` request. */
export const DEFAULT_PORTS = { connect: 443, http: 80 } as const

/** A pattern's host and its port (undefined when it names none); an IP address alone, bracketed or not, has none. */
function splitPattern(pattern: string): { host: string; port: number | undefined } {
  const match = /^(.*[^:]):(\d+)$/.exec(pattern)
  if (match === null || isIP(canonicalHost(pattern)) !== 0 || isIP(match[1]!) === 6) return { host: pattern, port: undefined }
  return { host: match[1]!, port: Number(match[2]) }
}

/** A host as matched: lower-cased, without brackets or a trailing dot; IPv6 in its canonical form. */
function canonicalHost(host: string): string {
  let name = host.toLowerCase()
  if (name.startsWith('[') && name.endsWith(']')) name = name.slice(1, -1)
  if (name.endsWith('.')) name = name.slice(0, -1)
  if (isIP(name) === 6) {
    try {
      name = new URL(`http://[${name}]/`).hostname.slice(1, -1)
    } catch {
      // a zone (`fe80::1%eth0`) has no URL form: kept as written, matched only by itself
    }
  }
  return name
}

function nameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > 253) return 'a host name has 1 to 253 characters'
  const labels = name.split('.')
  if (!labels.every((label) => LABEL.test(label))) return 'each dot-separated label is letters, digits, - or _ (1 to 63, not starting or ending with -)'
  if (NUMERIC.test(labels.at(-1)!)) return 'a name ending in a number is read as an IP address; write the address itself'
  return undefined
}

/**
 * Why `pattern` is not an allowlist host pattern, or undefined when it is one: `example.com`,
 * `*.example.com`, an IPv4 address, or an IPv6 address (bracketed or not), each optionally with
 * `:port` (an IPv6 address bracketed then). No scheme, path, or other wildcard.
 */
export function hostPatternProblem(pattern: string): string | undefined {
  const explain = (why: string) => `${JSON.stringify(pattern)} is not a host pattern: ${why} (write example.com, *.example.com or an IP address, each with :port for a port other than 443 and 80)`
  if (typeof pattern !== 'string') return explain('not a string')
  const { host: given, port } = splitPattern(pattern)
  if (port !== undefined && !(port >= 1 && port <= 65535)) return explain('a port is 1 to 65535')
  const host = canonicalHost(given)
  if (isIP(host) !== 0) return undefined
  if (/[/:@?#\s]/.test(host)) return explain('a pattern is a host and a port at most, without scheme or path')
  const wildcard = host.startsWith('*.')
  const name = wildcard ? host.slice(2) : host
  if (name.includes('*')) return explain('the only wildcard is a leading *. for subdomains')
  if (wildcard && isIP(name) !== 0) return explain('a wildcard cannot cover IP addresses')
  const problem = nameProblem(name)
  return problem === undefined ? undefined : explain(problem)
}

/** One allowlist pattern: an exact host (canonical) or a `.suffix`, and its port (undefined: `DEFAULT_PORTS`). */
interface Rule {
  exact?: string
  suffix?: string
  port: number | undefined
}

type Verdict = { allowed: true; exact: boolean } | { allowed: false; port: boolean }

/** Whether `host` (canonical) is allowed at `port` for a request of `kind`, and whether by an exact pattern; refused for its port alone (`port`) when a pattern names the host. */
function judge(host: string, port: number, kind: keyof typeof DEFAULT_PORTS, rules: readonly Rule[]): Verdict {
  const named = isIP(host) !== 0 || nameProblem(host) !== undefined ? rules.filter((rule) => rule.exact === host) : rules.filter((rule) => rule.exact === host || (rule.suffix !== undefined && host.endsWith(rule.suffix)))
  const fits = named.filter((rule) => (rule.port ?? DEFAULT_PORTS[kind]) === port)
  if (fits.length > 0) return { allowed: true, exact: fits.some((rule) => rule.exact !== undefined) }
  return { allowed: false, port: named.length > 0 }
}

/** Loopback, link-local (with cloud metadata services) and unspecified addresses, and those of `interfaces`: the host's own. */
export function isHostOwnAddress(address: string, interfaces: readonly string[] = []): boolean {
  const canonical = canonicalHost(address)
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical)
  const mapped = hex ? [...hex.slice(1).map((word) => parseInt(word, 16))].flatMap((word) => [word >> 8, word & 255]).join('.') : undefined
  if (interfaces.some((own) => canonicalHost(own) === (mapped ?? canonical))) return true
  if (isIP(canonical) === 4 || mapped !== undefined) {
    const [a, b] = (mapped ?? canonical).split('.').map(Number)
    return a === 0 || a === 127 || (a === 169 && b === 254)
  }
  if (canonical === '::' || canonical === '::1' || canonical === 'fd00:ec2::254') return true
  return /^fe[89ab][0-9a-f]:/.test(canonical)
}

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']

/** `headers` without the hop-by-hop ones (RFC 9110 §7.6.1), including those `Connection` names. */
function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = String(headers['connection'] ?? '')
    .split(',')
    .map((token) => token.trim().toLowerCase())
  const drop = new Set([...HOP_BY_HOP, ...named])
  return Object.fromEntries(Object.entries(headers).filter(([key]) => !drop.has(key)))
}

/** `host:port` of a CONNECT target or an authority, or undefined when it is not one. */
function splitAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority)
  const port = Number(match?.[2])
  if (!match || !(port >= 1 && port <= 65535)) return undefined
  return { host: match[1]!, port }
}

const defaultInterfaceAddresses = (): string[] =>
  Object.values(networkInterfaces())
    .flat()
    .flatMap((entry) => (entry === undefined ? [] : [entry.address]))

const defaultResolve = async (host: string): Promise<string[]> => (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address)

/**
 * Serves HTTP CONNECT and plain absolute-URI HTTP over the unix socket; a refused host gets `403`
 * with body `blocked <host> — not in the allowlist`.
 * @throws SandboxError `INVALID_POLICY` naming the first pattern `hostPatternProblem` refuses;
 *   `EGRESS_SOCKET_UNSAFE` when the socket's folder is not a directory of this user's closed to others.
 */
export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  for (const pattern of options.allow) {
    const problem = hostPatternProblem(pattern)
    if (problem !== undefined) throw new SandboxError('INVALID_POLICY', { reason: `network allowlist: ${problem}` })
  }
  const rules = options.allow.map((pattern): Rule => {
    const { host, port } = splitPattern(pattern)
    return host.startsWith('*.') ? { suffix: canonicalHost(host).slice(1), port } : { exact: canonicalHost(host), port }
  })
  const resolve = options.resolve ?? defaultResolve
  const interfaceAddresses = options.interfaceAddresses ?? defaultInterfaceAddresses
  const { socketPath } = options
  privateFolder(socketPath)

  const sockets = new Set<Duplex>()
  const track = (socket: Duplex) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  }

  /** The address to connect to for `host` at `port`, or the reason it is refused (`status` 403) or cannot be reached (502). */
  const route = async (rawHost: string, port: number, kind: keyof typeof DEFAULT_PORTS): Promise<{ address: string } | { status: 403 | 502; host: string; reason: string }> => {
    const host = canonicalHost(rawHost)
    const verdict = judge(host, port, kind, rules)
    if (!verdict.allowed && verdict.port) {
      return { status: 403, host, reason: `port ${port} is not in the allowlist (${kind === 'connect' ? 'CONNECT reaches 443' : 'http:// reaches 80'} unless a pattern names host:port)` }
    }
    if (!verdict.allowed) return { status: 403, host, reason: 'not in the allowlist' }
    if (isIP(host) !== 0) return { address: host }
    let addresses: string[]
    try {
      addresses = await resolve(host)
    } catch {
      addresses = []
    }
    if (addresses.length === 0) return { status: 502, host, reason: 'cannot be resolved' }
    const interfaces = interfaceAddresses()
    const own = addresses.find((address) => isHostOwnAddress(address, interfaces))
    if (own !== undefined && !verdict.exact) {
      return { status: 403, host, reason: `resolves to the host's own address ${own}; only an exact pattern (not a wildcard) reaches it` }
    }
    // IPv4 first: a host without an IPv6 route still reaches a dual-stack name.
    return { address: addresses.sort((a, b) => isIP(a) - isIP(b))[0]! }
  }

  const refused = (host: string, reason: string): string => {
    options.onRefused?.(host, reason)
    return `blocked ${host} — ${reason}`
  }

  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES })
  server.maxConnections = MAX_CONNECTIONS
  server.on('connection', track)
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request'
    if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
    socket.destroy()
  })

  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    const reply = (status: string, body: string) => {
      client.end(`HTTP/1.1 ${status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
    }
    client.on('error', () => client.destroy())
    const target = splitAuthority(req.url ?? '')
    if (target === undefined) return reply('400 Bad Request', `CONNECT needs host:port, not ${JSON.stringify(req.url)}\n`)
    void route(target.host, target.port, 'connect').then((routed) => {
      if (client.destroyed) return
      if ('status' in routed) return reply(routed.status === 403 ? '403 Forbidden' : '502 Bad Gateway', routed.status === 403 ? refused(routed.host, routed.reason) : `${routed.host} ${routed.reason}\n`)
      const upstream = connect({ host: routed.address, port: target.port })
      track(upstream)
      upstream.once('error', (error) => {
        if (!client.destroyed && client.bytesWritten === 0) reply('502 Bad Gateway', `cannot connect to ${target.host}:${target.port}: ${(error as NodeJS.ErrnoException).code ?? error.message}\n`)
        else client.destroy()
      })
      upstream.once('connect', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
        if (head.length > 0) upstream.write(head)
        upstream.pipe(client)
        client.pipe(upstream)
        upstream.on('error', () => client.destroy())
        client.on('close', () => upstream.destroy())
        upstream.on('close', () => client.destroy())
      })
    }).catch(() => client.destroy())
  })

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const text = (status: number, body: string) => {
      if (res.headersSent) return void res.destroy()
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body)
    }
    let url: URL
    try {
      url = new URL(req.url ?? '')
    } catch {
      return text(400, `this is a proxy: send an absolute http:// URI, or CONNECT host:port (got ${JSON.stringify(req.url)})\n`)
    }
    if (url.protocol !== 'http:') return text(400, `only http:// is forwarded; use CONNECT for ${url.protocol}\n`)
    void route(url.hostname, Number(url.port || 80), 'http').then((routed) => {
      if ('status' in routed) return text(routed.status, routed.status === 403 ? refused(routed.host, routed.reason) : `${routed.host} ${routed.reason}\n`)
      const upstream = request(
        { host: routed.address, port: Number(url.port || 80), method: req.method, path: `${url.pathname}${url.search}`, headers: { ...endToEnd(req.headers), host: url.host }, setHost: false, agent: false },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.headers))
          answer.pipe(res)
          answer.on('error', () => res.destroy())
        },
      )
      upstream.on('socket', track)
      upstream.on('error', (error: NodeJS.ErrnoException) => text(502, `cannot connect to ${url.host}: ${error.code ?? error.message}\n`))
      res.on('close', () => upstream.destroy())
      req.pipe(upstream)
    }).catch(() => res.destroy())
  })

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => {
      server.off('error', reject)
      resolve()
    })
  })
  chmodSync(socketPath, 0o600)

  let closing: Promise<void> | undefined
  return {
    socketPath,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const socket of sockets) socket.destroy()
      }).then(() => rmSync(socketPath, { force: true }))),
  }
}

/** Checks that the socket's folder is a real directory of this user's with no access for others, and clears a stale socket. */
function privateFolder(socketPath: string): void {
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0
  const stats = lstatOf(dirname(socketPath))
  if (!stats?.isDirectory() || stats.uid !== uid || (stats.mode & 0o077) !== 0) throw new SandboxError('EGRESS_SOCKET_UNSAFE', { path: socketPath, uid })
  if (lstatOf(socketPath)?.isSocket()) rmSync(socketPath)
}

function lstatOf(path: string): Stats | undefined {
  try {
    return lstatSync(path)
  } catch {
    return undefined
  }
}

/**
 * The preload that sends Node's `fetch` through the proxy on a Node without env-proxy support
 * (before 22.21 and 24): loaded by `NODE_OPTIONS=--require`, it reads the variables below and
 * loads undici from `UNDICI_FOLDER`. A sandbox keeps both readable and unwritable where it sets them.
 */
export const NODE_PROXY_PRELOAD = fileURLToPath(new URL('./node-proxy.cjs', import.meta.url))

/** undici's package folder (canonical), which the preload loads; undefined when it is not installed. */
export const UNDICI_FOLDER = ((): string | undefined => {
  try {
    return dirname(createRequire(NODE_PROXY_PRELOAD).resolve('undici/package.json'))
  } catch {
    return undefined
  }
})()

/**
 * The variables that send a process's HTTP and HTTPS through a relay to the proxy, listening on
 * `port` of its loopback: the `HTTP_PROXY` family, `NODE_USE_ENV_PROXY=1` (Node 22.21 and 24 on),
 * and, with `preload` (default: when undici is installed), `NODE_OPTIONS` naming `NODE_PROXY_PRELOAD`
 * and `NODE_PROXY_UNDICI` naming `UNDICI_FOLDER`. `NODE_OPTIONS` is appended to the process's own
 * (after a space), never put in its place, so what the process is given keeps working.
 */
export function proxyEnvironment(port: number, preload: boolean = UNDICI_FOLDER !== undefined): Record<string, string> {
  const url = `http://127.0.0.1:${port}`
  const none = 'localhost,127.0.0.1,::1'
  const node = preload && UNDICI_FOLDER !== undefined ? { NODE_OPTIONS: `--require ${nodeOptionQuoted(NODE_PROXY_PRELOAD)}`, NODE_PROXY_UNDICI: UNDICI_FOLDER } : {}
  return { HTTP_PROXY: url, HTTPS_PROXY: url, ALL_PROXY: url, http_proxy: url, https_proxy: url, all_proxy: url, NO_PROXY: none, no_proxy: none, NODE_USE_ENV_PROXY: '1', ...node }
}

/** `value` as one word of `NODE_OPTIONS`: in double quotes, `"` and `\` escaped (Node's `ParseNodeOptionsEnvVar`). */
function nodeOptionQuoted(value: string): string {
  return `"${value.replace(/["\\]/g, '\\$&')}"`
}
