/**
 * run_code end to end with real node processes under bubblewrap: terminals driven from code,
 * nested calls logged with their parent, tool errors as values, what the model sees.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { ToolCallData, ToolResultData } from '@conch/agent'
import type { SessionEvent } from '@conch/session'
import { DESCRIPTION, RUN_CODE } from '../src/index.ts'
import { boot, type Harness } from './harness.ts'

// Every test starts real node processes (and bubblewrap); on a loaded 2-core machine one can take seconds.
vi.setConfig({ testTimeout: 60_000 })

let h: Harness
/** Every event appended, nested calls included (memory keeps only what replay needs). */
const appended: SessionEvent[] = []
beforeAll(async () => {
  h = await boot()
  h.ctx.sessions.subscribe((event) => void appended.push(event))
})
afterAll(async () => {
  await h.dispose()
})

describe('run_code', () => {
  it('drives a terminal from code: nested calls run in order and are logged with their parent call id', async () => {
    const code = [
      'const opened = await tools.terminal_open({ type: "shell" })',
      'const id = opened.meta!.sessionId as string',
      'const lines: string[] = []',
      'for (const n of [1, 2, 3]) {',
      '  const sent = await tools.terminal_send({ sessionId: id, text: `echo square-${n * n}` })',
      '  lines.push(sent.text.split("\\n").find((line) => line.startsWith("square-"))!)',
      '}',
      'await tools.terminal_close({ sessionId: id })',
      'console.log("done with", id)',
      'return { id, lines }',
    ].join('\n')
    const before = appended.length
    const result = await h.call(RUN_CODE, { code }, { callId: 'outer-1' })
    const text = result.content[0]!.text
    expect(result.isError, text).toBeUndefined()
    expect(text).toContain('done with pty-1')
    expect(text).toContain('"square-9"')
    expect(text).toMatch(/\n\[run_code: ok in \d+ ms, 5 tool calls\]$/)
    expect(result.meta).toMatchObject({ status: 'ok', toolCalls: 5, sandbox: { mode: 'workspace-write', enforcement: 'full' } })

    const nested = appended.slice(before)
    expect(nested.map((event) => `${event.type} ${(event.data as ToolCallData).name}`)).toEqual([
      'tool/call terminal_open',
      'tool/result terminal_open',
      'tool/call terminal_send',
      'tool/result terminal_send',
      'tool/call terminal_send',
      'tool/result terminal_send',
      'tool/call terminal_send',
      'tool/result terminal_send',
      'tool/call terminal_close',
      'tool/result terminal_close',
    ])
    for (const [index, event] of nested.entries()) {
      const data = event.data as ToolCallData & ToolResultData
      expect(data.parentCallId).toBe('outer-1')
      expect(data.callId).toBe(`outer-1.${Math.floor(index / 2) + 1}`)
    }
    expect((nested[3]!.data as ToolResultData).text).toContain('square-1')
  })

  it('a tool error is a normal return value, and validation still applies to nested calls', async () => {
    const code = 'const bad = await tools.terminal_send({ sessionId: "pty-99", text: "x" })\nconst invalid = await tools.terminal_send({ nope: 1 } as any)\nreturn { bad: [bad.isError, bad.text], invalid: [invalid.isError, invalid.text] }'
    const result = await h.call(RUN_CODE, { code })
    const text = result.content[0]!.text
    expect(result.isError, text).toBeUndefined()
    expect(text).toContain('NO_SESSION')
    expect(text).toContain('invalid arguments for terminal_send')
  })

  it('run_code is not callable from code', async () => {
    const result = await h.call(RUN_CODE, { code: 'return typeof (tools as any).run_code' })
    expect(result.content[0]!.text).toContain('"undefined"')
  })

  it('another agent\'s terminal is fenced from code as from a direct call', async () => {
    const other = await h.ctx.agents.create()
    try {
      const opened = await h.ctx.tools.execute('terminal_open', { type: 'shell' }, { agent: other, signal: new AbortController().signal, callId: 'x' })
      const foreign = opened.meta!['sessionId'] as string
      const result = await h.call(RUN_CODE, { code: `return (await tools.terminal_read({ sessionId: ${JSON.stringify(foreign)} })).text` })
      expect(result.content[0]!.text).toMatch(/FOREIGN_SESSION|NO_SESSION/)
    } finally {
      await h.ctx.agents.dispose(other)
    }
  })

  it('a failing program is isError, keeps its logs and says what failed', async () => {
    const result = await h.call(RUN_CODE, { code: 'console.log("before the throw")\nawait tools.terminal_list({})\nthrow new Error("nope")' })
    const text = result.content[0]!.text
    expect(result.isError).toBe(true)
    expect(text.split('\n')[0]).toBe('before the throw')
    expect(text).toContain('exception: Error: nope')
    expect(text).toContain('program.ts:3:7')
    expect(text).toMatch(/\[run_code: exception after \d+ ms, 1 tool call\]$/)
  })

  it('a write the sandbox denies is reported before the status line', async () => {
    const result = await h.call(RUN_CODE, { code: 'try { require("node:fs").writeFileSync("/etc/conch-denied", "x") } catch (e) { console.log((e as Error).message) }\nreturn null' })
    const text = result.content[0]!.text
    expect(text).toMatch(/EROFS/)
    expect(text).toMatch(/\[sandbox: workspace-write denied EROFS\]\n\[run_code: ok in \d+ ms, 0 tool calls\]$/)
    expect(result.meta).toMatchObject({ sandbox: { denials: 1 } })
  })

  it('a timeout reports the deadline and the calls made', async () => {
    const result = await h.call(RUN_CODE, { code: 'await tools.terminal_list({})\nawait tools.terminal_list({})\nwhile (true) {}', timeoutMs: 1000 })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toMatch(/\[run_code: timeout after 1000 ms, 2 tool calls\]$/)
  })

  it('cancelling the call aborts the program and its nested call', async () => {
    const controller = new AbortController()
    const pending = h.call(RUN_CODE, { code: 'const t = await tools.terminal_open({ type: "shell" })\nawait tools.terminal_send({ sessionId: t.meta!.sessionId as string, text: "hold waiting" })\nreturn 1' }, { signal: controller.signal })
    // The memory shell's `hold` keeps the send open until it is cancelled: wait for the nested send to start.
    while (!appended.some((event) => event.type === 'tool/call' && (event.data as ToolCallData).name === 'terminal_send' && JSON.stringify(event.data).includes('hold waiting'))) {
      await new Promise((resolve) => setImmediate(resolve))
    }
    controller.abort(new Error('the turn was cancelled'))
    const result = await pending
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toMatch(/\[run_code: abort after \d+ ms, 2 tool calls\]$/)
  })

  it("a program's nested calls fill at most maxLogBytes of the log, the result's meta says what was cut, and memory keeps none of them", async () => {
    const small = await boot({ toolPtc: { maxLogBytes: 65_536 } })
    const seen: SessionEvent[] = []
    small.ctx.sessions.subscribe((event) => void seen.push(event))
    try {
      const code = [
        'const t = await tools.terminal_open({ type: "shell" })',
        'const sessionId = t.meta!.sessionId as string',
        'await tools.terminal_send({ sessionId, text: "seq 1 3000" })',
        'let chars = 0',
        'for (let i = 0; i < 1000; i++) chars += (await tools.terminal_read({ sessionId, count: 500 })).text.length',
        'return chars',
      ].join('\n')
      const result = await small.call(RUN_CODE, { code }, { callId: 'flood' })
      expect(result.isError, result.content[0]!.text).toBeUndefined()
      const nested = seen.filter((event) => (event.data as ToolCallData).parentCallId === 'flood')
      const logged = nested.reduce((sum, event) => sum + Buffer.byteLength(JSON.stringify(event)) + 1, 0)
      expect(logged).toBeLessThanOrEqual(65_536)
      // The program itself got every page whole: far more than the log holds.
      const chars = JSON.parse(result.content[0]!.text.split('\n')[0]!) as number
      expect(chars).toBeGreaterThan(1_000_000)
      const log = result.meta!['log'] as { maxLogBytes: number; omittedCalls: number; omittedBytes: number }
      expect(log.maxLogBytes).toBe(65_536)
      expect(log.omittedCalls).toBe(1002 - nested.length / 2)
      expect(log.omittedBytes).toBeGreaterThan(chars - 65_536)
      expect(nested.some((event) => /output truncated: \d+ bytes omitted/.test((event.data as ToolResultData).text ?? ''))).toBe(true)
      expect(small.agent.session.events().filter((event) => (event.data as ToolCallData).parentCallId !== undefined)).toEqual([])
    } finally {
      await small.dispose()
    }
  })

  it('the result is bounded by maxResultBytes and keeps the status line', async () => {
    const small = await boot({ toolPtc: { maxResultBytes: 300 } })
    try {
      const text = await small.text(RUN_CODE, { code: 'console.log("é".repeat(1000))\nreturn 1' })
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(300)
      expect(text).not.toContain('\uFFFD')
      expect(text).toMatch(/bytes cut/)
      expect(text).toMatch(/\[run_code: ok in \d+ ms, 0 tool calls\]$/)
    } finally {
      await small.dispose()
    }
  })
})

describe('what the model is offered', () => {
  it('the description names the binding and its result instead of restating the other tools', () => {
    const spec = h.ctx.tools.specs().find((tool) => tool.name === RUN_CODE)!
    expect(spec.description).toBe(DESCRIPTION)
    expect(spec.description).toContain('`await tools.<name>(args)`')
    expect(spec.description).toContain('{text, isError, meta}')
    for (const other of h.ctx.tools.names().filter((name) => name !== RUN_CODE)) expect(spec.description).not.toContain(other)
    expect(spec.parameters).toMatchObject({ type: 'object', required: ['code'] })
  })
})
