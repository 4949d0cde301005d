/**
 * A real Cordis composition of the spine (sessions, tools, llm, agents) with a scripted model
 * adapter whose every call is recorded, for the agent-loop tests.
 */
import { Context } from 'cordis'
import LlmService, { type ModelAdapter, type ModelChunk, type ModelRequest } from '@conch/llm'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import AgentService from '../src/index.ts'

export type Step = { text?: string; calls?: { id?: string; name: string; arguments: string }[] } | ((request: ModelRequest) => AsyncIterable<ModelChunk>)

export interface Harness {
  ctx: Context
  requests: ModelRequest[]
  /** Model steps consumed in order; a call past the end rejects. */
  steps: Step[]
  warnings: string[]
  dispose(): Promise<void>
}

export async function boot(config: { maxSteps?: number; instructions?: string; wakeWaitMs?: number } = {}): Promise<Harness> {
  const ctx = new Context()
  const warnings: string[] = []
  ctx.logger.exporter({
    export: (message) => {
      if (message.type === 'warn' || message.type === 'error') warnings.push(message.args.map(String).join(' '))
    },
  })
  const requests: ModelRequest[] = []
  const steps: Step[] = []
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, { maxResultBytes: 262144 }))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse(config)))
  const adapter: ModelAdapter = {
    provider: 'test',
    stream(request) {
      requests.push(structuredClone({ messages: request.messages, tools: request.tools }))
      const step = steps.shift()
      if (step === undefined) throw new Error('the test script has no more model steps')
      if (typeof step === 'function') return step(request)
      return fromStep(step)
    },
  }
  ctx.llm.register(adapter)
  return {
    ctx,
    requests,
    steps,
    warnings,
    async dispose() {
      for (const fiber of fibers.reverse()) await fiber.dispose()
    },
  }
}

async function* fromStep(step: Exclude<Step, Function>): AsyncIterable<ModelChunk> {
  if (step.text) {
    const middle = Math.ceil(step.text.length / 2)
    yield { type: 'text-delta', text: step.text.slice(0, middle) }
    yield { type: 'text-delta', text: step.text.slice(middle) }
  }
  for (const [index, call] of (step.calls ?? []).entries()) {
    yield { type: 'tool-call-delta', index, id: call.id ?? `call_${index}`, name: call.name, argumentsDelta: call.arguments }
  }
  yield { type: 'finish', reason: step.calls?.length ? 'tool_calls' : 'stop' }
}

/** A promise with its resolver, for waiting on a token instead of sleeping. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => (resolve = r))
  return { promise, resolve }
}

/** Resolves when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason)
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true })
  })
}
