/**
 * The Claude Code provider: each run is one `query()` of the Claude Agent SDK, its CLI spawned
 * through `ctx.subprocess` (spawn.ts); a run is starting → running → ended (see the README).
 */
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { query, type Options, type SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import {
  NO_CAPABILITIES,
  SubagentError,
  childCwd,
  childEnv,
  productsEnv,
  disposeProcess,
  textOf,
  type OutOfProcessConfig,
  type ProviderOutcome,
  type ProviderRequest,
  type ProviderRun,
  type SubagentProvider,
} from '@conch/subagent'
import { skippedExecutables, type ChildHandle, type SubprocessServiceApi } from '@conch/subprocess'
import { NOT_FOUND_HINT, resolveClaudeExecutable } from './resolve.ts'
import { spawnThroughSubprocess } from './spawn.ts'

export type SandboxMode = 'read-only' | 'workspace-write' | 'danger-full-access'

export interface ClaudeCodeProviderConfig extends OutOfProcessConfig {
  name: string
  executable?: string | undefined
  model?: string | undefined
  allowedTools: string[]
  disallowedTools: string[]
  settingSources: ('user' | 'project' | 'local')[]
  maxTurns?: number | undefined
  configDir: 'private' | 'inherit'
  stateRoot: string
}

export interface ClaudeCodeProviderDeps {
  subprocess: SubprocessServiceApi
  parentMode(request: ProviderRequest): SandboxMode | undefined
  track?(request: ProviderRequest, live: boolean): void
  /** The folders the parent may write (`parentWritable`): no binary is taken from PATH folders there. */
  parentWritable?(request: ProviderRequest): readonly string[]
}

/** Tools that write files; removed from the child under a read-only parent. */
export const WRITE_TOOLS = ['Edit', 'Write', 'NotebookEdit'] as const

/**
 * The parent's sandbox mode (read-only without a policy) as Claude Code settings (the README's
 * "Sandbox"); a missing sandbox fails rather than run unconfined, and no command may leave it.
 */
export function projectSandbox(mode: SandboxMode | undefined, cwd: string): Pick<Options, 'sandbox' | 'disallowedTools'> {
  switch (mode ?? 'read-only') {
    case 'read-only':
      return {
        sandbox: { enabled: true, failIfUnavailable: true, allowUnsandboxedCommands: false, autoAllowBashIfSandboxed: false, filesystem: { denyWrite: [cwd] } },
        disallowedTools: [...WRITE_TOOLS],
      }
    case 'workspace-write':
      return { sandbox: { enabled: true, failIfUnavailable: true, allowUnsandboxedCommands: false, autoAllowBashIfSandboxed: false }, disallowedTools: [] }
    case 'danger-full-access':
      return { disallowedTools: [] }
  }
}

export function claudeCodeProvider(deps: ClaudeCodeProviderDeps, config: ClaudeCodeProviderConfig): SubagentProvider {
  return {
    name: config.name,
    capabilities: NO_CAPABILITIES,
    start: (request) => startRun(deps, config, request),
  }
}

type Json = Record<string, unknown>
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

async function startRun(deps: ClaudeCodeProviderDeps, config: ClaudeCodeProviderConfig, request: ProviderRequest): Promise<ProviderRun> {
  const provider = config.name
  const cwd = childCwd(config.cwd, request.parent, provider)
  const writable = deps.parentWritable?.(request) ?? []
  const executable = resolveClaudeExecutable(config.executable, productsEnv({ writable }))
  if (executable === undefined) {
    const found = skippedExecutables('claude', process.env.PATH ?? '', writable) ?? 'no claude binary found'
    throw new SubagentError('START_FAILED', { reason: `cannot start the "${provider}" sub-agent: ${found}; ${NOT_FOUND_HINT}` })
  }
  const projection = projectSandbox(deps.parentMode(request), cwd)

  let stateDir: string | undefined
  const extra: Record<string, string> = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' }
  if (config.configDir === 'private') {
    try {
      mkdirSync(config.stateRoot, { recursive: true, mode: 0o700 })
      stateDir = mkdtempSync(join(config.stateRoot, 'run-'))
    } catch (error) {
      throw new SubagentError('START_FAILED', { reason: `cannot start the "${provider}" sub-agent: cannot create its config dir under ${config.stateRoot}: ${(error as Error).message}` }, { cause: error })
    }
    extra.CLAUDE_CONFIG_DIR = stateDir
  }
  const removeState = () => {
    if (stateDir !== undefined) rmSync(stateDir, { recursive: true, force: true })
  }

  const stderr: string[] = []
  const stderrTail = () => stderr.join('').trim().split('\n').slice(-5).join('\n')
  let child: ChildHandle | undefined
  const abortController = new AbortController()
  const options: Options = {
    cwd,
    pathToClaudeCodeExecutable: executable,
    abortController,
    persistSession: false,
    settingSources: config.settingSources,
    permissionMode: 'dontAsk',
    allowedTools: config.allowedTools,
    disallowedTools: ['AskUserQuestion', ...(projection.disallowedTools ?? []), ...config.disallowedTools],
    ...(projection.sandbox === undefined ? {} : { sandbox: projection.sandbox }),
    includePartialMessages: true,
    strictMcpConfig: true,
    mcpServersDelivery: 'initialize',
    env: childEnv(config.env, extra),
    stderr: (data) => {
      stderr.push(data)
      if (stderr.length > 200) stderr.splice(0, stderr.length - 200)
    },
    spawnClaudeCodeProcess: (spawnOptions) => {
      const spawned = spawnThroughSubprocess(deps.subprocess, spawnOptions, config.disposeGraceMs, writable)
      child = spawned.handle
      return spawned.process
    },
    ...(config.model === undefined ? {} : { model: config.model }),
    ...(config.maxTurns === undefined ? {} : { maxTurns: config.maxTurns }),
  }

  deps.track?.(request, true)
  const run = new ClaudeRun(request, abortController, stderrTail)
  let q: ReturnType<typeof query>
  try {
    q = query({ prompt: textOf(request.prompt, '\n\n'), options })
  } catch (error) {
    removeState()
    deps.track?.(request, false)
    throw new SubagentError('START_FAILED', { reason: `cannot start the "${provider}" sub-agent: ${(error as Error).message}` }, { cause: error })
  }

  let sessionId: string
  try {
    sessionId = await run.untilInit(q, config.startTimeoutMs, provider)
  } catch (error) {
    // Nothing was published: stop the CLI's tree at once.
    abortController.abort()
    const report = await child?.terminate({ graceMs: config.disposeGraceMs }).catch(() => undefined)
    removeState()
    deps.track?.(request, false)
    if (report && report.survivors.length > 0) throw new SubagentError('START_FAILED', { reason: `${(error as Error).message}; and its processes survived SIGKILL` }, { cause: error })
    throw error
  }

  const onAbort = () => run.cancel(q)
  request.signal.addEventListener('abort', onAbort, { once: true })
  return {
    childId: sessionId,
    outcome: run.outcome,
    async dispose() {
      request.signal.removeEventListener('abort', onAbort)
      try {
        abortController.abort()
        const shutdown = async () => void (await q.interrupt().catch(() => undefined))
        if (child !== undefined) await disposeProcess({ child, shutdown, eofGraceMs: config.disposeEofGraceMs, graceMs: config.disposeGraceMs, provider })
      } finally {
        removeState()
        deps.track?.(request, false)
      }
    },
  }
}

/** One query's messages turned into updates and an outcome. */
class ClaudeRun {
  state: 'starting' | 'running' | 'ended' = 'starting'
  readonly outcome: Promise<ProviderOutcome>
  private settle!: (outcome: ProviderOutcome) => void
  private cancelled = false
  /** Message ids whose text was streamed through `stream_event` deltas. */
  private readonly streamed = new Set<string>()
  private currentMessage: string | undefined
  /** The last failed model call Claude Code reported (an assistant message with `error`). */
  private apiError: string | undefined

  constructor(
    private readonly request: ProviderRequest,
    private readonly abortController: AbortController,
    private readonly stderrTail: () => string,
  ) {
    this.outcome = new Promise((resolve) => (this.settle = resolve))
  }

  /**
   * Pulls messages until `system/init` (the CLI is up and configured), then keeps consuming
   * in the background. Rejects with `START_FAILED` when the iterator ends or throws first, or
   * the timeout or the run's signal comes first.
   */
  untilInit(q: AsyncGenerator<SDKMessage, void>, timeoutMs: number, provider: string): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const fail = (message: string, cause?: unknown) => {
        cleanup()
        this.end({ stopReason: 'error', diagnostic: message })
        reject(new SubagentError('START_FAILED', { reason: message }, cause === undefined ? undefined : { cause }))
      }
      const timer = setTimeout(() => fail(`the "${provider}" sub-agent was not ready within ${timeoutMs} ms${this.detail()}`), timeoutMs)
      const onAbort = () => fail(`the "${provider}" sub-agent was cancelled while it started`, this.request.signal.reason)
      const cleanup = () => {
        clearTimeout(timer)
        this.request.signal.removeEventListener('abort', onAbort)
      }
      if (this.request.signal.aborted) return onAbort()
      this.request.signal.addEventListener('abort', onAbort, { once: true })
      const pump = async () => {
        try {
          for await (const message of q) {
            if (this.state === 'starting') {
              if (message.type === 'system' && (message as { subtype?: string }).subtype === 'init') {
                this.state = 'running'
                cleanup()
                resolve(String((message as { session_id?: string }).session_id ?? ''))
              }
              continue
            }
            if (this.state === 'ended') continue
            this.handle(message)
          }
          if (this.state === 'starting') return fail(`the "${provider}" sub-agent ended before it was ready${this.detail()}`)
          this.end({ stopReason: 'error', diagnostic: `claude ended without a result${this.detail()}` })
        } catch (error) {
          if (this.state === 'starting') return fail(`the "${provider}" sub-agent failed before it was ready: ${(error as Error).message}${this.detail()}`, error)
          if (this.cancelled) this.end({ stopReason: 'aborted', diagnostic: 'the run was interrupted' })
          else this.end({ stopReason: 'error', diagnostic: `claude stopped: ${(error as Error).message}${this.detail()}` })
        }
      }
      void pump()
    })
  }

  /** Interrupts the turn (best effort) and aborts the query; the iterator's throw becomes `aborted`. */
  cancel(q: { interrupt(): Promise<unknown> }): void {
    this.cancelled = true
    void q.interrupt().catch(() => undefined)
    this.abortController.abort()
  }

  private detail(): string {
    const tail = this.stderrTail()
    return tail === '' ? '' : `; its stderr ends with: ${tail}`
  }

  private handle(message: SDKMessage): void {
    const json = message as unknown as Json
    const mainThread = json.parent_tool_use_id === null || json.parent_tool_use_id === undefined
    const inner = json.message as Json
    const content = Array.isArray(inner?.content) ? inner.content.filter(isObject) : []
    switch (message.type) {
      case 'stream_event': {
        if (!mainThread) return
        const event = json.event as Json
        if (event?.type === 'message_start' && isObject(event.message)) this.currentMessage = String(event.message.id)
        if (event?.type === 'content_block_delta' && isObject(event.delta) && event.delta.type === 'text_delta' && typeof event.delta.text === 'string') {
          if (this.currentMessage !== undefined) this.streamed.add(this.currentMessage)
          this.request.update({ type: 'text', text: event.delta.text })
        }
        return
      }
      case 'assistant': {
        if (json.error !== undefined) {
          // A synthetic message reporting a failed model call: a diagnostic, not answer text.
          this.apiError = `${String(json.error)}: ${content.map((block) => (typeof block.text === 'string' ? block.text : '')).join(' ').trim()}`
          return
        }
        for (const block of content) {
          if (block.type === 'tool_use') {
            this.request.update({ type: 'tool', callId: String(block.id), title: toolTitle(String(block.name), block.input), status: 'running' })
          } else if (block.type === 'text' && mainThread && typeof block.text === 'string' && !this.streamed.has(String(inner.id))) {
            // Text that arrived without stream events still belongs to the partial output.
            this.request.update({ type: 'text', text: block.text })
          }
        }
        return
      }
      case 'user': {
        for (const block of content) {
          if (block.type === 'tool_result') this.request.update({ type: 'tool', callId: String(block.tool_use_id), title: '', status: block.is_error === true ? 'failed' : 'completed' })
        }
        return
      }
      case 'result': {
        const result = json
        if (result.subtype === 'success' && result.is_error === false && typeof result.result === 'string' && result.result.trim() !== '') {
          return this.end({ stopReason: 'completed', output: [{ type: 'text', text: result.result }] })
        }
        const errors = Array.isArray(result.errors) ? result.errors.filter((entry) => typeof entry === 'string').join('; ') : ''
        const why =
          result.subtype === 'success'
            ? result.is_error === true
              ? `claude reported an error: ${String(result.result ?? '')}`
              : 'claude finished with an empty answer'
            : `claude ended with ${String(result.subtype)}${errors ? `: ${errors}` : ''}`
        return this.end({ stopReason: 'error', diagnostic: this.apiError ? `${why} (${this.apiError})` : why })
      }
      default:
        return
    }
  }

  private end(outcome: ProviderOutcome): void {
    if (this.state === 'ended') return
    this.state = 'ended'
    this.settle(outcome)
  }
}

/** A one-line title for a child tool call (`Bash: ls -la`, `Read: src/a.ts`). */
function toolTitle(name: string, input: unknown): string {
  if (!isObject(input)) return name
  const detail = input.command ?? input.file_path ?? input.path ?? input.pattern ?? input.url
  return typeof detail === 'string' ? `${name}: ${detail.split('\n')[0]}` : name
}
