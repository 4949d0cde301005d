/**
 * exec_command and write_stdin over ctx.pty. Each exec_command opens its own terminal (a bash
 * with the controlled prompt, in `workdir`), types `cmd` and waits for conch's readiness, at most
 * `yield_time_ms`: when the command ended at the shell's prompt (its `$?` rides on the prompt
 * marker) or ended the shell, the terminal is closed and the result carries `exit_code`; otherwise
 * the terminal stays and the result carries a `session_id`, valid until the process ends.
 */
import { constants } from 'node:os'
import { performance } from 'node:perf_hooks'
import { z } from 'zod'
import { beforePrompt, PtyError, type PtyOwner, type PtyServiceApi, type SendResult } from '@conch/pty'
import { boundUtf8, utf8Bytes, type ToolResult, type ToolsServiceApi } from '@conch/tools'
import type { Config } from './config.ts'
import { renderExec, type ExecOutcome } from './render.ts'

/** The terminals an owner's running processes live in, by the session_id the model was given. */
type Running = WeakMap<PtyOwner, Map<number, string>>

export function registerExecTools(pty: PtyServiceApi, tools: ToolsServiceApi, config: Config): void {
  const running: Running = new WeakMap()
  const limits = { maxResultBytes: config.maxResultBytes }
  const yieldMs = (asked: number | undefined, fallback: number) => Math.min(asked ?? fallback, config.maxYieldMs)
  const budgetOf = (tokens: number | undefined) => (tokens ?? config.maxOutputTokens) * config.bytesPerToken
  const maxOutputTokens = z.number().int().positive().optional().describe(`Output budget in tokens (default ${config.maxOutputTokens})`)

  tools.register({
    name: 'exec_command',
    description:
      'Run a command in a fresh bash in a terminal. Returns when it exits (exit code), waits for input, or after yield_time_ms; while it runs the result gives a session_id for write_stdin.',
    kind: 'execute',
    ...limits,
    input: z.object({
      cmd: z.string().min(1, 'cmd must be a shell command').describe('Shell command'),
      workdir: z.string().min(1).optional().describe('Working directory (default: the workspace root)'),
      tty: z.boolean().optional().describe('Accepted; the command always runs on a terminal'),
      yield_time_ms: z.number().int().positive().optional().describe(`Longest wait in ms (default ${config.execYieldMs}); returns sooner when the command exits or waits for input`),
      max_output_tokens: maxOutputTokens,
    }),
    title: (input) => `exec: ${input.cmd.split('\n')[0]!.slice(0, 80)}`,
    async execute(input, { agent, signal }) {
      const started = performance.now()
      let sessionId: string
      try {
        sessionId = (await pty.spawn(agent, { type: config.shell, ...(input.workdir !== undefined && { cwd: input.workdir }) }, signal)).sessionId
      } catch (caught) {
        return errorResult(caught, config.maxResultBytes)
      }
      return settle(agent, sessionId, { text: input.cmd, submit: true, bound: yieldMs(input.yield_time_ms, config.execYieldMs), budgetBytes: budgetOf(input.max_output_tokens), started, signal })
    },
  })

  tools.register({
    name: 'write_stdin',
    description:
      'Write chars to a running session (no Enter is added: end a line with "\\n"). Empty chars waits for more output. Returns when the process exits, waits for input, or after yield_time_ms.',
    kind: 'execute',
    ...limits,
    input: z.object({
      session_id: z.number().int().nonnegative().describe('From exec_command'),
      chars: z.string().default('').describe('Bytes to write; "\\u0003" is Ctrl-C'),
      yield_time_ms: z.number().int().positive().optional().describe(`Longest wait in ms (default ${config.writeYieldMs}); returns sooner when the process exits or waits for input`),
      max_output_tokens: maxOutputTokens,
    }),
    title: (input) => (input.chars === '' ? `poll session ${input.session_id}` : `stdin ${input.session_id}: ${JSON.stringify(input.chars).slice(0, 80)}`),
    async execute(input, { agent, signal }) {
      const started = performance.now()
      const sessionId = running.get(agent)?.get(input.session_id)
      if (sessionId === undefined) {
        return errorResult(new PtyError('NO_SESSION', { sessionId: String(input.session_id) }), config.maxResultBytes, 'it ended, or was never started; run the command again with exec_command')
      }
      return settle(agent, sessionId, { text: input.chars, submit: false, bound: yieldMs(input.yield_time_ms, config.writeYieldMs), budgetBytes: budgetOf(input.max_output_tokens), started, signal })
    },
  })

  /**
   * One send of `text` (with Enter when `submit`: a command typed at bash's prompt, whose echo is
   * then left out of the output), bounded by `bound` ms and settled only by proof (the prompt, a
   * read of the terminal, the shell's exit) or the bound: silence alone never ends it. A process
   * that ended leaves no terminal behind. `budgetBytes` bounds the output; `started` is when the
   * call began (performance.now()), for its wall time.
   */
  async function settle(agent: PtyOwner, sessionId: string, call: { text: string; submit: boolean; bound: number; budgetBytes: number; started: number; signal: AbortSignal }): Promise<ToolResult> {
    const { text, submit, bound, signal } = call
    let result: SendResult
    try {
      result = await pty.startSend(agent, sessionId, { text, submit, timeoutMs: bound, idleMs: bound, signal }).done
    } catch (caught) {
      // Only a send still in flight leaves the process usable; otherwise its terminal goes.
      if (!(caught instanceof PtyError && caught.code === 'SEND_ACTIVE')) {
        running.get(agent)?.delete(numberOf(sessionId))
        await closeQuietly(agent, sessionId)
      }
      return errorResult(caught, config.maxResultBytes)
    }
    const exitCode = exitCodeOf(result)
    // Settled at the controlled prompt: the prompt ending it is not output.
    const shown = result.exitStatus === undefined ? result.viewport : beforePrompt(result.viewport)
    const echoed = submit ? echoLines(shown, text) : 0
    const output = shown.split('\n').slice(echoed).join('\n')
    const omitted = result.omitted && { ...result.omitted, headLines: Math.max(0, result.omitted.headLines - echoed) }
    const outcome: ExecOutcome = {
      wallTimeSeconds: Math.round(performance.now() - call.started) / 1000,
      originalTokenCount: Math.ceil((utf8Bytes(output) + (omitted?.bytes ?? 0)) / config.bytesPerToken),
      output,
      ...(omitted && { omitted }),
      truncated: result.truncated,
    }
    const sessions = running.get(agent) ?? new Map<number, string>()
    running.set(agent, sessions)
    if (exitCode !== undefined) {
      sessions.delete(numberOf(sessionId))
      await closeQuietly(agent, sessionId)
      outcome.exitCode = exitCode
    } else {
      sessions.set(numberOf(sessionId), sessionId)
      outcome.sessionId = numberOf(sessionId)
      outcome.running = result.waitReason === 'stdin_read' ? 'waiting for input' : 'still running at yield_time_ms'
    }
    const rendered = renderExec(outcome, call.budgetBytes, config.maxResultBytes)
    return { content: [{ type: 'text', text: rendered.text }], meta: { ...rendered.meta, waitReason: result.waitReason, evidence: result.evidence } }
  }

  async function closeQuietly(agent: PtyOwner, sessionId: string): Promise<void> {
    await pty.close(agent, sessionId).catch(() => undefined)
  }
}

