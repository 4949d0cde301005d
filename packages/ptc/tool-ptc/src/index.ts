/**
 * `@conch/tool-ptc`: the `run_code` tool. The model's program runs through `ctx.ptc` under the
 * agent's sandbox policy, with every other tool bound as `tools.<name>(args)`: each call goes
 * through `ctx.tools.execute` and is logged as a nested `tool/call` / `tool/result` pair.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import type { ToolCallData, ToolResultData } from '@conch/agent'
import { nameProblem, type JsonValue, type PtcBinding, type PtcFunction, type PtcServiceApi } from '@conch/ptc'
import { boundWithNotice, MIN_RESULT_BYTES, toolResultText, utf8Bytes, type ToolExecuteContext, type ToolsServiceApi } from '@conch/tools'
import { renderResult } from './render.ts'

export { renderResult, statusLine } from './render.ts'

export const name = 'tool-ptc'
export const inject = ['ptc', 'tools']

/** The tool's own name; it is never bound inside a program. */
export const RUN_CODE = 'run_code'

export const Config = z
  .strictObject({
    maxResultBytes: z
      .number()
      .int()
      .min(MIN_RESULT_BYTES)
      .default(262144)
      .describe('Bound of the rendered result (logs, value, status line), in UTF-8 bytes.'),
    maxLogBytes: z
      .number()
      .int()
      .nonnegative()
      .default(1_048_576)
      .describe("Bytes of nested calls' arguments and result texts one run writes to the session log; past it a result is cut and later calls are not logged, counted in the result's meta.log."),
  })
  .prefault({})

export type Config = z.output<typeof Config>

/**
 * The description. The other tools' schemas are in the same request, so it names the binding
 * and its result shape instead of restating them.
 */
export const DESCRIPTION = [
  'Run a TypeScript program (the body of an async function: top-level await and return work; erasable types only, no enum or namespace) in a fresh Node process under your sandbox; returns its console output, its return value as JSON and a status line.',
  'Each of your other tools is `await tools.<name>(args)` with the arguments its schema takes, resolving to {text, isError, meta}; a tool error is a result with isError: true, not an exception.',
  'Use it for loops, for polling a terminal until a condition holds and for combining many results; return a small JSON value (no undefined, NaN, Map or class instances).',
  'process.env is empty but for the network proxy\'s variables under an allowlist (fetch goes through it); require("node:fs") and the other Node APIs work inside the sandbox. Nothing is kept between runs.',
].join(' ')

export const apply = (ctx: Context, config: Config) => {
  const ptc: PtcServiceApi = ctx.ptc
  const tools: ToolsServiceApi & { names(): string[] } = ctx.tools

  /** The tools a program may call: every registered tool but run_code whose name is a legal binding. */
  const bindable = (): string[] => tools.names().filter((tool) => tool !== RUN_CODE && nameProblem(tool, 'function') === undefined)

  const definition = {
    name: RUN_CODE,
    description: DESCRIPTION,
    kind: 'execute' as const,
    maxResultBytes: config.maxResultBytes,
    input: z.object({
      code: z.string().min(1, 'code is empty: pass the program text'),
      timeoutMs: z.number().int().positive().optional().describe('Deadline in ms, nested calls included'),
    }),
    title: (input: { code: string }) => `run_code: ${firstLine(input.code)}`,
    async execute(input: { code: string; timeoutMs?: number | undefined }, context: ToolExecuteContext) {
      const { agent, signal, callId } = context
      const spec = ptc.resolve({ code: input.code, ...(input.timeoutMs !== undefined && { timeoutMs: input.timeoutMs }) }, agent)
      const counter = { calls: 0 }
      // One signal for every nested call of this run (the run's own signal is the same object
      // for each call): AbortSignal.any per call costs more than many a tool.
      let combined: { run: AbortSignal; signal: AbortSignal } | undefined
      const callSignal = (runSignal: AbortSignal): AbortSignal =>
        combined?.run === runSignal ? combined.signal : (combined = { run: runSignal, signal: AbortSignal.any([signal, runSignal]) }).signal
      // The run's share of the session log: nested calls are logged whole while it lasts, each
      // event counted with its envelope (seq, ts, session id, type).
      const log = { left: config.maxLogBytes, omittedCalls: 0, omittedBytes: 0 }
      const cost = (data: object): number => utf8Bytes(JSON.stringify(data)) + 128 + agent.session.id.length
      const call = (tool: string): PtcFunction => async (args, { signal: runSignal }) => {
        const nestedId = `${callId}.${++counter.calls}`
        const callData: ToolCallData = { callId: nestedId, name: tool, arguments: args, parentCallId: callId }
        const callCost = cost(callData)
        const logged = log.left >= callCost
        if (logged) {
          log.left -= callCost
          agent.session.append<ToolCallData>('tool/call', callData)
        }
        const result = await tools.execute(tool, args, { agent, signal: callSignal(runSignal), callId: nestedId, parentCallId: callId })
        const text = toolResultText(result)
        if (logged) {
          const data: ToolResultData = { callId: nestedId, name: tool, isError: result.isError === true, text, parentCallId: callId }
          if (result.meta) data.meta = result.meta
          const over = cost(data) - log.left
          if (over > 0) data.text = boundWithNotice(text, Math.max(MIN_RESULT_BYTES, utf8Bytes(text) - over)).text
          log.left = Math.max(0, log.left - cost(data))
          agent.session.append<ToolResultData>('tool/result', data)
        } else {
          log.omittedCalls++
          log.omittedBytes += callCost + utf8Bytes(text)
        }
        const meta = result.meta === undefined ? null : (JSON.parse(JSON.stringify(result.meta)) as JsonValue)
        return { text, isError: result.isError === true, meta }
      }
      const binding: PtcBinding = { global: 'tools', functions: Object.fromEntries(bindable().map((tool) => [tool, call(tool)])) }
      const result = await ptc.run(spec, { bindings: [binding], signal })
      const text = renderResult(result, { toolCalls: counter.calls, timeoutMs: spec.timeoutMs, maxBytes: config.maxResultBytes, redact: (text) => agent.session.redact(text) })
      const meta: Record<string, unknown> = {
        status: result.ok ? 'ok' : result.failure.kind,
        toolCalls: counter.calls,
        sandbox: { mode: result.sandbox.mode, enforcement: result.sandbox.enforcement, denials: result.sandbox.denials.length },
      }
      if (result.sandbox.refused !== undefined) meta['networkRefused'] = result.sandbox.refused
      if (log.omittedCalls > 0) meta['log'] = { maxLogBytes: config.maxLogBytes, omittedCalls: log.omittedCalls, omittedBytes: log.omittedBytes }
      return { content: [{ type: 'text' as const, text }], ...(!result.ok && { isError: true }), meta }
    },
  }
  tools.register(definition)
}

function firstLine(code: string): string {
  const line = code.split('\n').find((text) => text.trim() !== '') ?? ''
  return line.length > 60 ? `${line.slice(0, 57)}...` : line.trim()
}
