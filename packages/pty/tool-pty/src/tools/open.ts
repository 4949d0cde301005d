/** terminal_open: start a terminal of a registered type. */
import { z } from 'zod'
import { MAX_SESSION_NAME_CHARS, MAX_TERMINAL_COLS, MAX_TERMINAL_ROWS } from '@conch/pty'
import { renderOpen } from '../render.ts'
import type { ToolKit } from './kit.ts'

export function registerTerminalOpen(kit: ToolKit): void {
  const { tools, config, limits, error, text } = kit
  tools.register({
    name: 'terminal_open',
    description:
      'Open another terminal (a second shell, another type, cwd, size, ports); it persists until terminal_close. Returns its start output, then [opened: pty-1] (and cwd DIR when not the workspace).',
    kind: 'execute',
    ...limits,
    input: z.object({
      type: z.string().min(1, 'type must name a terminal type, e.g. "shell"').describe('e.g. shell'),
      name: z
        .string()
        .min(1)
        .max(MAX_SESSION_NAME_CHARS, `name must be at most ${MAX_SESSION_NAME_CHARS} characters`)
        .optional()
        .describe('Unique display name'),
      cwd: z.string().min(1).optional().describe('Default: the workspace root'),
      rows: z.number().int().min(1).max(MAX_TERMINAL_ROWS).optional().describe('Default 40'),
      cols: z.number().int().min(1).max(MAX_TERMINAL_COLS).optional().describe('Default 160'),
      expose: z.array(z.number().int().min(1).max(65535)).max(16).optional().describe('Sandbox ports (e.g. 3000) to reach from the host; the result names the host port'),
    }),
    title: (input) => `open ${input.type}${input.name === undefined ? '' : ` "${input.name}"`}`,
    async execute(input, { agent, signal }) {
      try {
        const size = { ...(input.rows !== undefined && { rows: input.rows }), ...(input.cols !== undefined && { cols: input.cols }) }
        const opened = await kit.open(
          agent,
          { type: input.type, ...(input.name !== undefined && { name: input.name }), ...(input.cwd !== undefined && { cwd: input.cwd }), ...size, ...(input.expose !== undefined && { expose: input.expose }) },
          signal,
        )
        return text(renderOpen(opened, config.maxOutputBytes, kit.policy(agent)?.workspaceRoot), { sessionId: opened.sessionId, type: opened.type, status: opened.status, ...(opened.name !== undefined && { name: opened.name }), ...(opened.cwd !== undefined && { cwd: opened.cwd }), ...(opened.exposed !== undefined && { exposed: opened.exposed }) })
      } catch (caught) {
        return error(caught)
      }
    },
  })
}
