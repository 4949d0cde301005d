import { chmodSync, linkSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context, type EffectMeta, type Message } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import SandboxService, { agentHome, SandboxError, type ConfinePolicy, type ConfineResult, type SandboxPolicy, type SandboxProvider } from '../src/index.ts'

let root: Context
let fiber: { dispose(): Promise<void> } | undefined
let logs: Message[]

async function boot(): Promise<SandboxService> {
  root = new Context()
  logs = []
  root.logger.exporter({ export: (message) => void logs.push(message) })
  fiber = await root.plugin(SandboxService, {})
  return root.sandbox
}

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  expect(logs.filter((message) => message.type === 'error').map((message) => message.args)).toEqual([])
})

interface FakeProvider extends SandboxProvider {
  probes: number
}

function fake(name: string, verdict: true | string | Error, options: { platforms?: NodeJS.Platform[]; network?: boolean } = {}): FakeProvider {
  const provider: FakeProvider = {
    name,
    platforms: options.platforms ?? [process.platform],
    probes: 0,
    async probe() {
      provider.probes++
      if (verdict instanceof Error) throw verdict
      return verdict
    },
    confine(argv, policy): ConfineResult {
      return { argv: [name, policy.mode, policy.cwd ?? policy.workspaceRoot, '--', ...argv], enforcement: 'full', provider: name }
    },
  }
  if (options.network !== undefined) Object.assign(provider, { network: options.network })
  return provider
}

const policy: SandboxPolicy = { mode: 'workspace-write', workspaceRoot: '/work/x' }

async function rejection(promise: Promise<unknown>): Promise<SandboxError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  )
  expect(error).toBeInstanceOf(SandboxError)
  return error as SandboxError
}

