/**
 * `ctx.subagents`: the provider registry and the run lifecycle every provider shares (capability
 * check, publish boundary, cancellation, session-log events, teardown). A run is
 * running → settled → disposed; a failed teardown stays `settled` and may be retried.
 */
import { setMaxListeners } from 'node:events'
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import { messageOf, registerUnique } from '@conch/session'
import {
  SubagentError,
  type ContentBlock,
  type ProviderOutcome,
  type ProviderRequest,
  type ProviderRun,
  type SubagentCapabilities,
  type SubagentEndData,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentResult,
  type SubagentRun,
  type SubagentServiceApi,
  type SubagentStartData,
  type SubagentStopReason,
  type SubagentUpdate,
} from './types.ts'
import { PROVIDER_NAME } from './out-of-process.ts'

declare module 'cordis' {
  interface Context {
    subagents: SubagentService
  }
}

/** Request fields that need a capability, in the order they are checked. */
const CAPABILITY_FIELDS: ReadonlyArray<[keyof SubagentCapabilities, (request: SubagentRequest) => boolean]> = [
  ['outputSchema', (request) => request.outputSchema !== undefined],
  ['depthLimit', (request) => request.maxDepth !== undefined],
  ['toolFilter', (request) => request.toolFilter !== undefined],
  ['persona', (request) => request.persona !== undefined],
]

type RunState = 'running' | 'settled' | 'disposed'

/** The service's record of one published run. */
class Run implements SubagentRun {
  state: RunState = 'running'
  readonly result: Promise<SubagentResult>
  private settleResult!: (result: SubagentResult) => void
  private text = ''
  private bytes = 0
  private truncated = false
  private teardown: Promise<void> | undefined
  private providerRun: ProviderRun | undefined
  private deadline: ReturnType<typeof setTimeout> | undefined
  private readonly cleanups: Array<() => void> = []

  constructor(
    readonly id: string,
    readonly provider: string,
    readonly controller: AbortController,
    private readonly request: SubagentRequest,
    private readonly startedAt: number,
    /** When the run must have ended, in ms from `startedAt`. */
    private readonly timeoutMs: number,
    private readonly maxOutputBytes: number,
    private readonly onSettled: (run: Run, result: SubagentResult, durationMs: number) => void,
    private readonly onGone: (run: Run) => void,
  ) {
    this.result = new Promise((resolve) => (this.settleResult = resolve))
  }

  get childId(): string {
    return this.providerRun?.childId ?? ''
  }

  /** A tool update came after answer text: the next text is a new message. */
  private messageEnded = false

  /** The output reported so far through `update`. */
  partial(): ContentBlock[] {
    return this.text === '' ? [] : [{ type: 'text', text: this.text }]
  }

  update(update: SubagentUpdate): void {
    if (this.state !== 'running') return
    if (update.type === 'text') {
      if (update.text === '') return
      // Text after a child tool call is its next message: a blank line before it, also in the update.
      const separator = this.messageEnded ? this.separateMessage() : ''
      this.messageEnded = false
      this.append(update.text)
      if (separator !== '') update = { type: 'text', text: separator + update.text }
    } else if (update.type === 'tool') {
      this.messageEnded = this.text !== ''
    }
    try {
      this.request.onUpdate?.(update)
    } catch {
      // A display callback must not break the run.
    }
  }

  /** Ends the text so far with one blank line (its trailing spaces and tabs dropped), before the next message; returns the line breaks it added. */
  private separateMessage(): string {
    const trimmed = this.text.replace(/[ \t]+$/, '')
    if (trimmed !== this.text) {
      this.text = trimmed
      this.bytes = Buffer.byteLength(trimmed, 'utf8')
    }
    const separator = this.text.endsWith('\n\n') ? '' : this.text.endsWith('\n') ? '\n' : '\n\n'
    this.append(separator)
    return separator
  }

