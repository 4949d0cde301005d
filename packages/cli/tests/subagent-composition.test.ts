/**
 * Delegation mounted by the loader from a cordis.yml — the seam, the conch and ACP providers
 * and their tool rows (the Codex and Claude Code rows disabled) — driven through a real
 * `conch run` whose scripted model calls a child conch (answering from its own script) and
 * an ACP agent.
 */
import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { spine, writeComposition } from '@conch/test-support/composition'
import { ACP_AGENT } from '@conch/test-support/products'
import { acpRequest, jsonLines, processesWith, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

// A parent conch and a child conch, each compiling on start.
vi.setConfig({ testTimeout: 90_000 })


const composition = (options: { childScript: string; token: string }) =>
  spine([
    { id: 'tasks', name: '@conch/tasks' },
    { id: 'tool-tasks', name: '@conch/tool-tasks' },
    { id: 'subprocess', name: '@conch/subprocess' },
    { id: 'subagents', name: '@conch/subagent' },
    { id: 'subagent-conch', name: '@conch/subagent-conch', config: { script: options.childScript } },
    { id: 'subagent-acp', name: '@conch/subagent-acp', config: { command: process.execPath, args: [ACP_AGENT, options.token] } },
    { id: 'subagent-codex', name: '@conch/subagent-codex', disabled: true },
    { id: 'subagent-claude-code', name: '@conch/subagent-claude-code', disabled: true },
    { id: 'tool-subagent', name: '@conch/tool-subagent', config: { provider: 'conch' } },
    { id: 'tool-subagent-acp', name: '@conch/tool-subagent', config: { provider: 'acp', toolName: 'subagent_acp' } },
    { id: 'tool-subagent-codex', name: '@conch/tool-subagent', disabled: true, config: { provider: 'codex', toolName: 'codex' } },
  ])

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

describe('sub-agents from a cordis.yml', () => {
  it('runs a scripted turn through a child conch and an ACP agent, and leaves no process', async () => {
    const token = `run-${randomBytes(6).toString('hex')}`
    // Two messages of the child, one before its tool call and one after.
    const childScript = ws.write('child.jsonl', [step('child conch here, listing first.', [{ name: 'task_list', arguments: {} }]), step('from my own script')].join('\n') + '\n')
    const script = ws.write(
      'parent.jsonl',
      [
        step('Delegating.', [{ name: 'subagent', arguments: { prompt: 'introduce yourself' } }]),
        step('', [{ name: 'subagent_acp', arguments: { prompt: 'text' } }]),
        step('', [{ name: 'subagent', arguments: { prompt: 'in the background', run_in_background: true } }]),
        step('', [{ name: 'task_output', arguments: { taskId: 'task-1', wait: true, timeoutMs: 60000 } }]),
        step('Both answered.'),
      ].join('\n') + '\n',
    )
    const config = writeComposition(ws.dir, composition({ childScript, token }))

    const run = await runConch(['run', '--config', config, '--script', script, '--output', 'stream-json', 'delegate'], { cwd: ws.dir })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = jsonLines(run.stdout)
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Both answered.' })
    const results = lines.filter((line) => line['type'] === 'tool_result') as Array<{ name: string; isError: boolean; text: string }>
    expect(results.map((result) => [result.name, result.isError])).toEqual([
      ['subagent', false],
      ['subagent_acp', false],
      ['subagent', false],
      ['task_output', false],
    ])
    expect(results[0]!.text).toMatch(/^child conch here, listing first\.\n\nfrom my own script\n\[subagent: conch, stop: completed, \d+\.\d s\]$/)
    // The ACP agent's two messages, before and after its tool call, a blank line apart.
    expect(results[1]!.text).toMatch(/^hello\n\nworld\n\[subagent: acp, stop: completed, \d+\.\d s\]$/)
    expect(results[2]!.text).toBe('[task: task-1 started]')
    // In the background, the same blank line between the child's messages.
    expect(results[3]!.text).toMatch(/^child conch here, listing first\.\n\nfrom my own script\n\[status: completed, stop: completed, duration: \d+\.\d s\]$/)
    // The children: conch acp processes booted from this workspace's yml, the ACP agent with its token.
    expect(processesWith(ws.dir)).toEqual([])
    expect(processesWith(token)).toEqual([])
  })

  it('conch acp outlives a sub-agent that writes a 40 MB protocol line: that call fails as protocol and every session goes on', async () => {
    const token = `acp-${randomBytes(6).toString('hex')}`
    const childScript = ws.write('child.jsonl', step('unused') + '\n')
    const script = ws.write(
      'parent.jsonl',
      [step('', [{ name: 'subagent_acp', arguments: { prompt: 'huge-line' } }]), step('first session goes on'), step('second session answers')].join('\n') + '\n',
    )
    const config = writeComposition(ws.dir, composition({ childScript, token }))
    const conch = startConch(['acp', '--config', config, '--script', script], { cwd: ws.dir })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    const ids = [] as string[]
    for (const id of [1, 2]) ids.push(((await acpRequest(conch, id, 'session/new', { cwd: ws.dir, mcpServers: [] }))['result'] as { sessionId: string }).sessionId)
    const prompt = (id: number, sessionId: string) => acpRequest(conch, id, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] })
    expect(await prompt(3, ids[0]!)).toMatchObject({ result: { stopReason: 'end_turn' } })
    expect(await prompt(4, ids[1]!)).toMatchObject({ result: { stopReason: 'end_turn' } })
    type Update = { sessionId: string; update: { sessionUpdate: string; status?: string; content?: unknown } }
    const updates = jsonLines(conch.stdout())
      .filter((frame) => frame['method'] === 'session/update')
      .map((frame) => frame['params'] as Update)
    const said = (sessionId: string) =>
      updates
        .filter((params) => params.sessionId === sessionId && params.update.sessionUpdate === 'agent_message_chunk')
        .map((params) => (params.update.content as { text: string }).text)
        .join('')
    expect(said(ids[0]!)).toBe('first session goes on')
    expect(said(ids[1]!)).toBe('second session answers')
    const failed = updates.find((params) => params.update.status === 'failed')!
    expect((failed.update.content as Array<{ content: { text: string } }>)[0]!.content.text).toMatch(
      /^before the flood\n\[subagent: acp, stop: protocol, \d+\.\d s\]\n\[diagnostic: the "acp" sub-agent sent a protocol line of more than 16777216 bytes \(maxFrameBytes\), starting "\{\\"jsonrpc\\":\\"2\.0\\",\\"method\\":\\"session\/update\\"/,
    )
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
    expect(processesWith(token)).toEqual([])
  })
})
