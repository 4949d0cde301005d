/** terminal_send: type into a terminal and wait until it is ready, in the foreground or as a task. */
import { z } from 'zod'
import { PtyError, type PtyServiceApi, type SendOperation, type SendResult, type SignalResult } from '@conch/pty'
import type { KillReport, TasksServiceApi } from '@conch/tasks'
import { utf8Bytes } from '@conch/tools'
import { renderBackground, renderSend, statusText } from '../render.ts'
import { firstLine, sessionId, type ToolKit } from './kit.ts'

export function registerTerminalSend(kit: ToolKit): void {
  const { ctx, pty, tools, config, limits, error, text } = kit
  const sendShape = {
    sessionId,
    text: z.string().describe('Text to type. With submit (default) Enter follows; several lines run one after another. Control characters are sent as typed (e.g. "\\u0003" is ^C).'),
    submit: z.boolean().default(true).describe('Press Enter after the text (default true). false types without submitting, e.g. a single key for a pager.'),
    timeoutMs: z
      .number()
      .int()
      .positive()
      .max(config.maxTimeoutMs, `timeoutMs may be at most ${config.maxTimeoutMs} (maxTimeoutMs); use run_in_background for longer commands`)
      .optional()
      .describe(`Return after at most this many ms for this send (default: the terminal's own, 30000; at most ${config.maxTimeoutMs}). The command keeps running after a timeout.`),
    idleMs: z
      .number()
      .int()
      .positive()
      .max(config.maxTimeoutMs, `idleMs may be at most ${config.maxTimeoutMs} (maxTimeoutMs)`)
      .optional()
      .describe("Return once output has been quiet this many ms (default: the terminal's own, 3000), for a program that pauses longer between outputs."),
  }
  const sendInput = config.enableRunInBackground
    ? z.object({
        ...sendShape,
        run_in_background: z
          .boolean()
          .optional()
          .describe('Return a task id at once instead of waiting; read the output with task_output and interrupt with task_kill.'),
      })
    : z.strictObject(sendShape, {
        error: (issue) =>
          issue.code === 'unrecognized_keys' && issue.keys.includes('run_in_background')
            ? 'run_in_background is disabled in this deployment; send in the foreground (omit run_in_background)'
            : undefined,
      })

  tools.register({
    name: 'terminal_send',
    description:
      'Type text into a terminal and wait until it is ready for more. Returns the new output, then why it returned: [wait: stdin_read] (waiting for input), [wait: inferred_idle] (output went quiet — the command may still run), [wait: timeout] (still running), [wait: session_exit] (the shell exited); then [session: running] or [session: exited code=N]. One send at a time per terminal.',
    kind: 'execute',
    ...limits,
    input: sendInput,
    title: (input) => `${input.sessionId}: ${firstLine(input.text)}`,
    async execute(input, { agent, signal, progress }) {
      const background = 'run_in_background' in input && input.run_in_background === true
      const bytes = utf8Bytes(input.text)
      if (bytes > config.maxInputBytes) {
        return error(
          new PtyError(
            'INVALID_INPUT',
            `text is ${bytes} bytes, over the ${config.maxInputBytes}-byte limit (maxInputBytes); nothing was written. Send it in parts, or write it to a file and run that`,
          ),
        )
      }
      if (background) {
        const tasks = ctx.get('tasks') as TasksServiceApi | undefined
        if (!tasks) {
          return error(new PtyError('INVALID_INPUT', 'run_in_background needs the tasks service, which is not loaded; nothing was written. Send in the foreground instead'))
        }
        let operation: SendOperation
        try {
          operation = pty.startSend(agent, input.sessionId, { text: input.text, submit: input.submit, ...limitsOf(input) })
        } catch (caught) {
          return error(caught)
        }
        const label = `${input.sessionId}: ${firstLine(input.text)}`
        let taskId: string
        try {
          taskId = tasks.start({
            kind: 'pty-send',
            label,
            owner: agent,
            run: async () => {
              const result = await operation.done
              return { fields: outcomeFields(result), meta: sendMeta(input.sessionId, result) }
            },
            drain: () => operation.readOutput(),
            cancel: () => stopBackground(pty, agent, input.sessionId, operation, config.killEscalation),
          }).id
        } catch (caught) {
          // No task took the send: take it back before anything is written.
          await operation.cancel()
          await operation.done.catch(() => undefined)
          throw caught
        }
        return text(renderBackground(taskId, label, config.maxResultBytes), { taskId, sessionId: input.sessionId })
      }

      let operation: SendOperation
      try {
        operation = pty.startSend(agent, input.sessionId, { text: input.text, submit: input.submit, signal, ...limitsOf(input) })
      } catch (caught) {
        return error(caught)
      }
      const stop = progress
        ? operation.onOutput(() => {
            const chunk = operation.readOutput()
            if (chunk !== '') progress({ type: 'output', text: chunk })
          })
        : undefined
      let result: SendResult
      try {
        result = await operation.done
      } catch (caught) {
        return error(caught)
      } finally {
        stop?.()
      }
      const rendered = renderSend(result, config.maxResultBytes, signal.aborted)
      return text(rendered.text, { ...sendMeta(input.sessionId, result), truncated: rendered.truncated })
    },
  })
}

