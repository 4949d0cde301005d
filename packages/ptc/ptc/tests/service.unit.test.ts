/**
 * The seam's own rules with a recording runtime: resolution, binding names, misuse and
 * disposal. Runtimes are tested with real processes in @conch/ptc-node.
 */
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import PtcService, { isLosslessJson, nameProblem, type PtcRuntime, type PtcSpec } from '../src/index.ts'

let ctx: Context
let agent: Agent
let fiber: { dispose(): Promise<void> }
const specs: PtcSpec[] = []
const runtime: PtcRuntime = {
  name: 'recording',
  timeouts: { timeoutMs: 1000, maxTimeoutMs: 5000 },
  run: async (spec) => {
    specs.push(spec)
    return { ok: true, value: null, logs: '', sandbox: { mode: spec.policy.mode, enforcement: 'none', denials: [] }, elapsedMs: 0 }
  },
}

beforeEach(async () => {
  specs.length = 0
  ctx = new Context()
  await ctx.plugin(SessionService, {})
  await ctx.plugin(ToolsService, ToolsService.Config.parse({}))
  await ctx.plugin(LlmService, {})
  await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: 'workspace-write', workspaceRoot: '/' }))
  await ctx.plugin(AgentService, AgentService.Config.parse({}))
  fiber = await ctx.plugin(PtcService, PtcService.Config.parse({}))
  agent = await ctx.agents.create()
})
afterEach(async () => {
  await ctx.agents.dispose(agent)
})

describe('ctx.ptc', () => {
  it('without a runtime, resolve and run are NO_RUNTIME', async () => {
    expect(() => ctx.ptc.resolve({ code: '1' }, agent)).toThrow(expect.objectContaining({ code: 'NO_RUNTIME' }))
    expect(ctx.ptc.timeouts()).toBeUndefined()
  })

  it('resolve fills cwd, the deadline and the owner policy; run passes the spec through unchanged', async () => {
    ctx.ptc.register(runtime)
    const spec = ctx.ptc.resolve({ code: 'return 1' }, agent)
    expect(spec).toEqual({ owner: agent, code: 'return 1', cwd: '/', timeoutMs: 1000, policy: { mode: 'workspace-write', workspaceRoot: '/', network: { mode: 'none' } } })
    expect(ctx.ptc.resolve({ code: '1', timeoutMs: 99_999 }, agent).timeoutMs).toBe(5000)
    expect(ctx.ptc.resolve({ code: '1', timeoutMs: null }, agent).timeoutMs).toBeNull()
    ctx.sandboxPolicy.setMode(agent.session, 'read-only')
    expect(ctx.ptc.resolve({ code: '1' }, agent).policy.mode).toBe('read-only')
    await ctx.ptc.run(spec)
    expect(specs).toEqual([spec])
  })

  it('refuses a program over maxCodeBytes with its size and the bound, before the runtime sees it', async () => {
    ctx.ptc.register(runtime)
    const big = `return ${JSON.stringify('é'.repeat(600_000))}`
    expect(() => ctx.ptc.resolve({ code: big }, agent)).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTIONS', message: expect.stringMatching(/^code is 1200009 bytes, over the 1048576-byte bound on a program \(ptc config maxCodeBytes\)/) }),
    )
    expect(ctx.ptc.resolve({ code: 'return 1' }, agent).code).toBe('return 1')
    expect(specs).toEqual([])
    expect(() => PtcService.Config.parse({ maxCodeBytes: 0 })).toThrow(/maxCodeBytes/)
  })

  it('a second runtime is DUPLICATE_RUNTIME; unregistering frees the slot', () => {
    const dispose = ctx.ptc.register(runtime)
    expect(() => ctx.ptc.register({ ...runtime, name: 'other' })).toThrow(expect.objectContaining({ code: 'DUPLICATE_RUNTIME' }))
    dispose()
    expect(() => ctx.ptc.register({ ...runtime, name: 'other' })).not.toThrow()
  })

  it('rejects bad and duplicate binding names with the name', async () => {
    ctx.ptc.register(runtime)
    const spec = ctx.ptc.resolve({ code: '1' }, agent)
    const fn = async () => null
    for (const global of ['console', 'process', 'globalThis', 'require', 'Promise', 'class', '1abc', 'a-b', 'ü']) {
      await expect(ctx.ptc.run(spec, { bindings: [{ global, functions: { fn } }] })).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining(JSON.stringify(global)) })
    }
    await expect(ctx.ptc.run(spec, { bindings: [{ global: 'a', functions: { fn } }, { global: 'a', functions: { fn } }] })).rejects.toMatchObject({ message: expect.stringContaining('declared twice') })
    await expect(ctx.ptc.run(spec, { bindings: [{ global: 'a', functions: { __proto__: fn } as never }] })).resolves.toMatchObject({ ok: true })
    await expect(ctx.ptc.run(spec, { bindings: [{ global: 'a', functions: { constructor: fn } }] })).rejects.toMatchObject({ message: expect.stringContaining('a.constructor') })
    await expect(ctx.ptc.run(spec, { bindings: [{ global: 'a', functions: { f: 'no' as never } }] })).rejects.toMatchObject({ message: expect.stringContaining('not a function') })
    expect(specs).toHaveLength(1)
    expect(nameProblem('tools', 'global')).toBeUndefined()
  })

  it('a call after dispose is DISPOSED', async () => {
    ctx.ptc.register(runtime)
    const service = ctx.ptc
    const spec = service.resolve({ code: '1' }, agent)
    await fiber.dispose()
    expect(() => service.resolve({ code: '1' }, agent)).toThrow(expect.objectContaining({ code: 'DISPOSED' }))
    await expect(service.run(spec)).rejects.toMatchObject({ code: 'DISPOSED' })
    expect(specs).toEqual([])
  })
})

describe('isLosslessJson', () => {
  it('accepts JSON values and names the first lossy part', () => {
    expect(isLosslessJson({ a: [1, 'b', null, true, { c: -0.5 }] })).toBeUndefined()
    expect(isLosslessJson(Object.create(null))).toBeUndefined()
    expect(isLosslessJson({ a: [1, Number.NaN] })).toBe('$.a[1] is NaN')
    expect(isLosslessJson({ d: new Date(0) })).toBe('$.d is not a plain object')
    expect(isLosslessJson([, 1])).toBe('$[0] is a hole')
    const cycle: Record<string, unknown> = {}
    cycle['self'] = cycle
    expect(isLosslessJson(cycle)).toBe('$.self is a cycle')
    expect(isLosslessJson(1n)).toBe('$ is a BigInt')
    expect(isLosslessJson(undefined)).toBe('$ is undefined')
  })
})
