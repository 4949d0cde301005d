/**
 * `conch` from any folder: linked into a bin folder on PATH as the README says, and run by its
 * name in a project folder that has no cordis.yml, it boots conch's own root composition (saying
 * so in one stderr line) with that folder as the workspace.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import { OWN_COMPOSITION } from '../src/args.ts'
import { BIN, jsonLines, step } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

let root: string

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-any-folder-')))
})

afterEach(() => {
  rmSync(root, { recursive: true, force: true })
})

it('a linked conch run by name in a folder without cordis.yml uses the root composition, said once on stderr', async () => {
  const bin = join(root, 'bin')
  const project = join(root, 'project')
  mkdirSync(bin)
  mkdirSync(project)
  // The README's command, with this bin folder for /usr/local/bin.
  symlinkSync(BIN, join(bin, 'conch'))
  writeFileSync(join(project, 's.jsonl'), `${step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }])}\n${step('done')}\n`)
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${dirname(process.execPath)}:/usr/bin:/bin`, XDG_STATE_HOME: join(root, 'state') }
  for (const name of ['DEEPSEEK_API_KEY', 'OPENAI_API_KEY', 'CONCH_BASE_URL', 'OPENAI_BASE_URL', 'CONCH_MODEL', 'CONCH_CONFIG']) delete env[name]
  const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile('conch', ['run', '--script', 's.jsonl', '--output', 'stream-json', 'open a shell'], { cwd: project, env }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    )
  })
  expect(result.stderr).toBe(`conch: no cordis.yml in ${project}; using conch's own ${OWN_COMPOSITION}\n`)
  expect(result.code).toBe(0)
  const lines = jsonLines(result.stdout)
  expect(lines.find((line) => line['type'] === 'tool_result')).toMatchObject({ name: 'terminal_open', isError: false })
  expect(String(lines.find((line) => line['type'] === 'tool_result')?.['text'])).toContain(`cwd ${project}]`)
  expect(lines.at(-1)).toMatchObject({ type: 'result', status: 'completed', text: 'done' })
})
