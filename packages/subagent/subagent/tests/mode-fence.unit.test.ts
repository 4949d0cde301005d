import { Context } from 'cordis'
import { describe, expect, it } from 'vitest'
import { modeFence } from '../src/mode-fence.ts'
import type { ProviderRequest } from '../src/types.ts'

/** A stand-in for ctx.sandboxPolicy: one mode, and the fences registered with it. */
function policy(mode: string) {
  const fences: { name: string; busy(sessionId: string): string | undefined }[] = []
  return { fences, resolve: () => ({ mode }), fence: (fence: (typeof fences)[number]) => (fences.push(fence), () => {}) }
}

const request = (session: string, runId: string) => ({ runId, parent: { session: { id: session } } }) as unknown as ProviderRequest

describe('the sandbox-mode fence of a provider', () => {
  it('reports the parent mode, and a session busy exactly while it has runs', async () => {
    const ctx = new Context()
    const service = policy('workspace-write')
    ctx.provide('sandboxPolicy')
    ctx.set('sandboxPolicy', service)
    const fence = modeFence<string>(ctx, 'codex')
    await new Promise((resolve) => setImmediate(resolve))
    expect(service.fences.map((entry) => entry.name)).toEqual(['codex sub-agents'])
    const [registered] = service.fences
    expect(fence.parentMode(request('s1', 'subagent-1'))).toBe('workspace-write')
    expect(registered!.busy('s1')).toBeUndefined()
    fence.track(request('s1', 'subagent-1'), true)
    fence.track(request('s1', 'subagent-2'), true)
    expect(registered!.busy('s1')).toBe('codex sub-agent runs subagent-1, subagent-2 are running')
    expect(registered!.busy('s2')).toBeUndefined()
    fence.track(request('s1', 'subagent-1'), false)
    fence.track(request('s1', 'subagent-2'), false)
    expect(registered!.busy('s1')).toBeUndefined()
  })

  it('has no parent mode without a sandbox policy', () => {
    const fence = modeFence<string>(new Context(), 'codex')
    expect(fence.parentMode(request('s1', 'subagent-1'))).toBeUndefined()
  })
})
