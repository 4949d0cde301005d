/**
 * Driving a child that speaks the Agent Client Protocol (`@conch/subagent-acp`,
 * `@conch/subagent-conch`): initialize → session/new → publish → session/prompt; permission
 * requests are answered by policy. Exported as `@conch/subagent/acp`, so the seam loads no SDK.
 */
import {
  PROTOCOL_VERSION,
  client as clientApp,
  methods,
  ndJsonStream,
  type ClientConnection,
  type PermissionOption,
  type PromptResponse,
  type RequestPermissionResponse,
  type SessionNotification,
  type StopReason,
  type ToolCallContent,
} from '@agentclientprotocol/sdk'
import { readableFrom, type ChildHandle, type SubprocessServiceApi } from '@conch/subprocess'
import { describeExit } from '@conch/session'
import {
  EXIT_WINDOW_MS,
  StreamTail,
  disposeProcess,
  raceStart,
  spawnChild,
  type AcpChildConfig,
  type OutOfProcessConfig,
} from './out-of-process.ts'
import { SubagentError, type ProviderOutcome, type ProviderRequest, type ProviderRun, type SubagentStopReason } from './types.ts'

/** How a permission request from the child is answered: `allow` selects an allow option, `reject` a reject option (or cancels). */
export type PermissionPolicy = 'allow' | 'reject'

export interface AcpChildOptions {
  subprocess: SubprocessServiceApi
  /** Provider name, for diagnostics. */
  provider: string
  argv: [string, ...string[]]
  cwd: string
  env: Record<string, string>
  /** The parent's writable folders (`parentWritable`): a bare `argv[0]` is never taken from PATH there. */
  agentWritable?: readonly string[]
  permission: PermissionPolicy
  timing: Pick<OutOfProcessConfig, 'startTimeoutMs' | 'disposeEofGraceMs' | 'disposeGraceMs'> & AcpChildConfig
  request: ProviderRequest
  /** Client name sent in `initialize`. */
  clientName?: string
  /** Called with the child right after spawning (before the handshake). */
  onSpawn?: (child: ChildHandle) => void
}

const STOP_REASONS: Partial<Record<StopReason, SubagentStopReason>> = {
  end_turn: 'completed', max_tokens: 'max-tokens', refusal: 'refusal', cancelled: 'aborted',
}

/** ACP `StopReason` → the seam's stop reason; any other (`max_turn_requests`: the task is not done) is `error`. */
export function stopReasonOf(reason: StopReason | string): SubagentStopReason {
  return (Object.hasOwn(STOP_REASONS, reason) && STOP_REASONS[reason as StopReason]) || 'error'
}

/** The answer to `session/request_permission` under `policy` (ACP tool-calls, "Requesting Permission"). */
export function answerPermission(options: readonly PermissionOption[], policy: PermissionPolicy): RequestPermissionResponse {
  const kinds = policy === 'allow' ? ['allow_once', 'allow_always'] : ['reject_once', 'reject_always']
  for (const kind of kinds) {
    const option = options.find((candidate) => candidate.kind === kind)
    if (option) return { outcome: { outcome: 'selected', optionId: option.optionId } }
  }
  return { outcome: { outcome: 'cancelled' } }
}

/** Bytes for the child's stdin, handed to `ChildHandle.write` (which queues them in order). */
function writableTo(child: ChildHandle): WritableStream<Uint8Array> {
  return new WritableStream<Uint8Array>({ write: (chunk) => child.write(chunk) })
}

/**
 * Starts an ACP child and publishes it as a `ProviderRun`. Rejects, once the child's tree is gone,
 * when it exits (even cleanly) or fails before answering, times out, or the run is cancelled.
 */