/**
 * How many first lines of `viewport` are the terminal's echo of the command bash was given: one
 * per line of `typed` (as tool-pty counts a send's echo), counted only while each ends with its
 * line, so output that does not start with the echo is kept whole.
 */
function echoLines(viewport: string, typed: string): number {
  const lines = viewport.split('\n')
  let echoed = 0
  for (const line of typed.split('\n')) {
    if (echoed >= lines.length || !lines[echoed]!.trimEnd().endsWith(line.trimEnd())) break
    echoed++
  }
  return echoed
}

/**
 * The exit code once the process ended: the status bash reported at its prompt (`$?`, 128+N after
 * signal N), or the shell's own when the command ended it (`exit 3`). Undefined while it runs.
 */
function exitCodeOf(result: SendResult): number | undefined {
  if (result.exitStatus !== undefined) return result.exitStatus
  const status = result.sessionStatus
  if (status.state !== 'exited') return undefined
  if (status.exitCode !== null && status.exitCode !== undefined) return status.exitCode
  const signal = status.signal === undefined ? undefined : constants.signals[status.signal as keyof typeof constants.signals]
  return signal === undefined ? undefined : 128 + signal
}

/** The number Codex-shaped calls name a terminal by: the digits that end its id (`pty-3` → 3). */
function numberOf(sessionId: string): number {
  return Number(/(\d+)$/.exec(sessionId)?.[1] ?? Number.NaN)
}

function errorResult(caught: unknown, maxBytes: number, hint?: string): ToolResult {
  if (!(caught instanceof PtyError)) throw caught
  const text = `${caught.code}: ${caught.message}${hint === undefined ? '' : ` — ${hint}`}`
  return { content: [{ type: 'text', text: boundUtf8(text, maxBytes).text }], isError: true, meta: { errorCode: caught.code } }
}
