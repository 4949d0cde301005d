/** terminal_read: a page of a terminal's scrollback. */
import { z } from 'zod'
import { renderRead, renderScreen } from '../render.ts'
import { outputBudget, sessionId, type ToolKit } from './kit.ts'

export function registerTerminalRead(kit: ToolKit): void {
  const { pty, tools, config, limits, error, text, screens } = kit
  tools.register({
    name: 'terminal_read',
    description:
      'Read a terminal\'s scrollback (prompts and commands included), newest lines last, e.g. output that came after a send returned. offset and count go back from the newest line: {offset: 0, count: 20} is the last 20 lines, {offset: 20, count: 20} the 20 before.',
    kind: 'read',
    ...limits,
    input: z.object({
      sessionId,
      offset: z.number().int().min(0).default(0).describe('Lines back from the newest'),
      count: z.number().int().min(1).default(500),
      screen: z.boolean().optional().describe('The whole current screen instead (cursor row marked)'),
      maxOutputBytes: outputBudget(config),
    }),
    title: (input) => `read ${input.sessionId ?? 'shell'}`,
    async execute(input, { agent }) {
      const maxBytes = input.maxOutputBytes ?? config.maxOutputBytes
      try {
        const { sessionId } = await kit.terminal(agent, input.sessionId)
        // What terminal_send shows next is compared with what it showed, not with this.
        screens.forget(agent, sessionId)
        if (input.screen === true) {
          const rendered = renderScreen(pty.screen(agent, sessionId), maxBytes)
          return text(rendered.text, { sessionId, screen: true, truncated: rendered.truncated })
        }
        const page = pty.read(agent, sessionId, { offset: input.offset, count: input.count })
        const rendered = renderRead(page, maxBytes, { offset: input.offset, count: input.count })
        return text(rendered.text, { sessionId, totalLines: page.totalLines, firstRetainedLine: page.firstRetainedLine, lineBegin: rendered.lineBegin, lineEnd: page.lineEnd, truncated: rendered.truncated })
      } catch (caught) {
        return error(caught)
      }
    },
  })
}
