/**
 * What a send's result says when the agent's network is `none` and a program's name lookup fails,
 * with the real composition (pty-local, bubblewrap unsharing the network) and real programs: the
 * result names the policy, as an allowlist refusal does, so the model does not blame the host.
 */
import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, type CaseHarness } from './cases/harness.ts'

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0
const NONE_LINE = '[network: none — this sandbox has no network beyond loopback, so no host name resolves]'
/** A lookup of a name no /etc/hosts holds: only a resolver could answer it. */
const LOOKUP = `python3 -c 'import socket; socket.getaddrinfo("conch-offline.example", 80)' 2>&1 | tail -1`

describe.skipIf(!hasBwrap)('a failed name lookup under network none (skipped: bubblewrap cannot run here)', () => {
  let harness: CaseHarness

  beforeAll(async () => {
    // workspace-write with the policy's default network: none.
    harness = await bootCase({ mode: 'workspace-write' })
    expect(harness.ctx.sandboxPolicy.resolve({ session: harness.agent.session }).network).toEqual({ mode: 'none' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('names the policy after the resolver’s error', async () => {
    const sessionId = await harness.open()
    const sent = await harness.send(sessionId, LOOKUP)
    expect(sent.text).toMatch(/^socket\.gaierror: .*name resolution/m)
    expect(sent.text.split('\n')).toContain(NONE_LINE)
  })

  it('says nothing of the network when no lookup failed', async () => {
    const sessionId = await harness.open()
    const sent = await harness.send(sessionId, 'echo resolved-$((1))')
    expect(sent.text).toMatch(/^resolved-1$/m)
    expect(sent.text).not.toMatch(/\[network:/)
  })
})

describe('a failed name lookup with the network allowed', () => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode: 'danger-full-access' })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('does not blame a policy that is not there', async () => {
    const sessionId = await harness.open()
    const sent = await harness.send(sessionId, `echo "Temporary failure in name $((0))resolution" | tr -d 0`)
    expect(sent.text).toMatch(/^Temporary failure in name resolution$/m)
    expect(sent.text).not.toMatch(/\[network:/)
  })
})
