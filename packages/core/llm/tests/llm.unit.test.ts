import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import LlmService, { LlmError, collectResponse, type ModelAdapter, type ModelChunk } from '../src/index.ts'

let fiber: { dispose(): Promise<void> } | undefined

async function boot(config: LlmService.Config = {}): Promise<Context> {
  const ctx = new Context()
  fiber = await ctx.plugin(LlmService, config)
  return ctx
}

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
})

function adapter(provider: string): ModelAdapter {
  return {
    provider,
    async *stream() {
      yield { type: 'finish', reason: 'stop' }
    },
  }
}

async function* chunks(list: ModelChunk[]): AsyncIterable<ModelChunk> {
  for (const chunk of list) yield chunk
}

function caught(fn: () => unknown): LlmError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(LlmError)
    return error as LlmError
  }
  throw new Error('expected an LlmError')
}

describe('the adapter registry', () => {
  it('registers adapters by provider name and refuses a second one with the same name', async () => {
    const ctx = await boot()
    const first = adapter('replay')
    ctx.llm.register(first)
    const error = caught(() => ctx.llm.register(adapter('replay')))
    expect(error.code).toBe('DUPLICATE_PROVIDER')
    expect(error.message).toMatch(/provider "replay" is already registered/)
    expect(ctx.llm.get('replay')).toBe(first)
    expect(ctx.llm.providers()).toEqual(['replay'])
  })

  it('unregisters an adapter when the plugin that registered it is disposed', async () => {
    const ctx = await boot()
    const plugin = await ctx.plugin({
      name: 'fake-model',
      inject: ['llm'],
      apply: (pctx: Context) => void pctx.llm.register(adapter('fake')),
    })
    expect(ctx.llm.providers()).toEqual(['fake'])
    await plugin.dispose()
    expect(ctx.llm.providers()).toEqual([])
    expect(ctx.llm.get('fake')).toBeUndefined()
  })

  it('resolves the named provider, then the configured one, then the only one', async () => {
    const ctx = await boot()
    const only = adapter('openai')
    ctx.llm.register(only)
    expect(ctx.llm.resolve()).toBe(only)
    const replay = adapter('replay')
    ctx.llm.register(replay)
    expect(ctx.llm.resolve('replay')).toBe(replay)
    const ambiguous = caught(() => ctx.llm.resolve())
    expect(ambiguous.code).toBe('AMBIGUOUS_PROVIDER')
    expect(ambiguous.message).toMatch(/\(openai, replay\); set the llm "provider" config/)
    await fiber!.dispose()

    const configured = await boot({ provider: 'replay' })
    configured.llm.register(only)
    configured.llm.register(replay)
    expect(configured.llm.resolve()).toBe(replay)
  })

  it('names the registered providers when the wanted one is missing', async () => {
    const ctx = await boot({ provider: 'openai' })
    const none = caught(() => ctx.llm.resolve())
    expect(none.code).toBe('NO_PROVIDER')
    expect(none.message).toMatch(/no model adapter for provider "openai"; registered: \(none\)/)
    ctx.llm.register(adapter('replay'))
    expect(caught(() => ctx.llm.resolve('gpt')).message).toMatch(/"gpt"; registered: replay/)
    await fiber!.dispose()
    const empty = await boot()
    expect(caught(() => empty.llm.resolve()).message).toMatch(/load @conch\/llm-openai or @conch\/llm-replay/)
  })
})

describe('collectResponse', () => {
  it('joins text deltas and assembles interleaved tool-call deltas by index', async () => {
    const seen: string[] = []
    const response = await collectResponse(
      chunks([
        { type: 'text-delta', text: 'Let me ' },
        { type: 'text-delta', text: 'look.' },
        { type: 'tool-call-delta', index: 1, id: 'call_b', name: 'terminal_read', argumentsDelta: '{"sess' },
        { type: 'tool-call-delta', index: 0, id: 'call_a', name: 'terminal_open', argumentsDelta: '' },
        { type: 'tool-call-delta', index: 1, argumentsDelta: 'ionId":"pty-1"}' },
        { type: 'tool-call-delta', index: 0, argumentsDelta: '{"type":"bash"}' },
        { type: 'usage', inputTokens: 120, outputTokens: 30 },
        { type: 'finish', reason: 'tool_calls' },
      ]),
      (chunk) => void seen.push(chunk.type),
    )
    expect(response).toEqual({
      text: 'Let me look.',
      toolCalls: [
        { id: 'call_a', name: 'terminal_open', arguments: '{"type":"bash"}' },
        { id: 'call_b', name: 'terminal_read', arguments: '{"sessionId":"pty-1"}' },
      ],
      finishReason: 'tool_calls',
      usage: { inputTokens: 120, outputTokens: 30 },
    })
    expect(seen).toHaveLength(8)
  })

  it('reports "other" when the stream ends without a finish chunk, and names calls without an id', async () => {
    const response = await collectResponse(chunks([{ type: 'tool-call-delta', index: 3, name: 'task_list', argumentsDelta: '{}' }]))
    expect(response.finishReason).toBe('other')
    expect(response.toolCalls).toEqual([{ id: 'call_3', name: 'task_list', arguments: '{}' }])
    expect(response.usage).toBeUndefined()
  })

  it('rejects a tool call that never received a name', async () => {
    const error = await collectResponse(chunks([{ type: 'tool-call-delta', index: 0, argumentsDelta: '{}' }])).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LlmError)
    expect((error as LlmError).code).toBe('MODEL_ERROR')
    expect((error as LlmError).message).toMatch(/tool call #0 without a function name/)
  })

  it('propagates a stream failure unchanged', async () => {
    const failure = new LlmError('MODEL_ERROR', { reason: 'upstream said 500' })
    async function* failing(): AsyncIterable<ModelChunk> {
      yield { type: 'text-delta', text: 'partial' }
      throw failure
    }
    await expect(collectResponse(failing())).rejects.toBe(failure)
  })
})
