import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { afterEach, describe, expect, it, onTestFinished } from 'vitest'
import SubprocessService, { SUBPROCESS_TAG_VARIABLE, defaultProcessTable, type ChildHandle } from '@conch/subprocess'
import { AbsoluteDirectory, childCwd, childEnv, disposeProcess, raceStart, spawnChild } from '../src/index.ts'

let fibers: { dispose(): Promise<void> }[] = []

async function subprocess(): Promise<Context> {
  const ctx = new Context()
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  return ctx
}

afterEach(async () => {
  for (const fiber of fibers.reverse()) await fiber.dispose()
  fibers = []
})

/** Resolves with the first line of stdout that contains `token`. */
function line(child: ChildHandle, token: string): Promise<string> {
  return new Promise((resolve) => {
    let text = ''
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      const found = text.split('\n').find((candidate) => candidate.includes(token))
      if (found !== undefined) resolve(found)
    })
  })
}

/** Pids of live processes whose environment carries the child's subprocess tag value. */
async function tagged(value: string): Promise<number[]> {
  const table = defaultProcessTable()
  const entries = (await table.snapshot()).filter((entry) => entry.state !== 'Z')
  const values = await Promise.all(entries.map((entry) => table.environ(entry.pid, SUBPROCESS_TAG_VARIABLE)))
  return entries.filter((_, index) => values[index] === value).map((entry) => entry.pid)
}

describe('the child environment', () => {
  it('drops secret-looking and CONCH_ variables unless passed through by name', () => {
    const env = childEnv(['OPENAI_API_KEY'], { CONCH_DEPTH: '1' }, {
      PATH: '/bin',
      OPENAI_API_KEY: 'sk-1',
      GITHUB_TOKEN: 'ghp',
      CONCH_SESSION: 'x',
    })
    expect(env).toEqual({ PATH: '/bin', OPENAI_API_KEY: 'sk-1', CONCH_DEPTH: '1' })
  })
})

