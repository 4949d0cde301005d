/** terminal_read: a page of a terminal's scrollback. */
import { z } from 'zod'
import { renderRead } from '../render.ts'
import { sessionId, type ToolKit } from './kit.ts'

export function registerTerminalRead(kit: ToolKit): void {
  const { pty, tools, config, limits, error, text } = kit
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
}
