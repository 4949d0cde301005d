/**
 * The root cordis.yml mounted by the loader, with the scripted model: one run_code turn whose
 * program drives a real, sandboxed bash from code and returns a summary, end to end in a real
 * `conch run` process — the nested calls are in the session log with their parent call id.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { tempFolders } from '@conch/test-support/homes'
import { CLI_ROOT, jsonLines, processesWith, runConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

const ROOT_CONFIG = resolve(CLI_ROOT, '..', '..', 'cordis.yml')

const stateHome = tempFolders('conch-state-', '/var/tmp')
let ws: Workspace
let state: string
beforeEach(() => {
  ws = workspace()
  // The root cordis.yml keeps session logs under $XDG_STATE_HOME, outside the workspace.
  state = stateHome()
})
afterEach(() => {
  ws.remove()
})

describe('run_code from the root cordis.yml', () => {
  it('runs a scripted run_code turn that drives a terminal from code, logging the nested calls with their parent', async () => {
    const code = [
      'const { meta } = await tools.terminal_open({ type: "shell" })',
      'const sessionId = meta!.sessionId as string',
      'const outputs: string[] = []',
      'for (const word of ["alpha", "beta", "gamma"]) {',
      '  const sent = await tools.terminal_send({ sessionId, text: `echo ${word} | tr a-z A-Z` })',
      '  outputs.push(sent.text.split("\\n").find((line) => line === word.toUpperCase()) ?? "missing")',
      '}',
      'await tools.terminal_close({ sessionId })',
      'return { sessionId, outputs }',
    ].join('\n')
    const script = ws.write('script.jsonl', [step('Running code.', [{ name: 'run_code', arguments: { code } }]), step('Done.')].join('\n'))
    const run = await runConch(['run', '--config', ROOT_CONFIG, '--script', script, '--output', 'stream-json', 'shout three words'], { cwd: ws.dir, env: { XDG_STATE_HOME: state } })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = jsonLines(run.stdout)
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Done.' })
    const result = lines.find((line) => line['type'] === 'tool_result') as { id: string; name: string; isError: boolean; text: string; meta: Record<string, unknown> }
    expect(result.name).toBe('run_code')
    expect(result.isError, result.text).toBe(false)
    expect(JSON.parse(result.text.slice(0, result.text.lastIndexOf('\n[run_code')))).toEqual({ sessionId: 'pty-1', outputs: ['ALPHA', 'BETA', 'GAMMA'] })
    expect(result.text).toMatch(/\[run_code: ok in \d+ ms, 5 tool calls\]$/)
    expect(result.meta).toMatchObject({ status: 'ok', toolCalls: 5, sandbox: { mode: 'workspace-write', enforcement: 'full' } })
    // Only the model's own calls reach the transcript; the nested ones are in the session log.
    expect(lines.filter((line) => line['type'] === 'tool_call').map((line) => line['name'])).toEqual(['run_code'])

    const [folder] = readdirSync(join(state, 'conch', 'sessions'))
    const dir = join(state, 'conch', 'sessions', folder!)
    const [file] = readdirSync(dir)
    const events = readFileSync(join(dir, file!), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type: string; data: Record<string, unknown> })
    const nested = events.filter((event) => event.data['parentCallId'] === result.id)
    expect(nested.map((event) => `${event.type} ${String(event.data['name'])}`)).toEqual([
      'tool/call terminal_open',
      'tool/result terminal_open',
      'tool/call terminal_send',
      'tool/result terminal_send',
      'tool/call terminal_send',
      'tool/result terminal_send',
      'tool/call terminal_send',
      'tool/result terminal_send',
      'tool/call terminal_close',
      'tool/result terminal_close',
    ])
    expect(processesWith(ws.dir)).toEqual([])
  })
})
