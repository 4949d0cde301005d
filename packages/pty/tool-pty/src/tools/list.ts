/** terminal_list: the caller's terminals. */
import { z } from 'zod'
import { renderList } from '../render.ts'
import type { ToolKit } from './kit.ts'

export function registerTerminalList(kit: ToolKit): void {
  const { pty, tools, config, limits, text } = kit
  tools.register({
    name: 'terminal_list',
    description: 'List your terminals (id, type, status, name, busy while a send runs) and the secrets terminal_send can type.',
    kind: 'read',
    ...limits,
    input: z.object({}),
    title: () => 'terminals',
    async execute(_input, { agent }) {
      const sessions = pty.list(agent)
      // createdAt stays out of meta so scripted runs are byte-stable; ids give the order.
      return text(renderList(sessions, config.maxOutputBytes, Object.keys(config.secrets)), { sessions: sessions.map(({ createdAt: _createdAt, ...session }) => session) })
    },
  })
}
