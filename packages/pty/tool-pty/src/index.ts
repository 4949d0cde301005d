/**
 * `@conch/tool-pty`: the six model-facing terminal tools over `ctx.pty` — terminal_open,
 * terminal_send, terminal_read, terminal_signal, terminal_close, terminal_list — and the
 * system-prompt section that says when to use them. Background sends run as `ctx.tasks` tasks.
 *
 * A namespace plugin (no default export: the loader would prefer it and lose `inject`).
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import type { AgentServiceApi } from '@conch/agent'
import { PTY_SIGNALS, PtyError, type PtyServiceApi, type SendOperation, type SendResult } from '@conch/pty'
import type { TasksServiceApi } from '@conch/tasks'
import { MIN_RESULT_BYTES, type ToolResult, type ToolsServiceApi, utf8Bytes } from '@conch/tools'
import { renderBackground, renderClose, renderError, renderList, renderOpen, renderRead, renderSend, renderSignal, statusText } from './render.ts'

export { NO_OUTPUT, TRUNCATED, fit, renderBackground, renderClose, renderError, renderList, renderOpen, renderRead, renderSend, renderSignal, statusText } from './render.ts'

export const name = 'tool-pty'
export const inject = ['pty', 'tools']

export const Config = z
  .object({
    enableRunInBackground: z
      .boolean()
      .default(true)
      .describe('Offer `run_in_background` on terminal_send (needs ctx.tasks at run time). false removes it from the schema and refuses it.'),
    maxResultBytes: z
      .number()
      .int()
      .min(MIN_RESULT_BYTES)
      .default(262144)
      .describe('Bound of every terminal tool result, in UTF-8 bytes; output keeps its newest bytes, metadata lines are kept.'),
    maxInputBytes: z.number().int().positive().default(1048576).describe('Largest `text` terminal_send accepts, in UTF-8 bytes.'),
    maxTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(600000)
      .describe('Largest `timeoutMs` (and `idleMs`) one terminal_send may ask for, in ms.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>

/** Section id and order on ctx.agents (after the base instructions, before task guidance). */
export const PROMPT_SECTION_ID = 'terminals'
export const PROMPT_SECTION_ORDER = 50

/** The system-prompt section (a few lines; background guidance only when it is enabled). */
export function promptSection(config: Pick<Config, 'enableRunInBackground'>): string {
  return [
    'Terminals (terminal_open, terminal_send, terminal_read, terminal_signal, terminal_close, terminal_list) keep their state between calls. Use them when state must persist: a REPL (python3, node), a debugger, cd/export in a shell, a long-running interactive program. For a one-off command any terminal works, but close terminals you no longer need.',
    'A terminal runs one send at a time; while one runs, wait for it or interrupt it before sending more.',
    'Each send says why it returned: stdin_read means the terminal is waiting for input. inferred_idle (output went quiet) and timeout do not prove the command finished; check with terminal_read before relying on the result.',
    config.enableRunInBackground
      ? 'For long commands use run_in_background: true; it returns a task id at once, and task_output shows the output and final status.'
      : undefined,
    'To interrupt a program, use terminal_signal with SIGINT (SIGTERM or SIGKILL to stop it harder); [input: continuation] means the terminal waits for the rest of a block.',
  ]
    .filter((line) => line !== undefined)
    .join('\n')
}

const sessionId = z.string().min(1, 'sessionId must name a terminal, e.g. "pty-1"').describe('The terminal, e.g. "pty-1" (from terminal_open or terminal_list).')

