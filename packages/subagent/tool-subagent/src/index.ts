/**
 * `@conch/tool-subagent`: the tool the model calls to hand a task to a `ctx.subagents` provider,
 * one tool per row; foreground (the answer streamed as progress) or `run_in_background`.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import type { Agent } from '@conch/agent'
import type { SubagentResult, SubagentRun, SubagentServiceApi, SubagentUpdate } from '@conch/subagent'
import { tasksOf, type TaskSpec } from '@conch/tasks'
import type { ToolExecuteContext, ToolResult, ToolsServiceApi } from '@conch/tools'
import { answerText, formatDuration, progressText, renderResult } from './render.ts'

export { NO_OUTPUT, answerText, formatDuration, progressText, renderResult, statusLine } from './render.ts'

export const name = 'tool-subagent'
export const inject = ['subagents', 'tools']

export const Config = z.strictObject({
  provider: z.string().min(1).describe('The ctx.subagents provider this tool starts (e.g. conch, acp, codex).'),
  toolName: z
    .string()
    .regex(/^[a-z][a-z0-9_]*$/, 'must match [a-z][a-z0-9_]*')
    .default('subagent')
    .describe('Name the model calls; give each row its own when several providers are mounted.'),
  description: z
    .string()
    .min(1)
    .optional()
    .describe('What the model is told about this sub-agent; unset: a generic description naming the provider.'),
  enableRunInBackground: z
    .boolean()
    .default(true)
    .describe('Offer run_in_background (needs ctx.tasks): the call returns a task id at once.'),
  maxResultBytes: z
    .number()
    .int()
    .min(1024)
    .default(16_384)
    .describe('Bound of the result text in UTF-8 bytes; the answer keeps its head so the status line fits.'),
})
  // A row without `config:` parses as {}, so the error names the required field.
  .prefault({} as never)

export type Config = z.output<typeof Config>

/** The description used when the row sets none. */
export function defaultDescription(provider: string, background: boolean): string {
  return (
    `Hand a self-contained task to a separate "${provider}" agent in its own process and get its answer. ` +
    'It does not see this conversation: the prompt must hold everything it needs. ' +
    'The result ends with [subagent: NAME, stop: REASON, SECONDS]; a stop other than completed is an error showing the partial answer and why.' +
    (background ? ' run_in_background: true returns a task id at once; you are notified when it ends (task_output reads the answer, task_kill stops it).' : '')
  )
}

/** The label of a run: the first line of the prompt, at most 60 characters. */
export function labelOf(prompt: string): string {
  const first = prompt.trim().split('\n')[0] ?? ''
  return first.length > 60 ? `${first.slice(0, 59)}…` : first
}

