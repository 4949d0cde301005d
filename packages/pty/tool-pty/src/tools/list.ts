/** terminal_list: the caller's terminals. */
import { z } from 'zod'
import { renderList } from '../render.ts'
import type { ToolKit } from './kit.ts'

export function registerTerminalList(kit: ToolKit): void {
  const { pty, tools, config, limits, text } = kit
  tools.register({
    name: 'terminal_list',
    description: 'List your terminals, one per line: id, type, status (running or exited with its code), name, and busy while a send runs; then the names of the secrets terminal_send can type, when the deployment configures any.',
    kind: 'read',
    ...limits,
    input: z.object({}),
    title: () => 'terminals',
    async execute(_input, { agent }) {
      const sessions = pty.list(agent)
      // createdAt stays out of meta so scripted runs are byte-stable; ids give the order.
      return text(renderList(sessions, config.maxResultBytes, Object.keys(config.secrets)), { sessions: sessions.map(({ createdAt: _createdAt, ...session }) => session) })
    },
  })
}
