/**
 * The provider inside the built `conch` bin (packages/cli/dist, scripts/build-bin.mjs), where
 * the Claude agent SDK is left out of the bundle and preloaded by the bin before this plugin:
 * a real `conch run` whose scripted model calls the `claude_code` tool, the real Claude Code
 * binary answering from the fake model on 127.0.0.1, keyless. The other tests of this package
 * import the sources and cannot see a bundling fault (a named import of the SDK that the bundle
 * leaves undefined fails every start).
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spine, writeComposition } from '@conch/test-support/composition'
import { startFakeModel, type FakeModelServer } from '@conch/test-support/fake-model'
// @ts-expect-error -- a plain JavaScript module of the bin, without declarations
import { currentBuild } from '../../../cli/bin/build-current.js'
import { claudeBinary, freshMark, marked, MARK_VARIABLE } from './harness.ts'

const BIN = fileURLToPath(new URL('../../../cli/bin/conch.js', import.meta.url))
const DIST = pathToFileURL(fileURLToPath(new URL('../../../cli/dist/', import.meta.url)) + '/')

const binary = claudeBinary()
const built = (currentBuild as (dist: URL, env: object) => object | undefined)(DIST, {}) !== undefined
if (!built && process.env.CI) throw new Error('packages/cli/dist is missing or older than the sources and CI is set: run pnpm build (scripts/setup.sh does)')
// Without the product (./scripts/install-products.sh) or with a build older than the sources
// (pnpm build), the bin would not run this provider from the bundle: the test cannot run. In CI
// both are failures instead (claudeBinary() and the check above throw).
const real = describe.skipIf(binary === undefined || !built)

let fake: FakeModelServer
let scratch: string

beforeAll(async () => {
  fake = await startFakeModel()
  scratch = mkdtempSync('/var/tmp/conch-claude-bin-test-')
})

afterAll(async () => {
  await fake.close()
  rmSync(scratch, { recursive: true, force: true })
})

function conch(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

real('the claude-code provider in the built bin', { timeout: 90_000 }, () => {
  it('answers a claude_code tool call of a conch run, and leaves no process or config dir', async () => {
    const mark = freshMark()
    const workspace = mkdtempSync(join(scratch, 'ws-'))
    const stateRoot = join(scratch, 'state')
    const script = join(scratch, 'parent.jsonl')
    writeFileSync(
      script,
      `${JSON.stringify({ text: '', tool_calls: [{ name: 'claude_code', arguments: { prompt: 'say the answer' } }] })}\n${JSON.stringify({ text: 'Delegated.' })}\n`,
    )
    const config = writeComposition(
      scratch,
      spine([
        { id: 'tasks', name: '@conch/tasks' },
        { id: 'subprocess', name: '@conch/subprocess' },
        { id: 'subagents', name: '@conch/subagent' },
        { id: 'subagent-claude-code', name: '@conch/subagent-claude-code', config: { executable: binary, stateRoot, env: [MARK_VARIABLE, 'ANTHROPIC_API_KEY'] } },
        { id: 'tool-subagent-claude-code', name: '@conch/tool-subagent', config: { provider: 'claude-code', toolName: 'claude_code' } },
      ]),
    )
    fake.enqueue({ text: 'the child answer' })
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      CONCH_FROM_SOURCE: '0',
      XDG_STATE_HOME: join(scratch, 'logs'),
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: 'sk-ant-dummy-key-for-the-fake-model',
      CLAUDE_CODE_MAX_RETRIES: '0',
    }
    delete env['DEEPSEEK_API_KEY']
    delete env['OPENAI_API_KEY']

    const run = await conch(['run', '--config', config, '--script', script, '--cwd', workspace, '--output', 'stream-json', 'delegate'], workspace, env)
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = run.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    const result = lines.find((line) => line['type'] === 'tool_result') as { name: string; isError: boolean; text: string } | undefined
    expect(result).toMatchObject({ name: 'claude_code', isError: false })
    expect(result!.text).toMatch(/^the child answer\n\[subagent: claude-code, stop: completed, \d+\.\d s\]$/)
    expect(lines.at(-1)).toEqual({ type: 'result', status: 'completed', text: 'Delegated.' })
    // The product really ran against the fake model with the prompt.
    expect(fake.requests.findLast((request) => request.api === 'messages')?.userText).toContain('say the answer')
    expect(marked(mark)).toEqual([])
    expect(existsSync(stateRoot) ? readdirSync(stateRoot) : []).toEqual([])
  })
})