describe('ctx.sandbox', () => {
  it('wraps the argv with the first provider for this platform whose probe succeeds', async () => {
    const sandbox = await boot()
    sandbox.register(fake('elsewhere', true, { platforms: ['aix'] }))
    sandbox.register(fake('broken', 'not installed'))
    sandbox.register(fake('works', true))
    sandbox.register(fake('later', true))
    const result = await sandbox.confine(['bash', '-i'], { ...policy, cwd: '/work/x/sub' })
    expect(result).toEqual({ argv: ['works', 'workspace-write', '/work/x/sub', '--', 'bash', '-i'], enforcement: 'full', provider: 'works' })
  })

  it('probes each provider once and caches the verdict, failures included', async () => {
    const sandbox = await boot()
    const broken = fake('broken', 'not installed')
    const throwing = fake('throwing', new Error('exec format error'))
    const works = fake('works', true)
    sandbox.register(broken)
    sandbox.register(throwing)
    sandbox.register(works)
    await Promise.all([sandbox.confine(['a'], policy), sandbox.confine(['b'], policy)])
    await sandbox.confine(['c'], policy)
    expect([broken.probes, throwing.probes, works.probes]).toEqual([1, 1, 1])
  })

  it('fails closed with SANDBOX_UNAVAILABLE naming each probe failure, the install hint and the explicit opt-out', async () => {
    const sandbox = await boot()
    sandbox.register(fake('bubblewrap', 'bwrap was not found on PATH'))
    sandbox.register(fake('other', new Error('exec format error')))
    const error = await rejection(sandbox.confine(['bash'], policy))
    expect(error.code).toBe('SANDBOX_UNAVAILABLE')
    expect(error.message).toContain('bubblewrap: bwrap was not found on PATH')
    expect(error.message).toContain('other: probe failed: exec format error')
    expect(error.message).toContain('apt-get install bubblewrap')
    expect(error.message).toContain('mode: danger-full-access')
    expect(error.message).toContain('cordis.yml')
  })

  it('probe() reports at once what confine would, and shares its cached verdicts', async () => {
    const sandbox = await boot()
    expect(await sandbox.probe()).toBe(false)
    const missing = fake('bubblewrap', 'bwrap was not found on PATH')
    sandbox.register(missing)
    const error = await rejection(sandbox.probe())
    expect(error.code).toBe('SANDBOX_UNAVAILABLE')
    expect(error.message).toBe((await rejection(sandbox.confine(['bash'], policy))).message)
    expect(missing.probes).toBe(1)
    const works = fake('other', true)
    sandbox.register(works)
    expect(await sandbox.probe()).toBe(true)
    await sandbox.confine(['bash'], policy)
    expect(works.probes).toBe(1)
  })

  it('fails closed when no provider is registered for this platform', async () => {
    const sandbox = await boot()
    sandbox.register(fake('elsewhere', true, { platforms: ['aix'] }))
    const error = await rejection(sandbox.confine(['bash'], policy))
    expect(error.code).toBe('SANDBOX_UNAVAILABLE')
    expect(error.message).toContain(`no sandbox provider is registered for ${process.platform}`)
  })

  it('refuses a provider that hands the argv back unconfined', async () => {
    const sandbox = await boot()
    const sneaky = fake('sneaky', true)
    sneaky.confine = (argv) => ({ argv, enforcement: 'full', provider: 'sneaky' })
    sandbox.register(sneaky)
    const error = await rejection(sandbox.confine(['bash'], policy))
    expect(error.code).toBe('SANDBOX_UNAVAILABLE')
    expect(error.message).toContain('sneaky: returned an argv that adds no confinement')
  })

  it('rejects relative paths, danger-full-access, unknown modes and an empty argv as INVALID_POLICY', async () => {
    const sandbox = await boot()
    sandbox.register(fake('works', true))
    const cases: Array<[unknown, unknown, RegExp]> = [
      [['bash'], { mode: 'workspace-write', workspaceRoot: 'relative/dir' }, /workspaceRoot must be an absolute path/],
      [['bash'], { mode: 'read-only', workspaceRoot: '/w', cwd: 'sub' }, /cwd must be an absolute path/],
      [['bash'], { mode: 'danger-full-access', workspaceRoot: '/w' }, /danger-full-access is not confined/],
      [['bash'], { mode: 'yolo', workspaceRoot: '/w' }, /unknown sandbox mode "yolo"/],
      [['bash'], { mode: 'workspace-write', workspaceRoot: '/' }, /whole filesystem writable/],
      [[], policy, /empty argv/],
    ]
    for (const [argv, bad, pattern] of cases) {
      const error = await rejection(sandbox.confine(argv as [string], bad as SandboxPolicy))
      expect(error.code).toBe('INVALID_POLICY')
      expect(error.message).toMatch(pattern)
    }
  })

  it('rejects a second provider with the same name', async () => {
    const sandbox = await boot()
    sandbox.register(fake('bubblewrap', true))
    expect(() => sandbox.register(fake('bubblewrap', true))).toThrow(
      expect.objectContaining({ code: 'DUPLICATE_PROVIDER', message: expect.stringContaining('bubblewrap') }),
    )
  })

  it('unregisters a provider when the plugin that registered it is disposed', async () => {
    const sandbox = await boot()
    const provider = fake('plugged', true)
    const plugin = await root.plugin({
      name: 'provider-plugin',
      inject: ['sandbox'],
      apply: (ctx: Context) => {
        ctx.sandbox.register(provider)
      },
    })
    expect(plugin.getEffects().map((effect: EffectMeta) => effect.label)).toContain('sandbox.register')
    expect((await sandbox.confine(['x'], policy)).provider).toBe('plugged')
    await plugin.dispose()
    expect((await rejection(sandbox.confine(['x'], policy))).code).toBe('SANDBOX_UNAVAILABLE')
    // Registering again is allowed and probes afresh.
    sandbox.register(provider)
    await sandbox.confine(['x'], policy)
    expect(provider.probes).toBe(2)
  })

  it('reports the network setting of the first provider for this platform', async () => {
    const sandbox = await boot()
    expect(sandbox.networkAllowed()).toBeUndefined()
    sandbox.register(fake('elsewhere', true, { platforms: ['aix'], network: true }))
    sandbox.register(fake('here', true, { network: false }))
    expect(sandbox.networkAllowed()).toBe(false)
  })

  it('hands providers the protected paths — registered ones and the request’s — canonical, and the network override', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-protect-')))
    try {
      writeFileSync(join(dir, 'cordis.yml'), '[]\n')
      mkdirSync(join(dir, 'real'))
      symlinkSync(join(dir, 'real'), join(dir, 'link'))
      const sandbox = await boot()
      const seen: ConfinePolicy[] = []
      const provider = fake('works', true)
      provider.confine = (argv, given) => {
        seen.push(given)
        return { argv: ['works', '--', ...argv], enforcement: 'full', provider: 'works' }
      }
      sandbox.register(provider)
      const unprotect = sandbox.protect([join(dir, 'cordis.yml'), join(dir, 'link'), join(dir, 'missing')])
      expect(sandbox.protectedPaths()).toEqual([join(dir, 'cordis.yml'), join(dir, 'real')])
      await sandbox.confine(['x'], { ...policy, network: true, protectedPaths: [join(dir, 'link'), join(dir, 'real')] })
      expect(seen[0]).toEqual({ ...policy, network: true, protectedPaths: [join(dir, 'cordis.yml'), join(dir, 'real')] })
      unprotect()
      await sandbox.confine(['x'], policy)
      expect(seen[1]).toEqual({ ...policy, protectedPaths: [] })
      expect(sandbox.protectedPaths()).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses a relative protected path and a network that is not a boolean', async () => {
    const sandbox = await boot()
    sandbox.register(fake('works', true))
    expect(() => sandbox.protect(['relative/cordis.yml'])).toThrow(expect.objectContaining({ code: 'INVALID_POLICY', message: expect.stringContaining('relative/cordis.yml') }))
    const relative = await rejection(sandbox.confine(['x'], { ...policy, protectedPaths: ['x.yml'] }))
    expect(relative.message).toMatch(/protectedPaths must be an absolute path/)
    const network = await rejection(sandbox.confine(['x'], { ...policy, network: 'yes' as unknown as boolean }))
    expect(network.message).toMatch(/network must be true or false/)
  })

  it('removes protected paths when the plugin that registered them is disposed', async () => {
    const sandbox = await boot()
    const plugin = await root.plugin({
      name: 'protecting-plugin',
      inject: ['sandbox'],
      apply: (ctx: Context) => {
        ctx.sandbox.protect(['/'])
      },
    })
    expect(sandbox.protectedPaths()).toEqual(['/'])
    await plugin.dispose()
    expect(sandbox.protectedPaths()).toEqual([])
  })

  it('hands providers the hidden paths — registered and requested, canonical, missing ones left out — and forgets them at disposal', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-hide-')))
    try {
      mkdirSync(join(dir, 'pool'))
      symlinkSync(join(dir, 'pool'), join(dir, 'link'))
      mkdirSync(join(dir, 'other'))
      const sandbox = await boot()
      const seen: ConfinePolicy[] = []
      const provider = fake('works', true)
      provider.confine = (argv, given) => {
        seen.push(given)
        return { argv: ['works', '--', ...argv], enforcement: 'full', provider: 'works' }
      }
      sandbox.register(provider)
      const plugin = await root.plugin({ name: 'hiding-plugin', inject: ['sandbox'], apply: (ctx: Context) => void ctx.sandbox.hide([join(dir, 'link'), join(dir, 'missing')]) })
      expect(sandbox.hiddenPaths()).toEqual([join(dir, 'pool')])
      await sandbox.confine(['x'], { ...policy, hiddenPaths: [join(dir, 'other'), join(dir, 'pool')] })
      expect(seen[0]).toEqual({ ...policy, protectedPaths: [], hiddenPaths: [join(dir, 'pool'), join(dir, 'other')] })
      await plugin.dispose()
      expect(sandbox.hiddenPaths()).toEqual([])
      await sandbox.confine(['x'], policy)
      expect(seen[1]).toEqual({ ...policy, protectedPaths: [] })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('hands providers the provisions — canonical, missing ones left out — and forgets them at disposal', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-provision-')))
    try {
      mkdirSync(join(dir, 'cli'))
      symlinkSync(join(dir, 'cli'), join(dir, 'cli-link'))
      mkdirSync(join(dir, 'homes'))
      const sandbox = await boot()
      const seen: ConfinePolicy[] = []
      const provider = fake('works', true)
      provider.confine = (argv, given) => {
        seen.push(given)
        return { argv: ['works', '--', ...argv], enforcement: 'full', provider: 'works' }
      }
      sandbox.register(provider)
      const plugin = await root.plugin({
        name: 'provisioning-plugin',
        inject: ['sandbox'],
        apply: (ctx: Context) => void ctx.sandbox.provision({ programs: [join(dir, 'cli-link'), join(dir, 'missing')], homes: [join(dir, 'homes')] }),
      })
      await sandbox.confine(['x'], policy)
      expect(seen[0]).toEqual({ ...policy, protectedPaths: [], provisions: { programs: [join(dir, 'cli')], homes: [join(dir, 'homes')] } })
      expect(agentHome(join(dir, 'homes'), 'session-1')).toMatch(new RegExp(`^${join(dir, 'homes')}/agent-[0-9a-f]{24}$`))
      expect(agentHome(join(dir, 'homes'), 'session-1')).not.toBe(agentHome(join(dir, 'homes'), 'session-2'))
      await plugin.dispose()
      await sandbox.confine(['x'], policy)
      expect(seen[1]).toEqual({ ...policy, protectedPaths: [] })
      expect(() => sandbox.provision({ homes: ['relative'] })).toThrow(expect.objectContaining({ code: 'INVALID_POLICY' }))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses to confine once a hidden folder, or a folder above it, was moved or replaced, naming it', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-hide-moved-')))
    try {
      mkdirSync(join(dir, 'state', 'pool'), { recursive: true })
      const sandbox = await boot()
      sandbox.register(fake('works', true))
      const plugin = await root.plugin({ name: 'hiding-plugin', inject: ['sandbox'], apply: (ctx: Context) => void ctx.sandbox.hide([join(dir, 'state', 'pool')]) })
      await sandbox.confine(['x'], policy)
      // What a confined process whose workspace holds the folder can do: rename a folder above
      // it, and put an empty one where it was.
      renameSync(join(dir, 'state'), join(dir, 'moved'))
      mkdirSync(join(dir, 'state', 'pool'), { recursive: true })
      const refused = await rejection(sandbox.confine(['x'], policy))
      expect(refused).toMatchObject({ code: 'HIDDEN_PATH_MOVED', message: expect.stringContaining(join(dir, 'state', 'pool')) })
      // Put back, the same folder is hidden again.
      rmSync(join(dir, 'state'), { recursive: true })
      renameSync(join(dir, 'moved'), join(dir, 'state'))
      await sandbox.confine(['x'], policy)
      // A symbolic link in its place is another file too.
      renameSync(join(dir, 'state', 'pool'), join(dir, 'elsewhere'))
      symlinkSync(join(dir, 'elsewhere'), join(dir, 'state', 'pool'))
      expect(await rejection(sandbox.confine(['x'], policy))).toMatchObject({ code: 'HIDDEN_PATH_MOVED' })
      await plugin.dispose()
      await sandbox.confine(['x'], policy)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses a relative hidden path, and / (which would hide everything)', async () => {
    const sandbox = await boot()
    sandbox.register(fake('works', true))
    expect(() => sandbox.hide(['state/pool'])).toThrow(expect.objectContaining({ code: 'INVALID_POLICY', message: expect.stringContaining('state/pool') }))
    expect(() => sandbox.hide(['/'])).toThrow(expect.objectContaining({ code: 'INVALID_POLICY' }))
    expect((await rejection(sandbox.confine(['x'], { ...policy, hiddenPaths: ['/'] }))).message).toMatch(/hiddenPaths must not hold \//)
  })

  it('refuses a shared temporary root as the workspace root in both confined modes, naming it, and accepts a private folder inside it', async () => {
    const shared = realpathSync(mkdtempSync(join(tmpdir(), 'conch-shared-')))
    try {
      chmodSync(shared, 0o1777)
      const sandbox = await boot()
      sandbox.register(fake('works', true))
      for (const mode of ['workspace-write', 'read-only'] as const) {
        for (const root of ['/tmp', '/var/tmp', '/dev/shm', shared]) {
          const error = await rejection(sandbox.confine(['x'], { mode, workspaceRoot: root }))
          expect(error.code).toBe('INVALID_POLICY')
          expect(error.message).toContain(`${root} is a temporary folder every user shares`)
        }
        const own = mkdtempSync(join(shared, 'own-'))
        await expect(sandbox.confine(['x'], { mode, workspaceRoot: own })).resolves.toMatchObject({ provider: 'works' })
      }
    } finally {
      rmSync(shared, { recursive: true, force: true })
    }
  })
  it('refuses a system folder, below one, or a link to one as the workspace root in both confined modes, naming it', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-system-')))
    try {
      symlinkSync('/proc', join(dir, 'proc-link'))
      const sandbox = await boot()
      sandbox.register(fake('works', true))
      for (const mode of ['workspace-write', 'read-only'] as const) {
        for (const [root, named] of [['/proc', '/proc is the system folder /proc'], ['/sys/kernel', '/sys/kernel is inside the system folder /sys'], ['/etc', '/etc is the system folder /etc'], [join(dir, 'proc-link'), `${join(dir, 'proc-link')} (/proc) is the system folder /proc`]]) {
          const error = await rejection(sandbox.confine(['x'], { mode, workspaceRoot: root! }))
          expect(error.code).toBe('INVALID_POLICY')
          expect(error.message).toContain(named)
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('ctx.sandbox: protected paths whose protection a writable path could get around', () => {
  let dir: string
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  async function protecting(paths: string[], provider: SandboxProvider = fake('works', true)): Promise<SandboxService> {
    const sandbox = await boot()
    sandbox.register(provider)
    sandbox.protect(paths)
    return sandbox
  }

  it('refuses a protected file with another hard link on the device of the workspace, naming the file, its link count and how to find the names', async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-linked-')))
    const file = join(dir, 'cordis.yml')
    writeFileSync(file, '[]\n')
    linkSync(file, join(dir, '.cfg-link'))
    const sandbox = await protecting([file])
    const error = await rejection(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: dir }))
    expect(error.code).toBe('PROTECTED_PATH_LINKED')
    expect(error.message).toContain(`the protected file ${file} has 2 hard links`)
    expect(error.message).toContain(`find ${dir} -xdev -samefile ${file}`)
    // A writable path of the confinement itself counts, in either mode; nothing writable: nothing to get around.
    const own = await rejection(sandbox.confine(['x'], { mode: 'read-only', workspaceRoot: '/', writablePaths: [dir] }))
    expect(own.code).toBe('PROTECTED_PATH_LINKED')
    await expect(sandbox.confine(['x'], { mode: 'read-only', workspaceRoot: dir })).resolves.toMatchObject({ provider: 'works' })
    // With one name again it confines.
    rmSync(join(dir, '.cfg-link'))
    await expect(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: dir })).resolves.toMatchObject({ provider: 'works' })
  })

  it("counts the provider's readWritePaths as writable under workspace-write", async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-linked-')))
    mkdirSync(join(dir, 'rw'))
    mkdirSync(join(dir, 'ws'))
    const file = join(dir, 'conf.yml')
    writeFileSync(file, '[]\n')
    linkSync(file, join(dir, 'rw', 'other-name'))
    const sandbox = await protecting([file], Object.assign(fake('works', true), { readWritePaths: [join(dir, 'rw')] }))
    const error = await rejection(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'ws') }))
    expect(error.code).toBe('PROTECTED_PATH_LINKED')
    expect(error.message).toContain(`find ${join(dir, 'ws')} ${join(dir, 'rw')} -xdev -samefile ${file}`)
  })

  it('does not look into a protected folder: its files may have other names (a pnpm install hard-links them)', async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-linked-')))
    mkdirSync(join(dir, 'install'))
    writeFileSync(join(dir, 'install', 'index.js'), '\n')
    linkSync(join(dir, 'install', 'index.js'), join(dir, 'store-copy'))
    const sandbox = await protecting([join(dir, 'install')])
    await expect(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: dir })).resolves.toMatchObject({ provider: 'works' })
  })

  it('refuses a protected path that goes through a symbolic link inside a writable path, naming the link and its target', async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-symlinked-')))
    mkdirSync(join(dir, 'shared'))
    mkdirSync(join(dir, 'ws'))
    writeFileSync(join(dir, 'shared', 'cordis.yml'), '[]\n')
    symlinkSync(join(dir, 'shared', 'cordis.yml'), join(dir, 'ws', 'cordis.yml'))
    symlinkSync(join(dir, 'shared'), join(dir, 'ws', 'conf'))
    const sandbox = await protecting([join(dir, 'ws', 'cordis.yml')])
    const error = await rejection(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'ws') }))
    expect(error.code).toBe('PROTECTED_PATH_SYMLINK')
    expect(error.message).toContain(`the symbolic link ${join(dir, 'ws', 'cordis.yml')} -> ${join(dir, 'shared', 'cordis.yml')}, inside the writable ${join(dir, 'ws')}`)
    expect(error.message).toContain(`--config ${join(dir, 'shared', 'cordis.yml')}`)
    // A link as a folder on the way, given with the request, is refused the same way.
    const sandbox2 = await protecting([])
    const folder = await rejection(sandbox2.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'ws'), protectedPaths: [join(dir, 'ws', 'conf', 'cordis.yml')] }))
    expect(folder.code).toBe('PROTECTED_PATH_SYMLINK')
    expect(folder.message).toContain(`the symbolic link ${join(dir, 'ws', 'conf')} -> ${join(dir, 'shared')}`)
  })

  it('refuses any writable path that holds code registered with code: true, or lies inside a code folder; read-only and other workspaces confine', async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-code-')))
    mkdirSync(join(dir, 'ws', 'plugins'), { recursive: true })
    mkdirSync(join(dir, 'other'))
    mkdirSync(join(dir, 'pkg', 'sub'), { recursive: true })
    writeFileSync(join(dir, 'ws', 'plugins', 'tool.mts'), '\n')
    const sandbox = await boot()
    sandbox.register(fake('works', true))
    const off = sandbox.protect([join(dir, 'ws', 'plugins', 'tool.mts'), join(dir, 'pkg')], { code: true })
    const error = await rejection(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'ws') }))
    expect(error.code).toBe('PROTECTED_CODE_WRITABLE')
    expect(error.message).toContain(`cannot confine a process that may write ${join(dir, 'ws')}: it holds code this conch runs outside its installation (${join(dir, 'ws', 'plugins', 'tool.mts')})`)
    // A writable path inside a code folder, given with the request, is refused the same way.
    const inner = await rejection(sandbox.confine(['x'], { mode: 'read-only', workspaceRoot: join(dir, 'other'), writablePaths: [join(dir, 'pkg', 'sub')] }))
    expect(inner.code).toBe('PROTECTED_CODE_WRITABLE')
    await expect(sandbox.confine(['x'], { mode: 'read-only', workspaceRoot: join(dir, 'ws') })).resolves.toMatchObject({ provider: 'works' })
    const other = await sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'other') })
    expect(other.provider).toBe('works')
    // Code stays protected (read-only) like any protected path, and the registration ends with its disposer.
    expect(sandbox.protectedPaths()).toEqual(expect.arrayContaining([join(dir, 'ws', 'plugins', 'tool.mts'), join(dir, 'pkg')]))
    off()
    await expect(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'ws') })).resolves.toMatchObject({ provider: 'works' })
  })

  it('accepts a link outside every writable path, and the target given directly', async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-symlinked-')))
    mkdirSync(join(dir, 'shared'))
    mkdirSync(join(dir, 'ws'))
    writeFileSync(join(dir, 'shared', 'cordis.yml'), '[]\n')
    symlinkSync(join(dir, 'shared', 'cordis.yml'), join(dir, 'link.yml'))
    const sandbox = await protecting([join(dir, 'link.yml'), join(dir, 'shared', 'cordis.yml')])
    await expect(sandbox.confine(['x'], { mode: 'workspace-write', workspaceRoot: join(dir, 'ws') })).resolves.toMatchObject({ provider: 'works' })
    // Under read-only the workspace is not writable: its links cannot be replaced.
    symlinkSync(join(dir, 'shared', 'cordis.yml'), join(dir, 'ws', 'cordis.yml'))
    const inside = await protecting([join(dir, 'ws', 'cordis.yml')])
    await expect(inside.confine(['x'], { mode: 'read-only', workspaceRoot: join(dir, 'ws') })).resolves.toMatchObject({ provider: 'works' })
  })
})
