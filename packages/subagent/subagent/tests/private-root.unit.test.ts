import { chownSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import SandboxService from '@conch/sandbox'
import { hidePrivateRoot, SubagentError } from '../src/index.ts'

const made: string[] = []
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('a provider’s private root', () => {
  it('is made mode 0700 and hidden in every sandbox while the provider is loaded, and no longer once it is disposed', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-root-')))
    made.push(dir)
    const homes = join(dir, 'cache', 'conch', 'codex')
    const root = new Context()
    const sandbox = await root.plugin(SandboxService, {})
    const provider = await root.plugin({ name: 'a-provider', apply: (ctx: Context) => hidePrivateRoot(ctx, homes, 'codex sub-agents') })
    expect(statSync(homes).mode & 0o777).toBe(0o700)
    expect(root.sandbox.hiddenPaths()).toEqual([homes])
    await provider.dispose()
    expect(root.sandbox.hiddenPaths()).toEqual([])
    await sandbox.dispose()
  })

  it('closes a folder that already exists with looser bits to mode 0700', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-root-')))
    made.push(dir)
    const homes = join(dir, 'cache', 'conch', 'codex')
    mkdirSync(homes, { recursive: true, mode: 0o755 })
    expect(statSync(homes).mode & 0o777).toBe(0o755)
    const root = new Context()
    const provider = await root.plugin({ name: 'a-provider', apply: (ctx: Context) => hidePrivateRoot(ctx, homes, 'codex sub-agents') })
    expect(statSync(homes).mode & 0o777).toBe(0o700)
    await provider.dispose()
  })

  it('refuses a root that is a symbolic link, naming it, and leaves what it points to as it was', () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-root-')))
    made.push(dir)
    const elsewhere = join(dir, 'elsewhere')
    mkdirSync(elsewhere, { mode: 0o755 })
    const homes = join(dir, 'codex')
    symlinkSync(elsewhere, homes)
    const ctx = new Context()
    let error: unknown
    try {
      hidePrivateRoot(ctx, homes, 'codex sub-agents')
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(SubagentError)
    expect((error as SubagentError).code).toBe('PRIVATE_ROOT_UNSAFE')
    expect((error as SubagentError).message).toContain(`codex sub-agents: the private state folder ${homes} is a symbolic link`)
    expect(statSync(elsewhere).mode & 0o777).toBe(0o755)
    expect(readdirSync(elsewhere)).toEqual([])
  })

  it.runIf(process.getuid?.() === 0)('refuses a root another user owns (it could read or replace what is put there), as root too', () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'subagent-root-')))
    made.push(dir)
    const homes = join(dir, 'codex')
    mkdirSync(homes, { mode: 0o700 })
    chownSync(homes, 65534, 65534)
    let error: unknown
    try {
      hidePrivateRoot(new Context(), homes, 'codex sub-agents')
    } catch (caught) {
      error = caught
    }
    expect((error as SubagentError).code).toBe('PRIVATE_ROOT_UNSAFE')
    expect((error as SubagentError).message).toContain(`codex sub-agents: the private state folder ${homes} is not a private folder of uid 0`)
  })
})
