/**
 * The `conch` bin as a process: exit codes, what goes to stdout and stderr, and that nothing
 * it started outlives it.
 */
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { acpRequest, jsonLines, processesWith, runConch, SPINE, startConch, step, workspace, type Workspace } from './harness.ts'

// Each test starts one or two `conch` processes (tsx compiles on start); the machine is shared.
vi.setConfig({ testTimeout: 60_000 })

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

describe('usage', () => {
  it('conch --help and conch run --help print usage on stdout and exit 0', async () => {
    const top = await runConch(['--help'], { cwd: ws.dir })
    expect(top.code).toBe(0)
    expect(top.stdout).toMatch(/^Usage: conch <command>/)
    expect(top.stdout).toContain('run [options] "task"')
    const run = await runConch(['run', '--help'], { cwd: ws.dir })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('--script FILE')
    expect(run.stdout).toContain('--output FORMAT')
  })

  it('an unknown flag exits 2 naming the flag, with nothing on stdout', async () => {
    const result = await runConch(['run', '--verbose', 'task'], { cwd: ws.dir })
    expect(result).toMatchObject({ code: 2, stdout: '' })
    expect(result.stderr).toBe('conch: unknown option --verbose; see --help\n')
  })

  it('a misspelt flag exits 2 suggesting the nearest one, and a missing task is said once, as conch run', async () => {
    const result = await runConch(['run', '--outptu', 'text', 'task'], { cwd: ws.dir })
    expect(result).toMatchObject({ code: 2, stdout: '' })
    expect(result.stderr).toBe('conch: unknown option --outptu (did you mean --output?); see --help\n')
    const missing = await runConch(['run'], { cwd: ws.dir })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/^conch run: missing the task; give it as one quoted argument/)
  })

  it('a bad flag value names the flag', async () => {
    const output = await runConch(['run', '--output', 'xml', 'task'], { cwd: ws.dir })
    expect(output.code).toBe(2)
    expect(output.stderr).toContain('--output must be text or stream-json, got "xml"')
    const cwd = await runConch(['run', '--cwd', 'nowhere', 'task'], { cwd: ws.dir })
    expect(cwd.code).toBe(2)
    expect(cwd.stderr).toContain('--cwd nowhere: no such directory')
  })

  it('conch acp --help prints its usage on stdout and exits 0', async () => {
    const result = await runConch(['acp', '--help'], { cwd: ws.dir })
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/^Usage: conch acp \[--config FILE\] \[--script FILE\]/)
  })

  it('conch gc --help prints its usage, and a bad --output or an argument exits 2 naming it', async () => {
    const help = await runConch(['gc', '--help'], { cwd: ws.dir })
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/^Usage: conch gc \[--config FILE\] \[--output text\|json\]/)
    const output = await runConch(['gc', '--output', 'xml'], { cwd: ws.dir })
    expect(output).toMatchObject({ code: 2, stdout: '' })
    expect(output.stderr).toContain('--output must be text or json, got "xml"')
    const extra = await runConch(['gc', 'now'], { cwd: ws.dir })
    expect(extra.code).toBe(2)
    expect(extra.stderr).toContain('conch gc: unexpected argument "now"; conch gc takes options only')
  })
})

