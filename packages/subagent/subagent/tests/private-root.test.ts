import { mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import SandboxService from '@conch/sandbox'
import { hidePrivateRoot } from '../src/index.ts'

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
})
