import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import ToolsService, { ToolsError, toolResultText, utf8Bytes, type ToolDefinition, type ToolExecuteContext, type ToolOwner } from '../src/index.ts'

let fiber: { dispose(): Promise<void> } | undefined

async function boot(maxResultBytes = 262144): Promise<Context> {
  const ctx = new Context()
  fiber = await ctx.plugin(ToolsService, { maxResultBytes })
  return ctx
}

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
})

// @conch/agent widens ToolOwner to its Agent; the registry itself only passes the object through.
const owner = { id: 'agent-1' } as ToolOwner

function call(callId = 'call_1'): ToolExecuteContext {
  return { agent: owner, signal: new AbortController().signal, callId }
}

const echoInput = z.object({
  text: z.string().describe('what to echo'),
  times: z.number().int().min(1).default(1),
  options: z.object({ upper: z.boolean() }).optional(),
})

function echo(overrides: Partial<ToolDefinition<typeof echoInput>> = {}): ToolDefinition<typeof echoInput> {
  return {
    name: 'echo',
    description: 'Echoes text.',
    input: echoInput,
    kind: 'think',
    async execute(input) {
      const text = input.text.repeat(input.times)
      return { content: [{ type: 'text', text: input.options?.upper ? text.toUpperCase() : text }] }
    },
    ...overrides,
  }
}

function registerError(ctx: Context, definition: ToolDefinition<z.ZodType>): ToolsError {
  try {
    ctx.tools.register(definition)
  } catch (error) {
    expect(error).toBeInstanceOf(ToolsError)
    return error as ToolsError
  }
  throw new Error('expected register to throw')
}

describe('registration and specs', () => {
  it('offers each tool as JSON Schema from zod, with defaulted fields optional and no $schema', async () => {
    const ctx = await boot()
    ctx.tools.register(echo())
    ctx.tools.register({ ...echo(), name: 'another', kind: undefined } as unknown as ToolDefinition)
    const specs = ctx.tools.specs()
    expect(specs.map((spec) => spec.name)).toEqual(['another', 'echo'])
    const spec = specs[1]!
    expect(spec.kind).toBe('think')
    expect(specs[0]!.kind).toBe('other')
    expect(spec.parameters).not.toHaveProperty('$schema')
    expect(spec.parameters).toMatchObject({
      type: 'object',
      required: ['text'],
      properties: { text: { type: 'string', description: 'what to echo' }, times: { type: 'integer', default: 1 } },
    })
  })

  it('refuses a duplicate name, a bad name, a non-object schema, an unrepresentable schema and a tiny bound', async () => {
    const ctx = await boot()
    ctx.tools.register(echo())
    const duplicate = registerError(ctx, echo() as unknown as ToolDefinition)
    expect(duplicate.code).toBe('DUPLICATE_TOOL')
    expect(duplicate.message).toMatch(/tool echo is already registered/)
    const cases: [Partial<ToolDefinition<z.ZodType>>, RegExp][] = [
      [{ name: 'Echo-Tool' }, /must match \[a-z\]\[a-z0-9_\]\*/],
      [{ name: 'ok_name', description: ' ' }, /description is empty/],
      [{ name: 'ok_name', input: z.string() }, /must be a z\.object/],
      [{ name: 'ok_name', input: z.object({ when: z.date() }) }, /no JSON Schema form/],
      [{ name: 'ok_name', maxResultBytes: 10 }, /maxResultBytes must be an integer of at least 64 bytes, got 10/],
    ]
    for (const [override, message] of cases) {
      const error = registerError(ctx, { ...echo(), ...override } as unknown as ToolDefinition)
      expect(error.code).toBe('INVALID_TOOL')
      expect(error.message).toMatch(message)
    }
    expect(ctx.tools.specs().map((spec) => spec.name)).toEqual(['echo'])
  })

  it('unregisters a tool when the plugin that registered it is disposed', async () => {
    const ctx = await boot()
    const plugin = await ctx.plugin({
      name: 'tool-echo',
      inject: ['tools'],
      apply: (pctx: Context) => void pctx.tools.register(echo()),
    })
    expect(ctx.tools.get('echo')).toBeDefined()
    await plugin.dispose()
    expect(ctx.tools.get('echo')).toBeUndefined()
    expect(ctx.tools.specs()).toEqual([])
  })
})