describe('the model', () => {
  it('without --script and without an API key, explains how to set one or use a script, and exits 2', async () => {
    ws.write('cordis.yml', `${SPINE}- id: llm-openai\n  name: '@conch/llm-openai'\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', 'list the files'], { cwd: ws.dir })
    expect(result.code).toBe(2)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain('set DEEPSEEK_API_KEY (sent to https://api.deepseek.com) or OPENAI_API_KEY (sent to https://api.openai.com/v1)')
    expect(result.stderr).toContain('--script')
  })
})

describe('the audit', () => {
  it('an unknown plugin fails naming the entry and the package, and exits 1', async () => {
    ws.write('cordis.yml', `${SPINE}- id: terminals\n  name: '@conch/no-such-plugin'\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/did not start: 1 entry is not active/)
    expect(result.stderr).toMatch(/entry "terminals" \(@conch\/no-such-plugin\): cannot resolve @conch\/no-such-plugin: Cannot find package '@conch\/no-such-plugin'/)
  })

  it('an invalid config fails naming the entry and the field path', async () => {
    ws.write('cordis.yml', `${SPINE}- id: tasks\n  name: '@conch/tasks'\n  config:\n    outputLimitBytes: lots\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/entry "tasks" \(@conch\/tasks\): invalid config:\n\s+- Invalid input: expected number, received string \(at outputLimitBytes\)/)
  })

  it('an unknown key at the top of a config is named, and said to be at the top level, once', async () => {
    ws.write('cordis.yml', `${SPINE}- id: tasks\n  name: '@conch/tasks'\n  config:\n    outputLimit: 5\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/entry "tasks" \(@conch\/tasks\): invalid config:\n\s+- Unrecognized key: "outputLimit" \(at the top level\)/)
    // Only the summary says it: cordis's own log line of the failed start is not printed as well.
    expect(result.stderr).not.toContain('(at )')
    expect(result.stderr.match(/outputLimit/g)).toHaveLength(1)
    expect(result.stderr).toMatch(/^conch: the composition /)
  })

  it('an unknown config key close to a known one suggests it, for any plugin', async () => {
    ws.write(
      'cordis.yml',
      `${SPINE}- id: pty\n  name: '@conch/pty'\n- id: pty-local\n  name: '@conch/pty-local'\n  config:\n    idleSilenceMS: 500\n` +
        `- id: tasks\n  name: '@conch/tasks'\n  config: { outputlimitbytes: 5, zzz: 1 }\n`,
    )
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('- Unrecognized key: "idleSilenceMS" (at the top level); did you mean "idleSilenceMs"?')
    expect(result.stderr).toContain('- Unrecognized keys: "outputlimitbytes", "zzz" (at the top level); did you mean "outputLimitBytes" for "outputlimitbytes"?')
  })

  it('a misspelt key of a row or a patch, and a config value near one of its enum, suggest the right one', async () => {
    ws.write('s.jsonl', `${step('hi')}\n`)
    ws.write('rows.yml', `${SPINE}- id: extra\n  name: '@conch/tasks'\n  disable: true\n`)
    const row = await runConch(['run', '--config', 'rows.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(row.code).toBe(1)
    expect(row.stderr).toBe('conch: rows.yml: entry #5 "extra": Unrecognized key: "disable"; did you mean "disabled"?\n')
    ws.write('base.yml', `${SPINE}- id: policy\n  name: '@conch/sandbox-policy'\n  config: { mode: workspace_write }\n`)
    ws.write('over.yml', 'base: base.yml\npatches:\n  - patch: policy\n    confg: {}\n')
    const patch = await runConch(['run', '--config', 'over.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(patch.code).toBe(1)
    expect(patch.stderr).toBe('conch: over.yml: patches[0]: Unrecognized key: "confg"; did you mean "config"?\n')
    const mode = await runConch(['run', '--config', 'base.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(mode.code).toBe(1)
    expect(mode.stderr).toContain(
      '- Invalid option: expected one of "read-only"|"workspace-write"|"danger-full-access" (at mode); did you mean "workspace-write"?',
    )
  })

  it('a service missing because its entry has an invalid config names that entry as the provider', async () => {
    ws.write('cordis.yml', `${SPINE}- id: tasks\n  name: '@conch/tasks'\n  config: { outputLimitBytes: lots }\n- id: tool-tasks\n  name: '@conch/tool-tasks'\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(
      'entry "tool-tasks" (@conch/tool-tasks): waits for services that are not available: tasks (from entry "tasks", whose config is invalid)',
    )
  })

  it('a bad --script line is said once, naming the script file and the line', async () => {
    ws.write('cordis.yml', SPINE)
    ws.write('s.jsonl', `${step('hi')}\n{not json\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result).toMatchObject({ code: 2, stdout: '' })
    expect(result.stderr).toMatch(/^conch: the model script s\.jsonl:2: not valid JSON \([^\n]*\)\n$/)
  })

  it('a plugin whose services nobody provides fails naming the entry and the services', async () => {
    ws.write('cordis.yml', `${SPINE}- id: tool-tasks\n  name: '@conch/tool-tasks'\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(
      'entry "tool-tasks" (@conch/tool-tasks): waits for services that are not available: tasks (no active entry provides it)',
    )
  })

  it('a relative plugin that does not exist fails with the import error', async () => {
    ws.write('cordis.yml', `${SPINE}- id: mine\n  name: ./missing-plugin.ts\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/entry "mine" \(\.\/missing-plugin\.ts\): cannot import \.\/missing-plugin\.ts: Cannot find module/)
  })

  it('a failed audit disposes what did start, leaving no process behind', async () => {
    const token = `conch-test-${randomUUID()}`
    ws.fixture('child-plugin.ts')
    ws.write(
      'cordis.yml',
      `${SPINE}- id: child\n  name: ./child-plugin.ts\n  config: { token: ${token} }\n- id: tasks\n  name: '@conch/tasks'\n  config: { outputLimitBytes: -5 }\n`,
    )
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/child started \d+/)
    expect(result.stderr).toMatch(/entry "tasks" \(@conch\/tasks\): invalid config/)
    expect(processesWith(token)).toEqual([])
  })

  it('a missing environment variable fails naming the variable, the entry and the field', async () => {
    ws.write('cordis.yml', `${SPINE}- id: tasks\n  name: '@conch/tasks'\n  config:\n    label: \${CONCH_TEST_UNSET_VARIABLE}\n`)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(
      'cordis.yml: entry "tasks": config.label: environment variable CONCH_TEST_UNSET_VARIABLE is not set',
    )
  })

  it('an overlay patch naming an unknown id fails before anything starts', async () => {
    ws.write('cordis.yml', SPINE)
    ws.write('over.yml', 'base: cordis.yml\npatches:\n  - patch: llm-openai\n    disabled: true\n')
    ws.write('s.jsonl', `${step('hi')}\n`)
    const result = await runConch(['run', '--config', 'over.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      'conch: over.yml: patches[0]: no entry has id "llm-openai"; the ids are sessions, tools, llm, agents\n',
    )
  })
})

describe('a scripted run', () => {
  it('boots a cordis.yml with a ./ plugin and prints the turn as stream-json', async () => {
    ws.fixture('echo-tool.ts')
    ws.write('cordis.yml', `${SPINE}- id: tasks\n  name: '@conch/tasks'\n- id: tool-tasks\n  name: '@conch/tool-tasks'\n- id: echo\n  name: ./echo-tool.ts\n`)
    ws.write(
      'script.jsonl',
      [
        step('Echoing.', [
          { name: 'echo', arguments: { text: 'héllo 😀' } },
          { name: 'task_list', arguments: {} },
        ]),
        step('Done.'),
      ].join('\n'),
    )
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 'script.jsonl', '--output', 'stream-json', 'say hello'], { cwd: ws.dir })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(jsonLines(result.stdout)).toEqual([
      { type: 'assistant', text: 'Echoing.' },
      { type: 'tool_call', id: 'call_1_0', name: 'echo', arguments: { text: 'héllo 😀' } },
      { type: 'tool_result', id: 'call_1_0', name: 'echo', isError: false, text: 'echo: héllo 😀', meta: { length: 8 } },
      { type: 'tool_call', id: 'call_1_1', name: 'task_list', arguments: {} },
      { type: 'tool_result', id: 'call_1_1', name: 'task_list', isError: false, text: '(no tasks)', meta: { tasks: [] } },
      { type: 'assistant', text: 'Done.' },
      { type: 'result', status: 'completed', text: 'Done.' },
    ])
    // Key order is part of the format.
    expect(result.stdout.split('\n')[2]).toBe(
      '{"type":"tool_result","id":"call_1_0","name":"echo","isError":false,"text":"echo: héllo 😀","meta":{"length":8}}',
    )
  })

  it('prints a readable transcript with --output text', async () => {
    ws.fixture('echo-tool.ts')
    ws.write('cordis.yml', `${SPINE}- id: echo\n  name: ./echo-tool.ts\n`)
    ws.write('s.jsonl', [step('', [{ name: 'echo', arguments: { text: 'a\nb' } }]), step('All good.')].join('\n'))
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(0)
    expect(result.stdout).toBe('> echo {"text":"a\\nb"}\n  echo: a\n  b\n\nAll good.\n')
  })

  it('runs the agent in the --cwd workspace root', async () => {
    ws.fixture('echo-tool.ts')
    ws.write('cordis.yml', `${SPINE}- id: echo\n  name: ./echo-tool.ts\n`)
    ws.write('s.jsonl', [step('', [{ name: 'where', arguments: {} }]), step('ok')].join('\n'))
    // A folder of its own: a shared temporary root such as /tmp is no workspace for a confined terminal.
    const project = realpathSync(mkdtempSync(join(tmpdir(), 'conch-cli-cwd-')))
    try {
      const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', '--cwd', project, '--output', 'stream-json', 'task'], { cwd: ws.dir })
      expect(result.code).toBe(0)
      expect(jsonLines(result.stdout)[1]).toMatchObject({ type: 'tool_result', text: project })
    } finally {
      rmSync(project, { recursive: true, force: true })
    }
  })

  it('says on stderr when the script has lines left over', async () => {
    ws.write('cordis.yml', SPINE)
    ws.write('s.jsonl', [step('first'), step('never used'), step('nor this')].join('\n'))
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', '--output', 'stream-json', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(0)
    expect(result.stderr).toBe('conch: the model script s.jsonl has 2 unconsumed lines; the run used 1\n')
  })

  it('a run that ends in a model error prints a result line with status error and exits 1', async () => {
    ws.fixture('echo-tool.ts')
    ws.write('cordis.yml', `${SPINE}- id: echo\n  name: ./echo-tool.ts\n`)
    ws.write('s.jsonl', step('', [{ name: 'echo', arguments: { text: 'x' } }]))
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', '--output', 'stream-json', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(1)
    const lines = jsonLines(result.stdout)
    expect(lines.at(-1)).toMatchObject({ type: 'result', status: 'error' })
    expect(String(lines.at(-1)?.['text'])).toMatch(/no line for model call 2/)
    expect(result.stderr).toMatch(/^conch: the run ended with an error: .*no line for model call 2/m)
  })

  it('--script replaces the live model of an overlay composition without needing a key', async () => {
    ws.fixture('echo-tool.ts')
    ws.write('cordis.yml', `${SPINE}- id: llm-openai\n  name: '@conch/llm-openai'\n  config:\n    endpoints: [{apiKeyEnv: CONCH_TEST_UNSET_KEY, baseURL: "http://127.0.0.1:1", model: m}]\n`)
    ws.write('tools.yml', 'base: cordis.yml\npatches:\n  - insert: { id: echo, name: ./echo-tool.ts }\n    after: tools\n')
    ws.write('s.jsonl', [step('', [{ name: 'echo', arguments: { text: 'over' } }]), step('fine')].join('\n'))
    const result = await runConch(['run', '--config', 'tools.yml', '--script', 's.jsonl', '--output', 'stream-json', 'task'], {
      cwd: ws.dir,
    })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(jsonLines(result.stdout).map((line) => line['type'])).toEqual(['tool_call', 'tool_result', 'assistant', 'result'])
  })
})

describe('a shared temporary folder as the workspace', () => {
  it('conch run --cwd /tmp under a confining mode stops at start with exit 2, naming --cwd, why, and what to do', async () => {
    ws.write('s.jsonl', `${step('hi')}\n`)
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode: 'workspace-write' }))
    const result = await runConch(['run', '--config', 'cordis.yml', '--cwd', '/tmp', '--output', 'stream-json', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(
      /^conch: --cwd \/tmp cannot be the workspace under the sandbox mode workspace-write: \/tmp is a temporary folder every user shares.*Pass --cwd a folder of your own\.\n$/,
    )
    // No model call was made: the stream-json result is the refusal.
    const lines = jsonLines(result.stdout)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ type: 'result', status: 'error', text: expect.stringContaining('--cwd /tmp cannot be the workspace') })
  })

  it('the working directory as the default --cwd is named as such; under read-only too', async () => {
    ws.write('s.jsonl', `${step('hi')}\n`)
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode: 'read-only' }))
    const result = await runConch(['run', '--config', join(ws.dir, 'cordis.yml'), 'task'], { cwd: '/tmp' })
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/^conch: the working directory \/tmp \(the default --cwd\) cannot be the workspace under the sandbox mode read-only: /)
  })

  it('under danger-full-access the run goes ahead', async () => {
    ws.write('s.jsonl', `${step('hi')}\n`)
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode: 'danger-full-access' }))
    const result = await runConch(['run', '--config', 'cordis.yml', '--cwd', '/tmp', '--output', 'stream-json', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(0)
    expect(jsonLines(result.stdout).at(-1)).toMatchObject({ type: 'result', status: 'completed', text: 'hi' })
  })
})

