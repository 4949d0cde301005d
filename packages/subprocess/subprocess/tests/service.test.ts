import { Context, type EffectMeta, type Message } from 'cordis'
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import SubprocessService, {
  linuxProcessTable,
  SUBPROCESS_TAG_VARIABLE,
  SubprocessError,
  type ProcessEntry,
} from '../src/index.ts'
import { LineReader } from './lines.ts'

const table = linuxProcessTable()
let root: Context
let fiber: { dispose(): Promise<void> } | undefined
let logs: Message[]

async function boot(config: Partial<SubprocessService.Config> = {}): Promise<SubprocessService> {
  root = new Context()
  logs = []
  root.logger.exporter({ export: (message) => void logs.push(message) })
  fiber = await root.plugin(SubprocessService, config as SubprocessService.Config)
  return root.subprocess
}

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  expect(logs.filter((message) => message.type === 'error').map((message) => message.args)).toEqual([])
})

async function tagged(value: string): Promise<ProcessEntry[]> {
  const entries = await table.snapshot()
  const values = await Promise.all(entries.map((e) => table.environ(e.pid, SUBPROCESS_TAG_VARIABLE)))
  return entries.filter((e, i) => values[i] === value && e.state !== 'Z')
}

async function alive(pid: number, startTime: string): Promise<boolean> {
  const entry = await table.get(pid)
  return entry !== undefined && entry.startTime === startTime && entry.state !== 'Z'
}

function expectCode(fn: () => unknown, code: SubprocessError['code'], pattern: RegExp): void {
  let thrown: unknown
  try {
    fn()
  } catch (error) {
    thrown = error
  }
  expect(thrown).toBeInstanceOf(SubprocessError)
  expect((thrown as SubprocessError).code).toBe(code)
  expect((thrown as SubprocessError).message).toMatch(pattern)
}

