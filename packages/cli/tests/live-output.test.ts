/**
 * Live terminal output of headless runs: `conch run --output text` prints a send's output as it
 * arrives, and `--output stream-json --partial` emits `tool_output` deltas before the result.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { jsonLines, runConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

const composition = (script: string): string => `
- id: sessions
  name: '@conch/session'
- id: tools
  name: '@conch/tools'
- id: llm
  name: '@conch/llm'
- id: model
  name: '@conch/llm-replay'
  config:
    script: ${JSON.stringify(script)}
- id: subprocess
  name: '@conch/subprocess'
- id: sandbox
  name: '@conch/sandbox'
- id: sandbox-local
  name: '@conch/sandbox-local'
- id: sandbox-policy
  name: '@conch/sandbox-policy'
  config:
    mode: danger-full-access
- id: pty
  name: '@conch/pty'
- id: pty-local
  name: '@conch/pty-local'
- id: tool-pty
  name: '@conch/tool-pty'
- id: agents
  name: '@conch/agent'
`

/** Three ticks with pauses between them, so they arrive in separate chunks while the send waits. */
const TICKS = 'for i in 1 2 3; do echo "tick-$((i * 11))"; sleep 0.3; done'

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

function script(): string {
  return ws.write(
    'script.jsonl',
    [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: TICKS } }]),
      step('', [{ name: 'terminal_close', arguments: { sessionId: 'pty-1' } }]),
      step('Done.'),
    ].join('\n'),
  )
}

describe('live output of conch run', () => {
  it('--partial emits tool_output deltas before the unchanged tool_result', async () => {
    const config = ws.write('cordis.yml', composition(script()))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', '--partial', 'tick'], { cwd: ws.dir })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = jsonLines(run.stdout)
    const send = lines.find((line) => line['type'] === 'tool_call' && line['name'] === 'terminal_send')!
    const at = (predicate: (line: Record<string, unknown>) => boolean) => lines.findIndex(predicate)
    const deltas = lines.filter((line) => line['type'] === 'tool_output' && line['id'] === send['id'])
    expect(deltas.length).toBeGreaterThan(1)
    const streamed = deltas.map((line) => line['text'] as string).join('')
    for (const tick of ['tick-11', 'tick-22', 'tick-33']) expect(streamed.split('\n')).toContain(tick)
    const result = at((line) => line['type'] === 'tool_result' && line['id'] === send['id'])
    expect(at((line) => line['type'] === 'tool_output')).toBeLessThan(result)
    expect(Object.keys(lines[result]!)).toEqual(['type', 'id', 'name', 'isError', 'text', 'meta'])
    expect(lines[result]!['text']).toMatch(/^tick-33$/m)
  })

  it('without --partial, stream-json has no tool_output lines', async () => {
    const config = ws.write('cordis.yml', composition(script()))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'tick'], { cwd: ws.dir })
    expect(run.code).toBe(0)
    expect(jsonLines(run.stdout).filter((line) => line['type'] === 'tool_output')).toEqual([])
  })

  it('--output text prints the output live, each line marked, then the result', async () => {
    const config = ws.write('cordis.yml', composition(script()))
    const run = await runConch(['run', '--config', config, 'tick'], { cwd: ws.dir })
    expect(run.code).toBe(0)
    const lines = run.stdout.split('\n')
    const live = lines.indexOf('  | tick-11')
    expect(live).toBeGreaterThan(0)
    expect(lines).toContain('  | tick-33')
    // The result follows the live lines and is unchanged.
    expect(lines.indexOf('  tick-33')).toBeGreaterThan(lines.indexOf('  | tick-33'))
  })

  it('refuses --partial without stream-json', async () => {
    const config = ws.write('cordis.yml', composition(script()))
    const run = await runConch(['run', '--config', config, '--partial', 'tick'], { cwd: ws.dir })
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/--partial needs --output stream-json/)
  })
})
