/** terminal_send: type into a terminal and wait until it is ready, in the foreground or as a task. */
import { z } from 'zod'
import { RE2JS } from 're2js'
import { beforePrompt, CONTROLLED_PS1, entersAfter, PtyError, type KeyEntry, type PtyServiceApi, type ReadinessEvidence, type SendOperation, type SendPayload, type SendResult, type SignalResult } from '@conch/pty'
import { tasksOf, type KillReport, type LinePattern } from '@conch/tasks'
import { messageOf, unreachable } from '@conch/session'
import { utf8Bytes } from '@conch/tools'
import { EchoFilter, sendWithoutEcho } from '../echo.ts'
import { readyFields, renderBackground, renderSend, statusText } from '../render.ts'
import { readSecret, secretNames } from '../secrets.ts'
import { firstLine, outputBudget, sessionId, type ToolKit } from './kit.ts'

export function registerTerminalSend(kit: ToolKit): void {
  const { ctx, pty, tools, config, limits, error, text, screens } = kit
  const names = secretNames(config.secrets)
  // Sessions whose last send ended at a reader with echo off (`[input: hidden]`): the next text
  // is not echoed, so output that begins with it is the program's own and is kept whole.
  const echoOff = new Set<string>()
  const noteInput = (sessionId: string, result: SendResult) => {
    if (result.inputState === 'hidden') echoOff.add(sessionId)
    else echoOff.delete(sessionId)
  }
  const sendShape = {
    sessionId,
    text: z
      .string()
      .optional()
      .describe('Typed as given, then Enter; lines run one after another; control characters too ("\\u0003" is ^C)'),
    keys: z
      .array(z.union([z.string(), z.strictObject({ text: z.string() })]))
      .min(1)
      .max(256)
      .optional()
      .describe(
        'Instead of text: key presses, e.g. ["Escape", {"text": ":wq"}, "Enter"]. Enter, Tab, S-Tab, Escape, Backspace, Space, Delete, Insert, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1–F12, C-a…C-z, M-<key>, C-/S-/M- on arrows and F-keys (C-Left); one character types itself; {"text"} is literal. No submit',
      ),
    secret: z
      .string()
      .optional()
      .describe(`Instead of text: a secret to type, then Enter, for [input: hidden]; you see only [secret NAME]. Configured: ${names}`),
    submit: z.boolean().default(true).describe('false: no Enter; never after a final ESC or only ^C, ^\\, ^Z'),
    timeoutMs: z
      .number()
      .int()
      .positive()
      .max(config.maxTimeoutMs, `timeoutMs may be at most ${config.maxTimeoutMs} (maxTimeoutMs); use run_in_background for longer commands`)
      .optional()
      .describe('Wait up to this long for the terminal to be ready (default 30000); the command keeps running. Given without idleMs, quiet output does not end the wait'),
    idleMs: z
      .number()
      .int()
      .positive()
      .max(config.maxTimeoutMs, `idleMs may be at most ${config.maxTimeoutMs} (maxTimeoutMs)`)
      .optional()
      .describe('Return inferred_idle after this many ms of quiet output (default 3000; timeoutMs when that is given)'),
    maxOutputBytes: outputBudget(config),
  }
  const objectInput = config.enableRunInBackground
    ? z.object({
        ...sendShape,
        run_in_background: z
          .boolean()
          .optional()
          .describe('Return a task id at once, notified when it ends or waits for input; without sessionId it runs in a new shell at the workspace root, closed when it ends leaving nothing running'),
        notify: z.boolean().optional().describe('Background: wake me when it ends, even after my turn ended'),
        notifyOn: z
          .string()
          .max(1000)
          .superRefine((source, context) => {
            const problem = patternProblem(source)
            if (problem !== undefined) context.addIssue({ code: 'custom', message: `notifyOn is not a valid RE2 regular expression (no lookaround or backreferences): ${problem}` })
          })
          .optional()
          .describe('Background: RE2 regex; notify and wake me at the first output line matching it'),
      })
    : z.strictObject(sendShape, {
        error: (issue) =>
          issue.code === 'unrecognized_keys' && issue.keys.includes('run_in_background')
            ? 'run_in_background is disabled in this deployment; send in the foreground (omit run_in_background)'
            : undefined,
      })
  const sendInput = objectInput.superRefine((input, context) => {
    if (('notify' in input && input.notify !== undefined) || ('notifyOn' in input && input.notifyOn !== undefined)) {
      if (!('run_in_background' in input && input.run_in_background === true)) {
        context.addIssue({ code: 'custom', message: 'notify and notifyOn need run_in_background: true', path: ['run_in_background'] })
      }
    }
    const given = (['text', 'keys', 'secret'] as const).filter((key) => input[key] !== undefined)
    if (given.length !== 1) {
      context.addIssue({
        code: 'custom',
        message: given.length === 0 ? 'give one of text, keys or secret' : `give exactly one of text, keys or secret, not ${given.join(' and ')}`,
        path: given.length === 0 ? ['text'] : [given[1]!],
      })
    }
  })

  tools.register({
    name: 'terminal_send',
    description:
      'Type into a terminal and wait until it is ready for more; one send at a time per terminal. Returns the new output, less the exact echo of your text, then [exit: N] when a command ended at the shell prompt, else [wait: R]: R is stdin_read (waiting for input), inferred_idle (output went quiet: the command may still run), timeout (still running) or session_exit (the shell ended; [session: exited …] follows). [input: continuation]: send the rest of the block or SIGINT. [input: hidden]: a password prompt, answer with secret.',
    kind: 'execute',
    ...limits,
    input: sendInput,
    title: (input) => `${input.sessionId ?? 'shell'}: ${describeInput(input)}`,
    async execute(input, { agent, signal, progress }) {
      const background = 'run_in_background' in input && input.run_in_background === true
      // Only the background schema has them (and requires run_in_background with them).
      const { notify, notifyOn } = input as { notify?: boolean; notifyOn?: string }
      const bytes = input.text !== undefined ? utf8Bytes(input.text) : (input.keys ?? []).reduce((sum, key) => sum + utf8Bytes(typeof key === 'string' ? key : key.text), 0)
      if (bytes > config.maxInputBytes) {
        return error(
          new PtyError('INVALID_INPUT', {
            reason: `${input.text !== undefined ? 'text' : 'keys'} is ${bytes} bytes, over the ${config.maxInputBytes}-byte limit (maxInputBytes); nothing was written. Send it in parts, or write it to a file and run that`,
          }),
        )
      }
      // A secret's value is read now, and goes only to ctx.pty; the call and its log name it.
      let payload: SendPayload
      let target: Awaited<ReturnType<typeof kit.terminal>>
      // Refused before a terminal is opened for it.
      const tasks = background ? tasksOf(ctx, 'terminal_send') : undefined
      try {
        payload = payloadOf(input, config.secrets)
        target = await kit.terminal(agent, input.sessionId, { open: background ? 'own' : 'shell', signal })
      } catch (caught) {
        return error(caught)
      }
      const { sessionId } = target
      // Taken now: any result but a screen shown whole leaves nothing to compare the next one with.
      const lastScreen = screens.take(agent, sessionId)
      if (tasks !== undefined) {
        let operation: SendOperation
        try {
          // A background send waits for proof (a prompt, a read, the exit), not for quiet: a job
          // that is silent for a while has not ended. Its timeoutMs defaults to maxTimeoutMs.
          operation = pty.startSend(agent, sessionId, { ...payload, submit: input.submit, ...limitsOf(input, input.timeoutMs ?? config.maxTimeoutMs) })
        } catch (caught) {
          if (target.opened !== undefined) await pty.close(agent, sessionId).catch(() => undefined)
          return error(caught)
        }
        const label = `${sessionId}: ${describeInput(input)}`
        // The echo of the text is left out of the task's output as of a foreground result.
        const echo = payload.text === undefined || echoOff.has(sessionId) ? undefined : new EchoFilter(payload.text, entersAfter(payload.text, input.submit))
        let ended = false
        // Ended at the shell's prompt ([exit: N] in its status): the output's last row is that prompt.
        let atPrompt = false
        // A last row that reads as the shell's prompt, held back until the send's end says whether it is.
        const held = { row: '' }
        let taskId: string
        try {
          taskId = tasks.start({
            kind: 'pty-send',
            label,
            owner: agent,
            ...(notify === true && { notify: true }),
            echoLines: echoLines(payload),
            ...(notifyOn !== undefined && { notifyOn: linePattern(notifyOn) }),
            run: async (controller) => {
              const stop = notifyOn !== undefined ? operation.onOutput(() => controller.changed()) : undefined
              const result = await operation.done.then((settled) => ((atPrompt = readyFields(settled).wait === undefined), settled)).finally(() => {
                stop?.()
                ended = true
              })
              noteInput(sessionId, result)
              // A job stopped, not ended, is what the task's status says too: the shell keeps it.
              const status = kit.closedByOwner.get(agent)?.has(sessionId) === true ? 'killed' : result.stopped === undefined ? undefined : 'stopped'
              // The job's own shell goes once the job ended at its prompt and left nothing in it.
              if (target.opened !== undefined && result.exitStatus !== undefined) await pty.closeIfIdle(agent, sessionId, `when its task ${taskId} ended`).catch(() => undefined)
              return { ...(status && { status }), fields: outcomeFields(result), meta: sendMeta(sessionId, result), event: eventOf(result), evidence: noticeEvidence(result.evidence) }
            },
            drain: () => {
              const screen = operation.screen?.()
              // A screen the task shows is the model's latest view of it, not the last send's.
              if (screen !== undefined) screens.forget(agent, sessionId)
              return backgroundOutput(operation, screen, echo, ended, atPrompt, held)
            },
            cancel: () => stopBackground(pty, agent, sessionId, operation, config.killEscalation),
          }).id
        } catch (caught) {
          // No task took the send: take it back before anything is written, and the shell opened for it.
          await operation.cancel()
          await operation.done.catch(() => undefined)
          if (target.opened !== undefined) await pty.close(agent, sessionId).catch(() => undefined)
          throw caught
        }
        return text(renderBackground(taskId, target.opened && sessionId, config.maxOutputBytes), { taskId, sessionId })
      }

      let operation: SendOperation
      const refusals = kit.refusals(agent.session.id)
      try {
        operation = pty.startSend(agent, sessionId, { ...payload, submit: input.submit, signal, ...limitsOf(input) })
      } catch (caught) {
        refusals.stop()
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
        refusals.stop()
        return error(caught)
      } finally {
        stop?.()
      }
      const refused = refusals.stop()
      const shown = input.text === undefined || echoOff.has(sessionId) ? result : sendWithoutEcho(result, input.text, entersAfter(input.text, input.submit))
      noteInput(sessionId, result)
      const rendered = renderSend(shown, input.maxOutputBytes ?? config.maxOutputBytes, {
        interrupted: signal.aborted,
        refused,
        retained: result.omitted && retainedLines(pty, agent, sessionId),
        networkNone: kit.policy(agent)?.network.mode === 'none',
        ...(target.replaced !== undefined && { opened: { sessionId, replaced: target.replaced } }),
        // A cancelled turn's result may never reach the model.
        shown: signal.aborted ? undefined : lastScreen,
      })
      if (rendered.shown !== undefined && !signal.aborted) screens.remember(agent, sessionId, rendered.shown)
      return text(rendered.text, { ...sendMeta(sessionId, result), truncated: rendered.truncated, ...(refused.length > 0 && { networkRefused: refused }) })
    },
  })
}