/** Outcome fields of a background send's task: `{wait, session}`, and `input` when not at a primary prompt. */
function outcomeFields(result: SendResult): Record<string, string> {
  return {
    wait: result.waitReason,
    session: statusText(result.sessionStatus),
    ...(result.inputState !== undefined && result.inputState !== 'prompt' && { input: result.inputState }),
  }
}

function sendMeta(sessionId: string, result: SendResult): Record<string, unknown> {
  return {
    sessionId,
    waitReason: result.waitReason,
    sessionStatus: result.sessionStatus,
    evidence: result.evidence,
    ...(result.inputState !== undefined && { inputState: result.inputState }),
    elapsedMs: result.elapsedMs,
    truncated: result.truncated,
  }
}

/** The per-send limits the caller gave, as ctx.pty takes them (absent ones omitted). */
function limitsOf(input: { timeoutMs?: number | undefined; idleMs?: number | undefined }): { timeoutMs?: number; idleMs?: number } {
  return {
    ...(input.timeoutMs !== undefined && { timeoutMs: input.timeoutMs }),
    ...(input.idleMs !== undefined && { idleMs: input.idleMs }),
  }
}


/**
 * Stops a background send for task_kill: SIGINT first (the send's own cancel), then each signal
 * of `escalation` to the foreground process group while the terminal is not ready for input
 * again. A program that ignores SIGINT (`trap '' INT`, a raw-mode program) would otherwise keep
 * running under a task reported `killed`. Reports the signals it needed, and says so when the
 * program survived all of them.
 */
async function stopBackground(
  pty: PtyServiceApi,
  agent: Parameters<PtyServiceApi['signal']>[0],
  sessionId: string,
  operation: SendOperation,
  escalation: readonly ('SIGTERM' | 'SIGKILL')[],
): Promise<KillReport> {
  await operation.cancel()
  const result = await operation.done.catch(() => undefined)
  // Rejected: cancelled before anything was written; nothing runs.
  if (result === undefined || result.waitReason === 'stdin_read' || result.sessionStatus.state === 'exited') return {}
  const sent = ['SIGINT']
  let output = ''
  let target = 'the foreground program'
  for (const signal of escalation) {
    let signalled: SignalResult
    try {
      signalled = await pty.signal(agent, sessionId, signal)
    } catch (error) {
      // The shell itself is in front again (SIGKILL refused), nothing is, or the terminal is gone.
      if (error instanceof PtyError && ['SIGNAL_REFUSED', 'NO_FOREGROUND', 'SESSION_EXITED', 'NO_SESSION'].includes(error.code)) {
        return sent.length === 1 ? { output } : { fields: { signals: sent.join(' then ') }, output }
      }
      throw error
    }
    sent.push(signal)
    target = signalled.target
    output += signalled.output === undefined || signalled.output === '' ? '' : `${signalled.output}\n`
    if (signalled.waitReason === 'stdin_read' || signalled.waitReason === 'session_exit') {
      return { fields: { wait: signalled.waitReason, signals: sent.join(' then ') }, output }
    }
  }
  if (sent.length === 1) return {}
  return {
    fields: { signals: sent.join(' then '), stopped: `no: ${target} still runs after ${sent.at(-1)}` },
    output,
  }
}