export const apply = (ctx: Context, config: Config) => {
  const subagents: SubagentServiceApi = ctx.subagents
  const tools: ToolsServiceApi = ctx.tools
  const provider = config.provider

  const prompt = z.string().min(1)
  const timeoutMs = z
    .number()
    .int()
    .positive()
    .optional()
    .describe('Deadline in ms (default and cap set by the deployment); then it stops with stop: timeout and its partial answer')
  const input = config.enableRunInBackground
    ? z.object({
        prompt,
        timeoutMs,
        run_in_background: z
          .boolean()
          .default(false),
        notify: z.boolean().optional().describe('Background: wake me when it ends, even after my turn ended'),
      })
    : z.object({ prompt, timeoutMs })

  /** The model's input: the prompt and its own deadline. */
  type Input = { prompt: string; timeoutMs?: number | undefined; run_in_background?: boolean; notify?: boolean | undefined }

  const start = (agent: Agent, value: Input, signal: AbortSignal, onUpdate: (update: SubagentUpdate) => void): Promise<SubagentRun> =>
    subagents.start(provider, {
      prompt: [{ type: 'text', text: value.prompt }],
      parent: agent,
      signal,
      label: labelOf(value.prompt),
      onUpdate,
      ...(value.timeoutMs === undefined ? {} : { timeoutMs: value.timeoutMs }),
    })

  const foreground = async (value: Input, context: ToolExecuteContext): Promise<ToolResult> => {
    const startedAt = Date.now()
    const run = await start(context.agent as Agent, value, context.signal, (update) => {
      const progress = progressText(update)
      if (progress !== '') context.progress?.({ type: 'output', text: progress })
    })
    const result = await run.result
    const durationMs = Date.now() - startedAt
    const teardown = await run.dispose().then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    )
    const rendered = toolResult(result, durationMs, run, context.agent as Agent)
    if (teardown === undefined) return rendered
    // The answer stands, but the parent must know a process of the child may still be running.
    rendered.content[0]!.text += `\n[teardown failed: ${teardown}]`
    rendered.isError = true
    return rendered
  }

  const background = async (value: Input, context: ToolExecuteContext): Promise<ToolResult> => {
    const text = value.prompt
    const tasks = tasksOf(ctx, config.toolName)
    const controller = new AbortController()
    const startedAt = Date.now()
    // Start first, so a start failure is this call's error, not a failed task.
    let write: (text: string) => void = () => {}
    const buffered: string[] = []
    const run = await start(context.agent as Agent, value, controller.signal, (update) => {
      if (update.type === 'text') {
        buffered.push(update.text)
        write(update.text)
      }
    })
    const spec: TaskSpec = {
      kind: 'subagent',
      label: `${provider}: ${labelOf(text)}`,
      owner: context.agent as Agent,
      ...(value.notify === true && { notify: true }),
      cancel: () => controller.abort(),
      run: async (task) => {
        task.signal.addEventListener('abort', () => controller.abort(), { once: true })
        for (const piece of buffered.splice(0)) task.write(piece)
        write = (piece) => task.write(piece)
        const result = await run.result
        const durationMs = Date.now() - startedAt
        await run.dispose()
        const fields: Record<string, string> = { stop: result.stopReason, duration: formatDuration(durationMs) }
        if (result.diagnostic !== undefined && result.stopReason !== 'completed') fields.diagnostic = result.diagnostic
        return {
          status: result.stopReason === 'completed' ? 'completed' : 'failed',
          event: `answered (stop: ${result.stopReason})`,
          fields,
          meta: { subagent: metaOf(result, durationMs, run) },
        }
      },
    }
    let id: string
    try {
      id = tasks.start(spec).id
    } catch (error) {
      // No task owns the run (the agent is going away, the service is shutting down): stop it.
      await run.dispose().catch(() => {})
      throw error
    }
    return {
      // The model called this provider's tool, so the line names only the task.
      content: [{ type: 'text', text: `[task: ${id} started]` }],
      meta: { taskId: id, subagent: { runId: run.id, provider, childId: run.childId } },
    }
  }

  const toolResult = (result: SubagentResult, durationMs: number, run: SubagentRun, agent: Agent): ToolResult => {
    const text = renderResult(result, { provider, durationMs, maxBytes: config.maxResultBytes, redact: (answer) => agent.session.redact(answer) })
    return {
      content: [{ type: 'text', text }],
      ...(result.stopReason === 'completed' ? {} : { isError: true }),
      meta: { subagent: metaOf(result, durationMs, run) },
    }
  }

  tools.register({
    name: config.toolName,
    description: config.description ?? defaultDescription(provider, config.enableRunInBackground),
    kind: 'other',
    maxResultBytes: config.maxResultBytes,
    input,
    title: (value: { prompt: string }) => `${config.toolName} (${provider}): ${labelOf(value.prompt)}`,
    execute: (value: Input, context) => (value.run_in_background === true ? background(value, context) : foreground(value, context)),
  })
}

function metaOf(result: SubagentResult, durationMs: number, run: SubagentRun): Record<string, unknown> {
  return {
    runId: run.id,
    provider: run.provider,
    childId: run.childId,
    stopReason: result.stopReason,
    durationMs,
    answerBytes: Buffer.byteLength(answerText(result), 'utf8'),
    ...(result.diagnostic === undefined ? {} : { diagnostic: result.diagnostic }),
    ...(result.truncated ? { truncated: true } : {}),
  }
}
