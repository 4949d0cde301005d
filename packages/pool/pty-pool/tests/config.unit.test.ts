import { describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { BUILTIN_KINDS, extractAnswer, findEcho, isLoopbackAddress, loadPoolConfig, MainMessageSchema, PtyPool, PtyPoolService, routeFor } from '../src/index.ts'

describe('pool config', () => {
  it('applies defaults and the env overrides', () => {
    const config = loadPoolConfig({}, { CONCH_POOL_STALL_MS: '5000', CONCH_POOL_HARD_CAP_MS: '60000' }, BUILTIN_KINDS)
    expect(config).toMatchObject({ stallMs: 5000, hardCapMs: 60000, idleEvictMs: 600000, evictEveryMs: 60000, maxSessions: 8, killSwitch: false, worker: 'in-process' })
    expect(Object.keys(config.kinds).sort()).toEqual(['claude', 'codex', 'generic'])
    expect(config.kinds.claude!.network).toBe(true)
    expect(config.terminal).toBe('conch')
  })

  it('runs CLIs as conch terminals by default, and says what is missing for that at load, naming terminal', () => {
    expect(() => loadPoolConfig({ terminal: 'bare' }, {}, BUILTIN_KINDS)).toThrow(/pool config: terminal: /)
    // In-process with no terminal factory (the plugin: no ctx.pty).
    expect(() => new PtyPool(loadPoolConfig({}, {}, BUILTIN_KINDS))).toThrow(/terminal: "conch" \(the default\) opens each CLI as a ctx\.pty terminal.*terminal: "unconfined"/)
    // Managed with no way to resolve an owner's policy (the plugin: no ctx.sandboxPolicy).
    const managed = loadPoolConfig({ worker: 'managed', supervisor: { command: [process.execPath] } }, {}, BUILTIN_KINDS)
    expect(() => new PtyPool(managed, { subprocess: {} as never })).toThrow(/terminal: "conch" \(the default\) runs each CLI under its owner's sandbox policy/)
    // The plugin in a composition without ctx.pty fails at load the same way.
    expect(() => new PtyPoolService(new Context(), {})).toThrow(/CONFIG_INVALID|terminal: "conch"/)
    // The explicit opt-out needs neither.
    expect(new PtyPool(loadPoolConfig({ terminal: 'unconfined' }, {}, BUILTIN_KINDS)).config.terminal).toBe('unconfined')
  })

  it('the worker takes an owner policy only in its exact shape', () => {
    const invoke = { type: 'invoke', id: 1, key: { owner: 'a', conversation: 'c', kind: 'generic', model: '', account: '', bare: false }, prompt: 'p', capMs: 1, stallMs: 1, cwd: '/', oneShot: false }
    const policy = { mode: 'workspace-write', workspaceRoot: '/work/a', protectedPaths: ['/etc/conch'] }
    expect(MainMessageSchema.safeParse({ ...invoke, policy }).success).toBe(true)
    for (const bad of [
      { ...policy, mode: 'everything' },
      { ...policy, workspaceRoot: 'relative/ws' },
      { ...policy, workspaceRoot: '/work/a/../b' },
      { ...policy, workspaceRoot: '/work/a\0' },
      { ...policy, protectedPaths: ['~/x'] },
      { ...policy, protectedPaths: Array.from({ length: 1025 }, (_, index) => `/p/${index}`) },
      { ...policy, network: true },
      { mode: 'read-only', workspaceRoot: '/w' },
    ]) {
      expect(MainMessageSchema.safeParse({ ...invoke, policy: bad }).success, JSON.stringify(bad).slice(0, 120)).toBe(false)
    }
    expect(MainMessageSchema.safeParse({ type: 'init', config: {}, env: {}, terminal: { sandboxLocal: {}, ptyLocal: {}, extra: 1 } }).success).toBe(false)
  })

  it('fails at load naming the field', () => {
    expect(() => loadPoolConfig({ stallMs: -1 }, {}, BUILTIN_KINDS)).toThrow(/stallMs/)
    expect(() => loadPoolConfig({}, { CONCH_POOL_STALL_MS: 'soon' }, BUILTIN_KINDS)).toThrow(/CONCH_POOL_STALL_MS/)
    expect(() => loadPoolConfig({ kinds: { claude: { command: '/nonexistent/claude' } } }, {}, BUILTIN_KINDS)).toThrow(/kinds\.claude\.command/)
    expect(() => loadPoolConfig({ kinds: { mine: { command: 'sh' } } }, {}, BUILTIN_KINDS)).toThrow(/kinds\.mine\.readyPattern/)
    expect(() => loadPoolConfig({ kinds: { claude: { busyPattern: '(' } } }, {}, BUILTIN_KINDS)).toThrow(/kinds\.claude\.busyPattern/)
    expect(() => loadPoolConfig({ agents: { a: { runtime: 'pty-pool', kind: 'nope' } } }, {}, BUILTIN_KINDS)).toThrow(/agents\.a\.kind: unknown kind "nope"/)
    expect(() => loadPoolConfig({ agents: { a: { runtime: 'pty-pool', kind: 'generic', account: 'x' } } }, {}, BUILTIN_KINDS)).toThrow(/agents\.a\.account/)
    expect(() => loadPoolConfig({ status: { host: '0.0.0.0' } }, {}, BUILTIN_KINDS)).toThrow(/status\.host.*loopback/)
    // Under the test runner argv[1] is not the conch bin: the worker's argv must be given.
    expect(() => loadPoolConfig({ worker: 'managed' }, {}, BUILTIN_KINDS)).toThrow(/supervisor\.command: .* is not the conch bin/)
    expect(() => loadPoolConfig({ worker: 'managed', supervisor: { command: ['/nonexistent/node'] } }, {}, BUILTIN_KINDS)).toThrow(/supervisor\.command: "\/nonexistent\/node" is not an executable/)
    expect(() => loadPoolConfig({ worker: 'managed', supervisor: { pingEveryMs: 0 } }, {}, BUILTIN_KINDS)).toThrow(/supervisor\.pingEveryMs/)
    expect(() => loadPoolConfig({ status: { host: '10.0.0.1' } }, {}, BUILTIN_KINDS)).toThrow(/loopback/)
  })

  it('routes a missing or malformed agent setting to fresh-spawn', () => {
    const config = loadPoolConfig({ agents: { good: { runtime: 'pty-pool', kind: 'generic' }, bad: { runtime: 'warp' }, typo: 'pty-pool' } }, {}, BUILTIN_KINDS)
    expect(routeFor(config, 'good')).toMatchObject({ runtime: 'pty-pool', kind: 'generic' })
    expect(routeFor(config, 'bad')).toEqual({ runtime: 'fresh-spawn' })
    expect(routeFor(config, 'typo')).toEqual({ runtime: 'fresh-spawn' })
    expect(routeFor(config, 'absent')).toEqual({ runtime: 'fresh-spawn' })
  })

  it('knows loopback addresses', () => {
    for (const address of ['127.0.0.1', '127.5.6.7', '::1', '::ffff:127.0.0.1']) expect(isLoopbackAddress(address)).toBe(true)
    for (const address of ['10.0.0.1', '::ffff:10.0.0.1', '0.0.0.0', '::', undefined, 'localhost']) expect(isLoopbackAddress(address)).toBe(false)
  })
})

describe('sentinel extraction', () => {
  const S = '<<<CONCH-00aa11bb>>>'
  it('takes the last complete pair after the echo, decoration and indentation removed', () => {
    const rows = ['❯ Q1: old', `● ${S}`, '  old answer', `  ${S}`, '', '❯ Q2: new one', '', `● ${S}`, '  line one', '    indented', `  ${S}`, '', '❯ ']
    const echo = findEcho(rows, 'Q2: new one')
    expect(echo).toBe(5)
    expect(extractAnswer(rows, S, echo + 1, /^\s*●\s?/)?.text).toBe('line one\n  indented')
  })
  it('finds nothing without a complete pair', () => {
    expect(extractAnswer(['❯ Q', `● ${S}`, '  partial'], S, 1)).toBeUndefined()
  })
})
