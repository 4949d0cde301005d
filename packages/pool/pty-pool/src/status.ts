/**
 * The loopback status listener: `GET /api/runtime/status` (JSON) and `GET /metrics` (Prometheus).
 * Loopback is the authentication (any other peer gets 403), and every pooled CLI is such a peer:
 * the body names no owner, conversation or process, and connections and their times are bounded.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { z } from 'zod'
import { isLoopbackAddress, StatusConfig } from './config.ts'
import { PoolError } from './errors.ts'
import type { PtyPool } from './pool.ts'
import { WorkerSupervisor } from './supervisor.ts'

export interface StatusListener {
  readonly port: number
  readonly host: string
  close(): Promise<void>
}

/** The JSON of `GET /api/runtime/status`. */
export async function statusBody(pool: PtyPool): Promise<Record<string, unknown>> {
  return {
    kill_switch_active: pool.killSwitch(),
    state: pool.state,
    worker: pool.config.worker,
    ...(pool.backend instanceof WorkerSupervisor && { worker_state: pool.backend.state }),
    pool: await pool.metrics.snapshot(),
    fallbacks: await pool.metrics.fallbacksByReason(),
    // Kinds and states only: a peer on loopback may be another owner's CLI.
    sessions: pool.sessionStates().map(({ key, state, turns }) => ({ kind: key.kind, model: key.model, bare: key.bare, state, turns })),
  }
}

/**
 * Starts the listener; `options` is the pool's `status` config (defaults from its schema).
 * @throws PoolError `CONFIG_INVALID` for a host that is not a loopback address.
 */
export async function startStatusListener(pool: PtyPool, input: z.input<typeof StatusConfig>, statusOf: () => Promise<Record<string, unknown>> = () => statusBody(pool)): Promise<StatusListener> {
  const checked = StatusConfig.safeParse(input)
  if (!checked.success) throw new PoolError('CONFIG_INVALID', { field: `status.${checked.error.issues[0]!.path.join('.')}`, problem: checked.error.issues[0]!.message })
  const options = checked.data
  const host = options.host === 'localhost' ? '127.0.0.1' : options.host
  if (!isLoopbackAddress(host)) throw new PoolError('CONFIG_INVALID', { field: 'status.host', problem: `"${options.host}" is not a loopback address; the status endpoint binds 127.0.0.0/8 or ::1 only` })
  const server: Server = createServer({
    headersTimeout: options.headersTimeoutMs,
    requestTimeout: options.requestTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    // How often the two timeouts above are checked (node's default is 30 s).
    connectionsCheckingInterval: Math.min(1_000, options.headersTimeoutMs),
  }, (request, response) => {
    if (!isLoopbackAddress(request.socket.remoteAddress)) {
      response.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'FORBIDDEN', message: 'the runtime status is served to loopback peers only' }))
      return
    }
    const path = (request.url ?? '/').split('?')[0]
    if (request.method !== 'GET') {
      response.writeHead(405, { allow: 'GET' }).end()
      return
    }
    const reply = async () => {
      if (path === '/api/runtime/status') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(await statusOf()))
      } else if (path === '/metrics') {
        response.writeHead(200, { 'content-type': pool.metrics.registry.contentType }).end(await pool.metrics.registry.metrics())
      } else {
        response.writeHead(404).end()
      }
    }
    reply().catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500)
      response.end(String((error as Error).message))
    })
  })
  // Node closes a connection that arrives while this many are open (net.Server maxConnections).
  server.maxConnections = options.maxConnections
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, host, () => resolve())
  })
  const address = server.address() as AddressInfo
  return {
    port: address.port,
    host,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}
