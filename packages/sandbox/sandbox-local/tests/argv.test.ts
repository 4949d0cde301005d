import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import SandboxService from '@conch/sandbox'
import { afterAll, describe, expect, it } from 'vitest'
import * as local from '../src/index.ts'
import { bubblewrapArgv, bubblewrapProvider, sandboxExecArgv, sandboxExecProvider, seatbeltProfile, SANDBOX_EXEC_GAPS } from '../src/index.ts'

const base = { network: true, readWritePaths: [], readOnlyPaths: [], runnerCommand: 'bwrap', sandboxExecCommand: '/usr/bin/sandbox-exec', probeTimeoutMs: 1000 }
const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-config-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('bubblewrapArgv', () => {
  it('mounts everything read-only, the workspace writable, fresh /dev and /proc, a private /tmp, and its own PID namespace', () => {
    expect(bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/work/x' }, base)).toEqual([
      'bwrap', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp',
      '--bind', '/work/x', '/work/x',
      '--unshare-pid', '--unshare-ipc', '--die-with-parent', '--cap-drop', 'ALL',
      '--chdir', '/work/x', '--', 'bash', '-i',
    ])
  })

  it('never passes --new-session, which would take job control away from an interactive shell', () => {
    expect(bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/w' }, base)).not.toContain('--new-session')
  })

  it('binds the workspace read-only under read-only, so a workspace under /tmp stays visible', () => {
    const argv = bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/tmp/ws', cwd: '/tmp/ws/sub' }, base)
    expect(argv.slice(10, 13)).toEqual(['--ro-bind', '/tmp/ws', '/tmp/ws'])
    expect(argv.indexOf('--tmpfs')).toBeLessThan(argv.indexOf('/tmp/ws'))
    expect(argv.slice(argv.indexOf('--chdir'))).toEqual(['--chdir', '/tmp/ws/sub', '--', 'sh'])
  })

  it('adds read-write paths under workspace-write only, and read-only paths last so they win inside writable ones', () => {
    const options = { ...base, readWritePaths: ['/cache'], readOnlyPaths: ['/w/.git'] }
    const write = bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/w' }, options)
    expect(write.slice(10, 19)).toEqual(['--bind', '/w', '/w', '--bind', '/cache', '/cache', '--ro-bind', '/w/.git', '/w/.git'])
    const read = bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, options)
    expect(read.slice(10, 19)).toEqual(['--ro-bind', '/w', '/w', '--ro-bind', '/cache', '/cache', '--ro-bind', '/w/.git', '/w/.git'])
  })

  it('unshares the network when network is false', () => {
    const argv = bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, { ...base, network: false })
    expect(argv).toContain('--unshare-net')
    expect(bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, base)).not.toContain('--unshare-net')
  })

  it('folds a writable root workspace into the root mount instead of covering /dev, /proc and /tmp', () => {
    const argv = bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/' }, base)
    expect(argv.slice(0, 10)).toEqual(['bwrap', '--bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'])
    expect(argv.filter((arg) => arg === '/')).toHaveLength(3)
  })

  it('uses the configured runner and probes it once with every flag and `true`', async () => {
    const calls: string[][] = []
    const provider = bubblewrapProvider({ ...base, runnerCommand: '/opt/bin/bwrap-compatible', network: false }, async (argv) => {
      calls.push(argv)
      return true
    })
    expect(await provider.probe()).toBe(true)
    expect(calls[0]?.[0]).toBe('/opt/bin/bwrap-compatible')
    expect(calls[0]).toContain('--unshare-net')
    expect(calls[0]?.slice(-2)).toEqual(['--', 'true'])
    expect(provider).toMatchObject({ name: 'bubblewrap', platforms: ['linux'], network: false })
    expect(provider.confine(['sh'], { mode: 'read-only', workspaceRoot: '/w' })).toMatchObject({ enforcement: 'full', provider: 'bubblewrap' })
  })
})