describe('groups', () => {
  it('loads group entries, nested groups included, and disposes children before their group', async () => {
    ws.fixture('dispose-log.ts')
    ws.write(
      'cordis.yml',
      `${SPINE}` +
        `- id: outer\n  group: true\n  config:\n` +
        `    - id: log-a\n      name: ./dispose-log.ts\n      config: { label: a }\n` +
        `    - id: inner\n      group: true\n      config:\n` +
        `        - id: log-b\n          name: ./dispose-log.ts\n          config: { label: b }\n` +
        `        - id: log-off\n          name: ./dispose-log.ts\n          disabled: true\n          config: { label: off }\n` +
        `- id: log-c\n  name: ./dispose-log.ts\n  config: { label: c }\n`,
    )
    ws.write('s.jsonl', step('ok'))
    const result = await runConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    expect(result.code).toBe(0)
    const lines = result.stderr.split('\n').filter((line) => /^(apply|dispose) /.test(line))
    expect(lines.filter((line) => line.startsWith('apply')).sort()).toEqual(['apply a', 'apply b', 'apply c'])
    expect(lines.filter((line) => line.startsWith('dispose'))).toEqual(['dispose c', 'dispose b', 'dispose a'])
  })
})

describe('shutdown', () => {
  it('SIGTERM during a run cancels the turn, disposes entries in reverse order and leaves no process', async () => {
    const token = `conch-test-${randomUUID()}`
    ws.fixture('dispose-log.ts')
    ws.fixture('wait-tool.ts')
    ws.write(
      'cordis.yml',
      `${SPINE}` +
        `- id: log-a\n  name: ./dispose-log.ts\n  config: { label: a }\n` +
        `- id: waiter\n  name: ./wait-tool.ts\n` +
        `- id: log-b\n  name: ./dispose-log.ts\n  config: { label: b }\n` +
        `- id: log-c\n  name: ./dispose-log.ts\n  config: { label: c }\n`,
    )
    ws.write('s.jsonl', [step('', [{ name: 'wait_for_abort', arguments: { token } }]), step('unreachable')].join('\n'))
    const conch = startConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', '--output', 'stream-json', 'task'], { cwd: ws.dir })
    await conch.waitForStderr('TOOL_STARTED')
    expect(processesWith(token)).toHaveLength(1)
    conch.child.kill('SIGTERM')
    expect(await conch.exit).toBe(143)
    const order = conch
      .stderr()
      .split('\n')
      .filter((line) => /^(apply|dispose) /.test(line))
    // The loader applies independent entries as their modules arrive; the boot's own guarantee is
    // the disposal: every entry, in reverse file order.
    expect(order.filter((line) => line.startsWith('apply ')).sort()).toEqual(['apply a', 'apply b', 'apply c'])
    expect(order.filter((line) => line.startsWith('dispose '))).toEqual(['dispose c', 'dispose b', 'dispose a'])
    const lines = jsonLines(conch.stdout())
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'error', text: 'interrupted by SIGTERM' })
    expect(lines.find((line) => line['type'] === 'tool_result')).toMatchObject({ name: 'wait_for_abort', text: 'aborted' })
    expect(processesWith(token)).toEqual([])
  })

  it('a second SIGINT exits at once when the shutdown hangs', async () => {
    const token = `conch-test-${randomUUID()}`
    ws.fixture('hang-dispose.ts')
    ws.fixture('wait-tool.ts')
    ws.write('cordis.yml', `${SPINE}- id: hang\n  name: ./hang-dispose.ts\n- id: waiter\n  name: ./wait-tool.ts\n`)
    ws.write('s.jsonl', step('', [{ name: 'wait_for_abort', arguments: { token } }]))
    const conch = startConch(['run', '--config', 'cordis.yml', '--script', 's.jsonl', 'task'], { cwd: ws.dir })
    await conch.waitForStderr('TOOL_STARTED')
    conch.child.kill('SIGINT')
    await conch.waitForStderr('DISPOSE_HANGING')
    conch.child.kill('SIGINT')
    expect(await conch.exit).toBe(130)
    expect(conch.stderr()).toContain('conch: SIGINT again: exiting without waiting for the shutdown')
    // The tool's child was stopped by the cancelled turn, before the shutdown began.
    expect(processesWith(token)).toEqual([])
  })
})