/**
 * What a read of a background send's task adds: the lines since the previous read, past the echo
 * of its text (let go once the send `ended`), or the program's `screen` as it is now (its lines
 * are consumed with it). While the send runs, a last row ending in the shell's prompt stays in
 * `held` for the next read: a read taken as the prompt came (a `notifyOn` task reads at every
 * output) must not show the row the end leaves out.
 */
function backgroundOutput(operation: SendOperation, screen: string | undefined, echo: EchoFilter | undefined, ended: boolean, atPrompt: boolean, held: { row: string }): string {
  const lines = operation.readOutput()
  if (screen !== undefined) return `${screen}\n`
  const shown = held.row + (echo === undefined ? lines : echo.feed(lines) + (ended ? echo.flush() : ''))
  held.row = ''
  // As in a foreground result, the status says the shell is back at its prompt: its row goes.
  if (ended) return atPrompt ? beforePrompt(shown) : shown
  if (!shown.endsWith(CONTROLLED_PS1)) return shown
  held.row = shown.slice(shown.endsWith(`\n${CONTROLLED_PS1}`) ? -CONTROLLED_PS1.length - 1 : -CONTROLLED_PS1.length)
  return shown.slice(0, shown.length - held.row.length)
}

/** What the send types, for ctx.pty: a secret's value is read here, at call time. */
function payloadOf(input: { text?: string | undefined; keys?: KeyEntry[] | undefined; secret?: string | undefined }, secrets: Parameters<typeof readSecret>[0]): SendPayload {
  if (input.secret !== undefined) return { secret: readSecret(secrets, input.secret) }
  if (input.keys !== undefined) return { keys: input.keys }
  return { text: input.text ?? '' }
}