  /** Appends answer text, keeping at most `maxOutputBytes` (the newest, cut on a code point). */
  private append(text: string): void {
    this.text += text
    this.bytes += Buffer.byteLength(text, 'utf8')
    if (this.bytes <= this.maxOutputBytes) return
    const buffer = Buffer.from(this.text, 'utf8')
    let start = buffer.length - this.maxOutputBytes
    // Skip UTF-8 continuation bytes (10xxxxxx) so the kept text starts on a code point.
    while (start < buffer.length && (buffer[start]! & 0xc0) === 0x80) start++
    this.text = buffer.subarray(start).toString('utf8')
    this.bytes = buffer.length - start
    this.truncated = true
  }

  addCleanup(cleanup: () => void): void {
    this.cleanups.push(cleanup)
  }

  /** Publishes the provider's run: from now on its outcome, a cancellation or the deadline settles the result. */
  publish(providerRun: ProviderRun): void {
    this.providerRun = providerRun
    const late = `the "${this.provider}" sub-agent did not finish within ${this.timeoutMs} ms (its deadline) and was stopped`
    const left = Math.max(0, this.startedAt + this.timeoutMs - Date.now())
    this.deadline = setTimeout(() => this.settle(this.partialResult('timeout', late)), left)
    const signal = this.controller.signal
    const onAbort = (): void => this.settle(this.partialResult('aborted', abortDiagnostic(signal.reason)))
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    providerRun.outcome.then(
      (outcome) => this.settle(this.fromOutcome(outcome)),
      (error: unknown) => this.settle(this.partialResult('error', messageOf(error))),
    )
  }

  /** The output reported so far, as a result that ended with `stopReason`. */
  private partialResult(stopReason: SubagentStopReason, diagnostic: string): SubagentResult {
    return { output: this.partial(), stopReason, diagnostic, ...(this.truncated && { truncated: true as const }) }
  }

  private fromOutcome(outcome: ProviderOutcome): SubagentResult {
    const result: SubagentResult = {
      output: outcome.output ?? this.partial(),
      stopReason: outcome.stopReason,
    }
    if (outcome.structured !== undefined) result.structured = outcome.structured
    if (outcome.output === undefined && this.truncated) result.truncated = true
    if (outcome.diagnostic !== undefined) result.diagnostic = outcome.diagnostic
    else if (outcome.stopReason !== 'completed') result.diagnostic = `the child stopped: ${outcome.stopReason}`
    return result
  }

  private settle(result: SubagentResult): void {
    if (this.state !== 'running') return
    this.state = 'settled'
    clearTimeout(this.deadline)
    this.settleResult(result)
    this.onSettled(this, result, Date.now() - this.startedAt)
    // Nothing of a one-shot child is useful after its result: tear it down now.
    void this.dispose().catch(() => {})
  }

  dispose(): Promise<void> {
    if (this.state === 'disposed') return Promise.resolve()
    if (!this.controller.signal.aborted && this.state === 'running') {
      this.controller.abort(new SubagentError('START_FAILED', { reason: `sub-agent run ${this.id} was disposed` }))
    }
    this.teardown ??= this.result
      .then(() => this.providerRun?.dispose())
      .then(
        () => {
          this.state = 'disposed'
          for (const cleanup of this.cleanups.splice(0)) cleanup()
          this.onGone(this)
        },
        (error: unknown) => {
          this.teardown = undefined
          throw error
        },
      )
    return this.teardown
  }
}

class SubagentService extends Service implements SubagentServiceApi {
  static Config = z
    .strictObject({
      maxOutputBytes: z
        .number()
        .int()
        .min(1024)
        .default(1_048_576)
        .describe('Most answer text kept per run, in UTF-8 bytes; beyond it the oldest text is dropped and the result is marked truncated.'),
      maxRunsPerParent: z
        .number()
        .int()
        .positive()
        .default(4)
        .describe('Most runs one agent has at once (starting, running, or being torn down); one more start fails with TOO_MANY_RUNS.'),
      timeoutMs: z
        .number()
        .int()
        .positive()
        .default(1_800_000)
        .describe('Deadline of a run that asks for none, in ms from its start; then it settles `timeout` with its partial output and the child is torn down.'),
      maxTimeoutMs: z
        .number()
        .int()
        .positive()
        .default(7_200_000)
        .describe('Largest deadline a request may ask for, in ms; a longer one is cut to this.'),
    })
    .prefault({})