describe('conch acp', () => {
  const request = acpRequest

  it('serves ACP on stdio, with only protocol frames on stdout, and exits 0 when stdin closes', async () => {
    ws.write('cordis.yml', SPINE)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const conch = startConch(['acp', '--config', 'cordis.yml', '--script', 's.jsonl'], { cwd: ws.dir })
    const initialized = await request(conch, 0, 'initialize', { protocolVersion: 1 })
    expect(initialized).toMatchObject({ jsonrpc: '2.0', id: 0, result: { protocolVersion: 1, agentInfo: { name: 'conch' } } })
    const session = await request(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
    expect(session).toMatchObject({ id: 1, result: { sessionId: expect.any(String) } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
    for (const frame of jsonLines(conch.stdout())) expect(frame['jsonrpc']).toBe('2.0')
  })

  it('refuses session/new in a temporary folder every user shares under a confining mode, and still serves a folder of its own', async () => {
    ws.write('s.jsonl', `${step('hi')}\n`)
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode: 'workspace-write' }))
    const conch = startConch(['acp', '--config', 'cordis.yml'], { cwd: ws.dir })
    await request(conch, 0, 'initialize', { protocolVersion: 1 })
    const refused = await request(conch, 1, 'session/new', { cwd: '/tmp', mcpServers: [] })
    expect(refused).toMatchObject({ id: 1, error: { code: -32602, data: { errorCode: 'CWD_REFUSED', cwd: '/tmp' } } })
    expect(String((refused['error'] as { message: string }).message)).toMatch(
      /^cwd \/tmp cannot be the workspace under the sandbox mode workspace-write: \/tmp is a temporary folder every user shares.*Send a folder of your own as the session's cwd$/,
    )
    const session = await request(conch, 2, 'session/new', { cwd: ws.dir, mcpServers: [] })
    expect(session).toMatchObject({ id: 2, result: { sessionId: expect.any(String) } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
  })

  it('refuses session/new past maxSessions with a JSON-RPC error naming the cap, holds no descriptor per idle session log, and keeps serving', async () => {
    const logs = realpathSync(mkdtempSync(join(tmpdir(), 'conch-acp-logs-')))
    try {
      ws.write('cordis.yml', SPINE.replace("name: '@conch/session'\n", `name: '@conch/session'\n  config: ${JSON.stringify({ dir: logs })}\n`))
      ws.write('s.jsonl', `${step('still here')}\n`)
      const conch = startConch(['acp', '--config', 'cordis.yml', '--script', 's.jsonl'], { cwd: ws.dir })
      const descriptors = () => readdirSync(`/proc/${conch.child.pid}/fd`).length
      await request(conch, 0, 'initialize', { protocolVersion: 1 })
      const first = await request(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
      const afterOne = descriptors()
      for (let id = 2; id <= 64; id++) {
        expect(await request(conch, id, 'session/new', { cwd: ws.dir, mcpServers: [] })).toMatchObject({ result: { sessionId: expect.any(String) } })
      }
      // 64 sessions, each with its log file: the descriptors of 63 more idle logs are not held.
      expect(readdirSync(logs)).toHaveLength(64)
      expect(descriptors() - afterOne).toBeLessThan(8)
      const refused = await request(conch, 65, 'session/new', { cwd: ws.dir, mcpServers: [] })
      expect(refused).toMatchObject({
        id: 65,
        error: {
          code: -32600,
          message: 'this connection already has 64 open sessions (maxSessions: 64); close one with session/close first',
          data: { errorCode: 'TOO_MANY_SESSIONS', maxSessions: 64 },
        },
      })
      const sessionId = (first['result'] as { sessionId: string }).sessionId
      expect(await request(conch, 66, 'session/close', { sessionId })).toMatchObject({ id: 66, result: {} })
      const again = await request(conch, 67, 'session/new', { cwd: ws.dir, mcpServers: [] })
      const prompted = await request(conch, 68, 'session/prompt', { sessionId: (again['result'] as { sessionId: string }).sessionId, prompt: [{ type: 'text', text: 'hi' }] })
      expect(prompted).toMatchObject({ id: 68, result: { stopReason: 'end_turn' } })
      conch.child.stdin.end()
      expect(await conch.exit).toBe(0)
    } finally {
      rmSync(logs, { recursive: true, force: true })
    }
  })

  it('exits 0 after SIGTERM once everything is shut down', async () => {
    ws.write('cordis.yml', SPINE)
    ws.write('s.jsonl', `${step('hi')}\n`)
    const conch = startConch(['acp', '--config', 'cordis.yml', '--script', 's.jsonl'], { cwd: ws.dir })
    await request(conch, 0, 'initialize', { protocolVersion: 1 })
    conch.child.kill('SIGTERM')
    expect(await conch.exit).toBe(0)
    expect(conch.stderr()).toContain('SIGTERM')
  })
})
