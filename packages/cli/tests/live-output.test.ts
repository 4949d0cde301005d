/**
 * Live terminal output of headless runs: `conch run --output text` prints a send's output as it
 * arrives, and `--output stream-json --partial` emits `tool_output` deltas before the result.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { spine, terminalComposition, writeComposition, type CompositionRow } from '@conch/test-support/composition'
import { LIVE_CUT_NOTICE, LIVE_LIMIT_BYTES, LIVE_PREFIX } from '../src/transcript.ts'
import { acpRequest, jsonLines, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

const composition = (script: string) => terminalComposition({ script, mode: 'danger-full-access' })

/** Three ticks with pauses between them, so they arrive in separate chunks while the send waits. */
const TICKS = 'for i in 1 2 3; do echo "tick-$((i * 11))"; sleep 0.3; done'
/**
 * A multi-line paste: bash 5.2 echoes it as it is pasted, and after Enter moves the cursor up and
 * writes it again in place; the echo reaches a watcher before the redraw.
 */
const LOOP = 'for f in a b; do\n  echo "file $f"\ndone'

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

function script(command = TICKS): string {
  return ws.write(
    'script.jsonl',
    [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: command } }]),
      step('', [{ name: 'terminal_close', arguments: { sessionId: 'pty-1' } }]),
      step('Done.'),
    ].join('\n'),
  )
}

describe('live output of conch run', () => {
  it('--partial emits tool_output deltas before the unchanged tool_result', async () => {
    const config = writeComposition(ws.dir, composition(script()))
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
    const config = writeComposition(ws.dir, composition(script()))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'tick'], { cwd: ws.dir })
    expect(run.code).toBe(0)
    expect(jsonLines(run.stdout).filter((line) => line['type'] === 'tool_output')).toEqual([])
  })

  it('--output text prints the output live, each line marked, then the result', async () => {
    const config = writeComposition(ws.dir, composition(script()))
    const run = await runConch(['run', '--config', config, 'tick'], { cwd: ws.dir })
    expect(run.code).toBe(0)
    const lines = run.stdout.split('\n')
    const live = lines.indexOf('  | tick-11')
    expect(live).toBeGreaterThan(0)
    expect(lines).toContain('  | tick-33')
    // The result follows the live lines and is unchanged.
    expect(lines.indexOf('  tick-33')).toBeGreaterThan(lines.indexOf('  | tick-33'))
  })

  it('--output text shows a multi-line paste live once, though bash writes it again in place', async () => {
    const config = writeComposition(ws.dir, composition(script(LOOP)))
    const run = await runConch(['run', '--config', config, 'loop'], { cwd: ws.dir })
    expect(run.code, run.stderr).toBe(0)
    const live = run.stdout.split('\n').filter((line) => line.startsWith(LIVE_PREFIX)).map((line) => line.slice(LIVE_PREFIX.length))
    expect(live).toEqual(['for f in a b; do', '  echo "file $f"', 'done', 'file a', 'file b', '$ '])
    // The result, after the live lines, leaves the echo of the typed block out: the model wrote it.
    expect(run.stdout.match(/^ {2}for f in a b; do$/gm)).toBeNull()
    expect(run.stdout).toMatch(/^ {2}file a\n {2}file b\n {2}\[exit: 0\]$/m)
  })

  it("an ACP client's live content shows a multi-line paste once, though bash writes it again in place", async () => {
    const config = writeComposition(ws.dir, composition(script(LOOP)))
    const conch = startConch(['acp', '--config', config], { cwd: ws.dir })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    const created = await acpRequest(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
    const sessionId = (created['result'] as { sessionId: string }).sessionId
    expect(await acpRequest(conch, 2, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'loop' }] })).toMatchObject({ result: { stopReason: 'end_turn' } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
    type Update = { sessionUpdate: string; status?: string; content?: { content: { text: string } }[] }
    const updates = jsonLines(conch.stdout())
      .filter((frame) => frame['method'] === 'session/update')
      .map((frame) => (frame['params'] as { update: Update }).update)
    const live = updates.filter((update) => update.sessionUpdate === 'tool_call_update' && update.status === undefined && update.content !== undefined)
    expect(live.length).toBeGreaterThan(0)
    for (const update of live) expect(update.content![0]!.content.text.match(/for f in a b; do/g) ?? []).toHaveLength(1)
    expect(live.at(-1)!.content![0]!.content.text).toBe('for f in a b; do\n  echo "file $f"\ndone\nfile a\nfile b\n$ ')
  })

  it('bounds one call\'s live output in both formats and still prints the whole result', async () => {
    // 3 MB of output in one send: the live view stops at the limit with one notice.
    const flood = 'yes conch-flood | head -c 3000000; echo flood-done'
    const config = writeComposition(ws.dir, composition(script(flood)))
    const text = await runConch(['run', '--config', config, 'flood'], { cwd: ws.dir })
    expect(text.code).toBe(0)
    const live = text.stdout.split('\n').filter((line) => line.startsWith('  | '))
    expect(live.filter((line) => line === `  | ${LIVE_CUT_NOTICE}`)).toHaveLength(1)
    expect(Buffer.byteLength(live.join('\n'))).toBeLessThan(LIVE_LIMIT_BYTES * 2)
    expect(text.stdout).toMatch(/^ {2}flood-done$/m)
    expect(Buffer.byteLength(text.stdout)).toBeLessThan(1_000_000)

    const json = await runConch(['run', '--config', config, '--output', 'stream-json', '--partial', 'flood'], { cwd: ws.dir })
    expect(json.code).toBe(0)
    const deltas = jsonLines(json.stdout).filter((line) => line['type'] === 'tool_output').map((line) => line['text'] as string)
    const streamed = deltas.join('')
    expect(streamed.endsWith(`${LIVE_CUT_NOTICE}\n`)).toBe(true)
    expect(Buffer.byteLength(streamed)).toBeLessThanOrEqual(LIVE_LIMIT_BYTES + LIVE_CUT_NOTICE.length + 2)
    const result = jsonLines(json.stdout).find((line) => line['type'] === 'tool_result' && line['name'] === 'terminal_send')!
    expect(result['text']).toMatch(/flood-done/)
  })

  it('refuses --partial without stream-json', async () => {
    const config = writeComposition(ws.dir, composition(script()))
    const run = await runConch(['run', '--config', config, '--partial', 'tick'], { cwd: ws.dir })
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/--partial needs --output stream-json/)
  })
})

