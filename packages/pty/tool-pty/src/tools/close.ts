/** terminal_close: stop a terminal and everything in it. */
import { z } from 'zod'
import { renderClose } from '../render.ts'
import { sessionId, type ToolKit } from './kit.ts'

export function registerTerminalClose(kit: ToolKit): void {
  const { pty, tools, config, limits, error, text, closedByOwner, screens } = kit
  tools.register({
    name: 'terminal_close',
    description: 'Close a terminal: stop its shell and everything it started. Returns what was stopped.',
    kind: 'delete',
    ...limits,
    input: z.object({ sessionId }),
    title: (input) => `close ${input.sessionId ?? 'shell'}`,
    async execute(input, { agent }) {
      try {
        const { sessionId } = await kit.terminal(agent, input.sessionId)
        const closed = closedByOwner.get(agent) ?? closedByOwner.set(agent, new Set()).get(agent)!
        closed.add(sessionId)
        screens.forget(agent, sessionId)
        const result = await pty.close(agent, sessionId)
        return text(renderClose(sessionId, result, config.maxOutputBytes), { sessionId, ...result })
      } catch (caught) {
        return error(caught)
      }
    },
  })
}