export async function startAcpChild(options: AcpChildOptions): Promise<ProviderRun> {
  const { request, provider } = options
  const child = spawnChild(options.subprocess, { argv: options.argv, cwd: options.cwd, env: options.env, provider, ...(options.agentWritable && { agentWritable: options.agentWritable }) })
  options.onSpawn?.(child)
  const stderr = new StreamTail(child.stderr)
  let sessionId: string | undefined
  /** Titles of the child's tool calls by id (an update may leave the title out). */
  const titles = new Map<string, string>()

  const onUpdate = (notification: SessionNotification): void => {
    // Updates for any other session are a confused or hostile child: ignore them.
    if (sessionId === undefined || notification.sessionId !== sessionId) return
    const update = notification.update
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        if (update.content.type === 'text') request.update({ type: 'text', text: update.content.text })
        return
      case 'tool_call':
        titles.set(update.toolCallId, update.title)
        request.update({ type: 'tool', callId: update.toolCallId, title: update.title, status: statusOf(update.status) })
        return
      case 'tool_call_update': {
        if (update.title) titles.set(update.toolCallId, update.title)
        const title = titles.get(update.toolCallId) ?? update.toolCallId
        if (update.status === 'completed') request.update({ type: 'tool', callId: update.toolCallId, title, status: 'completed' })
        if (update.status === 'failed') {
          const detail = failureDetail(update.content)
          request.update({ type: 'tool', callId: update.toolCallId, title, status: 'failed', ...(detail === '' ? {} : { detail }) })
        }
        return
      }
      default:
        return
    }
  }

  const app = clientApp({ name: options.clientName ?? 'conch' })
    .onNotification(methods.client.session.update, ({ params }) => onUpdate(params))
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      if (params.sessionId !== sessionId) return { outcome: { outcome: 'cancelled' } }
      return answerPermission(params.options, options.permission)
    })
  // A line over maxFrameBytes breaks the protocol: the run ends `protocol`, naming what arrived.
  let violated: (diagnostic: string) => void = () => {}
  const violation = new Promise<string>((resolve) => (violated = resolve))
  const input = readableFrom(child.stdout, {
    maxFrameBytes: options.timing.maxFrameBytes,
    onOversized: (limit, head) =>
      violated(
        `the "${provider}" sub-agent sent a protocol line of more than ${limit} bytes (maxFrameBytes), starting ${JSON.stringify(new TextDecoder().decode(head))}`,
      ),
  })
  // The SDK's own limit sits above ours, so an oversized line is cut here instead of closing the connection.
  const connection: ClientConnection = app.connect(
    ndJsonStream(writableTo(child), input, { maxMessageBytes: options.timing.maxFrameBytes + 1024 }),
  )
  connection.closed.catch(() => {})

  try {
    sessionId = await raceStart({
      handshake: Promise.race([
        (async () => {
          await connection.agent.request(methods.agent.initialize, {
            protocolVersion: PROTOCOL_VERSION,
            clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
            clientInfo: { name: options.clientName ?? 'conch', version: '0.1.0' },
          })
          const session = await connection.agent.request(methods.agent.session.new, { cwd: options.cwd, mcpServers: [] })
          return session.sessionId
        })(),
        violation.then((diagnostic): never => {
          throw new SubagentError('START_FAILED', { reason: diagnostic })
        }),
      ]),
      child,
      signal: request.signal,
      timeoutMs: options.timing.startTimeoutMs,
      provider,
      detail: () => stderr.tail(),
    })
  } catch (error) {
    // Nothing was published: no cooperative shutdown, just make sure the tree is gone.
    connection.close()
    await child.terminate({ graceMs: options.timing.disposeGraceMs }).catch(() => {})
    throw error
  }
  const id = sessionId

  let prompting = false
  const cancel = async (): Promise<void> => {
    if (prompting) await connection.agent.notify(methods.agent.session.cancel, { sessionId: id }).catch(() => {})
  }
  request.signal.addEventListener('abort', () => void cancel(), { once: true })

  const outcome = (async (): Promise<ProviderOutcome> => {
    prompting = true
    const exitError = (exit: Parameters<typeof describeExit>[0]) => {
      const tail = stderr.tail()
      return new Error(`the "${provider}" sub-agent ${describeExit(exit)} before it answered${tail === '' ? '' : `; its stderr ends with: ${tail}`}`)
    }
    const exited = child.done.then((exit) => {
      throw exitError(exit)
    })
    exited.catch(() => {})
    try {
      const answer: Promise<PromptResponse> = connection.agent.request(methods.agent.session.prompt, { sessionId: id, prompt: request.prompt })
      const response = await Promise.race([answer, exited, violation.then((diagnostic) => ({ violation: diagnostic }))])
      if ('violation' in response) return { stopReason: 'protocol', diagnostic: response.violation }
      const stopReason = stopReasonOf(response.stopReason)
      return stopReason === 'error'
        ? { stopReason, diagnostic: `the "${provider}" sub-agent stopped with ${response.stopReason}` }
        : { stopReason }
    } catch (error) {
      // A closed connection usually means the child died: prefer its exit as the reason.
      const exit = await Promise.race([child.done, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), EXIT_WINDOW_MS))])
      throw exit === undefined ? error : exitError(exit)
    } finally {
      prompting = false
    }
  })()

  return {
    childId: id,
    outcome,
    dispose: async () => {
      const { disposeEofGraceMs: eofGraceMs, disposeGraceMs: graceMs } = options.timing
      await disposeProcess({ child, shutdown: cancel, eofGraceMs, graceMs, provider }).finally(() => connection.close())
    },
  }
}

/** The text of a failed tool call's content, on one line, at most 300 characters. */
function failureDetail(content: ToolCallContent[] | null | undefined): string {
  const text = (content ?? [])
    .map((item) => (item.type === 'content' && item.content.type === 'text' ? item.content.text : ''))
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim()
  return text.length > 300 ? `${text.slice(0, 299)}…` : text
}

function statusOf(status: string | null | undefined): 'running' | 'completed' | 'failed' {
  return status === 'completed' ? 'completed' : status === 'failed' ? 'failed' : 'running'
}
