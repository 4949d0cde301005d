/**
 * The node runtime with real processes: outcomes, values, stacks, type stripping, output and
 * bindings. Sandbox, environment and teardown attacks are in attacks.test.ts; the control
 * channel is attacked in protocol.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { JsonValue } from '@conch/ptc'
import { nestingDepth, strip, STRIPPED_ENTRIES, STRIPPED_MAX_CHARS } from '../src/runtime.ts'
import { boot, type Harness } from './harness.ts'

// Every test starts real node processes (and bubblewrap); on a loaded 2-core machine one can take seconds.
vi.setConfig({ testTimeout: 60_000 })

let h: Harness
beforeAll(async () => {
  h = await boot({ runtime: { spare: false } })
})
afterAll(async () => {
  await h.dispose()
})

describe('values', () => {
  it('returns a value of every JSON type losslessly', async () => {
    const value = { null: null, true: true, false: false, int: 42, float: -1.5e-7, text: 'héllo 😀\n"q"', empty: [], nested: [1, [2, { a: 'b' }]], object: {} }
    const result = await h.run(`return ${JSON.stringify(value)}`)
    expect(result).toMatchObject({ ok: true, value, logs: '' })
    for (const scalar of [null, true, 0, 'x', []]) {
      expect(await h.run(`return ${JSON.stringify(scalar)}`)).toMatchObject({ ok: true, value: scalar })
    }
  })

  it.each([
    ['NaN', 'return NaN'],
    ['Infinity', 'return { a: [Infinity] }'],
    ['undefined', 'return undefined'],
    ['a BigInt', 'return 10n'],
    ['a function', 'return { f() {} }'],
    ['a cycle', 'const a: any = {}; a.self = a; return a'],
    ['a non-plain object', 'return new Map()'],
    ['a Date', 'return { when: new Date(0) }'],
  ])('a completion value with %s is invalid-output', async (_what, code) => {
    const result = await h.run(code)
    expect(result.ok).toBe(false)
    if (!result.ok) expect(result.failure.kind).toBe('invalid-output')
  })

  it('top-level await and return work, with erasable types stripped', async () => {
    const result = await h.run('type N = number\nconst wait = (ms: N): Promise<N> => new Promise((r) => setTimeout(() => r(ms), ms))\nconst got = await wait(5) as N\nreturn got satisfies N')
    expect(result).toMatchObject({ ok: true, value: 5 })
  })
})

describe('the type stripper', () => {
  it('a program stripped again gets the same answer, refusals included, past the cache bound and for long texts', async () => {
    const typed = 'const n: number = 1\nreturn n'
    const refused = 'enum E { A }\nreturn E.A'
    const first = await strip(typed, 256)
    const refusal = await strip(refused, 256)
    expect(first).toEqual({ ok: true, code: 'const n         = 1\nreturn n' })
    expect(refusal).toMatchObject({ ok: false, message: expect.stringMatching(/^TypeScript that cannot be erased: .*enum.*\(program\.ts:1:1\)$/) })
    for (let i = 0; i < STRIPPED_ENTRIES + 1; i++) await strip(`return ${i} as number`, 256)
    expect(await strip(typed, 256)).toEqual(first)
    expect(await strip(refused, 256)).toEqual(refusal)
    const long = `const s: string = ${JSON.stringify('x'.repeat(STRIPPED_MAX_CHARS))}\nreturn s.length`
    expect(await strip(long, 256)).toEqual(await strip(long, 256))
    expect(await h.run(long)).toMatchObject({ ok: true, value: STRIPPED_MAX_CHARS })
  })
})

describe('deeply nested programs', () => {
  const DEEP = 200_000
  const arrays = `return ${'['.repeat(DEEP)}${']'.repeat(DEEP)}`
  const parens = `return ${'('.repeat(DEEP)}1${')'.repeat(DEEP)}`

  it('are refused naming maxNestingDepth, and a normal program runs after them', async () => {
    for (const code of [arrays, parens]) {
      const result = await h.run(code)
      expect(result).toMatchObject({ ok: false, failure: { kind: 'exception', message: expect.stringMatching(/nests brackets more than 256 deep \(ptc-node config maxNestingDepth\)/) } })
    }
    expect(await h.run('const n: number = 41\nreturn n + 1')).toMatchObject({ ok: true, value: 42 })
  })

  it('that break the stripper itself leave it working for the next program (a fresh instance)', async () => {
    // No bound: the stripper's wasm stack overflows; after the second, its memory was corrupt.
    expect(await strip(arrays, Number.MAX_SAFE_INTEGER)).toMatchObject({ ok: false, message: expect.stringMatching(/^the type stripper failed on this program/) })
    expect(await strip(parens, Number.MAX_SAFE_INTEGER)).toMatchObject({ ok: false, message: expect.stringMatching(/^the type stripper failed on this program/) })
    expect(await strip('const n: number = 1\nreturn n', 256)).toEqual({ ok: true, code: 'const n         = 1\nreturn n' })
  })

  it('are measured outside strings, template text and comments', () => {
    expect(nestingDepth('f(a[{ b: 1 }])', 100)).toBe(3)
    expect(nestingDepth('"((((" + \'[[[\' // ((((\n/* [[[[ */ g()', 100)).toBe(1)
    expect(nestingDepth('`${`${(1)}`}`', 100)).toBe(5)
    expect(nestingDepth('")))))" + ((((1))))', 100)).toBe(4)
    expect(nestingDepth('['.repeat(10_000), 300)).toBe(301)
  })
})

