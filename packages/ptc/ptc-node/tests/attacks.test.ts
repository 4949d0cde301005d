/**
 * The program is hostile: what it can reach (files, environment, host flags), how it is stopped
 * (deadline, cancel, memory, escaping descendants) and the spare. Real bubblewrap, real node.
 */
import { mkdirSync, mkdtempSync, existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { until } from '@conch/test-support/wait'
import { Config } from '../src/config.ts'
import { ProgramProcess } from '../src/process.ts'
import { boot, privateBootstrap, processesWith, sleepToken, type Harness } from './harness.ts'

// Every test starts real node processes (and bubblewrap); on a loaded 2-core machine one can take seconds.
vi.setConfig({ testTimeout: 60_000 })

const bootstrapPath = privateBootstrap()
let h: Harness
beforeAll(async () => {
  h = await boot({ runtime: { spare: false, bootstrapPath } })
})
afterAll(async () => {
  await h.dispose()
  expect(processesWith(bootstrapPath)).toEqual([])
})

/** The parent pid of `pid` (/proc/<pid>/stat field 4, read after the last `)`); 0 once it is gone. */
function parentOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return 0
  }
}

describe('filesystem under workspace-write (bubblewrap)', () => {
  it('writes inside the workspace; a write outside is denied and reported as a denial', async () => {
    const result = await h.run(
      'const fs = require("node:fs")\nfs.writeFileSync("inside.txt", "ok")\ntry { fs.writeFileSync("/etc/conch-ptc-denied", "x") } catch (e) { console.log((e as Error).message); return "denied" }\nreturn "written"',
    )
    expect(result).toMatchObject({ ok: true, value: 'denied', sandbox: { mode: 'workspace-write', enforcement: 'full', provider: 'bubblewrap' } })
    expect(existsSync(join(h.workspace, 'inside.txt'))).toBe(true)
    expect(existsSync('/etc/conch-ptc-denied')).toBe(false)
    expect(result.sandbox.denials.map((denial) => denial.code)).toContain('EROFS')
  })

  it('a symlink in the workspace that points outside does not let the program write outside', async () => {
    const outside = mkdtempSync('/var/tmp/conch-ptc-outside-')
    try {
      symlinkSync(outside, join(h.workspace, 'escape'))
      const result = await h.run('const fs = require("node:fs")\ntry { fs.writeFileSync("escape/planted.txt", "x"); return "written" } catch (e) { return (e as NodeJS.ErrnoException).code }')
      expect(result).toMatchObject({ ok: true, value: 'EROFS' })
      expect(existsSync(join(outside, 'planted.txt'))).toBe(false)
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  })

  it('an uncaught write outside the workspace is an exception with the denial reported', async () => {
    const result = await h.run('require("node:fs").mkdirSync("/usr/conch-ptc-denied")')
    expect(result).toMatchObject({ ok: false, failure: { kind: 'exception' } })
    expect(result.sandbox.denials.length).toBeGreaterThan(0)
  })
})

describe('sandbox-unavailable', () => {
  it('fails closed when the runner is missing: nothing runs unconfined', async () => {
    const marker = join(h.workspace, 'ran-unconfined')
    const broken = await boot({ runtime: { spare: false, bootstrapPath }, sandboxLocal: { runnerCommand: '/nonexistent/bwrap' } })
    try {
      const result = await broken.run(`require("node:fs").writeFileSync(${JSON.stringify(marker)}, "x"); return 1`)
      expect(result).toMatchObject({ ok: false, failure: { kind: 'sandbox-unavailable' }, sandbox: { enforcement: 'none' } })
      if (!result.ok) expect(result.failure.message).toMatch(/bwrap|bubblewrap/)
      expect(existsSync(marker)).toBe(false)
    } finally {
      await broken.dispose()
    }
  })

  it('fails closed when no sandbox provider is loaded', async () => {
    const none = await boot({ runtime: { spare: false, bootstrapPath }, sandboxLocal: false, mode: 'read-only' })
    try {
      expect(await none.run('return 1')).toMatchObject({ ok: false, failure: { kind: 'sandbox-unavailable' } })
    } finally {
      await none.dispose()
    }
  })
})

describe('environment and host flags', () => {
  it('process.env is empty and host secrets never reach the program', async () => {
    process.env['AWS_SECRET_ACCESS_KEY'] = 'AKIA-host-secret-value'
    try {
      const result = await h.run(
        // /proc/self/environ is the OS environment the process started with (proc(5)); a sandbox that masks /proc hides it too.
        'let environ = ""\ntry { environ = require("node:fs").readFileSync("/proc/self/environ", "utf8") } catch {}\nreturn { env: { ...process.env }, keys: Object.keys(process.env).length, leaked: environ.includes("host-secret") }',
      )
      expect(result).toMatchObject({ ok: true, value: { env: {}, keys: 0, leaked: false } })
    } finally {
      delete process.env['AWS_SECRET_ACCESS_KEY']
    }
  })

  it('a host NODE_OPTIONS=--require is not applied, nor are the host execArgv', async () => {
    const preload = fileURLToPath(new URL('./fixtures/preload.cjs', import.meta.url))
    process.env['NODE_OPTIONS'] = `--require ${preload}`
    try {
      const result = await h.run('return { preloaded: (globalThis as any).__conchPreloaded === true, execArgv: process.execArgv }')
      expect(result).toMatchObject({ ok: true, logs: '' })
      if (!result.ok) return
      const value = result.value as { preloaded: boolean; execArgv: string[] }
      expect(value.preloaded).toBe(false)
      expect(value.execArgv.filter((arg) => /require|import|loader|inspect/.test(arg))).toEqual([])
      expect(value.execArgv).toContain('--max-old-space-size=512')
    } finally {
      delete process.env['NODE_OPTIONS']
    }
  })
})

describe('stopping a program', () => {
  it('while(true){} ends as timeout, with the process gone before the result', async () => {
    const token = sleepToken()
    const result = await h.run({ code: `require("node:child_process").spawn("sleep", ["${token}"], { stdio: "ignore" })\nwhile (true) {}`, timeoutMs: 1500 })
    expect(result).toMatchObject({ ok: false, failure: { kind: 'timeout' } })
    expect(result.elapsedMs).toBeGreaterThanOrEqual(1500)
    expect(processesWith(bootstrapPath)).toEqual([])
    expect(processesWith(token)).toEqual([])
  })

  it('cancel ends the run as abort, with the process gone', async () => {
    const controller = new AbortController()
    const bindings = [{ global: 'host', functions: { started: async () => (controller.abort(new Error('stop now')), null) } }]
    const result = await h.run('await host.started(null)\nwhile (true) {}', { bindings, signal: controller.signal })
    expect(result).toMatchObject({ ok: false, failure: { kind: 'abort', message: expect.stringContaining('stop now') } })
    expect(processesWith(bootstrapPath)).toEqual([])
  })

  it('a 2 GB allocation under maxOldGenerationSizeMb 64 ends quickly as worker-exit or exception', async () => {
    // The default deadline (120 s) is far away: the outcome kinds below prove the heap cap ended it.
    const small = await boot({ runtime: { spare: false, bootstrapPath, maxOldGenerationSizeMb: 64 } })
    try {
      const result = await small.run('const chunks: number[][] = []\nfor (let i = 0; i < 2048; i++) chunks.push(new Array(131072).fill(i + 0.5))\nreturn chunks.length')
      expect(result.ok).toBe(false)
      if (result.ok) return
      expect(['worker-exit', 'exception'], result.failure.message).toContain(result.failure.kind)
      // The process was stopped by the heap cap, not by the deadline.
      expect(result.logs + result.failure.message).toMatch(/heap|memory|exited/i)
    } finally {
      await small.dispose()
    }
  })

  it('process.exit in the program is worker-exit', async () => {
    const result = await h.run('process.exit(3)')
    expect(result).toMatchObject({ ok: false, failure: { kind: 'worker-exit', message: expect.stringContaining('code 3') } })
  })

  it.each([
    ['danger-full-access', false],
    ['workspace-write', true],
  ] as const)('a childless program that ignores SIGTERM does not hold its result for the grace: its process exits after its result (%s, spare %s)', async (mode, spare) => {
    // A grace far beyond the test's timeout: only the process leaving by itself lets these return.
    const runner = await boot({ runtime: { spare, bootstrapPath, graceMs: 600_000 }, mode })
    try {
      for (let run = 0; run < 2; run++) {
        const result = await runner.run('process.on("SIGTERM", () => {})\nreturn process.pid')
        expect(result).toMatchObject({ ok: true, value: expect.any(Number) })
      }
    } finally {
      await runner.dispose()
    }
  })

  it.each(['workspace-write', 'danger-full-access'] as const)('a detached grandchild is gone after completion (%s)', async (mode) => {
    const runner = mode === 'workspace-write' ? h : await boot({ runtime: { spare: false, bootstrapPath }, mode })
    try {
      const token = sleepToken()
      const result = await runner.run(`const child = require("node:child_process").spawn("sleep", ["${token}"], { detached: true, stdio: "ignore" })\nchild.unref()\nreturn typeof child.pid`)
      expect(result).toMatchObject({ ok: true, value: 'number' })
      expect(processesWith(token)).toEqual([])
    } finally {
      if (runner !== h) await runner.dispose()
    }
  })
})

describe('the program session, unconfined', () => {
  it('an orphan that left the program tree but not its session is gone after completion (danger-full-access)', async () => {
    const runner = await boot({ runtime: { spare: false, bootstrapPath }, mode: 'danger-full-access' })
    try {
      const token = sleepToken()
      // sh backgrounds a sleep from a subshell that exits: the sleep re-parents to init, outside
      // the program's tree, with no tag (the bootstrap emptied the environment), in its session.
      const result = await runner.run(
        `const sh = require("node:child_process").spawn("sh", ["-c", "(sleep ${token} >/dev/null 2>&1 &)"], { stdio: "ignore" })\nawait new Promise((resolve) => sh.on("exit", resolve))\nreturn "left"`,
      )
      expect(result).toMatchObject({ ok: true, value: 'left' })
      expect(processesWith(token)).toEqual([])
    } finally {
      await runner.dispose()
    }
  })
})

describe('the sandbox PID namespace', () => {
  it('a daemon that double-forks away from the program is gone after completion (workspace-write)', async () => {
    const token = sleepToken()
    // sh backgrounds a setsid sleep and exits: the sleep re-parents to the sandbox's init.
    const result = await h.run(
      `const sh = require("node:child_process").spawn("sh", ["-c", "setsid sleep ${token} >/dev/null 2>&1 &"], { stdio: "ignore" })\nawait new Promise((resolve) => sh.on("exit", resolve))\nreturn "left"`,
    )
    expect(result).toMatchObject({ ok: true, value: 'left' })
    expect(processesWith(token)).toEqual([])
  })
})

describe('the spare', () => {
  it('spare and cold paths give identical results, and no spare outlives dispose', async () => {
    const warmBootstrap = privateBootstrap()
    const warm = await boot({ runtime: { spare: true, bootstrapPath: warmBootstrap } })
    const cold = await boot({ runtime: { spare: false, bootstrapPath: warmBootstrap } })
    try {
      mkdirSync(join(warm.workspace, 'sub'))
      mkdirSync(join(cold.workspace, 'sub'))
      writeFileSync(join(warm.workspace, 'sub', 'f'), 'x')
      writeFileSync(join(cold.workspace, 'sub', 'f'), 'x')
      const code = 'console.log("hello")\nprocess.stdout.write("direct\\n")\nconst fs = require("node:fs")\nreturn { env: { ...process.env }, execArgv: process.execArgv, files: fs.readdirSync("sub"), cwdIsWorkspace: process.cwd() === process.argv[1] || true, globals: typeof (globalThis as any).host, value: await host.twice(21), imported: (await import("node:path")).join("a", "b"), stream: typeof process.stderr.on }'
      const bindings = [{ global: 'host', functions: { twice: async (n: unknown) => (n as number) * 2 } }]
      const strip = (result: { elapsedMs: number }) => ({ ...result, elapsedMs: 0 })
      const first = await warm.run({ code, cwd: warm.workspace }, { bindings })
      // The first run starts cold and leaves a spare behind; the second takes it.
      const second = await warm.run({ code, cwd: warm.workspace }, { bindings })
      const baseline = await cold.run({ code, cwd: cold.workspace }, { bindings })
      expect(first).toMatchObject({ ok: true, logs: 'hello\ndirect\n', value: { imported: 'a/b', stream: 'function', value: 42 } })
      expect(strip(second)).toEqual(strip(first))
      expect(strip(baseline)).toEqual(strip(first))
      // A spare belongs to its owner: another agent's run does not take it, and disposing the
      // owner closes it.
      await until(() => processesWith(warmBootstrap).length > 0, 20_000)
      const ownerOnly = processesWith(warmBootstrap).length
      const other = await warm.ctx.agents.create()
      expect(await warm.run({ code: 'return 7' }, { agent: other })).toMatchObject({ ok: true, value: 7 })
      // The other agent got a spare of its own (started after its run) …
      await until(() => processesWith(warmBootstrap).length > ownerOnly, 20_000)
      await warm.ctx.agents.dispose(other)
      // … which its disposal ended and waited for; the first owner's spare is still there.
      expect(processesWith(warmBootstrap).length).toBe(ownerOnly)
    } finally {
      await warm.dispose()
      await cold.dispose()
    }
    expect(processesWith(warmBootstrap)).toEqual([])
  })

  it('a spare started under one policy is not used after the mode changes', async () => {
    const warm = await boot({ runtime: { spare: true, bootstrapPath } })
    try {
      expect(await warm.run('require("node:fs").writeFileSync("first.txt", "x"); return 1')).toMatchObject({ ok: true, value: 1 })
      // The spare for workspace-write is booted now; under read-only the workspace is not writable.
      warm.ctx.sandboxPolicy.setMode(warm.agent.session, 'read-only')
      const result = await warm.run('try { require("node:fs").writeFileSync("second.txt", "x"); return "written" } catch (e) { return (e as NodeJS.ErrnoException).code }')
      expect(result).toMatchObject({ ok: true, value: 'EROFS', sandbox: { mode: 'read-only' } })
    } finally {
      await warm.dispose()
    }
  })

  it('an unused spare expires after spareIdleMs and its process is gone', async () => {
    const idleBootstrap = privateBootstrap()
    const warm = await boot({ runtime: { spare: true, bootstrapPath: idleBootstrap, spareIdleMs: 300 } })
    try {
      expect(await warm.run('return 1')).toMatchObject({ ok: true })
      await until(() => processesWith(idleBootstrap).length > 0, 20_000)
      await until(() => processesWith(idleBootstrap).length === 0, 20_000)
      expect(processesWith(idleBootstrap)).toEqual([])
    } finally {
      await warm.dispose()
    }
  })

  it("a process given no program is ended without the grace, even while its sandbox's init has not started node yet", async () => {
    // A grace far beyond the test's timeout: only an end without it lets this return. The
    // namespace's init ignores TERM (pid_namespaces(7)) and would start node during a grace.
    const config = Config.parse({ bootstrapPath, graceMs: 600_000 })
    const spec = h.ctx.ptc.resolve({ code: 'return 1' }, h.agent)
    const launch = { policy: spec.policy, cwd: spec.cwd }
    for (let attempt = 0; attempt < 3; attempt++) {
      const started = await ProgramProcess.start({ subprocess: h.ctx.subprocess, sandbox: h.ctx.sandbox, config }, launch)
      // The root (bubblewrap, once exec'd) is this process's child; its first child is the
      // namespace's init. Looked for without pause: the init starts node within milliseconds.
      let root: number | undefined
      while ((root = processesWith(bootstrapPath).find((pid) => parentOf(pid) === process.pid)) === undefined);
      while (parentOf(root) === process.pid && readFileSync(`/proc/${root}/task/${root}/children`, 'utf8') === '');
      expect((await started.terminate()).survivors).toEqual([])
    }
    expect(processesWith(bootstrapPath)).toEqual([])
  })

  it('a spare never runs two programs: state from one run is not seen by the next', async () => {
    const warm = await boot({ runtime: { spare: true, bootstrapPath } })
    try {
      expect(await warm.run('(globalThis as any).leftover = 1; return 1')).toMatchObject({ ok: true, value: 1 })
      expect(await warm.run('return typeof (globalThis as any).leftover')).toMatchObject({ ok: true, value: 'undefined' })
    } finally {
      await warm.dispose()
    }
  })
})
