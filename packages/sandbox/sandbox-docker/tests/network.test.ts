/**
 * The network relay of an agent's container, started here in this process's own network
 * namespace (nsenter needs root, as with a container's): its end is proved before `close` returns.
 */
import { existsSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { childrenNaming } from '@conch/test-support/procs'
import { startNetRelay } from '../src/network.ts'

const relays = (): number[] => childrenNaming('net-relay.cjs')

// nsenter enters a network namespace with CAP_SYS_ADMIN only.
describe.skipIf(process.getuid?.() !== 0)('the network relay (as root)', () => {
  it('close resolves once the relay has exited and been reaped: nothing is left to find', async () => {
    const relay = startNetRelay(process.pid, 30_000)
    // Its first answer proves it runs (past nsenter's exec into node).
    expect(await relay.expose(8769, 1)).toMatchObject({ port: 8769, hostPort: expect.any(Number) })
    const [pid] = relays()
    expect(pid).toBeDefined()
    await relay.close()
    // Not even a zombie: a check made at once, as teardown's callers make it, finds nothing.
    expect(existsSync(`/proc/${pid}`)).toBe(false)
    expect(existsSync(relay.folder)).toBe(false)
  })

  it('a request the relay does not answer fails at the bound, naming it, and ends the relay', async () => {
    // The bound is wide enough for the first answer of a relay just started on a loaded machine.
    const relay = startNetRelay(process.pid, 5000)
    let pid: number | undefined
    try {
      expect(await relay.expose(8770, 2)).toMatchObject({ port: 8770 })
      ;[pid] = relays()
      // Stopped: it reads no request and answers none.
      process.kill(pid!, 'SIGSTOP')
      await expect(relay.expose(8771, 2)).rejects.toThrow(`its network relay did not answer within 5000 ms (pid ${pid}); it was ended`)
    } finally {
      await relay.close()
    }
    expect(existsSync(`/proc/${pid}`)).toBe(false)
  })
})
