/**
 * One turn of the agent loop: prompt → model → tool calls in order → model … until the model
 * answers without tool calls, `maxSteps` model calls were made, the turn is cancelled, or the
 * model fails. Every step is appended to the agent's session as it happens.
 */
import type { Logger } from 'cordis'
import { collectResponse, type LlmServiceApi, type ModelTool } from '@conch/llm'
import { messageOf } from '@conch/session'
import { errorResult, toolResultText, type ToolDefinition, type ToolResult, type ToolsServiceApi } from '@conch/tools'
import type { AgentHandle } from './agent.ts'
import type { AssistantMessageData, ToolCallData, ToolResultData, TurnEndData, TurnStartData, UserMessageData } from './events.ts'
import { buildMessages } from './history.ts'
import { renderNotification, renderNotifications } from './notification.ts'
import type { AgentRunEvent, Notification, RunOptions, RunResult } from './types.ts'

export interface TurnDependencies {
  tools: ToolsServiceApi
  llm: LlmServiceApi
  maxSteps: number
  systemPrompt(agent: AgentHandle): string
  logger: Logger
}

type Arguments = { ok: true; value: unknown } | { ok: false; error: string }

/**
 * Runs one turn to its end and appends `turn/end`. Never rejects for model or tool failures:
 * they end the turn with status `error`. Rejects only when `turn/start` or `user/message`
 * cannot be appended (an interceptor vetoed it, or the session is closed).
 */
export async function runTurn(deps: TurnDependencies, agent: AgentHandle, options: RunOptions, woken: readonly Notification[] = []): Promise<RunResult> {
  const signal = options.signal ? AbortSignal.any([agent.signal, options.signal]) : agent.signal
  const log = agent.session
  const emit = (event: AgentRunEvent): void => {
    if (!options.onEvent) return
    try {
      options.onEvent(event)
    } catch (error) {
      deps.logger.warn('onEvent failed on %s of %s: %s', event.type, agent.id, error)
    }
  }
  log.append<TurnStartData>('turn/start', { prompt: options.prompt })
  log.append<UserMessageData>('user/message', { text: options.prompt })
  announce(log, emit, woken)

  const counter = { steps: 0 }
  let result: RunResult
  try {
    result = await steps(deps, agent, signal, emit, counter)
  } catch (error) {
    result = signal.aborted ? cancelled(signal, counter.steps) : failed(error, counter.steps)
  }
  try {
    log.append<TurnEndData>('turn/end', { status: result.status, text: result.text, steps: result.steps })
  } catch (error) {
    deps.logger.warn('could not append turn/end to session %s: %s', log.id, error)
  }
  return result
}

