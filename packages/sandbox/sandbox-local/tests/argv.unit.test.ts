import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Context } from 'cordis'
import SandboxService, { gitGuardScript, NODE_PROXY_PRELOAD, UNDICI_FOLDER } from '@conch/sandbox'
import { afterAll, describe, expect, it } from 'vitest'
import * as local from '../src/index.ts'
import {
  bubblewrapArgv,
  bubblewrapProvider,
  joinLauncher,
  KERNEL_MASKED_PATHS,
  KERNEL_READ_ONLY_PATHS,
  sandboxExecArgv,
  sandboxExecProvider,
  SANDBOX_EXEC_GAPS,
  SECCOMP_FD,
  SECCOMP_LAUNCHER,
  seatbeltProfile,
  seccompArchOf,
  seccompProgram,
  type HostFiles,
  type HostPaths,
} from '../src/index.ts'

const base = {
  network: true,
  readWritePaths: [],
  readOnlyPaths: [],
  runnerCommand: 'bwrap',
  sandboxExecCommand: '/usr/bin/sandbox-exec',
  probeTimeoutMs: 1000,
  maxExposedPorts: 64,
  privateHome: false,
  homeDir: '/home/u',
  homeReadOnly: [],
  denyRead: [],
  runtimeDir: '/run/x',
}
const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-config-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const files: HostFiles = {
  seccompFilter: '/run/conch-sandbox-0/seccomp.bpf',
  emptyFile: '/run/conch-sandbox-0/empty',
  emptyDir: '/run/conch-sandbox-0/empty.d',
  runtimeDir: '/run/conch-sandbox-0',
}

/** A host with exactly `entries` (path → kind, with an optional symlink target). */
function hostWith(entries: Record<string, 'file' | 'directory' | { link: string }>): HostPaths {
  const resolve = (path: string): string | undefined => {
    const entry = entries[path]
    if (entry === undefined) return undefined
    return typeof entry === 'object' ? resolve(entry.link) : path
  }
  return {
    kind: (path) => {
      const real = resolve(path)
      return real === undefined ? undefined : (entries[real] as 'file' | 'directory')
    },
    realpath: resolve,
    searchPath: () => searchPath,
    programFolders: () => searchPath,
  }
}
let searchPath: string[] = []
const emptyHost = hostWith({})

/** The bwrap options between the runner and the namespace flags. */
const mounts = (argv: string[]) => argv.slice(argv.findIndex((arg) => arg === 'bwrap' || arg.endsWith('/bwrap')) + 1, argv.indexOf('--unshare-pid'))
const triples = (list: string[]) => {
  const out: string[][] = []
  for (let i = 0; i < list.length; ) {
    const width = ['--tmpfs', '--dev', '--proc', '--perms', '--dir'].includes(list[i]!) ? 2 : 3
    out.push(list.slice(i, i + width))
    i += width
  }
  return out
}