/** A send in a title or task label: its first line of text, its keys, or the secret's name (never a value). */
export function describeInput(input: { text?: string | undefined; keys?: KeyEntry[] | undefined; secret?: string | undefined }): string {
  if (input.secret !== undefined) return `secret ${firstLine(input.secret)}`
  if (input.keys !== undefined) return firstLine(`keys ${input.keys.map((key) => (typeof key === 'string' ? key : JSON.stringify(key.text))).join(' ')}`)
  return firstLine(input.text ?? '')
}

/** Outcome fields of a background send's task: those of `readyFields`, `session` when the shell ended, and `input` when not at a primary prompt. */
function outcomeFields(result: SendResult): Record<string, string> {
  return {
    ...readyFields(result),
    ...(result.sessionStatus.state !== 'running' && { session: statusText(result.sessionStatus) }),
    ...(result.inputState !== undefined && result.inputState !== 'prompt' && { input: result.inputState }),
  }
}

/** What a background send's notification says happened: `exited 2`, `stopped (SIGTSTP); fg resumes it`, `waiting for input: Password:`, … */
function eventOf(result: SendResult): string {
  const { stopped, exit } = readyFields(result)
  if (stopped !== undefined) return `stopped (${stopped}); fg resumes it`
  if (exit !== undefined) return `exited ${exit}`
  switch (result.waitReason) {
    case 'stdin_read':
      return `waiting for input: ${firstLine(result.viewport.replace(/\n+$/, '').split('\n').at(-1) ?? '')}`
    case 'session_exit':
      return `ended the session (${statusText(result.sessionStatus)})`
    case 'inferred_idle':
      return 'went quiet (inferred_idle; it may still run)'
    case 'timeout':
      return 'still running at the send timeout'
    default:
      return unreachable(result.waitReason, 'wait reason')
  }
}