async function steps(
  deps: TurnDependencies,
  agent: AgentHandle,
  signal: AbortSignal,
  emit: (event: AgentRunEvent) => void,
  counter: { steps: number },
): Promise<RunResult> {
  const log = agent.session
  while (true) {
    if (signal.aborted) return cancelled(signal, counter.steps)
    const adapter = deps.llm.resolve()
    const tools: ModelTool[] = deps.tools.specs().map(({ name, description, parameters }) => ({ name, description, parameters }))
    const messages = buildMessages(deps.systemPrompt(agent), log.events())
    counter.steps++
    let response
    const deltas = log.liveRedaction()
    const delta = (text: string): void => {
      if (text !== '') emit({ type: 'text-delta', text })
    }
    try {
      response = await abortable(
        collectResponse(adapter.stream({ messages, tools, signal }), (chunk) => {
          if (chunk.type === 'text-delta' && chunk.text !== '') delta(deltas.push(chunk.text))
        }),
        signal,
      )
    } catch (error) {
      return signal.aborted ? cancelled(signal, counter.steps) : failed(error, counter.steps)
    }
    delta(deltas.push('', true))
    const said = log.append<AssistantMessageData>('assistant/message', { text: response.text, toolCalls: response.toolCalls }).data
    if (said.text !== '') emit({ type: 'assistant', text: said.text })
    if (response.toolCalls.length === 0) return { status: 'completed', text: said.text, steps: counter.steps }

    for (const call of response.toolCalls) {
      const definition = deps.tools.get(call.name)
      const parsed = parseArguments(call.arguments)
      const shownArguments = parsed.ok ? parsed.value : call.arguments
      // What reaches the client is what the log recorded (redacted, bounded), never more.
      const logged = log.append<ToolCallData>('tool/call', { callId: call.id, name: call.name, arguments: shownArguments })
      emit({
        type: 'tool-call',
        callId: call.id,
        name: call.name,
        arguments: logged.data.arguments,
        title: titleOf(definition, call.name, parsed),
        kind: definition?.kind ?? 'other',
      })
      let result: ToolResult
      // Progress is redacted as a stream: a value split across two pieces is still found.
      const live = log.liveRedaction()
      const progress = (text: string): void => {
        if (text !== '') emit({ type: 'tool-progress', callId: call.id, name: call.name, text })
      }
      if (signal.aborted) {
        result = errorResult(`${call.name} was not run: the turn was cancelled`)
      } else if (!parsed.ok) {
        result = errorResult(
          `the arguments of ${call.name} are not valid JSON (${parsed.error}); call ${call.name} again with a JSON object that matches its parameters`,
        )
      } else {
        try {
          result = await deps.tools.execute(call.name, parsed.value, {
            agent,
            signal,
            callId: call.id,
            progress: (update) => progress(live.push(update.text)),
          })
        } catch (error) {
          result = errorResult(messageOf(error))
        }
        progress(live.push('', true))
      }
      // Notifications queued until now ride on this result: one place for every tool.
      const delivered = agent.deliver()
      const resultText = toolResultText(result)
      const text = delivered.length === 0 ? resultText : `${resultText}\n\n${renderNotifications(delivered)}`
      const data: ToolResultData = { callId: call.id, name: call.name, isError: result.isError === true, text }
      if (result.meta) data.meta = result.meta
      const recorded = log.append<ToolResultData>('tool/result', data).data
      const shown: ToolResult = { ...result, content: [{ type: 'text', text: recorded.text }] }
      if (recorded.meta === undefined) delete shown.meta
      else shown.meta = recorded.meta
      emit({ type: 'tool-result', callId: call.id, name: call.name, result: shown })
      announce(log, emit, delivered)
    }
    if (signal.aborted) return cancelled(signal, counter.steps)
    if (counter.steps >= deps.maxSteps) {
      return {
        status: 'max_steps',
        text: `stopped after ${counter.steps} model calls without a final answer (maxSteps is ${deps.maxSteps})`,
        steps: counter.steps,
      }
    }
  }
}

/** Emits each delivered notification as the log would record it. */
function announce(log: AgentHandle['session'], emit: (event: AgentRunEvent) => void, delivered: readonly Notification[]): void {
  for (const notification of delivered) {
    const shown: Notification = { source: log.redact(notification.source), event: log.redact(notification.event), wake: notification.wake }
    for (const key of ['label', 'evidence', 'tail'] as const) {
      const value = notification[key]
      if (value !== undefined) shown[key] = log.redact(value)
    }
    emit({ type: 'notification', notification: shown, text: log.redact(renderNotification(notification)) })
  }
}

/** An empty arguments text means no arguments (some models send `""` for a tool without parameters). */
function parseArguments(text: string): Arguments {
  if (text.trim() === '') return { ok: true, value: {} }
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch (error) {
    return { ok: false, error: (error as Error).message }
  }
}

function titleOf(definition: ToolDefinition | undefined, name: string, parsed: Arguments): string {
  if (!definition?.title || !parsed.ok) return name
  try {
    const input = definition.input.safeParse(parsed.value)
    return input.success ? definition.title(input.data) : name
  } catch {
    return name
  }
}

function cancelled(signal: AbortSignal, steps: number): RunResult {
  const reason: unknown = signal.reason
  const why = reason instanceof Error ? reason.message : reason === undefined ? 'the turn was cancelled' : String(reason)
  const result: RunResult = { status: 'cancelled', text: why, steps }
  if (reason instanceof Error) result.error = reason
  return result
}

function failed(error: unknown, steps: number): RunResult {
  const cause = error instanceof Error ? error : new Error(String(error))
  return { status: 'error', text: cause.message, steps, error: cause }
}

/**
 * Settles with `promise`, or rejects with `signal.reason` as soon as the signal aborts, so a
 * model adapter that is slow to notice the abort cannot hold the turn open. A late rejection of
 * the abandoned promise is absorbed.
 */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {})
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}
