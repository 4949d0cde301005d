import { describe, expect, it } from 'vitest'
import { BUILTIN_KINDS, extractAnswer, findEcho, isLoopbackAddress, loadPoolConfig, routeFor } from '../src/index.ts'

describe('pool config', () => {
  it('applies defaults and the env overrides', () => {
    const config = loadPoolConfig({}, { CONCH_POOL_STALL_MS: '5000', CONCH_POOL_HARD_CAP_MS: '60000' }, BUILTIN_KINDS)
    expect(config).toMatchObject({ stallMs: 5000, hardCapMs: 60000, idleEvictMs: 600000, evictEveryMs: 60000, maxSessions: 8, killSwitch: false, worker: 'in-process' })
    expect(Object.keys(config.kinds).sort()).toEqual(['claude', 'codex', 'generic'])
    expect(config.kinds.claude!.network).toBe(true)
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
