import { mkdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { PassThrough } from 'node:stream'
import { methods } from '@agentclientprotocol/sdk'
import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { AcpSetupError, runAcp } from '../src/index.ts'
import { boot, initialize, rejection, type Harness } from './harness.ts'

let harness: Harness | undefined

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

describe('initialize', () => {
  it('answers protocol version 1 with the agent info and the capabilities conch honours', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    const response = await initialize(harness.agent)
    expect(response).toEqual({
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: false,
        promptCapabilities: { image: false, audio: false, embeddedContext: true },
        mcpCapabilities: { http: false, sse: false },
        sessionCapabilities: { close: {} },
      },
      authMethods: [],
      agentInfo: { name: 'conch', title: 'conch', version: '0.1.0' },
    })
  })

  it('answers version 1 to a client that asks for a newer one', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    const response = await harness.agent.request(methods.agent.initialize, { protocolVersion: 7 })
    expect(response.protocolVersion).toBe(1)
  })
})

describe('session/new', () => {
  it('creates one agent per session with the cwd as its workspace root', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    await initialize(harness.agent)
    const first = await harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [] })
    const second = await harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [] })
    expect(first.sessionId).not.toBe(second.sessionId)
    const agents = harness.ctx.agents.list()
    expect(agents.map((agent) => agent.session.id)).toEqual([first.sessionId, second.sessionId])
    expect(agents[0]!.session.start).toEqual({ workspaceRoot: harness.workspace })
  })

  it('refuses a relative cwd with invalid params naming the path and the fix', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    await initialize(harness.agent)
    const error = await rejection(harness.agent.request(methods.agent.session.new, { cwd: 'project/src', mcpServers: [] }))
    expect(error.code).toBe(-32602)
    expect(error.message).toBe('cwd must be an absolute path, got "project/src"; send the project folder as an absolute path')
    expect(error.data).toEqual({ errorCode: 'CWD_NOT_ABSOLUTE', cwd: 'project/src' })
    expect(harness.ctx.agents.list()).toEqual([])
  })

  it('refuses a cwd that is not an existing directory', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    await initialize(harness.agent)
    const error = await rejection(harness.agent.request(methods.agent.session.new, { cwd: `${harness.workspace}/missing`, mcpServers: [] }))
    expect(error.code).toBe(-32602)
    expect(error.data).toMatchObject({ errorCode: 'CWD_NOT_DIRECTORY' })
  })

  it('judges and works in the folder a linked cwd leads to when the session starts: a link re-pointed during the check does not move it', async () => {
    const asked: string[] = []
    let link = ''
    let refused = ''
    harness = await boot({
      script: [{ text: 'unused' }],
      // The check passes the link, which is then re-pointed at a folder the check refuses.
      workspaceProblem: (cwd) => {
        asked.push(cwd)
        if (cwd === link) {
          rmSync(link)
          symlinkSync(refused, link)
          return undefined
        }
        return cwd === refused ? `cwd ${cwd} is refused` : undefined
      },
    })
    link = join(dirname(harness.workspace), 'link')
    refused = join(dirname(harness.workspace), 'refused')
    mkdirSync(refused)
    symlinkSync(harness.workspace, link)
    await initialize(harness.agent)
    await harness.agent.request(methods.agent.session.new, { cwd: link, mcpServers: [] })
    expect(asked).toEqual([link, realpathSync(harness.workspace)])
    expect(harness.ctx.agents.list()[0]!.session.start).toEqual({ workspaceRoot: realpathSync(harness.workspace) })
    // A link to a refused folder is judged by where it leads.
    const error = await rejection(harness.agent.request(methods.agent.session.new, { cwd: link, mcpServers: [] }))
    expect(error).toMatchObject({ code: -32602, message: `cwd ${refused} is refused`, data: { errorCode: 'CWD_REFUSED', cwd: link } })
  })

  it('refuses MCP servers and additional directories, which it does not advertise', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    await initialize(harness.agent)
    const mcp = await rejection(
      harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [{ name: 'fs', command: '/bin/true', args: [], env: [] }] }),
    )
    expect(mcp.code).toBe(-32602)
    expect(mcp.message).toContain('send mcpServers: []')
    expect(mcp.data).toEqual({ errorCode: 'UNSUPPORTED_OPTION', option: 'mcpServers' })
    const dirs = await rejection(
      harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [], additionalDirectories: ['/tmp'] }),
    )
    expect(dirs.data).toEqual({ errorCode: 'UNSUPPORTED_OPTION', option: 'additionalDirectories' })
  })

  it('is refused before initialize', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    const error = await rejection(harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [] }))
    expect(error.code).toBe(-32600)
  })
})

