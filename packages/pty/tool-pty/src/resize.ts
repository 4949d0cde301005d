/**
 * `terminal_resize`: sets a terminal's size in character cells. The PTY's window size changes
 * (TIOCSWINSZ) and the kernel sends SIGWINCH to the foreground process group, so a full-screen
 * program redraws for the new size; the screen model follows.
 */
import { z } from 'zod'
import { MAX_TERMINAL_COLS, MAX_TERMINAL_ROWS, type PtyServiceApi } from '@conch/pty'
import type { ToolResult, ToolsServiceApi } from '@conch/tools'
import type { ShownScreens, ToolKit } from './tools/kit.ts'

export interface ResizeToolOptions {
  tools: ToolsServiceApi
  pty: PtyServiceApi
  maxResultBytes: number
  sessionId: z.ZodType<string | undefined>
  /** The terminal a call means (an omitted id: the agent's shell). */
  terminal: ToolKit['terminal']
  /** Renders a PtyError as the tool's error result (rethrows anything else). */
  error: (caught: unknown) => ToolResult
  /** Forgets the screen terminal_send showed: the next is shown whole at the new size. */
  screens: ShownScreens
}

/** Registers `terminal_resize`; returns the registry's disposer. */
export function registerResize(options: ResizeToolOptions): () => void {
  const { pty, maxResultBytes, error } = options
  return options.tools.register({
    name: 'terminal_resize',
    description:
      'Resize a terminal; the program in front gets SIGWINCH and redraws (vim, less, htop).',
    kind: 'execute',
    maxResultBytes,
    input: z.strictObject({
      sessionId: options.sessionId,
      rows: z.number().int().min(1).max(MAX_TERMINAL_ROWS),
      cols: z.number().int().min(1).max(MAX_TERMINAL_COLS),
    }),
    title: (input) => `resize ${input.sessionId ?? 'shell'} ${input.rows}x${input.cols}`,
    async execute(input, { agent }) {
      try {
        const { sessionId } = await options.terminal(agent, input.sessionId)
        options.screens.forget(agent, sessionId)
        pty.resize(agent, sessionId, { rows: input.rows, cols: input.cols })
        return { content: [{ type: 'text', text: `[resized: ${sessionId} to ${input.rows}x${input.cols}]` }], meta: { sessionId, rows: input.rows, cols: input.cols } }
      } catch (caught) {
        return error(caught)
      }
    },
  })
}