describe('exceptions', () => {
  it('a thrown error is an exception whose stack has the line numbers of the program as written', async () => {
    const code = ['interface Point { x: number; y: number }', 'const p: Point = { x: 1, y: 2 }', '', 'function inner(n: number): never {', '  throw new RangeError(`bad ${n}`)', '}', 'inner(p.x)']
    const result = await h.run(code.join('\n'))
    expect(result.ok).toBe(false)
    if (result.ok) return
    expect(result.failure.kind).toBe('exception')
    expect(result.failure.message).toBe('RangeError: bad 1')
    expect(result.failure.stack).toMatch(/at inner \(program\.ts:5:9\)/)
    expect(result.failure.stack).toMatch(/program\.ts:7:1/)
  })

  it('a thrown non-error value is an exception', async () => {
    const result = await h.run('throw { reason: "no" }')
    expect(result).toMatchObject({ ok: false, failure: { kind: 'exception', message: 'Uncaught {"reason":"no"}' } })
  })

  it('a parse error is an exception naming the line', async () => {
    const result = await h.run('const a = 1\nconst b = ;')
    expect(result).toMatchObject({ ok: false, failure: { kind: 'exception' } })
    if (!result.ok) expect(result.failure.message).toMatch(/program\.ts:2:/)
  })

  it.each([
    ['enum', 'const a = 1\nenum Color { Red }\nreturn a', /enum.*program\.ts:2:/],
    ['namespace', 'namespace N { export const x = 1 }\nreturn 1', /namespace.*program\.ts:1:1\)/],
    ['a parameter property', 'class C {\n  constructor(private x: number) {}\n}\nreturn 1', /parameter property.*program\.ts:2:/],
    ['import =', 'import fs = require("node:fs")\nreturn 1', /import.*program\.ts:1:/],
  ])('%s is refused as an exception naming the construct and its line, never transformed', async (_what, code, pattern) => {
    const result = await h.run(code)
    expect(result.ok).toBe(false)
    if (result.ok) return
    expect(result.failure.kind).toBe('exception')
    expect(result.failure.message).toMatch(pattern)
  })

  it('an unhandled rejection is an exception', async () => {
    const result = await h.run('Promise.reject(new Error("later")); await new Promise((r) => setTimeout(r, 1000)); return 1')
    expect(result).toMatchObject({ ok: false, failure: { kind: 'exception', message: 'Error: later' } })
  })
})

describe('output', () => {
  it('console methods and direct stdout/stderr writes are captured in order', async () => {
    const code = 'console.log("a", 1)\nconsole.info("b")\nprocess.stdout.write("c\\n")\nconsole.warn("d")\nconsole.error({ e: 1 })\nprocess.stderr.write("f\\n")\nconsole.debug("g")\nreturn null'
    const result = await h.run(code)
    expect(result).toMatchObject({ ok: true, logs: 'a 1\nb\nc\nd\n{ e: 1 }\nf\ng\n' })
  })

  it('more output than the channel holds at once keeps its order, and the value still comes after it', async () => {
    // After the first await the frames go straight to fd 3 until the kernel's socket buffer is
    // full, then through the socket's queue: both must keep the order, the terminal frame last.
    const result = await h.run(
      'await new Promise((resolve) => setTimeout(resolve, 10))\nconst line = "x".repeat(4000)\nfor (let i = 0; i < 1000; i++) console.log(i, line)\nreturn "after"',
    )
    expect(result).toMatchObject({ ok: true, value: 'after' })
    const lines = result.logs.split('\n').filter((text) => text !== '')
    expect(lines).toHaveLength(1000)
    lines.forEach((text, index) => expect(text).toBe(`${index} ${'x'.repeat(4000)}`))
  })

  it('logs beyond maxOutputBytes end the run as output-limit and keep the prefix that fits', async () => {
    const small = await boot({ runtime: { spare: false, maxOutputBytes: 1000 } })
    try {
      const result = await small.run('for (let i = 0; i < 100000; i++) console.log(`line ${i} ${"é".repeat(20)}`)\nreturn 1')
      expect(result.ok).toBe(false)
      if (result.ok) return
      expect(result.failure.kind).toBe('output-limit')
      expect(Buffer.byteLength(result.logs)).toBeLessThanOrEqual(1000)
      expect(result.logs.startsWith('line 0 ')).toBe(true)
      expect(result.logs).not.toContain('\uFFFD')
      const value = await small.run('console.log("x".repeat(600))\nreturn "y".repeat(600)')
      expect(value).toMatchObject({ ok: false, failure: { kind: 'output-limit' } })
      if (!value.ok) expect(value.logs).toBe(`${'x'.repeat(600)}\n`)
    } finally {
      await small.dispose()
    }
  })
})