describe('execute', () => {
  it('passes the parsed input, with defaults applied, and the exact owner and call id', async () => {
    const ctx = await boot()
    let seen: { input: unknown; context: ToolExecuteContext } | undefined
    ctx.tools.register(
      echo({
        async execute(input, context) {
          seen = { input, context }
          return { content: [{ type: 'text', text: 'ok' }], meta: { n: 1 } }
        },
      }),
    )
    const context = call('call_7')
    const result = await ctx.tools.execute('echo', { text: 'hi' }, context)
    expect(result).toEqual({ content: [{ type: 'text', text: 'ok' }], meta: { n: 1 } })
    expect(seen?.input).toEqual({ text: 'hi', times: 1 })
    expect(seen?.context.agent).toBe(owner)
    expect(seen?.context.callId).toBe('call_7')
  })

  it('answers an unknown tool with an error that lists the available tools', async () => {
    const ctx = await boot()
    ctx.tools.register(echo())
    const result = await ctx.tools.execute('terminal_opne', {}, call())
    expect(result.isError).toBe(true)
    expect(toolResultText(result)).toBe('unknown tool "terminal_opne"; available tools: echo')
    await fiber!.dispose()
    const empty = await boot()
    expect(toolResultText(await empty.tools.execute('x', {}, call()))).toMatch(/no tools are registered/)
  })

  it('lists every invalid field by path and says to fix the arguments, without running the tool', async () => {
    const ctx = await boot()
    let ran = false
    ctx.tools.register(echo({ execute: async () => ((ran = true), { content: [] }) }))
    const result = await ctx.tools.execute('echo', { text: 5, times: 0, options: { upper: 'yes' } }, call())
    expect(result.isError).toBe(true)
    expect(result.meta).toEqual({ errorCode: 'INVALID_INPUT' })
    const text = toolResultText(result)
    expect(text.split('\n')[0]).toBe('invalid arguments for echo:')
    expect(text).toMatch(/^- text: .*expected string, received number$/m)
    expect(text).toMatch(/^- times: .*>=1$/m)
    expect(text).toMatch(/^- options\.upper: .*expected boolean/m)
    expect(text.split('\n').at(-1)).toBe('Fix the arguments and call echo again.')
    expect(ran).toBe(false)
    const notObject = await ctx.tools.execute('echo', null, call())
    expect(toolResultText(notObject)).toMatch(/^- \(arguments\): .*expected object/m)
  })

  it('turns a thrown error into an error result carrying its message and code', async () => {
    const ctx = await boot()
    class PtyLikeError extends Error {
      readonly code = 'NO_SESSION'
    }
    ctx.tools.register(echo({ name: 'coded', execute: async () => Promise.reject(new PtyLikeError('unknown PTY session pty-7')) }))
    ctx.tools.register(echo({ name: 'plain', execute: async () => Promise.reject(new Error('disk full')) }))
    ctx.tools.register(echo({ name: 'odd', execute: async () => Promise.reject('a string') }))
    const coded = await ctx.tools.execute('coded', { text: 'x' }, call())
    expect(coded).toEqual({
      content: [{ type: 'text', text: 'NO_SESSION: unknown PTY session pty-7' }],
      isError: true,
      meta: { errorCode: 'NO_SESSION' },
    })
    expect(await ctx.tools.execute('plain', { text: 'x' }, call())).toEqual({
      content: [{ type: 'text', text: 'disk full' }],
      isError: true,
    })
    expect(toolResultText(await ctx.tools.execute('odd', { text: 'x' }, call()))).toBe('a string')
  })

  it('reports a malformed result instead of passing it on', async () => {
    const ctx = await boot()
    ctx.tools.register(echo({ execute: async () => ({ content: 'not a list' }) as never }))
    const result = await ctx.tools.execute('echo', { text: 'x' }, call())
    expect(result.isError).toBe(true)
    expect(toolResultText(result)).toMatch(/echo returned an invalid result/)
  })

  it('does not start a tool whose call was already cancelled', async () => {
    const ctx = await boot()
    let ran = false
    ctx.tools.register(echo({ execute: async () => ((ran = true), { content: [] }) }))
    const controller = new AbortController()
    controller.abort(new Error('turn cancelled'))
    const result = await ctx.tools.execute('echo', { text: 'x' }, { ...call(), signal: controller.signal })
    expect(ran).toBe(false)
    expect(result.isError).toBe(true)
    expect(toolResultText(result)).toBe('echo was cancelled before it started')
  })
})