describe('the child working directory', () => {
  const parent = (workspaceRoot?: string) =>
    ({ id: 'agent-1', session: { start: workspaceRoot === undefined ? {} : { workspaceRoot } } }) as never

  it("is the configured directory, else the parent's workspace root, never the server's cwd", () => {
    expect(childCwd('/srv', parent('/work'), 'acp')).toBe('/srv')
    expect(childCwd(undefined, parent('/work'), 'acp')).toBe('/work')
    expect(() => childCwd(undefined, parent(), 'acp')).toThrow(/no workspace root/)
  })

  it('refuses a relative, missing or non-directory cwd at load', () => {
    const dir = mkdtempSync(join(tmpdir(), 'subagent-cwd-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    const file = join(dir, 'file')
    writeFileSync(file, '')
    expect(AbsoluteDirectory.safeParse('relative/dir').error?.issues[0]?.message).toBe('must be an absolute path')
    expect(AbsoluteDirectory.safeParse('/no/such/dir').error?.issues[0]?.message).toBe(
      'must be an existing directory the server can enter',
    )
    expect(AbsoluteDirectory.safeParse(file).success).toBe(false)
    expect(AbsoluteDirectory.safeParse(tmpdir()).success).toBe(true)
  })
})

describe('raceStart', () => {
  it('fails the start when the child exits cleanly before the handshake', async () => {
    const ctx = await subprocess()
    const child = spawnChild(ctx.subprocess, { argv: ['sh', '-c', 'echo bye >&2; exit 0'], cwd: tmpdir(), env: childEnv([]), provider: 'acp' })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    await expect(
      raceStart({
        handshake: new Promise(() => {}),
        child,
        signal: new AbortController().signal,
        timeoutMs: 30_000,
        provider: 'acp',
        detail: () => stderr.trim(),
      }),
    ).rejects.toMatchObject({ code: 'START_FAILED', message: 'the "acp" sub-agent exited with code 0 before it was ready; its stderr ends with: bye' })
  })

  it('fails the start on the caller signal and on the timeout', async () => {
    const ctx = await subprocess()
    const child = spawnChild(ctx.subprocess, { argv: ['sleep', '100'], cwd: tmpdir(), env: childEnv([]), provider: 'acp' })
    const controller = new AbortController()
    const cancelled = raceStart({ handshake: new Promise(() => {}), child, signal: controller.signal, timeoutMs: 30_000, provider: 'acp' })
    controller.abort()
    await expect(cancelled).rejects.toMatchObject({ code: 'START_FAILED', message: /cancelled while it started/ })
    await expect(
      raceStart({ handshake: new Promise(() => {}), child, signal: new AbortController().signal, timeoutMs: 20, provider: 'acp' }),
    ).rejects.toMatchObject({ message: 'the "acp" sub-agent was not ready within 20 ms' })
    await child.terminate({ graceMs: 0 })
  })

  it('spawn failures name the program', () => {
    return subprocess().then((ctx) => {
      expect(() => spawnChild(ctx.subprocess, { argv: ['/no/such/agent'], cwd: tmpdir(), env: childEnv([]), provider: 'acp' })).toThrow(
        expect.objectContaining({ code: 'START_FAILED', message: expect.stringMatching(/\/no\/such\/agent/) }),
      )
    })
  })
})

describe('the teardown ladder', () => {
  it('lets a child that stops on EOF exit by itself, without a signal', async () => {
    const ctx = await subprocess()
    const child = spawnChild(ctx.subprocess, {
      argv: ['sh', '-c', 'echo ready; cat >/dev/null; echo flushed >&2'],
      cwd: tmpdir(),
      env: childEnv([]),
      provider: 'acp',
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    await line(child, 'ready')
    let shutdownCalled = false
    await disposeProcess({ child, shutdown: () => void (shutdownCalled = true), eofGraceMs: 10_000, graceMs: 3000, provider: 'acp' })
    expect(shutdownCalled).toBe(true)
    expect(await child.done).toEqual({ exitCode: 0, signal: null })
    expect(stderr).toBe('flushed\n')
  })

  it('kills a child that ignores EOF and SIGTERM, and the daemon it left behind', async () => {
    const ctx = await subprocess()
    const script = [
      "trap '' TERM",
      // A daemon that escapes the tree walk (setsid, re-parented to init) and ignores TERM too.
      "setsid sh -c \"trap '' TERM; echo daemon \\$\\$; while :; do sleep 1; done\" &",
      'echo ready',
      'while :; do sleep 1; done',
    ].join('\n')
    const child = spawnChild(ctx.subprocess, { argv: ['sh', '-c', script], cwd: tmpdir(), env: childEnv([]), provider: 'acp' })
    const daemon = line(child, 'daemon')
    await line(child, 'ready')
    await daemon
    const tag = await defaultProcessTable().environ(child.pid, SUBPROCESS_TAG_VARIABLE)
    expect(tag).toBeDefined()
    expect((await tagged(tag!)).length).toBeGreaterThanOrEqual(2)
    await disposeProcess({ child, eofGraceMs: 50, graceMs: 50, provider: 'acp' })
    expect(await tagged(tag!)).toEqual([])
  })

  it('sweeps what survives a child that exited cleanly', async () => {
    const ctx = await subprocess()
    const child = spawnChild(ctx.subprocess, {
      argv: ['sh', '-c', "setsid -f sh -c 'echo orphan $$; exec sleep 100 </dev/null >/dev/null 2>&1'; exit 0"],
      cwd: tmpdir(),
      env: childEnv([]),
      provider: 'acp',
    })
    const orphan = Number((await line(child, 'orphan')).split(' ')[1])
    const tag = await defaultProcessTable().environ(orphan, SUBPROCESS_TAG_VARIABLE)
    expect(tag).toBeDefined()
    expect(await child.done).toEqual({ exitCode: 0, signal: null })
    await disposeProcess({ child, eofGraceMs: 1000, graceMs: 1000, provider: 'acp' })
    expect(await tagged(tag ?? 'none')).toEqual([])
  })
})
