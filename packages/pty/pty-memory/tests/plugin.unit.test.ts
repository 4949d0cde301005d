import { Context } from 'cordis'
import { describe, expect, it } from 'vitest'
import PtyService from '@conch/pty'
import type { Agent } from '@conch/agent'
import * as memory from '../src/index.ts'

/** Just enough of an Agent for the service's ownership checks. */
function owner(id: string): Agent {
  return { id, state: 'live', signal: new AbortController().signal, onDispose: () => () => {} } as unknown as Agent
}

describe('plugin', () => {
  it('registers its type on ctx.pty and serves sessions through the service', async () => {
    const root = new Context()
    await root.plugin(PtyService, PtyService.Config.parse({}))
    const fiber = await root.plugin(memory, memory.Config.parse({ type: 'memsh' }))
    expect(root.pty.types()).toEqual(['memsh'])
    const agent = owner('agent-1')
    const opened = await root.pty.spawn(agent, { type: 'memsh', cwd: 'sub' })
    expect(opened).toMatchObject({ sessionId: 'pty-1', type: 'memsh', status: { state: 'running' }, motd: '' })
    expect(opened.pid).toBeUndefined()
    const result = await root.pty.startSend(agent, 'pty-1', { text: 'pwd', submit: true }).done
    expect(result.viewport).toBe('/workspace/sub')
    await fiber.dispose()
    expect(root.pty.types()).toEqual([])
    await expect(root.pty.close(agent, 'pty-1')).resolves.toMatchObject({ stopped: [{ pid: 100, name: 'bash' }] })
  })

  it('names the field of a bad config', () => {
    const parsed = memory.Config.safeParse({ cwd: 'relative', yesLines: 0 })
    expect(parsed.success).toBe(false)
    const paths = parsed.error!.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)
    expect(paths).toEqual(['cwd: must be an absolute path', 'yesLines: Too small: expected number to be >0'])
  })

  it('has defaults for every field', () => {
    expect(memory.Config.parse(undefined)).toEqual({
      type: 'shell',
      cwd: '/workspace',
      home: '/home/conch',
      motd: '',
      idleSilenceMs: 3000,
      timeoutMs: 30000,
      yesLines: 20,
      scrollbackLines: 10000,
      maxReadBytes: 262144,
    })
  })
})