describe('result bounds', () => {
  it('bounds a result to the tool’s own limit with a truncation notice, cutting on code points', async () => {
    const ctx = await boot()
    ctx.tools.register(echo({ maxResultBytes: 100 }))
    const result = await ctx.tools.execute('echo', { text: 'é🐚', times: 200 }, call())
    const text = toolResultText(result)
    expect(result.content).toHaveLength(1)
    expect(utf8Bytes(text)).toBeLessThanOrEqual(100)
    expect(text).toMatch(/^(é🐚)+é?\n\[output truncated: \d+ bytes omitted\]$/)
    expect(result.isError).toBeUndefined()
  })

  it('applies the service limit to tools without their own, and to error texts', async () => {
    const ctx = await boot(64)
    ctx.tools.register(echo())
    const long = await ctx.tools.execute('echo', { text: 'x', times: 1000 }, call())
    expect(utf8Bytes(toolResultText(long))).toBeLessThanOrEqual(64)
    expect(toolResultText(long)).toContain('[output truncated: ')
    ctx.tools.register(echo({ name: 'fails', execute: async () => Promise.reject(new Error('e'.repeat(500))) }))
    const failed = await ctx.tools.execute('fails', { text: 'x' }, call())
    expect(failed.isError).toBe(true)
    expect(utf8Bytes(toolResultText(failed))).toBeLessThanOrEqual(64)
  })

  it('keeps a result within the limit exactly as the tool returned it', async () => {
    const ctx = await boot(64)
    const content = [
      { type: 'text' as const, text: 'first' },
      { type: 'text' as const, text: 'second' },
    ]
    ctx.tools.register(echo({ execute: async () => ({ content, meta: { kept: true } }) }))
    expect(await ctx.tools.execute('echo', { text: 'x' }, call())).toEqual({ content, meta: { kept: true } })
  })

  it('rejects a service limit below 64 bytes at load, naming the field', async () => {
    const ctx = new Context()
    await expect(ctx.plugin(ToolsService, { maxResultBytes: 10 })).rejects.toThrow(/at maxResultBytes/)
  })
})

describe('unknown fields', () => {
  it('rejects a field the schema does not name, with its path and the fields the tool takes, and does not run', async () => {
    const ctx = await boot()
    let ran = false
    ctx.tools.register(echo({ async execute() { ran = true; return { content: [{ type: 'text', text: 'ran' }] } } }))
    const result = await ctx.tools.execute('echo', { text: 'hi', wait: true, options: { upper: true, loud: 1 } }, call())
    expect(result.isError).toBe(true)
    expect(result.meta).toEqual({ errorCode: 'INVALID_INPUT' })
    expect(toolResultText(result)).toBe(
      'invalid arguments for echo:\n' +
        '- wait: unknown field; it takes text, times, options\n' +
        '- options.loud: unknown field; it takes upper\n' +
        'Fix the arguments and call echo again.',
    )
    expect(ran).toBe(false)
  })

  it('lists an unknown field next to the other issues', async () => {
    const ctx = await boot()
    ctx.tools.register(echo())
    const text = toolResultText(await ctx.tools.execute('echo', { text: 3, colour: 'red' }, call()))
    expect(text).toMatch(/^- text: .*expected string/m)
    expect(text).toMatch(/^- colour: unknown field; it takes text, times, options$/m)
  })

  it('offers a compact JSON Schema: no additionalProperties false or safe-integer bounds, unknown fields still refused', async () => {
    const ctx = await boot()
    const input = z.strictObject({ text: z.string(), count: z.number().int().optional(), options: z.object({ upper: z.boolean() }).optional() })
    ctx.tools.register({ name: 'echo', description: 'Echo.', input, async execute() { return { content: [{ type: 'text', text: 'ok' }] } } })
    const json = JSON.stringify(ctx.tools.specs()[0]!.parameters)
    expect(json).not.toContain('additionalProperties')
    expect(json).not.toContain(String(Number.MAX_SAFE_INTEGER))
    const text = toolResultText(await ctx.tools.execute('echo', { text: 'a', options: { upper: true, lower: true } }, call()))
    expect(text).toMatch(/^- options\.lower: unknown field; it takes upper$/m)
  })

  it('keeps a strict schema\'s own message for its unrecognized keys, and reports the key once', async () => {
    const ctx = await boot()
    const input = z.strictObject({ text: z.string() }, { error: (issue) => (issue.code === 'unrecognized_keys' ? 'that option is disabled here' : undefined) })
    ctx.tools.register({ name: 'strict', description: 'Strict.', input, async execute() { return { content: [{ type: 'text', text: 'ok' }] } } })
    const text = toolResultText(await ctx.tools.execute('strict', { text: 'a', extra: 1 }, call()))
    expect(text).toBe('invalid arguments for strict:\n- (arguments): that option is disabled here\nFix the arguments and call strict again.')
  })

  it('leaves open levels open: a loose object or a record takes any key', async () => {
    const ctx = await boot()
    const input = z.object({ env: z.record(z.string(), z.string()), extra: z.looseObject({ a: z.string() }).optional() })
    ctx.tools.register({ name: 'open', description: 'Open.', input, async execute(value) { return { content: [{ type: 'text', text: JSON.stringify(value) }] } } })
    const result = await ctx.tools.execute('open', { env: { ANY: 'x' }, extra: { a: 'b', c: 'd' } }, call())
    expect(result.isError).toBeUndefined()
    expect(toolResultText(result)).toBe('{"env":{"ANY":"x"},"extra":{"a":"b","c":"d"}}')
  })
})