describe('bindings', () => {
  it('calls host functions in order with JSON arguments and results', async () => {
    const seen: unknown[] = []
    const bindings = [{ global: 'host', functions: { echo: async (args: JsonValue) => (seen.push(args), { got: args }) } }]
    const result = await h.run('const out = []\nfor (const i of [1, 2, 3]) out.push(await host.echo({ i }))\nreturn out', { bindings })
    expect(result).toMatchObject({ ok: true, value: [{ got: { i: 1 } }, { got: { i: 2 } }, { got: { i: 3 } }] })
    expect(seen).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }])
  })

  it('a binding that throws surfaces as an error the program can catch', async () => {
    const bindings = [{ global: 'host', functions: { fail: async () => { throw new Error('binding broke') } } }]
    const result = await h.run('try { await host.fail({}) } catch (e) { return `caught: ${(e as Error).message}` }', { bindings })
    expect(result).toMatchObject({ ok: true, value: 'caught: binding broke' })
  })

  it('a binding returning a value that is not JSON is an error in the program, not a crash', async () => {
    const bindings = [{ global: 'host', functions: { bad: async () => Number.NaN } }]
    const result = await h.run('try { await host.bad(null) } catch (e) { return (e as Error).message }', { bindings })
    expect(result.ok && String(result.value)).toMatch(/host\.bad returned a value that is not JSON/)
  })

  it('rejects binding names that are not portable identifiers or shadow built-ins, naming them', async () => {
    const fn = async () => null
    await expect(h.run('return 1', { bindings: [{ global: 'console', functions: { fn } }] })).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('"console"') })
    await expect(h.run('return 1', { bindings: [{ global: 'process', functions: { fn } }] })).rejects.toMatchObject({ code: 'INVALID_OPTIONS' })
    await expect(h.run('return 1', { bindings: [{ global: 'globalThis', functions: { fn } }] })).rejects.toMatchObject({ code: 'INVALID_OPTIONS' })
    await expect(h.run('return 1', { bindings: [{ global: 'my-tools', functions: { fn } }] })).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('my-tools') })
    await expect(h.run('return 1', { bindings: [{ global: 'tools', functions: { 'a.b': fn } }] })).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('tools.a.b') })
  })
})

describe('misuse and deadlines', () => {
  it('resolve validates and caps the deadline; null means none', () => {
    expect(h.ctx.ptc.resolve({ code: '1' }, h.agent).timeoutMs).toBe(120_000)
    expect(h.ctx.ptc.resolve({ code: '1', timeoutMs: 10_000_000 }, h.agent).timeoutMs).toBe(600_000)
    expect(h.ctx.ptc.resolve({ code: '1', timeoutMs: null }, h.agent).timeoutMs).toBeNull()
    expect(h.ctx.ptc.resolve({ code: '1' }, h.agent)).toMatchObject({ cwd: h.workspace, policy: { mode: 'workspace-write', workspaceRoot: h.workspace } })
    expect(() => h.ctx.ptc.resolve({ code: '1', timeoutMs: -5 }, h.agent)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }))
    expect(() => h.ctx.ptc.resolve({ code: '1', timeoutMs: 1.5 }, h.agent)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }))
    expect(() => h.ctx.ptc.resolve({ code: '  ' }, h.agent)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }))
    expect(() => h.ctx.ptc.resolve({ code: '1', cwd: 'relative' }, h.agent)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }))
  })

  it('run refuses a spec that was not resolved', async () => {
    await expect(h.ctx.ptc.run({ owner: h.agent, code: '1', cwd: h.workspace, policy: { mode: 'workspace-write', workspaceRoot: h.workspace } } as never)).rejects.toMatchObject({ code: 'INVALID_OPTIONS' })
  })
})