async function session(h: Harness): Promise<string> {
  await initialize(h.agent)
  return (await h.agent.request(methods.agent.session.new, { cwd: h.workspace, mcpServers: [] })).sessionId
}

function prompt(h: Harness, sessionId: string, text: string) {
  return h.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] })
}

describe('session/prompt', () => {
  it('streams assistant text as agent_message_chunk and ends the turn with end_turn', async () => {
    harness = await boot({ script: [{ text: 'Hello from conch.' }] })
    const id = await session(harness)
    expect(await prompt(harness, id, 'say hello')).toEqual({ stopReason: 'end_turn' })
    const chunks = harness.updates(id)
    expect(chunks.every((update) => update.sessionUpdate === 'agent_message_chunk')).toBe(true)
    const text = chunks.map((update) => (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text' ? update.content.text : '')).join('')
    expect(text).toBe('Hello from conch.')
  })

  it('reports each tool call as tool_call, in_progress, live output and the rendered result', async () => {
    harness = await boot({
      script: [
        { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] },
        { tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'echo hi; seq 3' } }] },
        { text: 'Done.' },
      ],
      acp: { streamIntervalMs: 0 },
    })
    const id = await session(harness)
    expect(await prompt(harness, id, 'count')).toEqual({ stopReason: 'end_turn' })
    const updates = harness.updates(id).filter((update) => update.sessionUpdate !== 'agent_message_chunk')
    expect(updates[0]).toEqual({
      sessionUpdate: 'tool_call',
      toolCallId: 'call_1_0',
      title: 'open shell',
      kind: 'execute',
      status: 'pending',
      rawInput: { type: 'shell' },
    })
    expect(updates[1]).toEqual({ sessionUpdate: 'tool_call_update', toolCallId: 'call_1_0', status: 'in_progress' })
    expect(updates[2]).toMatchObject({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'call_1_0',
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: '[opened: pty-1, cwd /workspace]' } }],
      rawOutput: { sessionId: 'pty-1', type: 'shell' },
    })
    const send = updates.filter((update) => 'toolCallId' in update && update.toolCallId === 'call_2_0')
    expect(send[0]).toMatchObject({ sessionUpdate: 'tool_call', title: 'pty-1: echo hi; seq 3', kind: 'execute', rawInput: { sessionId: 'pty-1', text: 'echo hi; seq 3' } })
    expect(send[1]).toEqual({ sessionUpdate: 'tool_call_update', toolCallId: 'call_2_0', status: 'in_progress' })
    // The memory shell prints each command's output as it runs: each live update holds all the output so far.
    const live = send.slice(2, -1)
    expect(live.length).toBeGreaterThan(0)
    expect(live.every((update) => update.sessionUpdate === 'tool_call_update' && update.status === undefined)).toBe(true)
    expect(live.at(-1)).toEqual({ sessionUpdate: 'tool_call_update', toolCallId: 'call_2_0', content: [{ type: 'content', content: { type: 'text', text: 'hi\n1\n2\n3\n' } }] })
    expect(send.at(-1)).toMatchObject({
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: 'hi\n1\n2\n3\n[wait: stdin_read]' } }],
      rawOutput: { waitReason: 'stdin_read' },
    })
  })

  it('marks an isError result failed', async () => {
    harness = await boot({ script: [{ tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-9', text: 'ls' } }] }, { text: 'No terminal.' }] })
    const id = await session(harness)
    await prompt(harness, id, 'try')
    const last = harness.updates(id).filter((update) => update.sessionUpdate === 'tool_call_update').at(-1)
    expect(last).toMatchObject({ status: 'failed', rawOutput: { errorCode: 'NO_SESSION' } })
  })

  it('answers max_turn_requests when the turn runs out of model calls', async () => {
    harness = await boot({
      script: [{ tool_calls: [{ name: 'terminal_list', arguments: {} }] }, { tool_calls: [{ name: 'terminal_list', arguments: {} }] }],
      agents: { maxSteps: 1 },
    })
    const id = await session(harness)
    expect(await prompt(harness, id, 'loop')).toEqual({ stopReason: 'max_turn_requests' })
  })

  it('answers a model failure with a JSON-RPC internal error naming it', async () => {
    harness = await boot({ script: [{ text: 'first answer' }] })
    const id = await session(harness)
    expect(await prompt(harness, id, 'first')).toEqual({ stopReason: 'end_turn' })
    const error = await rejection(prompt(harness, id, 'second'))
    expect(error.code).toBe(-32603)
    expect(error.message).toMatch(/^the model failed: the model script .* has no line for model call 2/)
    expect(error.data).toEqual({ errorCode: 'MODEL_ERROR', cause: 'SCRIPT_EXHAUSTED' })
  })

  it('refuses a second prompt while one is in flight, and an unknown session', async () => {
    harness = await boot({
      script: [
        { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] },
        { tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'hold working' } }] },
      ],
    })
    const id = await session(harness)
    const first = prompt(harness, id, 'work')
    await harness.waitForUpdate((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.toolCallId === 'call_2_0' && n.update.content != null)
    const error = await rejection(prompt(harness, id, 'again'))
    expect(error.code).toBe(-32600)
    expect(error.data).toEqual({ errorCode: 'PROMPT_ACTIVE', sessionId: id })
    const unknown = await rejection(prompt(harness, 'session-nope', 'hi'))
    expect(unknown.code).toBe(-32002)
    expect(unknown.data).toEqual({ errorCode: 'UNKNOWN_SESSION', sessionId: 'session-nope' })
    await harness.agent.notify(methods.agent.session.cancel, { sessionId: id })
    expect(await first).toEqual({ stopReason: 'cancelled' })
  })

  it('refuses image content, which it does not advertise', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    const id = await session(harness)
    const error = await rejection(
      harness.agent.request(methods.agent.session.prompt, { sessionId: id, prompt: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }] }),
    )
    expect(error.code).toBe(-32602)
    expect(error.data).toEqual({ errorCode: 'UNSUPPORTED_CONTENT', index: 0, type: 'image' })
  })
})

