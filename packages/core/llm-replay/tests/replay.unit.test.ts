import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import LlmService, { LlmError, collectResponse, type ModelChunk, type ModelRequest } from '@conch/llm'
import * as replay from '../src/index.ts'
import { ReplayAdapter } from '../src/index.ts'

let dir: string
let ctx: Context
let fibers: { dispose(): Promise<void> }[]

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-replay-'))
  ctx = new Context()
  fibers = [await ctx.plugin(LlmService, {})]
})

afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  rmSync(dir, { recursive: true, force: true })
})

function script(lines: string[], name = 'script.jsonl'): string {
  const file = join(dir, name)
  writeFileSync(file, lines.join('\n') + '\n')
  return file
}

async function load(config: { script: string; provider?: string }): Promise<ReplayAdapter> {
  fibers.push(await ctx.plugin(replay, { provider: 'replay', ...config }))
  const adapter = ctx.llm.get(config.provider ?? 'replay')
  if (!(adapter instanceof ReplayAdapter)) throw new Error('the replay adapter is not registered')
  return adapter
}

function request(tools: string[] = [], signal?: AbortSignal): ModelRequest {
  const base: ModelRequest = {
    messages: [{ role: 'user', content: 'demo' }],
    tools: tools.map((name) => ({ name, description: name, parameters: { type: 'object' } })),
  }
  if (signal) base.signal = signal
  return base
}

async function chunksOf(stream: AsyncIterable<ModelChunk>): Promise<ModelChunk[]> {
  const all: ModelChunk[] = []
  for await (const chunk of stream) all.push(chunk)
  return all
}

async function loadError(lines: string[] | undefined, path?: string): Promise<LlmError> {
  const file = path ?? script(lines ?? [])
  const error = await ctx.plugin(replay, { script: file, provider: 'replay' }).then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(LlmError)
  expect((error as LlmError).code).toBe('SCRIPT_ERROR')
  return error as LlmError
}

describe('playing a script', () => {
  it('answers each model call with the next line: text deltas, then tool calls with deterministic ids', async () => {
    const file = script([
      JSON.stringify({ text: 'Opening a shell 🐚.', tool_calls: [
        { name: 'terminal_open', arguments: { type: 'bash' } },
        { name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'ls' } },
      ] }),
      '',
      JSON.stringify({ text: 'Done.' }),
    ])
    const adapter = await load({ script: file })
    expect(adapter.remaining()).toBe(2)
    const tools = ['terminal_open', 'terminal_send']

    const chunks = await chunksOf(adapter.stream(request(tools)))
    expect(chunks.filter((chunk) => chunk.type === 'text-delta').length).toBeGreaterThan(1)
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'tool_calls' })
    expect(await collectResponse((async function* () { yield* chunks })())).toEqual({
      text: 'Opening a shell 🐚.',
      toolCalls: [
        { id: 'call_1_0', name: 'terminal_open', arguments: '{"type":"bash"}' },
        { id: 'call_1_1', name: 'terminal_send', arguments: '{"sessionId":"pty-1","text":"ls"}' },
      ],
      finishReason: 'tool_calls',
    })
    expect(adapter.remaining()).toBe(1)

    const last = await collectResponse(adapter.stream(request(tools)))
    expect(last).toEqual({ text: 'Done.', toolCalls: [], finishReason: 'stop' })
    expect(adapter.remaining()).toBe(0)
    expect(adapter.consumed()).toBe(2)
  })

  it('streams the same chunks every time the same script is played', async () => {
    const file = script([JSON.stringify({ text: 'same text, same pieces', tool_calls: [{ name: 't', arguments: { a: [1, 2, 3] } }] })])
    const first = await chunksOf((await load({ script: file })).stream(request(['t'])))
    const second = await chunksOf((await load({ script: file, provider: 'again' })).stream(request(['t'])))
    expect(second).toEqual(first)
  })

  it('reports a call past the end, naming the script and its line count', async () => {
    const file = script([JSON.stringify({ text: 'only line' })])
    const adapter = await load({ script: file })
    await collectResponse(adapter.stream(request()))
    const error = await collectResponse(adapter.stream(request())).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LlmError)
    expect((error as LlmError).code).toBe('SCRIPT_EXHAUSTED')
    expect((error as LlmError).message).toBe(
      `the model script ${file} has no line for model call 2: its one line was used; add lines or shorten the task`,
    )
  })

  it('reports a tool the request does not offer, naming file, line and the available tools', async () => {
    const file = script(['', JSON.stringify({ tool_calls: [{ name: 'terminal_opne', arguments: {} }] })])
    const adapter = await load({ script: file })
    const error = await collectResponse(adapter.stream(request(['terminal_open', 'task_list']))).catch((e: unknown) => e)
    expect((error as LlmError).code).toBe('SCRIPT_ERROR')
    expect((error as LlmError).message).toBe(`${file}:2: tool "terminal_opne" is not available; available tools: terminal_open, task_list`)
  })

  it('rejects with the abort reason, before a line is consumed or in the middle of one', async () => {
    const file = script([JSON.stringify({ text: 'a fairly long answer in pieces' }), JSON.stringify({ text: 'next' })])
    const adapter = await load({ script: file })
    const early = new AbortController()
    early.abort(new Error('cancelled before the call'))
    await expect(collectResponse(adapter.stream(request([], early.signal)))).rejects.toThrow('cancelled before the call')
    expect(adapter.remaining()).toBe(2)

    const midway = new AbortController()
    const seen: ModelChunk[] = []
    const result = collectResponse(adapter.stream(request([], midway.signal)), (chunk) => {
      seen.push(chunk)
      midway.abort(new Error('cancelled mid-stream'))
    })
    await expect(result).rejects.toThrow('cancelled mid-stream')
    expect(seen).toHaveLength(1)
    expect(adapter.remaining()).toBe(1)
  })

  it('resolves a relative script path against the working directory and registers under the configured provider', async () => {
    const file = script([JSON.stringify({ text: 'hi' })], 'relative.jsonl')
    const adapter = await load({ script: relative(process.cwd(), file), provider: 'scripted' })
    expect(adapter.provider).toBe('scripted')
    expect(ctx.llm.resolve()).toBe(adapter)
  })

  it('unregisters the adapter when the plugin is unloaded', async () => {
    await load({ script: script([JSON.stringify({ text: 'hi' })]) })
    await fibers.pop()!.dispose()
    expect(ctx.llm.providers()).toEqual([])
  })
})

