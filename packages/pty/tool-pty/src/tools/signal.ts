/** terminal_signal: signal the foreground process group of a terminal. */
import { z } from 'zod'
import { PTY_SIGNALS } from '@conch/pty'
import { renderSignal } from '../render.ts'
import { sessionId, type ToolKit } from './kit.ts'

export function registerTerminalSignal(kit: ToolKit): void {
  const { pty, tools, config, limits, error, text, screens } = kit
  tools.register({
    name: 'terminal_signal',
    description:
      'Signal the foreground process group of a terminal: SIGINT interrupts (Ctrl-C), SIGTERM asks to stop, SIGKILL forces, SIGTSTP suspends, SIGHUP hangs up. The shell itself cannot be SIGKILLed: use terminal_close.',
    kind: 'execute',
    ...limits,
    input: z.object({ sessionId, signal: z.enum(PTY_SIGNALS) }),
    title: (input) => `${input.sessionId ?? 'shell'}: ${input.signal}`,
    async execute(input, { agent }) {
      try {
        const { sessionId } = await kit.terminal(agent, input.sessionId)
        screens.forget(agent, sessionId)
        const result = await pty.signal(agent, sessionId, input.signal)
        return text(renderSignal(sessionId, result, config.maxOutputBytes), { sessionId, ...result })
      } catch (caught) {
        return error(caught)
      }
    },
  })
}
