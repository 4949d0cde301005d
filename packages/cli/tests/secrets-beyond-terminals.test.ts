/**
 * A registered secret's value read without a terminal: a run_code program that reads the
 * secret's file (fs inside the program, console.log, its return value, a nested call's
 * arguments) and a child conch whose model quotes what its own terminal showed, and a model
 * that quotes it in its streamed answer. The value
 * reaches no result, stream-json line, ACP update or session log — only `[secret NAME]` does.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { conchSubagent, terminalComposition, writeComposition } from '@conch/test-support/composition'
import { tempFolders } from '@conch/test-support/homes'
import { acpRequest, allFiles, jsonLines, processesWith, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

// A parent conch with a run_code program and a child conch, each compiling on start.
vi.setConfig({ testTimeout: 120_000 })

const VALUE = 'file-secret-7c41d09e-kappa'

const stateHome = tempFolders('conch-secrets-', '/var/tmp')
let ws: Workspace
let state = ''
beforeEach(() => {
  ws = workspace()
  state = stateHome()
})
afterEach(() => {
  ws.remove()
})

describe('a secret read outside a terminal', () => {
  it('by a run_code program and by a child conch shows only its name in results, stream-json, ACP updates and the session log', async () => {
    const secretFile = ws.write('token.txt', `${VALUE}\n`)
    // The child has its own terminals and no secrets: its terminal shows the value, and its model quotes it.
    const childScript = ws.write(
      'child.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `cat ${secretFile}` } }]),
        step(`The file holds ${VALUE}.`),
      ].join('\n'),
    )
    const childConfig = writeComposition(ws.dir, terminalComposition({ script: childScript, mode: 'danger-full-access' }), 'child.yml')
    const code = [
      'const fs = require("node:fs")',
      `const value = fs.readFileSync(${JSON.stringify(secretFile)}, "utf8").trim()`,
      'console.log("read:", value)',
      'const { meta } = await tools.terminal_open({ type: "shell" })',
      'const echoed = await tools.terminal_send({ sessionId: meta!.sessionId as string, text: `echo ${value} | rev | rev` })',
      'return { value, length: value.length, echoed: echoed.text.includes("[secret TOKEN]") }',
    ].join('\n')
    const script = ws.write(
      'script.jsonl',
      [step('', [{ name: 'run_code', arguments: { code } }]), step('', [{ name: 'subagent', arguments: { prompt: 'what does token.txt hold?' } }]), step(`Done: ${VALUE}`)].join('\n'),
    )
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sessions: { persist: true }, toolPty: { secrets: { TOKEN: { file: secretFile } } }, runCode: true, more: conchSubagent({ config: childConfig, script: childScript }) }))
    const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state }

    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'read it'], { cwd: ws.dir, env })
    expect(run.code, run.stderr).toBe(0)
    const results = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { name: string; isError: boolean; text: string }[]
    expect(results.map((result) => [result.name, result.isError])).toEqual([
      ['run_code', false],
      ['subagent', false],
    ])
    const [ran, delegated] = results.map((result) => result.text)
    expect(ran).toMatch(/^read: \[secret TOKEN\]$/m)
    expect(ran).toContain('"value": "[secret TOKEN]"')
    // The program itself read the value; its terminal showed the name.
    expect(ran).toContain(`"length": ${VALUE.length}`)
    expect(ran).toContain('"echoed": true')
    expect(delegated).toMatch(/^The file holds \[secret TOKEN\]\.$/m)
    // A model that quotes the value (it could only guess it) streams and ends with the name too.
    expect(jsonLines(run.stdout).at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Done: [secret TOKEN]' })
    expect(run.stdout).not.toContain(VALUE)
    const logs = allFiles(join(state, 'conch', 'sessions'))
    expect(logs).toContain('"parentCallId"')
    expect(logs).toContain('[secret TOKEN]')
    expect(logs).not.toContain(VALUE)

    const conch = startConch(['acp', '--config', config], { cwd: ws.dir, env })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    const created = await acpRequest(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
    const sessionId = (created['result'] as { sessionId: string }).sessionId
    expect(await acpRequest(conch, 2, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'read it' }] })).toMatchObject({ result: { stopReason: 'end_turn' } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
    const frames = jsonLines(conch.stdout())
    const updates = frames.filter((frame) => frame['method'] === 'session/update').map((frame) => JSON.stringify(frame['params']))
    expect(updates.join('\n')).toContain('read: [secret TOKEN]')
    expect(updates.join('\n')).toContain('The file holds [secret TOKEN].')
    const chunks = frames.filter((frame) => JSON.stringify(frame).includes('agent_message_chunk'))
    expect(chunks.map((frame) => (frame['params'] as { update: { content: { text: string } } }).update.content.text).join('')).toBe('Done: [secret TOKEN]')
    expect(conch.stdout()).not.toContain(VALUE)
    expect(allFiles(join(state, 'conch', 'sessions'))).not.toContain(VALUE)
    expect(processesWith(ws.dir)).toEqual([])
  })
})

describe('a secret in the forms conch writes it, and in the environment', () => {
  it('shows only its name where a run_code result or console.log escapes it (quote, backslash, newline, tab, non-ASCII)', async () => {
    const value = 'pa"ss\\wd-Zq9\n\tnaïve-☃-end'
    const secretFile = ws.write('escaped.txt', `${value}\n`)
    const code = [
      'const fs = require("node:fs")',
      `const k = fs.readFileSync(${JSON.stringify(secretFile)}, "utf8").replace(/\\n$/, "")`,
      'console.log({ k })',
      'return { s1: k }',
    ].join('\n')
    const script = ws.write('script.jsonl', [step('', [{ name: 'run_code', arguments: { code } }]), step('Done.')].join('\n'))
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sessions: { persist: true }, toolPty: { secrets: { S1: { file: secretFile } } }, runCode: true, more: conchSubagent({ config: writeComposition(ws.dir, [], 'child.yml'), script }) }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'read it'], { cwd: ws.dir, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    const [ran] = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { text: string }[]
    expect(ran!.text).toContain('"s1": "[secret S1]"')
    expect(ran!.text).toContain("{ k: '[secret S1]' }")
    const logs = allFiles(join(state, 'conch', 'sessions'))
    for (const where of [run.stdout, logs]) {
      // Any 6 characters of the value, as written or escaped once or twice, e.g. `pa\"ss` or `wd-Zq9`.
      for (const piece of ['pa"ss', 'pa\\"ss', 'pa\\\\\\"ss', 'ss\\wd', 'ss\\\\wd', 'wd-Zq9', 'naïve-', 'na\\u00efve']) expect(where).not.toContain(piece)
    }
  })

  /** A run of `conch run` whose one run_code program reads `value` from a `{file}` secret S2 as `read`, then runs `print`. */
  async function printed(value: string, read: string, print: string): Promise<{ text: string; where: string[] }> {
    const secretFile = ws.write('key.txt', `${value}\n`)
    const code = [`const fs = require("node:fs")`, `const s = ${read.replace('FILE', JSON.stringify(secretFile))}`, print, 'return 0'].join('\n')
    const script = ws.write('script.jsonl', [step('', [{ name: 'run_code', arguments: { code } }]), step('Done.')].join('\n'))
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sessions: { persist: true }, toolPty: { secrets: { S2: { file: secretFile } } }, runCode: true, more: conchSubagent({ config: writeComposition(ws.dir, [], 'child.yml'), script }) }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'read it'], { cwd: ws.dir, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    const [ran] = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { text: string }[]
    return { text: ran!.text, where: [ran!.text, run.stdout, allFiles(join(state, 'conch', 'sessions'))] }
  }

  /** Every run of 6 characters of `text` with no line break. */
  const pieces = (text: string): string[] => Array.from({ length: text.length - 5 }, (_, at) => text.slice(at, at + 6)).filter((piece) => !piece.includes('\n'))

  it('shows only its name where util.inspect splits a multi-line value inside an object or array', async () => {
    const value = ['-----BEGIN TEST KEY-----', 'MIIEowIBAAKCAQEA7v2Yq+bXk3Lw9sQpZtN', 'vJ0aHc5Rm8uEfT1gYdK4oLxW2nB6iS', '-----END TEST KEY-----'].join('\n')
    const { text, where } = await printed(value, 'fs.readFileSync(FILE, "utf8").trim()', 'console.log({ key: s }); console.log([s]); console.log({ a: { b: [s] } }); console.log(s)')
    // The nested forms are split: one quoted piece per line, joined by ` +` and an indented line break.
    expect(text).toMatch(/^ {4}'\[secret S2\]\\n' \+$/m)
    expect(text).toMatch(/^\[secret S2\]$/m)
    for (const seen of where) for (const piece of pieces(value)) expect(seen).not.toContain(piece)
  })

  it('shows only its name where its file is read without an encoding and printed as hex or decimal bytes', async () => {
    const value = 'hunter2-bytes-Zq9'
    const bytes = [...Buffer.from(value)]
    const hex = bytes.map((byte) => byte.toString(16).padStart(2, '0')).join(' ')
    const { text, where } = await printed(value, 'fs.readFileSync(FILE)', 'console.log(s); console.log({ s }); console.log([...s].join(", ")); console.log(JSON.stringify([...s])); console.log(new Uint8Array(s))')
    expect(text).toContain('<Buffer [secret S2] 0a>')
    expect(text).toContain('{ s: <Buffer [secret S2] 0a> }')
    expect(text).toContain('[secret S2], 10')
    expect(text).toContain('[[secret S2],10]')
    // util.inspect wraps the typed array into aligned columns: the name stands where they begin.
    expect(text).toMatch(/^Uint8Array\(18\) \[\n {2}\[secret S2\]\n/m)
    for (const seen of where) for (const spelled of [value, hex, bytes.join(', '), bytes.join(',')]) for (const piece of pieces(spelled)) expect(seen).not.toContain(piece)
  })

  it('withholds an {env} secret\'s variable from terminals and run_code programs', async () => {
    const value = 'correct-horse-battery'
    const reversed = [...value].reverse().join('')
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'env | grep DEPLOY | rev; echo env-listed' } }]),
        step('', [{ name: 'run_code', arguments: { code: 'return { names: Object.keys(process.env).filter((n) => n.includes("DEPLOY")), rev: [...(process.env.DEPLOY_WORDS ?? "unset")].reverse().join("") }' } }]),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', toolPty: { secrets: { S3: { env: 'DEPLOY_WORDS' } } }, runCode: true, more: conchSubagent({ config: writeComposition(ws.dir, [], 'child.yml'), script }) }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'look'], {
      cwd: ws.dir,
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state, DEPLOY_WORDS: value },
    })
    expect(run.code, run.stderr).toBe(0)
    const results = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { name: string; text: string }[]
    expect(results.map((result) => result.name)).toEqual(['terminal_open', 'terminal_send', 'run_code'])
    expect(results[1]!.text).toContain('env-listed')
    expect(results[2]!.text).toContain('"rev": "tesnu"')
    expect(run.stdout).not.toContain(reversed)
    expect(run.stdout).not.toContain('DEPLOY_WORDS=')
    expect(processesWith(ws.dir)).toEqual([])
  })
})

