/**
 * A deployment secret typed into a real confined terminal by name: the model sees the hidden
 * prompt and the name only; the value reaches the program and nothing that records or shows the
 * run — tool results, terminal_read, task output, the stream-json transcript, the session log.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { tempFolders } from '@conch/test-support/homes'
import { acpRequest, allFiles, jsonLines, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

const VALUE = 'Sw0rdf1sh-correct-horse-4217'

const composition = (script: string, secretFile: string) =>
  terminalComposition({
    script,
    mode: 'workspace-write',
    tasks: true,
    sessions: { persist: true },
    toolPty: { secrets: { DEMO_PASSWORD: { env: 'DEMO_PASSWORD' }, FROM_FILE: { file: secretFile } } },
  })

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

describe('secrets typed by name', () => {
  it('a hidden prompt gets the secret; results, terminal_read, task output, the transcript and the session log show only its name', async () => {
    const secretFile = ws.write('file-secret.txt', 'file-value-9f8e7d6c\n')
    const send = (args: Record<string, unknown>) => step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', ...args } }])
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        // Reading a secret's file from the terminal, before any send typed it: only its name shows.
        send({ text: `cat ${secretFile}; echo cat-done` }),
        send({ text: 'read -s -p "Password: " pw; echo "len=${#pw}"' }),
        send({ secret: 'DEMO_PASSWORD' }),
        send({ text: `printf '%s\\n' "$pw"; echo "env=[$DEMO_PASSWORD]"` }),
        send({ text: `sleep 0.2; printf 'bg:%s\\n' "$pw"`, run_in_background: true }),
        step('', [{ name: 'task_output', arguments: { taskId: 'task-1', wait: true } }]),
        step('', [{ name: 'terminal_read', arguments: { sessionId: 'pty-1' } }]),
        step('', [{ name: 'terminal_list', arguments: {} }]),
        send({ secret: 'NOPE' }),
        send({ text: 'read -s other; echo "file-len=${#other}"' }),
        send({ secret: 'FROM_FILE' }),
        send({ keys: ['Up', 'Bogus'] }),
        send({ text: 'echo x', keys: ['Enter'] }),
        step('Done.'),
      ].join('\n'),
    )
    const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', DEMO_PASSWORD: VALUE, XDG_STATE_HOME: state }
    const run = await runConch(['run', '--config', writeComposition(ws.dir, composition(script, secretFile)), '--output', 'stream-json', 'log in'], { cwd: ws.dir, env })
    expect(run.code, run.stderr).toBe(0)
    const results = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result') as { name: string; isError: boolean; text: string }[]
    const [, catFile, asking, typed, printed, , background, page, list, unknown, asking2, typed2, badKey, twoInputs] = results.map((result) => result!.text)
    expect(catFile).toMatch(/^\[secret FROM_FILE\]$/m)
    expect(catFile).toMatch(/^cat-done$/m)
    expect(asking).toContain('[input: hidden — the program is reading a secret]')
    expect(typed).toMatch(new RegExp(`^len=${VALUE.length}$`, 'm'))
    expect(printed).toMatch(/^\[secret DEMO_PASSWORD\]$/m)
    // The value never reached the shell's environment (scrubbed by name).
    expect(printed).toMatch(/^env=\[\]$/m)
    expect(background).toContain('bg:[secret DEMO_PASSWORD]')
    expect(page).toContain('[secret DEMO_PASSWORD]')
    expect(list).toContain('[secrets: DEMO_PASSWORD, FROM_FILE — terminal_send with secret: NAME types one]')
    expect(unknown).toContain('UNKNOWN_SECRET: unknown secret "NOPE"; configured secrets: DEMO_PASSWORD, FROM_FILE; nothing was written')
    expect(asking2).toContain('[input: hidden')
    expect(typed2).toMatch(/^file-len=19$/m)
    expect(badKey).toMatch(/UNKNOWN_KEY: unknown key "Bogus" \(entry 2 of keys\); nothing was written/)
    expect(twoInputs).toMatch(/exactly one of text, keys or secret/)

    expect(run.stdout).not.toContain(VALUE)
    expect(run.stdout).not.toContain('file-value-9f8e7d6c')
    const logs = allFiles(join(state, 'conch', 'sessions'))
    expect(logs).toContain('"secret":"DEMO_PASSWORD"')
    expect(logs).not.toContain(VALUE)
    expect(logs).not.toContain(VALUE.slice(0, 12))
    expect(logs).not.toContain('file-value-9f8e7d6c')
  })
})

describe('secrets in live output', () => {
  /** The value printed in halves 0.3 s apart, longer than the byte pass holds a tail (secretHoldMs). */
  const HALVES = `printf 'c:%s' "\${pw:0:8}"; sleep 0.3; printf '%s\\n' "\${pw:8}"; echo c-done`
  const steps = () => {
    const send = (args: Record<string, unknown>) => step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', ...args } }])
    return [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      send({ text: 'read -s pw' }),
      send({ secret: 'DEMO_PASSWORD' }),
      send({ text: HALVES }),
      step('Done.'),
    ]
  }
  const liveComposition = (script: string) =>
    terminalComposition({ script, mode: 'danger-full-access', toolPty: { secrets: { DEMO_PASSWORD: { env: 'DEMO_PASSWORD' } } } })
  const env = () => ({ PATH: process.env['PATH'] ?? '/usr/bin:/bin', DEMO_PASSWORD: VALUE, XDG_STATE_HOME: state })
  const expectNoValue = (text: string) => {
    expect(text).not.toContain(VALUE.slice(0, 8))
    expect(text).not.toContain(VALUE.slice(8))
  }

  it('conch run --output text and stream-json --partial show a value printed in halves only by its name', async () => {
    const script = ws.write('script.jsonl', steps().join('\n'))
    const config = writeComposition(ws.dir, liveComposition(script))
    const text = await runConch(['run', '--config', config, '--output', 'text', 'halves'], { cwd: ws.dir, env: env() })
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/^ {2}\| c:\[secret DEMO_PASSWORD\]$/m)
    expectNoValue(text.stdout)
    const json = await runConch(['run', '--config', config, '--output', 'stream-json', '--partial', 'halves'], { cwd: ws.dir, env: env() })
    expect(json.code, json.stderr).toBe(0)
    const deltas = jsonLines(json.stdout).filter((line) => line['type'] === 'tool_output')
    expect(deltas.map((line) => line['text']).join('')).toContain('c:[secret DEMO_PASSWORD]')
    for (const delta of deltas) expectNoValue(delta['text'] as string)
    expectNoValue(json.stdout)
  })

  it('an ACP client’s live tool_call_update content shows a value printed in halves only by its name', async () => {
    const script = ws.write('script.jsonl', steps().join('\n'))
    const config = writeComposition(ws.dir, liveComposition(script))
    const conch = startConch(['acp', '--config', config], { cwd: ws.dir, env: env() })
    await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
    const created = await acpRequest(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
    const sessionId = (created['result'] as { sessionId: string }).sessionId
    expect(await acpRequest(conch, 2, 'session/prompt', { sessionId, prompt: [{ type: 'text', text: 'halves' }] })).toMatchObject({ result: { stopReason: 'end_turn' } })
    conch.child.stdin.end()
    expect(await conch.exit).toBe(0)
    const frames = jsonLines(conch.stdout())
    const updates = frames.filter((frame) => frame['method'] === 'session/update').map((frame) => JSON.stringify(frame['params']))
    const live = updates.filter((update) => update.includes('"tool_call_update"') && !update.includes('"status"'))
    expect(live.join('\n')).toContain('c:[secret DEMO_PASSWORD]')
    for (const update of updates) expectNoValue(update)
  })
})