describe('sandbox-exec (macOS)', () => {
  it('generates a profile that allows by default and denies writes outside the listed paths', () => {
    expect(seatbeltProfile({ writable: 2, readOnly: 1, network: false })).toBe(
      [
        '(version 1)',
        ';; conch: reads are allowed everywhere; writes only where listed below.',
        '(allow default)',
        '(deny file-write*)',
        '(allow file-write*',
        '  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper")',
        '  (literal "/dev/tty") (literal "/dev/ptmx") (regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/fd/[0-9]+$")',
        '  (subpath "/private/tmp") (subpath "/private/var/folders"))',
        '(allow file-write* (subpath (param "WRITABLE_0")) (subpath (param "WRITABLE_1")))',
        '(deny file-write* (subpath (param "READONLY_0")))',
        '(deny network*)',
        '(deny appleevent-send)',
        '',
      ].join('\n'),
    )
  })

  it('leaves the network rules out when the network is allowed, and writable rules out when nothing is writable', () => {
    const profile = seatbeltProfile({ writable: 0, readOnly: 0, network: true })
    expect(profile).not.toContain('network')
    expect(profile).not.toContain('WRITABLE')
    expect(profile).not.toContain('READONLY')
  })

  it('passes paths as -D parameters and changes directory through sh before exec', () => {
    const options = { ...base, readWritePaths: ['/Users/me/cache'], readOnlyPaths: ['/Users/me/w/.git'] }
    const argv = sandboxExecArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/Users/me/w "quoted"', cwd: '/Users/me/w/sub' }, options)
    expect(argv).toEqual([
      '/usr/bin/sandbox-exec', '-p', seatbeltProfile({ writable: 2, readOnly: 1, network: true }),
      '-D', 'WRITABLE_0=/Users/me/w "quoted"', '-D', 'WRITABLE_1=/Users/me/cache', '-D', 'READONLY_0=/Users/me/w/.git',
      '--', '/bin/sh', '-c', 'cd -- "$1" && shift && exec "$@"', 'sh', '/Users/me/w/sub', 'bash', '-i',
    ])
  })

  it('makes nothing writable but temporary folders under read-only', () => {
    const argv = sandboxExecArgv(['ls'], { mode: 'read-only', workspaceRoot: '/Users/me/w' }, { ...base, readWritePaths: ['/Users/me/cache'] })
    expect(argv.filter((arg) => arg.startsWith('WRITABLE_'))).toEqual([])
    expect(argv[2]).toBe(seatbeltProfile({ writable: 0, readOnly: 0, network: true }))
  })

  it('reports partial enforcement with the gaps, and probes the same argv shape with /usr/bin/true', async () => {
    const calls: string[][] = []
    const provider = sandboxExecProvider(base, async (argv) => {
      calls.push(argv)
      return 'sandbox-exec failed (exit 65): sandbox-exec: unbound variable'
    })
    expect(await provider.probe()).toMatch(/unbound variable/)
    expect(calls[0]?.[0]).toBe('/usr/bin/sandbox-exec')
    expect(calls[0]?.at(-1)).toBe('/usr/bin/true')
    expect(provider.platforms).toEqual(['darwin'])
    expect(provider.confine(['sh'], { mode: 'read-only', workspaceRoot: '/w' })).toMatchObject({
      enforcement: 'partial',
      provider: 'sandbox-exec',
      gaps: SANDBOX_EXEC_GAPS,
    })
  })
})

describe('the sandbox-local plugin', () => {
  async function load(config: Record<string, unknown>): Promise<unknown> {
    const ctx = new Context()
    await ctx.plugin(SandboxService, {})
    return ctx.plugin(local, config as local.Config).then(
      () => undefined,
      (error: unknown) => error,
    )
  }

  it('is a namespace plugin without a default export, injecting sandbox', () => {
    expect(local.name).toBe('sandbox-local')
    expect(local.inject).toEqual(['sandbox'])
    expect('default' in local).toBe(false)
  })

  it('registers a provider for Linux and one for macOS', async () => {
    const ctx = new Context()
    await ctx.plugin(SandboxService, {})
    const registered: string[] = []
    const register = ctx.sandbox.register.bind(ctx.sandbox)
    ctx.sandbox.register = (provider) => {
      registered.push(provider.name)
      return register(provider)
    }
    await ctx.plugin(local, {} as local.Config)
    expect(registered).toEqual(['bubblewrap', 'sandbox-exec'])
  })

  it('fails to load with a relative or missing path, naming the field', async () => {
    expect(String(await load({ readWritePaths: ['relative/dir'] }))).toMatch(/must be an absolute path \(at readWritePaths\.0\)/)
    expect(String(await load({ readOnlyPaths: [join(scratch, 'missing')] }))).toMatch(/missing does not exist \(at readOnlyPaths\.0\)/)
    expect(await load({ readWritePaths: [scratch] })).toBeUndefined()
  })
})