describe('a secret at the cut of a bounded result', () => {
  it('leaves no 6-character piece of it before the run_code result bound, at every cut position', async () => {
    const value = 'hunter2hunter2'
    const secretFile = ws.write('cut.txt', `${value}\n`)
    const lengths = [261993, 261996, 261999, 262001]
    const code = (length: number) =>
      `const fs = require("node:fs"); console.log("x".repeat(${length}) + fs.readFileSync(${JSON.stringify(secretFile)}, "utf8").trim() + "y".repeat(100)); return 0`
    const script = ws.write('script.jsonl', [...lengths.map((length) => step('', [{ name: 'run_code', arguments: { code: code(length) } }])), step('Done.')].join('\n'))
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', toolPty: { secrets: { CUT: { file: secretFile } } }, runCode: true, more: conchSubagent({ config: writeComposition(ws.dir, [], 'child.yml'), script }) }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'cut'], { cwd: ws.dir, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    const results = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { text: string }[]
    expect(results).toHaveLength(lengths.length)
    for (const [index, result] of results.entries()) {
      expect(result.text, `length ${lengths[index]}`).toContain('bytes cut')
      for (let at = 0; at + 6 <= value.length; at++) expect(result.text, `length ${lengths[index]}`).not.toContain(value.slice(at, at + 6))
    }
  })
  it('leaves no 6-character piece of it at the cut of a terminal result, printed before or after the filler', async () => {
    const value = 'hunter2hunter2'
    const secretFile = ws.write('cut.txt', `${value}\n`)
    // A flood's result keeps its head (about 12 000 bytes of the 30 000-byte budget) and its tail:
    // the value after x fillers of these lengths meets the head's cut, then the tail's.
    const lengths = Array.from({ length: 40 }, (_, step) => 11_650 + 8 * step)
    const sends = [
      ...lengths.map((length) => `head -c ${length} /dev/zero | tr '\\0' x; cat ${secretFile} | tr -d '\\n'; head -c 300000 /dev/zero | tr '\\0' y; echo`),
      ...Array.from({ length: 4 }, (_, step) => `head -c 300000 /dev/zero | tr '\\0' x; cat ${secretFile} | tr -d '\\n'; printf 'y%.0s' {1..${100 + 3 * step}}; echo`),
    ]
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        ...sends.map((text) => step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text } }])),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', toolPty: { secrets: { CUT: { file: secretFile } } } }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'cut'], { cwd: ws.dir, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    const results = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { text: string }[]
    expect(results).toHaveLength(sends.length + 1)
    for (const [index, result] of results.slice(1).entries()) {
      for (let at = 0; at + 6 <= value.length; at++) expect(result.text, sends[index]).not.toContain(value.slice(at, at + 6))
    }
    // The cut fell inside what the value printed as at least once: a part of its label ends the head.
    expect(results.some((result) => /x\[[^\]\n]{0,10}\n\[… /.test(result.text))).toBe(true)
  })
  it('leaves no 6-character piece of it before the sub-agent result bound', async () => {
    const value = 'hunter2hunter2'
    const secretFile = ws.write('cut.txt', `${value}\n`)
    // tool-subagent keeps 16384 bytes: the answer's head, then `[subagent: conch, stop: completed, 1.2 s]`
    // and `[output truncated: 16408 bytes omitted]`, so the cut falls 7 or 8 characters into the value.
    const childScript = ws.write('child.jsonl', step('x'.repeat(16294) + value + 'y'.repeat(100)))
    const childConfig = writeComposition(ws.dir, terminalComposition({ script: childScript, mode: 'danger-full-access' }), 'child.yml')
    const script = ws.write('script.jsonl', [step('', [{ name: 'subagent', arguments: { prompt: 'answer' } }]), step('Done.')].join('\n'))
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', toolPty: { secrets: { CUT: { file: secretFile } } }, runCode: true, more: conchSubagent({ config: childConfig, script: childScript }) }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'cut'], { cwd: ws.dir, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    const [delegated] = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { text: string }[]
    expect(delegated!.text).toContain('[output truncated:')
    for (let at = 0; at + 6 <= value.length; at++) expect(delegated!.text).not.toContain(value.slice(at, at + 6))
  })
  it('leaves no 6-character piece of it where task_output cuts the output of a background sub-agent', async () => {
    const value = 'hunter2hunter2'
    const secretFile = ws.write('cut.txt', `${value}\n`)
    // task_output keeps the head and the tail of 30 000 bytes; the value is redacted before the cut.
    const childScript = ws.write('child.jsonl', step(value + 'y'.repeat(40_000)))
    const childConfig = writeComposition(ws.dir, terminalComposition({ script: childScript, mode: 'danger-full-access' }), 'child.yml')
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'subagent', arguments: { prompt: 'answer', run_in_background: true } }]),
        step('', [{ name: 'task_output', arguments: { taskId: 'task-1', wait: true } }]),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', tasks: true, toolPty: { secrets: { CUT: { file: secretFile } } }, runCode: true, more: conchSubagent({ config: childConfig, script: childScript }) }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'cut'], { cwd: ws.dir, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_STATE_HOME: state } })
    expect(run.code, run.stderr).toBe(0)
    const [, output] = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { text: string }[]
    expect(output!.text).toMatch(/^\[… [\d,]+ bytes \(1 line\) omitted\]$/m)
    expect(output!.text).toContain('[status: completed')
    for (let at = 0; at + 6 <= value.length; at++) expect(output!.text).not.toContain(value.slice(at, at + 6))
  })
})