/** Rows of one composition: the scripted model, terminals, run_code and a child conch, unconfined. */
function hostileComposition(script: string, childScript: string): CompositionRow[] {
  return spine([
    { id: 'model', name: '@conch/llm-replay', config: { script } },
    { id: 'subprocess', name: '@conch/subprocess' },
    { id: 'sandbox', name: '@conch/sandbox' },
    { id: 'sandbox-policy', name: '@conch/sandbox-policy', config: { mode: 'danger-full-access' } },
    { id: 'pty', name: '@conch/pty' },
    { id: 'pty-local', name: '@conch/pty-local' },
    { id: 'tool-pty', name: '@conch/tool-pty' },
    { id: 'ptc', name: '@conch/ptc' },
    { id: 'ptc-node', name: '@conch/ptc-node' },
    { id: 'tool-ptc', name: '@conch/tool-ptc' },
    { id: 'subagents', name: '@conch/subagent' },
    { id: 'subagent-conch', name: '@conch/subagent-conch', config: { script: childScript } },
    { id: 'tool-subagent', name: '@conch/tool-subagent', config: { provider: 'conch' } },
  ])
}

describe('the text transcript', () => {
  it('shows control sequences from run_code, a child conch, the model and a terminal name instead of passing them to the terminal', async () => {
    const osc52 = (what: string) => `\u001b]52;c;${Buffer.from(what).toString('base64')}\u0007`
    const childScript = ws.write('child.jsonl', `${step(`child ${osc52('CHILD')} answer \u001b]0;child-title\u0007`)}\n`)
    const script = ws.write(
      'script.jsonl',
      [
        step(`model ${osc52('MODEL')} \u001b]0;model-title\u0007 \u009b31m`, [{ name: 'run_code', arguments: { code: `console.log("rc\\u001b]52;c;UlVOQ09ERQo=\\u0007z \\u001b]0;rc-title\\u0007 \\u009b2J")` } }]),
        step('', [{ name: 'terminal_open', arguments: { type: 'shell', name: `n${osc52('NAME')}\u001b]0;name-title\u0007` } }]),
        step('', [{ name: 'subagent', arguments: { prompt: 'answer' } }]),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, hostileComposition(script, childScript))
    const run = await runConch(['run', '--config', config, '--output', 'text', 'go'], { cwd: ws.dir })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)
    // Each shown visibly, nothing hidden from the operator.
    expect(run.stdout).toContain('rc^[]52;c;UlVOQ09ERQo=^Gz ^[]0;rc-title^G \\x9b2J')
    expect(run.stdout).toContain(`model ^[]52;c;${Buffer.from('MODEL').toString('base64')}^G ^[]0;model-title^G \\x9b31m`)
    expect(run.stdout).toContain(`child ^[]52;c;${Buffer.from('CHILD').toString('base64')}^G answer ^[]0;child-title^G`)
    // The name is in the call's line only (the open result no longer repeats it), JSON-escaped.
    expect(run.stdout).toContain(`"name":"n\\u001b]52;c;${Buffer.from('NAME').toString('base64')}\\u0007\\u001b]0;name-title\\u0007"`)
    expect(run.stdout).toContain('Done.')
    // stream-json escapes them all (JSON.stringify leaves DEL and C1 raw), and parses back unchanged.
    const json = await runConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir })
    expect(json.code, json.stderr).toBe(0)
    expect(json.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/)
    expect(jsonLines(json.stdout).find((line) => line['type'] === 'assistant')).toEqual({ type: 'assistant', text: `model ${osc52('MODEL')} \u001b]0;model-title\u0007 \u009b31m` })
  })

  it('shows bidi controls and invisible format characters from the model, a terminal and the answer as <U+XXXX>', async () => {
    // U+202E (right-to-left override) makes `txt.exe` read as `exe.txt`; U+200B hides inside a word.
    const script = ws.write(
      'script.jsonl',
      [
        step('model \u202etxt.exe\u202c \u2066x\u2069 \u200e\u200f\u061c', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: "printf 'term-\\342\\200\\256-%s\\n' $((6*7))" } }]),
        step('answer \u200bzero\u200c\u200d\u2060\ufeff\u202aend'),
      ].join('\n'),
    )
    const run = await runConch(['run', '--config', writeComposition(ws.dir, composition(script)), '--output', 'text', 'go'], { cwd: ws.dir })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).not.toMatch(/[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/)
    expect(run.stdout).toContain('model <U+202E>txt.exe<U+202C> <U+2066>x<U+2069> <U+200E><U+200F><U+061C>')
    expect(run.stdout).toContain('term-<U+202E>-42')
    expect(run.stdout).toContain('answer <U+200B>zero<U+200C><U+200D><U+2060><U+FEFF><U+202A>end')
  })

  it("shows control characters in conch's own stderr lines (a tool name from the model) instead of passing them", async () => {
    const script = ws.write('script.jsonl', `${step('', [{ name: 'no_such\u001b[31mtool\u009b\u202e', arguments: {} }])}\n`)
    const run = await runConch(['run', '--config', writeComposition(ws.dir, composition(script)), '--output', 'text', 'go'], { cwd: ws.dir })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('conch: ')
    expect(run.stderr).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/)
    expect(run.stderr).toContain('no_such^[[31mtool\\x9b<U+202E>')
  })
})