describe('validating a script at load', () => {
  it('names the line of invalid JSON', async () => {
    const error = await loadError([JSON.stringify({ text: 'ok' }), '{"text": "missing brace"'])
    expect(error.message).toMatch(/script\.jsonl:2: not valid JSON \(/)
  })

  it('names the line and field of a wrong shape', async () => {
    expect((await loadError(['{"tool_calls": [{"name": "t", "arguments": [1]}]}'])).message).toMatch(
      /script\.jsonl:1: tool_calls\.0\.arguments: .*expected record/,
    )
    expect((await loadError(['', '', '{"txt": "typo"}'])).message).toMatch(/script\.jsonl:3: .*Unrecognized key.*"txt"/)
    expect((await loadError(['{"text": "a"}', '{}'])).message).toMatch(/script\.jsonl:2: the line has neither "text" nor "tool_calls"/)
    expect((await loadError(['[1, 2]'])).message).toMatch(/script\.jsonl:1: the line: .*expected object/)
  })

  it('names every wrong line, the first three in the message', async () => {
    const two = await loadError(['{"txt": "a"}', '{"txt": "b"}', '{"text": "ok"}'])
    expect(two.message).toMatch(/^.*script\.jsonl:1: .*"txt".*; also .*script\.jsonl:2: .*"txt"/)
    const five = await loadError(['{', '{', '{"text": "ok"}', '{', '{', '{'])
    expect(five.message.match(/; also /g)).toHaveLength(3)
    expect(five.message).toMatch(/jsonl:5: not valid JSON .*; and 1 more line$/)
    expect((five as unknown as { details: { also: { line: number }[] } }).details.also.map((wrong) => wrong.line)).toEqual([2, 4, 5, 6])
  })

  it('refuses a missing or empty script', async () => {
    expect((await loadError(undefined, join(dir, 'nope.jsonl'))).message).toMatch(/cannot read the model script .*nope\.jsonl: ENOENT/)
    expect((await loadError(['', '  '])).message).toMatch(/script\.jsonl: the script has no lines/)
  })

  it('refuses a config without a script, naming the field', async () => {
    await expect(ctx.plugin(replay, {} as replay.Config)).rejects.toThrow(/at script/)
  })
})
