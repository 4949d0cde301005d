/**
 * What an ACP client sees of a sub-agent call: a tool_call whose content streams the child's
 * text while it runs, then the rendered result.
 */
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { PROTOCOL_VERSION, client, methods, ndJsonStream, type SessionNotification } from '@agentclientprotocol/sdk'
import { Context } from 'cordis'
import { afterEach, expect, it, onTestFinished } from 'vitest'
import { readableFrom, runAcp, writableTo } from '@conch/acp'
import AgentService from '@conch/agent'
import LlmService from '@conch/llm'
import * as replay from '@conch/llm-replay'
import SessionService from '@conch/session'
import SubagentService, { NO_CAPABILITIES, type ProviderOutcome, type ProviderRequest } from '@conch/subagent'
import ToolsService from '@conch/tools'
import * as plugin from '../src/index.ts'

let cleanup: (() => Promise<void>) | undefined

afterEach(async () => {
  await cleanup?.()
  cleanup = undefined
})

it("streams the child's text as the tool call's content while the sub-agent runs", async () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'tool-subagent-acp-')))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const script = join(dir, 'script.jsonl')
  writeFileSync(
    script,
    [
      { tool_calls: [{ name: 'subagent', arguments: { prompt: 'count to two' } }] },
      { text: 'the child counted' },
    ]
      .map((line) => JSON.stringify(line))
      .join('\n') + '\n',
  )
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, { provider: 'replay' }))
  fibers.push(await ctx.plugin(replay, replay.Config.parse({ script })))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  let child: { request: ProviderRequest; finish: (outcome: ProviderOutcome) => void } | undefined
  let started!: () => void
  const isStarted = new Promise<void>((resolve) => (started = resolve))
  ctx.subagents.registerProvider({
    name: 'conch',
    capabilities: NO_CAPABILITIES,
    async start(request) {
      let finish!: (outcome: ProviderOutcome) => void
      const outcome = new Promise<ProviderOutcome>((resolve) => (finish = resolve))
      child = { request, finish }
      setImmediate(started)
      return { childId: 'child-session', outcome, dispose: async () => {} }
    },
  })
  fibers.push(await ctx.plugin(plugin, plugin.Config.parse({ provider: 'conch', enableRunInBackground: false })))

  const toAgent = new PassThrough()
  const fromAgent = new PassThrough()
  const controller = new AbortController()
  const served = runAcp({ ctx, input: toAgent, output: fromAgent, signal: controller.signal, config: { streamIntervalMs: 0 } })
  const notifications: SessionNotification[] = []
  const waiters: Array<[(n: SessionNotification) => boolean, () => void]> = []
  const connection = client({ name: 'test' })
    .onNotification(methods.client.session.update, ({ params }) => {
      notifications.push(params)
      for (const [match, resolve] of waiters) if (match(params)) resolve()
    })
    .connect(ndJsonStream(writableTo(toAgent), readableFrom(fromAgent)))
  const seen = (match: (n: SessionNotification) => boolean) =>
    notifications.some(match) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push([match, resolve]))
  cleanup = async () => {
    controller.abort()
    toAgent.end()
    await served
    for (const fiber of fibers.reverse()) await fiber.dispose()
  }

  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION })
  const { sessionId } = await connection.agent.request(methods.agent.session.new, { cwd: dir, mcpServers: [] })
  const prompted = connection.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'delegate' }] })
  await isStarted
  const contentText = (n: SessionNotification): string | undefined => {
    const update = n.update
    if (update.sessionUpdate !== 'tool_call_update' || !update.content) return undefined
    const first = update.content[0]
    return first?.type === 'content' && first.content.type === 'text' ? first.content.text : undefined
  }
  child!.request.update({ type: 'text', text: 'one, ' })
  await seen((n) => contentText(n) === 'one, ')
  child!.request.update({ type: 'text', text: 'two' })
  await seen((n) => contentText(n) === 'one, two')
  // Still running: the client has seen the text before any result.
  expect(notifications.some((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.status === 'completed')).toBe(false)
  child!.finish({ stopReason: 'completed' })
  expect((await prompted).stopReason).toBe('end_turn')
  const call = notifications.find((n) => n.update.sessionUpdate === 'tool_call')!.update
  expect(call).toMatchObject({ title: 'subagent (conch): count to two', status: 'pending' })
  const final = notifications.find((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.status === 'completed')!
  expect(contentText(final)).toMatch(/^one, two\n\[subagent: conch, stop: completed, \d+\.\d s\]$/)
})