export const apply = (ctx: Context, config: Config) => {
  const pty: PtyServiceApi = ctx.pty
  const tools: ToolsServiceApi = ctx.tools
  const limits = { maxResultBytes: config.maxResultBytes }
  const error = (caught: unknown): ToolResult => {
    if (!(caught instanceof PtyError)) throw caught
    return { content: [{ type: 'text', text: renderError(caught, config.maxResultBytes) }], isError: true, meta: { errorCode: caught.code } }
  }
  const text = (value: string, meta?: Record<string, unknown>): ToolResult => ({ content: [{ type: 'text', text: value }], ...(meta && { meta }) })

  tools.register({
    name: 'terminal_open',
    description:
      'Open a persistent terminal (a real shell) and get its session id. Its working directory, variables and running programs stay as you leave them between calls, until terminal_close. Returns what the terminal printed on start, then [opened: pty-1, type shell].',
    kind: 'execute',
    ...limits,
    input: z.object({
      type: z.string().min(1, 'type must name a terminal type, e.g. "shell"').describe('Terminal type, e.g. "shell".'),
      name: z.string().min(1).optional().describe('Optional display name, unique among your terminals.'),
      cwd: z.string().min(1).optional().describe('Working directory to start in (default: the workspace root).'),
    }),
    title: (input) => `open ${input.type}${input.name === undefined ? '' : ` "${input.name}"`}`,
    async execute(input, { agent, signal }) {
      try {
        const opened = await pty.spawn(agent, { type: input.type, ...(input.name !== undefined && { name: input.name }), ...(input.cwd !== undefined && { cwd: input.cwd }) }, signal)
        return text(renderOpen(opened, config.maxResultBytes), { sessionId: opened.sessionId, type: opened.type, status: opened.status, ...(opened.name !== undefined && { name: opened.name }) })
      } catch (caught) {
        return error(caught)
      }
    },
  })

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
            cancel: () => operation.cancel(),
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

  tools.register({
    name: 'terminal_read',
    description:
      'Read a terminal\'s retained scrollback (what it showed, prompts and commands included), newest lines last. offset counts lines back from the newest; count is how many lines. Use it to see output that arrived after a send returned.',
    kind: 'read',
    ...limits,
    input: z.object({
      sessionId,
      offset: z.number().int().min(0).default(0).describe('Lines to skip back from the newest (0 = end).'),
      count: z.number().int().min(1).default(500).describe('Lines to return (default 500).'),
    }),
    title: (input) => `read ${input.sessionId}`,
    async execute(input, { agent }) {
      try {
        const page = pty.read(agent, input.sessionId, { offset: input.offset, count: input.count })
        const rendered = renderRead(page, config.maxResultBytes)
        return text(rendered.text, { sessionId: input.sessionId, totalLines: page.totalLines, firstRetainedLine: page.firstRetainedLine, lineBegin: page.lineBegin, lineEnd: page.lineEnd, truncated: rendered.truncated })
      } catch (caught) {
        return error(caught)
      }
    },
  })

  tools.register({
    name: 'terminal_signal',
    description:
      'Send a signal to the program in the foreground of a terminal (its process group): SIGINT interrupts (like Ctrl-C), SIGTERM asks it to stop, SIGKILL forces it, SIGTSTP suspends it, SIGHUP hangs it up. The shell itself cannot be SIGKILLed; use terminal_close.',
    kind: 'execute',
    ...limits,
    input: z.object({ sessionId, signal: z.enum(PTY_SIGNALS).describe('The signal to send.') }),
    title: (input) => `${input.sessionId}: ${input.signal}`,
    async execute(input, { agent }) {
      try {
        const result = await pty.signal(agent, input.sessionId, input.signal)
        return text(renderSignal(input.sessionId, result, config.maxResultBytes), { sessionId: input.sessionId, ...result })
      } catch (caught) {
        return error(caught)
      }
    },
  })

  tools.register({
    name: 'terminal_close',
    description: 'Close a terminal: stop its shell and every process it started, and forget it. Returns what was stopped.',
    kind: 'delete',
    ...limits,
    input: z.object({ sessionId }),
    title: (input) => `close ${input.sessionId}`,
    async execute(input, { agent }) {
      try {
        const result = await pty.kill(agent, input.sessionId)
        return text(renderClose(input.sessionId, result, config.maxResultBytes), { sessionId: input.sessionId, ...result })
      } catch (caught) {
        return error(caught)
      }
    },
  })

  tools.register({
    name: 'terminal_list',
    description: 'List your terminals, one per line: id, type, status (running or exited with its code), name, and busy while a send runs.',
    kind: 'read',
    ...limits,
    input: z.object({}),
    title: () => 'terminals',
    async execute(_input, { agent }) {
      const sessions = pty.list(agent)
      // createdAt stays out of meta so scripted runs are byte-stable; ids give the order.
      return text(renderList(sessions, config.maxResultBytes), { sessions: sessions.map(({ createdAt: _createdAt, ...session }) => session) })
    },
  })

  ctx.inject(['agents'], (inner) => {
    const agents = inner.get('agents') as AgentServiceApi
    agents.section({ id: PROMPT_SECTION_ID, order: PROMPT_SECTION_ORDER, render: () => promptSection(config) })
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

/** The first non-blank line of `text` for titles and task labels: control characters as ^X, at most 80 characters. */
export function firstLine(text: string): string {
  const line = (text.split(/\r?\n/).find((part) => part.trim() !== '') ?? '').trim()
  const visible = line.replace(/[\x00-\x1f\x7f]/g, (char) => (char === '\x7f' ? '^?' : `^${String.fromCharCode(char.charCodeAt(0) + 64)}`))
  if (visible === '') return '(empty line)'
  const points = [...visible]
  return points.length > 80 ? `${points.slice(0, 79).join('')}…` : visible
}
