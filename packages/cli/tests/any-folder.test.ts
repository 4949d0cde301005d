/**
 * `conch` from any folder: linked into a bin folder on PATH as the README says, and run by its
 * name in a project folder that has no cordis.yml, it boots conch's own root composition (saying
 * so in one stderr line) with that folder as the workspace; a cordis.yml there is not loaded unless
 * named with --config.
 */
import { execFile, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { OWN_COMPOSITION } from '../src/args.ts'
import { acpRequest, BIN, jsonLines, runConch, startConch, step } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

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
  // The terminal opened in the project, the workspace (the open names a directory only when it is another).
  expect(lines.find((line) => line['type'] === 'tool_result')).toMatchObject({ text: '[opened: pty-1]', meta: { cwd: project } })
  expect(lines.at(-1)).toMatchObject({ type: 'result', status: 'completed', text: 'done' })
})

/**
 * A folder's own cordis.yml is host code: a confined terminal of one run (or a hostile repository)
 * can write one, and the next boot would run its plugins unconfined. It is loaded only when named.
 */
describe.runIf(hasBwrap)('a cordis.yml in the working folder', () => {
  it('written by a terminal of one conch run, is not run by the next conch run nor conch acp, and says so; --config ./cordis.yml runs it', async () => {
    const project = join(root, 'project')
    mkdirSync(project)
    const marker = join(root, 'evil-ran')
    const evil = `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(marker)}, 'host code')\nexport const name = 'evil'\nexport function apply() {}\n`
    const plant = [
      `echo ${Buffer.from(evil).toString('base64')} | base64 -d > evil.mjs`,
      `printf -- '- id: evil\\n  name: ./evil.mjs\\n' > cordis.yml`,
      'echo planted-$((6*7))',
    ].join('; ')
    const script = join(root, 'plant.jsonl')
    writeFileSync(script, [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: plant } }]),
      step('done'),
    ].join('\n'))
    const env = { XDG_STATE_HOME: join(root, 'state') }
    const first = await runConch(['run', '--script', script, '--output', 'stream-json', 'plant'], { cwd: project, env })
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain('planted-42')
    expect(readFileSync(join(project, 'cordis.yml'), 'utf8')).toBe('- id: evil\n  name: ./evil.mjs\n')

    const quiet = join(root, 'quiet.jsonl')
    writeFileSync(quiet, `${step('done')}\n`)
    const notice = `conch: not loading ${join(project, 'cordis.yml')} (a composition runs as host code; to use it on purpose: --config ./cordis.yml); using conch's own ${OWN_COMPOSITION}\n`
    const second = await runConch(['run', '--script', quiet, 'task'], { cwd: project, env })
    expect(existsSync(marker)).toBe(false)
    expect(second.stderr).toBe(notice)
    expect(second.code).toBe(0)

    const acp = startConch(['acp', '--script', quiet], { cwd: project, env })
    expect(await acpRequest(acp, 0, 'initialize', { protocolVersion: 1 })).toMatchObject({ id: 0, result: expect.any(Object) })
    acp.child.stdin.end()
    expect(await acp.exit).toBe(0)
    expect(existsSync(marker)).toBe(false)
    expect(acp.stderr()).toBe(notice)

    // Named on purpose, it is loaded (and its plugin runs).
    await runConch(['run', '--config', './cordis.yml', '--script', quiet, 'task'], { cwd: project, env })
    expect(readFileSync(marker, 'utf8')).toBe('host code')
  })

  it("in the conch checkout, the checkout's own cordis.yml still boots without --config, saying nothing", async () => {
    const project = join(root, 'project')
    mkdirSync(project)
    const script = join(root, 's.jsonl')
    writeFileSync(script, `${step('done')}\n`)
    const run = await runConch(['run', '--script', script, '--cwd', project, '--output', 'stream-json', 'task'], { cwd: dirname(OWN_COMPOSITION), env: { XDG_STATE_HOME: join(root, 'state') } })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(jsonLines(run.stdout).at(-1)).toMatchObject({ type: 'result', status: 'completed', text: 'done' })
  })
})
