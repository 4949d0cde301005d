/**
 * A machine where nothing can confine a process (no bubblewrap on PATH): a real `conch run` or
 * `conch acp` whose composition confines terminals stops at start, before any model call, with
 * the fix on stderr; one that chose danger-full-access runs.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { jsonLines, runConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 60_000 })

let ws: Workspace
/** A PATH with no bwrap on it (node runs by its own path). */
let path: string

beforeEach(() => {
  ws = workspace()
  path = join(ws.dir, 'empty-bin')
  mkdirSync(path)
  ws.write('s.jsonl', [step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]), step('done')].join('\n'))
})

afterEach(() => {
  ws.remove()
})

/** The one stderr paragraph: what is confined, why nothing can confine it here, and both fixes. */
function expectSandboxParagraph(stderr: string, mode: string) {
  expect(stderr).toMatch(new RegExp(`^conch: cordis\\.yml confines terminals \\(sandbox mode ${mode}\\), but cannot start a confined process: no sandbox provider works on this machine \\(bubblewrap: bwrap was not found on PATH's system folders \\([^)]*\\)\\)\\. `))
  expect(stderr).toContain('apt-get install bubblewrap')
  expect(stderr).toContain('mode: danger-full-access')
  expect(stderr.trimEnd().split('\n')).toHaveLength(1)
}

describe.each(['workspace-write', 'read-only'] as const)('without bubblewrap, a %s composition', (mode) => {
  it('conch run exits 2 at start with one stderr paragraph naming the fix, before any model call', async () => {
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode }))
    const result = await runConch(['run', '--config', 'cordis.yml', '--output', 'stream-json', 'open a shell'], { cwd: ws.dir, env: { PATH: path } })
    expect(result.code).toBe(2)
    expectSandboxParagraph(result.stderr, mode)
    const lines = jsonLines(result.stdout)
    expect(lines.map((line) => line['type'])).toEqual(['result'])
    expect(lines[0]).toMatchObject({ status: 'error' })
  })
})

describe('without bubblewrap', () => {
  it('conch acp exits 2 at start with the same paragraph', async () => {
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode: 'workspace-write' }))
    const result = await runConch(['acp', '--config', 'cordis.yml', '--script', 's.jsonl'], { cwd: ws.dir, env: { PATH: path } })
    expect(result.code).toBe(2)
    expectSandboxParagraph(result.stderr, 'workspace-write')
  })

  it('a composition that chose danger-full-access runs its terminals unconfined', async () => {
    writeComposition(ws.dir, terminalComposition({ script: join(ws.dir, 's.jsonl'), mode: 'danger-full-access' }))
    const result = await runConch(['run', '--config', 'cordis.yml', '--output', 'stream-json', 'open a shell'], { cwd: ws.dir, env: { PATH: path } })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(jsonLines(result.stdout).find((line) => line['type'] === 'tool_result')).toMatchObject({ name: 'terminal_open', isError: false })
  })
})
