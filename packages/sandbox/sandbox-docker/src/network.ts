/**
 * An agent container's network relay, seen from the host: net-relay.cjs started in the
 * container's network namespace (`nsenter --net`: no program needed in the image; CAP_SYS_ADMIN
 * here), with a private host folder for its unix sockets. It ends with conch (stdin) or at `close`.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { currentOwner, OWNER_TAG, ownerTag, type ExposedPort } from '@conch/sandbox'
import { resolveExecutable, systemFolders } from '@conch/subprocess'

const NET_RELAY = fileURLToPath(new URL('./net-relay.cjs', import.meta.url))

/**
 * A private host folder (mode 0700) named after the conch that made it,
 * `conch-docker-<kind>-<pidns>-<pid>-<start>-<random>` (`ownerTag`), so that one whose conch is
 * gone can be removed. Kinds: `net` (the relay's sockets), `run` (channels, shim, program files).
 */
export const OWNED_FOLDER = new RegExp(`^conch-docker-(?:net|run)-${OWNER_TAG}-[A-Za-z0-9]+$`)

/** Makes a private host folder of `kind` for this conch. */
export function ownedFolder(kind: 'net' | 'run'): string {
  const owner = currentOwner() ?? { pidns: '0', pid: process.pid, startTime: '0' }
  return mkdtempSync(join(tmpdir(), `conch-docker-${kind}-${ownerTag(owner)}-`))
}

export interface NetRelay {
  /** The private host folder of its unix sockets. */
  readonly folder: string
  /** A port of the container's loopback carried to the unix socket `socketPath` on the host. */
  egress(socketPath: string): Promise<number>
  /** A host listener on 127.0.0.1 carried to the container's 127.0.0.1:`port`; undefined past `limit` ports. */
  expose(port: number, limit: number): Promise<ExposedPort> | undefined
  /** Ends the relay (resolving once it has exited), closes the listeners and their connections, removes the folder. */
  close(): Promise<void>
}

/**
 * Starts the relay in the network namespace of host pid `pid` (the container's init). A request
 * not answered within `answerTimeoutMs` fails and ends the relay (a late answer would be misread).
 */
export function startNetRelay(pid: number, answerTimeoutMs: number): NetRelay {
  const folder = ownedFolder('net')
  // A host program: taken from the system's folders only, never from a PATH folder a sandbox may write.
  const nsenter = resolveExecutable('nsenter', systemFolders(process.env['PATH'] ?? '')) ?? '/usr/bin/nsenter'
  const child = spawn(nsenter, [`--net=/proc/${pid}/ns/net`, '--', process.execPath, NET_RELAY], { stdio: ['pipe', 'pipe', 'inherit'] })
  // A relay that cannot start or has ended closes its stdout: a request then says it exited.
  child.on('error', () => {})
  child.stdin.on('error', () => {})
  const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  let turn: Promise<unknown> = Promise.resolve()
  const ask = (request: object): Promise<Record<string, unknown>> => {
    const asked = turn.then(async () => {
      child.stdin.write(`${JSON.stringify(request)}\n`)
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL')
          reject(new Error(`its network relay did not answer within ${answerTimeoutMs} ms (pid ${child.pid}); it was ended`))
        }, answerTimeoutMs)
      })
      const next = await Promise.race([answers.next(), late]).finally(() => clearTimeout(timer))
      if (next.done) throw new Error('its network relay exited')
      const answer = JSON.parse(next.value) as Record<string, unknown>
      if (typeof answer['error'] === 'string') throw new Error(answer['error'])
      return answer
    })
    turn = asked.catch(() => undefined)
    return asked
  }
  const exposed = new Map<number, Promise<ExposedPort>>()
  const servers: Server[] = []
  const connections = new Set<Socket>()

  return {
    folder,
    async egress(socketPath) {
      return Number((await ask({ egress: socketPath })).egress)
    },
    expose(port, limit) {
      let made = exposed.get(port)
      if (made !== undefined) return made
      if (exposed.size >= limit) return undefined
      made = (async () => {
        const socketPath = join(folder, `expose-${port}.sock`)
        await ask({ expose: port, socket: socketPath })
        const server = createServer((client) => {
          connections.add(client)
          client.on('close', () => connections.delete(client))
          const upstream = connect(socketPath)
          client.pipe(upstream).pipe(client)
          client.on('error', () => upstream.destroy())
          upstream.on('error', () => client.destroy())
        })
        servers.push(server)
        await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
        return { port, hostPort: (server.address() as AddressInfo).port }
      })()
      exposed.set(port, made)
      made.catch(() => exposed.get(port) === made && exposed.delete(port))
      return made
    },
    async close() {
      // Ended only once reaped: what called close may check at once that nothing is left.
      const exited = child.pid === undefined || child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
      // A listener closes once its connections are gone: a client's keep-alive one must not hold it.
      for (const client of connections) client.destroy()
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
      rmSync(folder, { recursive: true, force: true })
    },
  }
}