  private readonly providers = new Map<string, SubagentProvider>()
  private readonly runs = new Set<Run>()
  /** Runs each parent holds, counted from the start call until the run is gone. */
  private readonly held = new Map<SubagentRequest['parent'], number>()
  private nextRun = 1
  private disposing = false

  constructor(ctx: Context, public config: SubagentService.Config) {
    super(ctx, 'subagents')
    ctx.effect(() => () => this.disposeAll(), 'subagents.disposeAll')
  }

  registerProvider(provider: SubagentProvider): () => void {
    if (!PROVIDER_NAME.test(provider.name)) {
      throw new SubagentError('INVALID_PROVIDER', { name: provider.name })
    }
    const duplicate = () => new SubagentError('DUPLICATE_PROVIDER', { provider: provider.name })
    return registerUnique(this.ctx, this.providers, provider.name, provider, duplicate, `subagents.registerProvider(${provider.name})`)
  }

  getProvider(name: string): SubagentProvider | undefined {
    return this.providers.get(name)
  }

  list(): SubagentProvider[] {
    return [...this.providers.values()].sort((a, b) => a.name.localeCompare(b.name))
  }

  async start(name: string, request: SubagentRequest): Promise<SubagentRun> {
    const provider = this.providers.get(name)
    if (provider === undefined) {
      const known = this.providers.size === 0 ? '(none)' : [...this.providers.keys()].sort().join(', ')
      throw new SubagentError('NO_PROVIDER', { provider: name, known })
    }
    for (const [capability, needed] of CAPABILITY_FIELDS) {
      if (needed(request) && !provider.capabilities[capability]) {
        throw new SubagentError('UNSUPPORTED_CAPABILITY', { provider: name, capability })
      }
    }
    if (this.disposing) {
      throw new SubagentError('START_FAILED', { reason: `cannot start a "${name}" sub-agent: the sub-agent service is shutting down` })
    }
    if (request.signal?.aborted) {
      throw new SubagentError('START_FAILED', { reason: `the "${name}" sub-agent was cancelled before it started` }, {
        cause: request.signal.reason,
      })
    }
    const timeoutMs = Math.min(request.timeoutMs ?? this.config.timeoutMs, this.config.maxTimeoutMs)
    if (!(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
      throw new SubagentError('INVALID_REQUEST', { provider: name, timeoutMs: request.timeoutMs })
    }
    const parent = request.parent
    const held = this.held.get(parent) ?? 0
    if (held >= this.config.maxRunsPerParent) {
      throw new SubagentError('TOO_MANY_RUNS', { parent: parent.id, running: held, maxRunsPerParent: this.config.maxRunsPerParent })
    }
    this.held.set(parent, held + 1)
    let released = false
    const release = (): void => {
      if (released) return
      released = true
      const count = (this.held.get(parent) ?? 1) - 1
      if (count === 0) this.held.delete(parent)
      else this.held.set(parent, count)
    }
    try {
      return await this.startHeld(name, provider, request, timeoutMs, release)
    } catch (error) {
      release()
      throw error
    }
  }

  /** `start` once the parent's hold is taken; `release` gives it back when the run is gone. */
  private async startHeld(name: string, provider: SubagentProvider, request: SubagentRequest, timeoutMs: number, release: () => void): Promise<Run> {
    const id = `subagent-${this.nextRun++}`
    const controller = new AbortController()
    setMaxListeners(0, controller.signal)
    const run = new Run(
      id,
      name,
      controller,
      request,
      Date.now(),
      timeoutMs,
      this.config.maxOutputBytes,
      (settled, result, durationMs) => this.logEnd(settled, request, result, durationMs),
      (gone) => this.runs.delete(gone),
    )
    run.addCleanup(release)

    // Cancellation sources: the caller's signal and the parent agent's disposal.
    const onCallerAbort = (): void => controller.abort(request.signal?.reason)
    request.signal?.addEventListener('abort', onCallerAbort, { once: true })
    run.addCleanup(() => request.signal?.removeEventListener('abort', onCallerAbort))
    let unregisterParent: () => void
    try {
      unregisterParent = request.parent.onDispose(() => run.dispose())
    } catch (error) {
      request.signal?.removeEventListener('abort', onCallerAbort)
      throw new SubagentError('START_FAILED', { reason: `cannot start a "${name}" sub-agent for agent ${request.parent.id}: ${messageOf(error)}` }, {
        cause: error,
      })
    }
    run.addCleanup(unregisterParent)

    const providerRequest: ProviderRequest = {
      runId: id,
      prompt: request.prompt,
      parent: request.parent,
      signal: controller.signal,
      ...(request.label === undefined ? {} : { label: request.label }),
      ...(request.outputSchema === undefined ? {} : { outputSchema: request.outputSchema }),
      ...(request.maxDepth === undefined ? {} : { maxDepth: request.maxDepth }),
      ...(request.toolFilter === undefined ? {} : { toolFilter: request.toolFilter }),
      ...(request.persona === undefined ? {} : { persona: request.persona }),
      update: (update) => run.update(update),
    }

    let providerRun: ProviderRun
    try {
      providerRun = await provider.start(providerRequest)
    } catch (error) {
      request.signal?.removeEventListener('abort', onCallerAbort)
      unregisterParent()
      if (error instanceof SubagentError) throw error
      throw new SubagentError('START_FAILED', { reason: `the "${name}" sub-agent did not start: ${messageOf(error)}` }, { cause: error })
    }
    if (controller.signal.aborted || this.disposing) {
      // The provider published after a cancellation it should have honoured: take it back.
      request.signal?.removeEventListener('abort', onCallerAbort)
      unregisterParent()
      await providerRun.dispose().catch(() => {})
      throw new SubagentError('START_FAILED', { reason: `the "${name}" sub-agent was cancelled while it started` }, {
        cause: controller.signal.reason,
      })
    }

    this.runs.add(run)
    this.append(request, 'subagent/start', {
      runId: id,
      provider: name,
      ...(request.label === undefined ? {} : { label: request.label }),
      childId: providerRun.childId,
    } satisfies SubagentStartData)
    run.publish(providerRun)
    return run
  }

  private logEnd(run: Run, request: SubagentRequest, result: SubagentResult, durationMs: number): void {
    this.append(request, 'subagent/end', {
      runId: run.id,
      provider: run.provider,
      ...(request.label === undefined ? {} : { label: request.label }),
      childId: run.childId,
      stopReason: result.stopReason,
      durationMs,
      ...(result.diagnostic === undefined ? {} : { diagnostic: result.diagnostic }),
    } satisfies SubagentEndData)
  }

  /** Appends to the parent's log; a closed log (the parent is going away) loses the event, never the run. */
  private append(request: SubagentRequest, type: string, data: unknown): void {
    try {
      request.parent.session.append(type, data)
    } catch (error) {
      this.ctx.logger('subagents').warn('cannot record %s for agent %s: %s', type, request.parent.id, messageOf(error))
    }
  }

  private async disposeAll(): Promise<void> {
    this.disposing = true
    await Promise.allSettled([...this.runs].map((run) => run.dispose()))
  }
}

function abortDiagnostic(reason: unknown): string {
  if (reason instanceof SubagentError) return reason.message
  if (reason instanceof Error && reason.name !== 'AbortError') return `cancelled: ${reason.message}`
  return 'cancelled by the caller'
}

namespace SubagentService {
  export type Config = z.output<typeof SubagentService.Config>
}

export default SubagentService