/**
 * A send's evidence as its notification says it: the reader by its name, not `name[pid]` — a host
 * pid means nothing in the sandbox's PID namespace (the task's meta keeps the whole evidence).
 */
function noticeEvidence(evidence: ReadinessEvidence): string {
  const reader = evidence.process
  return reader === undefined ? evidence.detail : evidence.detail.replace(`${reader.name}[${reader.pid}]`, reader.name)
}

/**
 * Lines the terminal echoes for the keys a send presses: kept in the task's output (they show what
 * `Up` recalled), left out of notifications, whose label names the send. A text's echo is left out
 * of the output itself (`EchoFilter`).
 */
function echoLines(payload: SendPayload): number {
  return payload.keys?.filter((key) => key === 'Enter' || key === 'C-m' || key === 'C-j').length ?? 0
}

/**
 * The model's `notifyOn` as a line test, compiled by RE2 (re2js): every line a task prints is
 * tried, and RE2 runs in time linear in the line, where `RegExp`'s backtracking lets a hostile
 * line (`aaaa…!` against `(a+)+$`) stall the event loop and every agent with it.
 */
function linePattern(source: string): LinePattern {
  const compiled = RE2JS.compile(source)
  return { source, test: (line) => compiled.test(line) }
}

function patternProblem(source: string): string | undefined {
  try {
    RE2JS.compile(source)
    return undefined
  } catch (error) {
    return messageOf(error)
  }
}

function sendMeta(sessionId: string, result: SendResult): Record<string, unknown> {
  return {
    sessionId,
    waitReason: result.waitReason,
    sessionStatus: result.sessionStatus,
    evidence: result.evidence,
    ...(result.inputState !== undefined && { inputState: result.inputState }),
    ...(result.exitStatus !== undefined && { exitStatus: result.exitStatus }),
    ...(result.stopped !== undefined && { stopped: result.stopped }),
    elapsedMs: result.elapsedMs,
    truncated: result.truncated,
  }
}

/**
 * The per-send limits for ctx.pty (absent: the backend's). `idleMs` defaults to `timeoutMs`: a
 * caller that says how long to wait waits that long for proof unless it gives `idleMs` too.
 */
function limitsOf(input: { timeoutMs?: number | undefined; idleMs?: number | undefined }, timeoutMs = input.timeoutMs): { timeoutMs?: number; idleMs?: number } {
  const idleMs = input.idleMs ?? timeoutMs
  return {
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(idleMs !== undefined && { idleMs }),
  }
}

/**
 * Stops a background send for task_kill: SIGINT (the send's own cancel), then each signal of
 * `escalation` while the terminal is not ready again, so a program that ignores SIGINT does not
 * run on under a task reported `killed`. Reports the signals it took, or that it survived them.
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

/**
 * How many of the newest lines the session's scrollback still keeps (undefined when it cannot be
 * read), so that a cut result's marker offers only pages that exist.
 */
function retainedLines(pty: PtyServiceApi, agent: Parameters<PtyServiceApi['read']>[0], sessionId: string): number | undefined {
  try {
    const page = pty.read(agent, sessionId, { offset: 0, count: 0 })
    return page.totalLines - page.firstRetainedLine + 1
  } catch {
    return undefined
  }
}
