/**
 * The sandbox-mode fence is seam policy: ctx.pty registers it on ctx.sandboxPolicy whenever that
 * service is loaded, for every backend, and reports the owner's terminals while they are open
 * or opening.
 */
import { Context, Service } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { ModeFence } from '@conch/sandbox-policy'
import PtyService from '../src/index.ts'
import { FakeBackend, fakeAgent, type FakeAgent } from './fakes.ts'

/** Stands in for ctx.sandboxPolicy: keeps the fences registered on it. */
class FakePolicy extends Service {
  readonly fences: ModeFence[] = []
  constructor(ctx: Context) {
    super(ctx, 'sandboxPolicy')
  }
  fence(fence: ModeFence): () => void {
    this.fences.push(fence)
    return () => this.fences.splice(this.fences.indexOf(fence), 1)
  }
}

let root: Context
let backend: FakeBackend
let alice: FakeAgent

beforeEach(async () => {
  root = new Context()
  await root.plugin(PtyService, PtyService.Config.parse({}))
  backend = new FakeBackend('shell')
  await root.plugin({ name: 'backend', inject: ['pty'], apply: (ctx: Context) => void ctx.pty.registerBackend(backend) })
  alice = fakeAgent(root, 'agent-1')
  ;(alice as { session: unknown }).session = { id: 'log-alice' }
})

afterEach(async () => {
  await root.pty.close(alice, 'pty-1').catch(() => {})
})

describe('the sandbox-mode fence', () => {
  it('is registered when a sandbox policy service is loaded and reports the owner’s open terminals', async () => {
    const fiber = await root.plugin(FakePolicy)
    const policy = root.get('sandboxPolicy') as unknown as FakePolicy
    expect(policy.fences.map((fence) => fence.name)).toEqual(['terminals'])
    const [fence] = policy.fences
    expect(fence!.busy('log-alice')).toBeUndefined()
    await root.pty.spawn(alice, { type: 'shell' })
    expect(fence!.busy('log-alice')).toBe('terminal pty-1 is open or opening')
    expect(fence!.busy('log-someone-else')).toBeUndefined()
    await root.pty.close(alice, 'pty-1')
    expect(fence!.busy('log-alice')).toBeUndefined()
    await fiber.dispose()
  })
})
