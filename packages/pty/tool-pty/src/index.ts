/**
 * `@conch/tool-pty`: the model-facing terminal tools over `ctx.pty` — terminal_open,
 * terminal_send, terminal_read, terminal_signal, terminal_close, terminal_list, terminal_resize
 * (resize.ts) — and the
 * system-prompt section that says when to use them. Background sends run as `ctx.tasks` tasks.
 *
 * A namespace plugin (no default export: the loader would prefer it and lose `inject`).
 */
import type { Context } from 'cordis'
import type { AgentServiceApi } from '@conch/agent'
import type { SessionServiceApi } from '@conch/session'
import { Config } from './config.ts'
import { toolKit } from './tools/kit.ts'
import { registerTerminalClose } from './tools/close.ts'
import { registerTerminalList } from './tools/list.ts'
import { registerTerminalOpen } from './tools/open.ts'
import { registerTerminalRead } from './tools/read.ts'
import { registerTerminalSend } from './tools/send.ts'
import { registerTerminalSignal } from './tools/signal.ts'
import { registerResize } from './resize.ts'
import { withholdVariables } from '@conch/subprocess'
import { secretsRedactor } from './secrets.ts'
import { sessionId } from './tools/kit.ts'

export { NO_OUTPUT, TRUNCATED, fit, renderBackground, renderClose, renderError, renderList, renderOpen, renderRead, renderScreen, renderSend, renderSignal, statusText } from './render.ts'
export { firstLine } from './tools/kit.ts'
export { Config }

export const name = 'tool-pty'
export const inject = ['pty', 'tools']

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

/** Registers the seven tools (one module each under tools/, resize.ts) and the prompt section. */
export const apply = (ctx: Context, config: Config) => {
  const kit = toolKit(ctx, config)
  registerTerminalOpen(kit)
  registerTerminalSend(kit)
  registerTerminalRead(kit)
  registerTerminalSignal(kit)
  registerTerminalClose(kit)
  registerTerminalList(kit)
  registerResize({ tools: kit.tools, pty: kit.pty, maxResultBytes: config.maxResultBytes, sessionId, error: kit.error })

  // A secret's value is redacted wherever a session records or shows text, not only in
  // terminals: a program that reads its file, a sub-agent that prints it.
  if (Object.keys(config.secrets).length > 0) {
    // A secret's variable reaches no child conch starts (`scrubbedEnv`): terminals, programs, sub-agents.
    const variables = Object.values(config.secrets).flatMap((source) => ('env' in source ? [source.env] : []))
    if (variables.length > 0) ctx.effect(() => withholdVariables(variables))
    ctx.inject(['sessions'], (inner) => {
      const sessions = inner.get('sessions') as SessionServiceApi
      sessions.redact(secretsRedactor(config.secrets))
    })
  }

  ctx.inject(['agents'], (inner) => {
    const agents = inner.get('agents') as AgentServiceApi
    agents.section({ id: PROMPT_SECTION_ID, order: PROMPT_SECTION_ORDER, render: () => promptSection(config) })
  })
}