describe.runIf(process.platform === 'linux')('ctx.subprocess', () => {
  it('extraPipes opens fd 3 in the child as a duplex pipe, apart from stdout and stderr', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['bash', '-c', 'read -r line <&3; echo "fd3 got $line" >&3; echo on-stdout'], extraPipes: 1 })
    expect(child.extra).toHaveLength(1)
    const control = new LineReader(child.extra[0]!)
    const out = new LineReader(child.stdout)
    child.extra[0]!.write('ping\n')
    expect((await control.line(/^fd3 got .*/))[0]).toBe('fd3 got ping')
    expect((await out.line(/^on-.*/))[0]).toBe('on-stdout')
    expect(out.all).not.toContain('fd3')
    expect((await child.done).exitCode).toBe(0)
    expectCode(() => subprocess.spawn({ argv: ['true'], extraPipes: 9 }), 'INVALID_ARGV', /extraPipes/)
  })

  it('pipes stdin to the child and reports its output and exit code', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['bash', '-c', 'read line; echo "got $line"; echo oops >&2; exit 3'] })
    const out = new LineReader(child.stdout)
    const err = new LineReader(child.stderr)
    child.write('hello\n')
    child.end()
    expect((await out.line(/^got.*/))[0]).toBe('got hello')
    expect((await err.line(/oops/))[0]).toBe('oops')
    expect(await child.done).toEqual({ exitCode: 3, signal: null })
  })

  it('starts the child in its own session and process group, in the given working directory', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['bash', '-c', 'pwd; sleep 300'], cwd: '/usr' })
    const out = new LineReader(child.stdout)
    expect((await out.line(/^\/.*/))[0]).toBe('/usr')
    const entry = await table.get(child.pid)
    expect(entry).toMatchObject({ pid: child.pid, pgid: child.pid, sid: child.pid })
    await child.terminate()
  })

  it('gives the child the scrubbed parent environment by default, plus its own tag', async () => {
    const subprocess = await boot()
    process.env.FOO_TOKEN = 'should-not-leak'
    try {
      const child = subprocess.spawn({ argv: ['env'] })
      const out = new LineReader(child.stdout)
      await child.done
      await out.end()
      expect(out.all).not.toContain('FOO_TOKEN')
      expect(out.all).toContain('PATH=')
      expect(out.all).toMatch(new RegExp(`^${SUBPROCESS_TAG_VARIABLE}=[0-9a-f]{32}$`, 'm'))
    } finally {
      delete process.env.FOO_TOKEN
    }
  })

  it('uses an explicit environment as the complete environment', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['/usr/bin/env'], env: { ONLY: 'this' } })
    const out = new LineReader(child.stdout)
    await child.done
    await out.end()
    expect(out.all.trim().split('\n').sort()).toEqual([`${SUBPROCESS_TAG_VARIABLE}=${out.all.match(/TAG=(\w+)/)?.[1]}`, 'ONLY=this'].sort())
  })

  it('terminate() stops the child and its descendants and reports them', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['bash', '-c', 'sleep 300 & echo "bg $!"; wait'] })
    const out = new LineReader(child.stdout)
    const bg = Number((await out.line(/^bg (\d+)/))[1])
    const report = await child.terminate({ graceMs: 5_000 })
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid).sort()).toEqual([bg, child.pid].sort())
    expect((await child.done).exitCode === 0 || (await child.done).signal === 'SIGTERM').toBe(true)
  })

  it("terminate() of a 'descendants' tree stops the child and its descendants", async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['bash', '-c', 'bash -c "sleep 301 & echo \\"grand \\$!\\"; wait" & sleep 300 & echo "bg $!"; wait'], tree: 'descendants' })
    const out = new LineReader(child.stdout)
    const grand = Number((await out.line(/^grand (\d+)/))[1])
    const bg = Number((await out.line(/^bg (\d+)/))[1])
    const report = await child.terminate({ graceMs: 5_000 })
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid)).toEqual(expect.arrayContaining([grand, bg, child.pid]))
    for (const record of report.stopped) expect(await alive(record.pid, record.startTime)).toBe(false)
  })

  it("terminate() of a 'session' tree also stops an orphan with an emptied environment that stayed in the session; a 'descendants' tree misses it", async () => {
    const subprocess = await boot()
    for (const tree of ['descendants', 'session'] as const) {
      // The orphan drops the tag (env -i) and is re-parented to init when its subshell exits.
      const child = subprocess.spawn({ argv: ['bash', '-c', '(env -i sleep 302 & echo "orphan $!"); echo up; sleep 300'], tree })
      const out = new LineReader(child.stdout)
      const orphan = Number((await out.line(/^orphan (\d+)/))[1])
      await out.line(/^up/)
      const entry = (await table.get(orphan))!
      expect(entry.ppid, 'the orphan left the tree').not.toBe(child.pid)
      expect(entry.sid).toBe(child.pid)
      const report = await child.terminate({ graceMs: 5_000 })
      expect(report.survivors).toEqual([])
      expect(await alive(orphan, entry.startTime), `orphan alive after a '${tree}' teardown`).toBe(tree === 'descendants')
      if (tree === 'descendants') process.kill(orphan, 'SIGKILL')
    }
  })

  it("terminate({ rootSignal: 'SIGKILL' }) of a 'descendants' tree TERMs the descendants and KILLs a child that ignores TERM, without its grace", async () => {
    const subprocess = await boot()
    const script = 'process.on("SIGTERM", () => {}); const s = require("node:child_process").spawn("sleep", ["302"], { stdio: "ignore" }); console.log("bg " + s.pid); setInterval(() => {}, 1000)'
    const child = subprocess.spawn({ argv: [process.execPath, '-e', script], tree: 'descendants' })
    const out = new LineReader(child.stdout)
    const bg = Number((await out.line(/^bg (\d+)/))[1])
    // A grace beyond the test's timeout: only the KILL of the root lets this return.
    const report = await child.terminate({ graceMs: 600_000, rootSignal: 'SIGKILL' })
    expect(report.survivors).toEqual([])
    expect(report.stopped.map((r) => r.pid).sort()).toEqual([bg, child.pid].sort())
    for (const record of report.stopped) expect(await alive(record.pid, record.startTime)).toBe(false)
    expect((await child.done).signal).toBe('SIGKILL')
  })

  it("terminate({ rootSignal: 'SIGKILL' }) of a childless child reports it stopped, and it exits by that KILL", async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: [process.execPath, '-e', 'process.on("SIGTERM", () => {}); console.log("up"); setInterval(() => {}, 1000)'], tree: 'descendants' })
    await new LineReader(child.stdout).line(/^up/)
    const report = await child.terminate({ graceMs: 600_000, rootSignal: 'SIGKILL' })
    expect(report).toMatchObject({ stopped: [{ pid: child.pid }], survivors: [] })
    expect(await child.done).toEqual({ exitCode: null, signal: 'SIGKILL' })
  })

  it("lets go of a 'descendants' child when it exits", async () => {
    await boot()
    let child: ReturnType<SubprocessService['spawn']> | undefined
    const spawner = await root.plugin({
      name: 'spawner',
      inject: ['subprocess'],
      apply: (ctx: Context) => {
        child = ctx.subprocess.spawn({ argv: ['true'], tree: 'descendants' })
      },
    })
    const labels = () => spawner.getEffects().map((effect: EffectMeta) => effect.label)
    await child!.done
    await vi.waitFor(() => expect(labels()).not.toContain('subprocess.child'))
    await spawner.dispose()
  })

  it('rejects an unknown tree with INVALID_ARGV', async () => {
    const subprocess = await boot()
    expectCode(() => subprocess.spawn({ argv: ['true'], tree: 'all' as never }), 'INVALID_ARGV', /tree must be 'tagged', 'descendants' or 'session'/)
  })

  it('aborting the signal terminates the child tree', async () => {
    const subprocess = await boot()
    const controller = new AbortController()
    const child = subprocess.spawn({ argv: ['bash', '-c', 'trap "" TERM; echo ready; sleep 300'], signal: controller.signal })
    await new LineReader(child.stdout).line(/^ready/)
    controller.abort()
    expect(await child.done).toEqual({ exitCode: null, signal: 'SIGKILL' })
  }, 15_000)

  it('throws the reason of an already aborted signal without starting anything', async () => {
    const subprocess = await boot()
    const reason = new Error('cancelled by the caller')
    expect(() => subprocess.spawn({ argv: ['true'], signal: AbortSignal.abort(reason) })).toThrow(reason)
  })

  it('disposing the calling plugin terminates the children it spawned', async () => {
    await boot()
    let pid = 0
    const plugin = {
      name: 'spawner',
      inject: ['subprocess'],
      apply: (ctx: Context) => {
        pid = ctx.subprocess.spawn({ argv: ['sleep', '300'] }).pid
      },
    }
    const spawner = await root.plugin(plugin)
    // The child is `sleep` once the shell that closes inherited descriptors has exec'd it.
    const entry = await vi.waitFor(async () => {
      const found = await table.get(pid)
      expect(found?.comm).toBe('sleep')
      return found
    })
    await spawner.dispose()
    expect(await alive(pid, entry!.startTime)).toBe(false)
  })

  it('disposing the service terminates every child, including daemons an exited child left behind', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({
      argv: ['bash', '-c', `setsid sleep 300 >/dev/null 2>&1 & echo "tag $${SUBPROCESS_TAG_VARIABLE}"`],
    })
    const tag = (await new LineReader(child.stdout).line(/^tag (\w+)/))[1]!
    await child.done
    const daemons = await tagged(tag)
    expect(daemons).toHaveLength(1)
    await fiber!.dispose()
    fiber = undefined
    expect(await tagged(tag)).toEqual([])
  })

  it('lets go of a child that exited and left nothing behind', async () => {
    await boot()
    let child: ReturnType<SubprocessService['spawn']> | undefined
    const spawner = await root.plugin({
      name: 'spawner',
      inject: ['subprocess'],
      apply: (ctx: Context) => {
        child = ctx.subprocess.spawn({ argv: ['true'] })
      },
    })
    const labels = () => spawner.getEffects().map((effect: EffectMeta) => effect.label)
    expect(labels()).toContain('subprocess.child')
    await child!.done
    await vi.waitFor(() => expect(labels()).not.toContain('subprocess.child'))
    await spawner.dispose()
  })

  it('finds a bare program name on the system default path when the environment has no PATH', async () => {
    const subprocess = await boot()
    const child = subprocess.spawn({ argv: ['echo', 'found'], env: {} })
    const out = new LineReader(child.stdout)
    await child.done
    await out.end()
    expect(out.all).toBe('found\n')
  })

  it('fails a missing program or working directory with SPAWN_FAILED naming it', async () => {
    const subprocess = await boot()
    expectCode(() => subprocess.spawn({ argv: ['/nonexistent/prog'] }), 'SPAWN_FAILED', /\/nonexistent\/prog: no such file/)
    expectCode(() => subprocess.spawn({ argv: ['no-such-program-anywhere'] }), 'SPAWN_FAILED', /no-such-program-anywhere: not found .*PATH=/)
    expectCode(() => subprocess.spawn({ argv: ['true'], cwd: '/nonexistent/dir' }), 'SPAWN_FAILED', /working directory \/nonexistent\/dir does not exist/)
  })

  it('never runs a bare program from a relative PATH entry or a folder an agent may write, and says what it skipped', async () => {
    const subprocess = await boot()
    const workspace = realpathSync(mkdtempSync('/var/tmp/conch-spawn-path-'))
    try {
      const bin = join(workspace, 'node_modules', '.bin')
      const marker = join(workspace, 'ran')
      mkdirSync(bin, { recursive: true })
      writeFileSync(join(bin, 'planted-cli'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 })
      expectCode(
        () => subprocess.spawn({ argv: ['planted-cli'], env: { PATH: `${bin}:/usr/bin:/bin` }, agentWritable: [workspace] }),
        'SPAWN_FAILED',
        new RegExp(`planted-cli was found only in ${bin} \\(inside ${workspace}\\), which an agent may write; .*give its absolute path`),
      )
      expectCode(() => subprocess.spawn({ argv: ['planted-cli'], cwd: workspace, env: { PATH: 'node_modules/.bin:/usr/bin' } }), 'SPAWN_FAILED', /planted-cli: not found/)
      // Named by its path, it is the caller's choice.
      const chosen = subprocess.spawn({ argv: [join(bin, 'planted-cli')], env: {}, agentWritable: [workspace] })
      expect(await chosen.done).toEqual({ exitCode: 0, signal: null })
      expect(existsSync(marker)).toBe(true)
    } finally {
      rmSync(workspace, { recursive: true, force: true })
    }
  })

  it("gives a child run outside an agent's sandbox a PATH without the agent's folders, so what it starts by name is not the agent's", async () => {
    const subprocess = await boot()
    const workspace = realpathSync(mkdtempSync('/var/tmp/conch-spawn-path-'))
    try {
      // `#!/usr/bin/env node` in an npm-installed CLI looks `node` up on the child's own PATH.
      const bin = join(workspace, 'node_modules', '.bin')
      const marker = join(workspace, 'ran')
      mkdirSync(bin, { recursive: true })
      writeFileSync(join(bin, 'planted-interpreter'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 })
      const child = subprocess.spawn({ argv: ['env', 'planted-interpreter'], cwd: workspace, env: { PATH: `${bin}:node_modules/.bin::/usr/bin:/bin` }, agentWritable: [workspace] })
      expect(await child.done).toEqual({ exitCode: 127, signal: null })
      expect(existsSync(marker)).toBe(false)
      const path = subprocess.spawn({ argv: ['sh', '-c', 'echo "PATH=$PATH"'], env: { PATH: `${bin}:node_modules/.bin::/usr/bin:/bin` }, agentWritable: [workspace] })
      const printed = new LineReader(path.stdout).line(/^PATH=.*/)
      expect((await printed)[0]).toBe('PATH=/usr/bin:/bin')
      await path.done
    } finally {
      rmSync(workspace, { recursive: true, force: true })
    }
  })

  it('rejects an empty program or a NUL byte with INVALID_ARGV', async () => {
    const subprocess = await boot()
    expectCode(() => subprocess.spawn({ argv: [''] }), 'INVALID_ARGV', /program \(argv\[0\]\) is empty/)
    expectCode(() => subprocess.spawn({ argv: ['echo', 'a\0b'] }), 'INVALID_ARGV', /NUL byte/)
  })

  it('refuses to spawn once the service is being disposed', async () => {
    const subprocess = await boot()
    await fiber!.dispose()
    fiber = undefined
    expectCode(() => subprocess.spawn({ argv: ['true'] }), 'SERVICE_DISPOSING', /shutting down/)
  })

  it('fails to load with a negative grace, naming the field', async () => {
    root = new Context()
    logs = []
    await expect(root.plugin(SubprocessService, { graceMs: -1 } as SubprocessService.Config)).rejects.toThrow(/graceMs/)
  })
})