describe('session/cancel', () => {
  it('ends the turn cancelled and interrupts the running send with SIGINT', async () => {
    harness = await boot({
      script: [
        { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] },
        { tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'hold compiling' } }] },
        { text: 'never reached' },
      ],
    })
    const id = await session(harness)
    const turn = prompt(harness, id, 'build')
    await harness.waitForUpdate((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.toolCallId === 'call_2_0' && n.update.content != null)
    await harness.agent.notify(methods.agent.session.cancel, { sessionId: id })
    expect(await turn).toEqual({ stopReason: 'cancelled' })
    const result = harness.updates(id).filter((update) => update.sessionUpdate === 'tool_call_update' && update.toolCallId === 'call_2_0').at(-1)
    expect(result).toMatchObject({
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: expect.stringContaining('[interrupted: the turn was cancelled, so SIGINT was sent to the foreground]') } }],
    })
    // The session takes the next prompt: the model script goes on where it stopped.
    expect(await prompt(harness, id, 'again')).toEqual({ stopReason: 'end_turn' })
  })

  it('is ignored for a session with no running prompt', async () => {
    harness = await boot({ script: [{ text: 'ok' }] })
    const id = await session(harness)
    await harness.agent.notify(methods.agent.session.cancel, { sessionId: id })
    await harness.agent.notify(methods.agent.session.cancel, { sessionId: 'session-unknown' })
    expect(await prompt(harness, id, 'hi')).toEqual({ stopReason: 'end_turn' })
  })
})

