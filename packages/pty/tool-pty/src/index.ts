/**
 * `@conch/tool-pty`: the model-facing terminal tools over `ctx.pty` (terminal_open, _send, _read,
 * _signal, _close, _list, _resize) and the system-prompt section that says when to use them.
 * Background sends run as `ctx.tasks` tasks.
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
    'Use terminals for REPLs (python3, node), debuggers and interactive programs as well as shell commands. Omit sessionId to use your shell: terminal_send opens it, and it keeps its directory, variables and programs. inferred_idle and timeout do not prove a command finished: check before relying on the result.',
    config.enableRunInBackground ? 'Run long commands with run_in_background: true.' : undefined,
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
  registerResize({ tools: kit.tools, pty: kit.pty, maxResultBytes: config.maxResultBytes, sessionId, terminal: kit.terminal, error: kit.error, screens: kit.screens })

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