describe('bubblewrapArgv', () => {
  it('starts with the launcher that opens the filter on fd 9 and becomes bwrap', () => {
    const argv = bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/work/x' }, base, files, emptyHost)
    expect(argv.slice(0, 6)).toEqual(['/bin/sh', '-c', `exec 9<"$1" || exit 126; shift; ${gitGuardScript()}exec "$@"`, 'conch-sandbox', files.seccompFilter, 'bwrap'])
    expect(SECCOMP_LAUNCHER).toContain(`exec ${SECCOMP_FD}<`)
    expect(argv.slice(argv.indexOf('--unshare-pid'))).toEqual([
      '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--die-with-parent', '--cap-drop', 'ALL',
      '--seccomp', '9', '--chdir', '/work/x', '--', 'bash', '-i',
    ])
  })

  it("joins an agent's network namespace through the join launcher, which becomes nsenter and then bwrap, with no --unshare-net", () => {
    const netns = { pin: "/run/x/agent-1/net'ns", nsenter: { utilLinux: '/usr/bin/nsenter' } }
    const argv = bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/work/x', network: false }, base, files, emptyHost, { tmp: '/run/x/agent-1/tmp', netns })
    expect(argv.slice(0, 6)).toEqual([...joinLauncher(netns, 'bwrap'), 'conch-sandbox', files.seccompFilter, '--ro-bind'])
    expect(argv.slice(0, 2)).toEqual(['/bin/sh', '-c'])
    expect(argv[2]).toMatch(/^exec 9<"\$1" \|\| exit 126; shift; /)
    expect(argv[2]).toContain(`LC_ALL=C exec '/usr/bin/nsenter' '--net=/run/x/agent-1/net'\\''ns' -- 'bwrap' "$@"`)
    expect(argv).not.toContain('--unshare-net')
    expect(argv.slice(argv.indexOf('--unshare-pid'), argv.indexOf('--chdir'))).toEqual(['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--die-with-parent', '--cap-drop', 'ALL', '--seccomp', '9'])
  })

  it("appends the proxy's NODE_OPTIONS to the process's own in the launcher, and keeps the Node preload and undici read-only in a writable workspace", () => {
    const workspace = dirname(NODE_PROXY_PRELOAD)
    const host = hostWith({ [workspace]: 'directory', [NODE_PROXY_PRELOAD]: 'file', [UNDICI_FOLDER!]: 'directory' })
    const env = { HTTP_PROXY: 'http://127.0.0.1:9', NODE_OPTIONS: `--require "${NODE_PROXY_PRELOAD}"` }
    const netns = { pin: '/run/x/agent-1/pin', nsenter: { utilLinux: '/usr/bin/nsenter' } }
    const argv = bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: workspace, network: false }, base, files, host, { netns, env })
    expect(argv.slice(0, 3)).toEqual(joinLauncher(netns, 'bwrap', env.NODE_OPTIONS))
    expect(argv[2]).toContain(`export NODE_OPTIONS="\${NODE_OPTIONS:+\$NODE_OPTIONS }"'--require "${NODE_PROXY_PRELOAD}"'; `)
    expect(argv.join('\0')).toContain(['--setenv', 'HTTP_PROXY', 'http://127.0.0.1:9'].join('\0'))
    expect(argv).not.toContain('NODE_OPTIONS')
    const options = triples(mounts(argv))
    expect(options.slice(options.findIndex((option) => option[0] === '--bind' && option[1] === workspace))).toContainEqual(['--ro-bind', NODE_PROXY_PRELOAD, NODE_PROXY_PRELOAD])
    // Without the proxy's NODE_OPTIONS, the workspace's files are the policy's business alone.
    const plain = bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: workspace, network: false }, base, files, host, { netns, env: { HTTP_PROXY: 'http://127.0.0.1:9' } })
    expect(triples(mounts(plain))).not.toContainEqual(['--ro-bind', NODE_PROXY_PRELOAD, NODE_PROXY_PRELOAD])
    expect(plain.slice(0, 3)).toEqual(joinLauncher(netns, 'bwrap'))
  })

  it("runs the launcher in busybox's sh and becomes its nsenter applet, each argument quoted, SHLVL taken back and the locale left alone", () => {
    const [shell, sh, c, script] = joinLauncher({ pin: "/run/x/p'in", nsenter: { busybox: '/usr/bin/busybox' } }, 'bwrap')
    expect([shell, sh, c]).toEqual(['/usr/bin/busybox', 'sh', '-c'])
    expect(script).toMatch(/^exec 9<"\$1" \|\| exit 126; shift; /)
    expect(script).toContain(`${gitGuardScript()}case $SHLVL in 1) unset SHLVL;; *) SHLVL=$((SHLVL - 1));; esac; exec '/usr/bin/busybox' nsenter '--net=/run/x/p'\\''in' -- 'bwrap' "$@"`)
    expect(script).not.toContain('LC_ALL')
  })

  it("covers each held folder after the workspace: with the agent's own folder, or a tmpfs of the process's own", () => {
    const held = [{ target: '/work/x/.git', source: '/run/x/agent-1/held/h' }, { target: '/work/x/sub/.git' }]
    const argv = bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/work/x' }, base, files, emptyHost, { held })
    expect(triples(mounts(argv)).slice(4, 7)).toEqual([['--bind', '/work/x', '/work/x'], ['--bind', '/run/x/agent-1/held/h', '/work/x/.git'], ['--tmpfs', '/work/x/sub/.git']])
  })

  it('mounts everything read-only, fresh /dev and /proc, a private /tmp, the workspace writable, and the kernel paths read-only', () => {
    const argv = bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/work/x' }, base, files, emptyHost)
    expect(triples(mounts(argv))).toEqual([
      ['--ro-bind', '/', '/'], ['--dev', '/dev'], ['--proc', '/proc'], ['--tmpfs', '/tmp'],
      ['--bind', '/work/x', '/work/x'],
      ...KERNEL_READ_ONLY_PATHS.map((path) => ['--ro-bind-try', path, path]),
    ])
  })

  it('hides folders with a read-only tmpfs after the writable paths, binding back only the policy\'s own writable paths inside, outer ones first', () => {
    const host = hostWith({ '/state': 'directory', '/state/pool': 'directory', '/state/pool/home-A': 'directory', '/secret.txt': 'file', '/missing-not': 'directory' })
    const argv = bubblewrapArgv(
      ['sh'],
      { mode: 'workspace-write', workspaceRoot: '/work/x', writablePaths: ['/state/pool/home-A'], hiddenPaths: ['/state/pool', '/state', '/secret.txt', '/gone'], protectedPaths: ['/state/pool/home-A/keep', '/state/pool/other'] } as never,
      base,
      files,
      host,
    )
    const list = mounts(argv)
    // The tmpfs of /state covers /state/pool (not hidden again), home-A is bound back with its protected file, and /state/pool/other is not re-exposed.
    const start = list.indexOf('/state') - 1
    expect(list.slice(start, start + 11)).toEqual([
      '--tmpfs', '/state', '--bind', '/state/pool/home-A', '/state/pool/home-A', '--ro-bind', '/state/pool/home-A/keep', '/state/pool/home-A/keep', '--remount-ro', '/state',
      '--ro-bind',
    ])
    expect(list).toEqual(expect.arrayContaining(['--ro-bind', files.emptyFile, '/secret.txt']))
    expect(list.filter((arg) => arg === '/state/pool/other')).toEqual([])
    expect(list.filter((arg) => arg === '--tmpfs')).toHaveLength(2) // /tmp and /state
    expect(list).not.toContain('/gone')
  })

  it('masks the kernel paths that exist with the empty file or folder', () => {
    const host = hostWith({ '/proc/kcore': 'file', '/sys/firmware': 'directory' })
    const argv = bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, base, files, host)
    const list = triples(mounts(argv))
    expect(list).toContainEqual(['--ro-bind', files.emptyFile, '/proc/kcore'])
    expect(list).toContainEqual(['--ro-bind', files.emptyDir, '/sys/firmware'])
    expect(list.filter((entry) => entry[2] === '/proc/keys')).toEqual([])
    expect(KERNEL_MASKED_PATHS).toEqual(expect.arrayContaining(['/proc/kcore', '/proc/keys', '/proc/timer_list', '/proc/sched_debug', '/proc/acpi', '/proc/scsi', '/sys/firmware']))
    expect(KERNEL_READ_ONLY_PATHS).toEqual(expect.arrayContaining(['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus', '/proc/fs']))
  })

  it('covers the runtime folders with a private tmpfs (a /var/run link once), makes the user’s runtime folder again, binds back a resolv.conf kept there, and masks daemon sockets elsewhere', () => {
    const host = hostWith({
      '/run': 'directory',
      '/var/run': { link: '/run' },
      '/run/systemd/resolve/stub-resolv.conf': 'file',
      '/etc/resolv.conf': { link: '/run/systemd/resolve/stub-resolv.conf' },
      '/run/conch/node': 'file',
      '/var/lib/lxd/unix.socket': 'file',
      [`/run/user/${process.getuid?.() ?? 0}`]: 'directory',
    })
    const policy = { mode: 'read-only' as const, workspaceRoot: '/work/x', protectedPaths: ['/run/conch/node'], hiddenPaths: [] }
    const list = triples(mounts(bubblewrapArgv(['bash'], policy, base, files, host)))
    expect(list.slice(0, 8)).toEqual([
      ['--ro-bind', '/', '/'], ['--dev', '/dev'], ['--proc', '/proc'], ['--tmpfs', '/tmp'],
      ['--tmpfs', '/run'], ['--perms', '0700'], ['--dir', `/run/user/${process.getuid?.() ?? 0}`],
      ['--ro-bind', '/run/systemd/resolve/stub-resolv.conf', '/run/systemd/resolve/stub-resolv.conf'],
    ])
    expect(list.filter(([flag]) => flag === '--tmpfs')).toHaveLength(2)
    // A protected path the tmpfs would hide is bound back, as one under the private /tmp is.
    expect(list).toContainEqual(['--ro-bind', '/run/conch/node', '/run/conch/node'])
    expect(list.at(-1)).toEqual(['--ro-bind', files.emptyFile, '/var/lib/lxd/unix.socket'])
  })

  it('never passes --new-session, which would take job control away from an interactive shell', () => {
    expect(bubblewrapArgv(['bash', '-i'], { mode: 'workspace-write', workspaceRoot: '/w' }, base, files, emptyHost)).not.toContain('--new-session')
  })

  it('binds the workspace read-only under read-only, after the private /tmp, so a workspace under /tmp stays visible', () => {
    const argv = bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/tmp/ws', cwd: '/tmp/ws/sub' }, base, files, emptyHost)
    expect(triples(mounts(argv))[4]).toEqual(['--ro-bind', '/tmp/ws', '/tmp/ws'])
    expect(argv.slice(argv.indexOf('--chdir'))).toEqual(['--chdir', '/tmp/ws/sub', '--', 'sh'])
  })

  it('adds read-write paths under workspace-write only, and read-only paths after them so they win inside writable ones', () => {
    const options = { ...base, readWritePaths: ['/cache'], readOnlyPaths: ['/w/.git'] }
    const write = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/w' }, options, files, emptyHost)))
    expect(write.slice(4, 7)).toEqual([['--bind', '/w', '/w'], ['--bind', '/cache', '/cache'], ['--ro-bind', '/w/.git', '/w/.git']])
    const read = triples(mounts(bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, options, files, emptyHost)))
    expect(read.slice(4, 7)).toEqual([['--ro-bind', '/w', '/w'], ['--ro-bind', '/cache', '/cache'], ['--ro-bind', '/w/.git', '/w/.git']])
  })

  it('unshares the network unless it is allowed, and a confinement may override the configured default either way', () => {
    const policy = { mode: 'read-only' as const, workspaceRoot: '/w' }
    expect(bubblewrapArgv(['sh'], policy, { ...base, network: false }, files, emptyHost)).toContain('--unshare-net')
    expect(bubblewrapArgv(['sh'], policy, base, files, emptyHost)).not.toContain('--unshare-net')
    expect(bubblewrapArgv(['sh'], { ...policy, network: true }, { ...base, network: false }, files, emptyHost)).not.toContain('--unshare-net')
    expect(bubblewrapArgv(['sh'], { ...policy, network: false }, base, files, emptyHost)).toContain('--unshare-net')
  })

  it('folds a writable root workspace into the root mount instead of covering /dev, /proc and /tmp', () => {
    const argv = mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/' }, base, files, emptyHost))
    expect(argv.slice(0, 9)).toEqual(['--bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'])
    expect(argv.filter((arg) => arg === '/')).toHaveLength(2)
  })

  it('binds protected paths read-only over a writable workspace, with the folders between them bound as rename fences', () => {
    const policy = { mode: 'workspace-write' as const, workspaceRoot: '/w', protectedPaths: ['/w/cordis.yml', '/w/examples/agent/over.yml', '/elsewhere/x.yml'] }
    const list = triples(mounts(bubblewrapArgv(['sh'], policy, base, files, emptyHost)))
    const at = (entry: string[]) => list.findIndex((other) => other.join(' ') === entry.join(' '))
    expect(at(['--bind', '/w/examples', '/w/examples'])).toBeGreaterThan(at(['--bind', '/w', '/w']))
    expect(at(['--bind', '/w/examples/agent', '/w/examples/agent'])).toBeGreaterThan(at(['--bind', '/w/examples', '/w/examples']))
    expect(at(['--ro-bind', '/w/examples/agent/over.yml', '/w/examples/agent/over.yml'])).toBeGreaterThan(at(['--bind', '/w/examples/agent', '/w/examples/agent']))
    expect(at(['--ro-bind', '/w/cordis.yml', '/w/cordis.yml'])).toBeGreaterThan(at(['--bind', '/w', '/w']))
    // Outside every writable path a protected path is read-only already.
    expect(list.filter((entry) => entry[1] === '/elsewhere/x.yml')).toEqual([])
  })

  it('makes a workspace inside a protected folder read-only, and binds the runtime folder read-only when a writable path holds it', () => {
    const inside = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/repo/packages/x', protectedPaths: ['/repo/packages'] }, base, files, emptyHost)))
    expect(inside.findIndex((e) => e.join(' ') === '--ro-bind /repo/packages/x /repo/packages/x')).toBeGreaterThan(inside.findIndex((e) => e.join(' ') === '--bind /repo/packages/x /repo/packages/x'))
    // A protected / never covers the fresh /proc, /dev, /tmp or the private home: only the writable paths become read-only.
    const all = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/w', protectedPaths: ['/'] }, base, files, emptyHost)))
    expect(all.filter((e) => e[1] === '/')).toEqual([['--ro-bind', '/', '/']])
    expect(all).toContainEqual(['--ro-bind', '/w', '/w'])
    const run = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/run' }, base, files, emptyHost)))
    expect(run).toContainEqual(['--ro-bind', files.runtimeDir, files.runtimeDir])
  })

  it('never re-binds a folder that holds the private /tmp or home, or lies in them, as a rename fence', () => {
    const options = { ...base, privateHome: true }
    const host = hostWith({ '/home/u': 'directory' })
    const list = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/', protectedPaths: ['/home/u/conch/cordis.yml', '/tmp/x/y.yml', '/srv/a/b.yml'] }, options, files, host)))
    expect(list.filter((entry) => entry[0] === '--bind').map((entry) => entry[1])).toEqual(['/', '/srv', '/srv/a', '/run'])
  })

  it('binds back, read-only, a protected path that the private /tmp or home would hide, so an installation there stays readable', () => {
    const options = { ...base, privateHome: true }
    const host = hostWith({ '/home/u': 'directory', '/home/u/conch/bootstrap.mjs': 'file', '/tmp/clone/bootstrap.mjs': 'file' })
    const policy = { mode: 'workspace-write' as const, workspaceRoot: '/w', protectedPaths: ['/home/u/conch/bootstrap.mjs', '/tmp/clone/bootstrap.mjs', '/tmp/missing.mjs'] }
    const list = triples(mounts(bubblewrapArgv(['sh'], policy, options, files, host)))
    const at = (entry: string[]) => list.findIndex((other) => other.join(' ') === entry.join(' '))
    expect(at(['--ro-bind', '/tmp/clone/bootstrap.mjs', '/tmp/clone/bootstrap.mjs'])).toBeGreaterThan(at(['--tmpfs', '/tmp']))
    expect(at(['--ro-bind', '/home/u/conch/bootstrap.mjs', '/home/u/conch/bootstrap.mjs'])).toBeGreaterThan(at(['--tmpfs', '/home/u']))
    expect(list.filter((entry) => entry[1] === '/tmp/missing.mjs')).toEqual([])
  })

  it('gives a private home: a tmpfs with the dotfiles that exist bound read-only, before the workspace', () => {
    const options = { ...base, privateHome: true, homeReadOnly: ['.gitconfig', '.bashrc', '.config/git', '.vimrc'] }
    const host = hostWith({
      '/home/u': 'directory',
      '/home/u/.gitconfig': 'file',
      '/home/u/.config/git': 'directory',
      '/home/u/.bashrc': { link: '/home/u/dotfiles/bashrc' },
      '/home/u/dotfiles/bashrc': 'file',
    })
    const list = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/home/u/project' }, options, files, host)))
    expect(list.slice(4, 9)).toEqual([
      ['--tmpfs', '/home/u'],
      ['--ro-bind', '/home/u/.gitconfig', '/home/u/.gitconfig'],
      ['--ro-bind', '/home/u/dotfiles/bashrc', '/home/u/.bashrc'],
      ['--ro-bind', '/home/u/.config/git', '/home/u/.config/git'],
      ['--bind', '/home/u/project', '/home/u/project'],
    ])
  })

  it('binds the PATH folders that lie in the home read-only into the private home, unless an entry holds them', () => {
    searchPath = ['/home/u/.pyenv/shims', '/home/u/bin', '/usr/bin', '/home/u/missing']
    try {
      const options = { ...base, privateHome: true, homeReadOnly: ['.pyenv'] }
      const host = hostWith({ '/home/u': 'directory', '/home/u/.pyenv': 'directory', '/home/u/.pyenv/shims': 'directory', '/home/u/bin': 'directory' })
      const list = triples(mounts(bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, options, files, host)))
      expect(list.slice(4, 7)).toEqual([['--tmpfs', '/home/u'], ['--ro-bind', '/home/u/.pyenv', '/home/u/.pyenv'], ['--ro-bind', '/home/u/bin', '/home/u/bin']])
    } finally {
      searchPath = []
    }
  })

  it('leaves the private home out for a home of / or one that does not exist', () => {
    for (const homeDir of ['/', '/nonexistent']) {
      const argv = bubblewrapArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w' }, { ...base, privateHome: true, homeDir }, files, hostWith({ '/': 'directory' }))
      expect(argv.filter((arg) => arg === '--tmpfs')).toHaveLength(1)
    }
  })

  it('masks the denied paths that exist, by their real path, after every bind, and never binds a dotfile that leads into one', () => {
    const options = { ...base, privateHome: true, homeReadOnly: ['.bashrc'], denyRead: ['~/.ssh', '~/.netrc', '~/.aws', '/etc/secret'] }
    const host = hostWith({
      '/home/u': 'directory',
      '/home/u/.ssh': { link: '/data/ssh' },
      '/data/ssh': 'directory',
      '/data/ssh/id_rsa': 'file',
      '/home/u/.netrc': 'file',
      '/home/u/.bashrc': { link: '/data/ssh/id_rsa' },
    })
    const list = triples(mounts(bubblewrapArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/home/u' }, options, files, host)))
    const workspace = list.findIndex((entry) => entry.join(' ') === '--bind /home/u /home/u')
    const masks = list.filter((entry) => entry[1] === files.emptyDir || entry[1] === files.emptyFile).filter((entry) => !entry[2]!.startsWith('/proc') && !entry[2]!.startsWith('/sys'))
    expect(masks).toEqual([['--ro-bind', files.emptyDir, '/data/ssh'], ['--ro-bind', files.emptyFile, '/home/u/.netrc']])
    expect(list.findIndex((entry) => entry[2] === '/data/ssh')).toBeGreaterThan(workspace)
    expect(list.filter((entry) => entry[2] === '/home/u/.bashrc')).toEqual([])
  })

  it('uses the configured runner and probes it once with every flag, the seccomp filter included, and `true`', async () => {
    const runtimeDir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-runtime-')))
    try {
      const calls: string[][] = []
      const provider = bubblewrapProvider({ ...base, runtimeDir, runnerCommand: '/bin/sh', network: false }, async (argv) => {
        calls.push(argv)
        return true
      })
      expect(await provider.probe()).toBe(true)
      expect(calls[0]?.[5]).toBe('/bin/sh')
      expect(calls[0]).toContain('--unshare-net')
      expect(calls[0]).toContain('--unshare-uts')
      expect(calls[0]?.slice(calls[0].indexOf('--seccomp'), calls[0].indexOf('--seccomp') + 2)).toEqual(['--seccomp', '9'])
      expect(calls[0]?.slice(-2)).toEqual(['--', 'true'])
      expect(readFileSync(calls[0]![4]!)).toEqual(seccompProgram({ arch: seccompArchOf(process.arch) ?? 'x86_64' }))
      expect(provider).toMatchObject({ name: 'bubblewrap', platforms: ['linux'], network: false })
      expect(provider.confine(['sh'], { mode: 'read-only', workspaceRoot: '/w', protectedPaths: [] })).toMatchObject({ enforcement: 'full', provider: 'bubblewrap' })
    } finally {
      rmSync(runtimeDir, { recursive: true, force: true })
    }
  })

  it('fails the probe naming a runner that is missing, and names the runner (not the launcher) when it fails', async () => {
    expect(await bubblewrapProvider({ ...base, runnerCommand: '/nonexistent/bwrap' }, async () => true).probe()).toBe('/nonexistent/bwrap was not found')
    expect(await bubblewrapProvider({ ...base, runnerCommand: 'no-such-bwrap' }, async () => true, { ...emptyHost, programFolders: () => ['/usr/bin'] }).probe()).toBe(
      "no-such-bwrap was not found on PATH's system folders (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)",
    )
    const runtimeDir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-runtime-')))
    try {
      const failing = bubblewrapProvider({ ...base, runtimeDir, runnerCommand: 'sh' }, async () => '/bin/sh failed (exit 1): bwrap: No permissions to create new namespace', {
        ...emptyHost,
        programFolders: () => ['/bin', '/usr/bin'],
      })
      expect(await failing.probe()).toBe('sh failed (exit 1): bwrap: No permissions to create new namespace')
    } finally {
      rmSync(runtimeDir, { recursive: true, force: true })
    }
  })

  it("runs the probe again when bubblewrap lost the race with the host's mount table, and keeps any other failure", async () => {
    const runtimeDir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sandbox-runtime-')))
    const raced = `/bin/sh failed (exit 1): bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/var/lib/docker/overlay2/x/merged": No such file or directory`
    try {
      const verdicts = (...queued: Array<true | string>) => {
        const runs: number[] = []
        return { runs, run: async () => (runs.push(runs.length), queued.shift() ?? true) }
      }
      const options = { ...base, runtimeDir, runnerCommand: 'sh' }
      const host = { ...emptyHost, programFolders: () => ['/bin', '/usr/bin'] }
      const once = verdicts(raced, true)
      expect(await bubblewrapProvider(options, once.run, host).probe()).toBe(true)
      expect(once.runs).toHaveLength(2)
      const always = verdicts(raced, raced, raced, raced)
      expect(await bubblewrapProvider(options, always.run, host).probe()).toBe(`sh${raced.slice('/bin/sh'.length)}`)
      expect(always.runs).toHaveLength(3)
      const other = verdicts('/bin/sh failed (exit 1): bwrap: No permissions to create new namespace', true)
      expect(await bubblewrapProvider(options, other.run, host).probe()).toBe('sh failed (exit 1): bwrap: No permissions to create new namespace')
      expect(other.runs).toHaveLength(1)
    } finally {
      rmSync(runtimeDir, { recursive: true, force: true })
    }
  })

  it('fails the probe on an architecture it has no syscall table for, without running anything', async () => {
    const calls: string[][] = []
    const provider = bubblewrapProvider({ ...base, runnerCommand: '/bin/sh' }, async (argv) => {
      calls.push(argv)
      return true
    }, emptyHost, 'riscv64')
    expect(await provider.probe()).toBe('cannot prepare the sandbox files: no seccomp syscall table for riscv64 (conch has tables for x86_64 and aarch64)')
    expect(calls).toEqual([])
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
      '--', '/bin/sh', '-c', `${gitGuardScript()}cd -- "$1" && shift && exec "$@"`, 'sh', '/Users/me/w/sub', 'bash', '-i',
    ])
  })

  it('denies writes to protected paths and reads of denyRead paths (~/ expanded), and follows the per-confinement network', () => {
    const options = { ...base, homeDir: '/Users/me', denyRead: ['~/.ssh', '/etc/secret'] }
    const argv = sandboxExecArgv(['sh'], { mode: 'workspace-write', workspaceRoot: '/Users/me/w', protectedPaths: ['/Users/me/w/cordis.yml'], network: false }, options)
    const profile = seatbeltProfile({ writable: 1, readOnly: 0, protected: 1, denyRead: 2, network: false })
    expect(argv[2]).toBe(profile)
    expect(profile).toContain('(deny file-write* (subpath (param "PROTECTED_0")))')
    expect(profile).toContain('(deny file-read* file-write* (subpath (param "DENYREAD_0")) (subpath (param "DENYREAD_1")))')
    expect(profile.indexOf('PROTECTED_0')).toBeGreaterThan(profile.indexOf('WRITABLE_0'))
    expect(argv).toEqual(expect.arrayContaining(['PROTECTED_0=/Users/me/w/cordis.yml', 'DENYREAD_0=/Users/me/.ssh', 'DENYREAD_1=/etc/secret']))
    expect(profile).toContain('(deny network*)')
    const open = sandboxExecArgv(['sh'], { mode: 'read-only', workspaceRoot: '/w', network: true }, { ...base, network: false })
    expect(open[2]).not.toContain('network')
  })

  it('denies reads and writes of hidden paths, and allows both again in the policy\'s own writable paths inside them', () => {
    const policy = { mode: 'read-only' as const, workspaceRoot: '/Users/me/w', writablePaths: ['/Users/me/state/pool/home-A'], hiddenPaths: ['/Users/me/state/pool'], protectedPaths: [] }
    const argv = sandboxExecArgv(['sh'], policy, base)
    const profile = argv[2]!
    expect(profile).toBe(seatbeltProfile({ writable: 1, readOnly: 0, protected: 0, denyRead: 0, hidden: 1, revealed: 1, network: true }))
    expect(profile).toContain('(deny file-read* file-write* (subpath (param "HIDDEN_0")))')
    expect(profile.indexOf('REVEALED_0')).toBeGreaterThan(profile.indexOf('HIDDEN_0'))
    expect(argv).toEqual(expect.arrayContaining(['HIDDEN_0=/Users/me/state/pool', 'REVEALED_0=/Users/me/state/pool/home-A']))
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
    expect(provider.confine(['sh'], { mode: 'read-only', workspaceRoot: '/w', protectedPaths: [] })).toMatchObject({
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

  it('fails to load with a readWritePaths entry the workspace rule refuses, naming it and the rule', async () => {
    expect(String(await load({ readWritePaths: [scratch, '/run'] }))).toMatch(/\/run cannot be made writable: \/run is the system folder \/run, .* \(at readWritePaths\.1\)/)
    expect(String(await load({ readWritePaths: ['/'] }))).toMatch(/\/ cannot be made writable: \/ is the root folder/)
    expect(String(await load({ readWritePaths: ['/tmp'] }))).toMatch(/\/tmp cannot be made writable: \/tmp is a temporary folder every user shares/)
  })
})