describe('several sessions', () => {
  it('gives each session its own agent, so terminals of one are foreign to the other', async () => {
    harness = await boot({
      script: [
        { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] },
        { text: 'opened' },
        { tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'echo mine' } }] },
        { text: 'tried' },
      ],
    })
    const a = await session(harness)
    const b = (await harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [] })).sessionId
    await prompt(harness, a, 'open a terminal')
    await prompt(harness, b, 'use pty-1')
    const last = harness.updates(b).filter((update) => update.sessionUpdate === 'tool_call_update').at(-1)
    expect(last).toMatchObject({ status: 'failed', rawOutput: { errorCode: 'FOREIGN_SESSION' } })
    expect(harness.updates(a).some((update) => update.sessionUpdate === 'tool_call' && update.toolCallId === 'call_3_0')).toBe(false)
  })

  it('session/close disposes that session’s agent and its terminals only', async () => {
    harness = await boot({ script: [{ tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] }, { text: 'opened' }] })
    const a = await session(harness)
    const b = (await harness.agent.request(methods.agent.session.new, { cwd: harness.workspace, mcpServers: [] })).sessionId
    await prompt(harness, a, 'open')
    const [agentA, agentB] = harness.ctx.agents.list()
    expect(harness.ctx.pty.list(agentA!)).toHaveLength(1)
    await harness.agent.request(methods.agent.session.close, { sessionId: a })
    expect(agentA!.state).toBe('disposed')
    expect(agentB!.state).toBe('live')
    expect(harness.ctx.agents.list()).toEqual([agentB])
    const error = await rejection(prompt(harness, a, 'more'))
    expect(error.data).toEqual({ errorCode: 'UNKNOWN_SESSION', sessionId: a })
    void b
  })
})

describe('the connection', () => {
  it('writes nothing but JSON-RPC frames to its output', async () => {
    harness = await boot({ script: [{ tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] }, { text: 'ok' }] })
    const id = await session(harness)
    await prompt(harness, id, 'open')
    expect(harness.frames.length).toBeGreaterThan(5)
    for (const frame of harness.frames) expect(frame).toMatchObject({ jsonrpc: '2.0' })
  })

  it('disposes every agent and its terminals when the input ends, even mid-turn', async () => {
    harness = await boot({
      script: [
        { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] },
        { tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'hold busy' } }] },
      ],
    })
    const id = await session(harness)
    void prompt(harness, id, 'busy').catch(() => undefined)
    await harness.waitForUpdate((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.toolCallId === 'call_2_0' && n.update.content != null)
    const [agent] = harness.ctx.agents.list()
    harness.endInput()
    await harness.served
    expect(agent!.state).toBe('disposed')
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.pty.list(agent!)).toEqual([])
  })

  it('answers a running prompt `cancelled` on SIGTERM before closing the connection', async () => {
    harness = await boot({
      script: [
        { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell' } }] },
        { tool_calls: [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'hold busy' } }] },
        { text: 'stopped' },
      ],
    })
    const id = await session(harness)
    const answer = prompt(harness, id, 'busy')
    await harness.waitForUpdate((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.toolCallId === 'call_2_0' && n.update.content != null)
    harness.stop()
    await expect(answer).resolves.toMatchObject({ stopReason: 'cancelled' })
    await harness.served
    expect(harness.ctx.agents.list()).toEqual([])
  })

  it('disposes every agent when its signal aborts', async () => {
    harness = await boot({ script: [{ text: 'unused' }] })
    await session(harness)
    await session(harness)
    expect(harness.ctx.agents.list()).toHaveLength(2)
    harness.stop()
    await harness.served
    expect(harness.ctx.agents.list()).toEqual([])
  })
})

describe('runAcp', () => {
  it('refuses a composition without an agent service, naming the entry to add', async () => {
    const error = await rejection(runAcp({ ctx: new Context(), input: new PassThrough(), output: new PassThrough() }))
    expect(error).toBeInstanceOf(AcpSetupError)
    expect((error as unknown as AcpSetupError).code).toBe('NO_AGENT_SERVICE')
    expect(error.message).toContain("{id: agents, name: '@conch/agent'}")
  })

  it('refuses an invalid option naming the field', async () => {
    const error = await rejection(runAcp({ ctx: new Context(), input: new PassThrough(), output: new PassThrough(), config: { streamBytes: 10 } }))
    expect(error.message).toContain('streamBytes')
  })
})
