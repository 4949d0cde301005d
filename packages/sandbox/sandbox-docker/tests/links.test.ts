/**
 * Symbolic links in the workspace, against the real daemon as root: the daemon resolves a bind
 * mount's source on the host, so a deny-write entry (or a folder on the way to one) that is a link
 * would mount the link's host target into the container. The first confined process is refused
 * with `PROTECTED_PATH_SYMLINK`, as bubblewrap refuses it, and nothing of the target is written or
 * shown. The links are planted on the host, as a confined process of another sandbox, or a clone of
 * a hostile repository, leaves them; and swapped in after the check (before the daemon resolves the
 * sources, and while the container lives, before its held folders are removed).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Config, dockerProvider } from '../src/index.ts'
import { compose, containersOf, dockerSkip, IMAGE } from './harness.ts'

let box: Awaited<ReturnType<typeof compose>> | undefined
let outside: string | undefined
afterEach(async () => {
  await box?.dispose()
  box = undefined
  if (outside !== undefined) rmSync(outside, { recursive: true, force: true })
  outside = undefined
})

/**
 * Opens a terminal and, when it opens, runs `attack` in it: what the terminal showed (empty when
 * it did not open), and the error the opening failed with.
 */
async function attempt(attack: string): Promise<{ shown: string; error: (Error & { code?: string; cause?: { code?: string; message?: string } }) | undefined; key: string }> {
  const made = box!
  const agent = await made.agent()
  const key = agent.session.id
  try {
    const { sessionId } = await made.pty.spawn(agent, { type: 'shell' })
    const result = await made.send(agent, sessionId, `${attack}; echo attacked-$((20+22))`)
    return { shown: result.viewport, error: undefined, key }
  } catch (error) {
    return { shown: '', error: error as Error & { code?: string; cause?: { code?: string; message?: string } }, key }
  }
}

describe.skipIf(dockerSkip)('symbolic links in the workspace (Docker, as root)', () => {
  it('a .git that links to a host folder is refused: nothing is written there', async () => {
    box = await compose()
    outside = mkdtempSync(join(tmpdir(), 'conch-victim-'))
    mkdirSync(join(outside, 'hooks'))
    writeFileSync(join(outside, 'config'), '[core]\n')
    symlinkSync(outside, join(box.workspace, '.git'))
    const { shown, error, key } = await attempt('echo PWNED > .git/authorized_keys; echo evil > .git/hooks/pre-commit')
    expect(existsSync(join(outside, 'authorized_keys')), shown).toBe(false)
    expect(readdirSync(outside).sort()).toEqual(['config', 'hooks'])
    expect(readdirSync(join(outside, 'hooks'))).toEqual([])
    expect(error?.cause?.code).toBe('PROTECTED_PATH_SYMLINK')
    expect(error?.message).toContain(`${join(box.workspace, '.git')} is a symbolic link (-> ${outside})`)
    expect(await containersOf(key)).toEqual([])
  })

  it.each([
    ['a file (.mcp.json)', '.mcp.json', false],
    ['a folder (.vscode)', '.vscode', true],
  ])('a deny-write entry that is a link to a host secret, %s, is refused: the secret is not shown', async (_name, entry, folder) => {
    box = await compose()
    outside = mkdtempSync(join(tmpdir(), 'conch-secret-'))
    const secret = `host-secret-${process.pid}-${Date.now()}`
    const target = folder ? join(outside, 'folder') : join(outside, 'shadow')
    if (folder) {
      mkdirSync(target)
      writeFileSync(join(target, 'shadow'), `${secret}\n`)
    } else writeFileSync(target, `${secret}\n`)
    symlinkSync(target, join(box.workspace, entry))
    const read = folder ? `cat ${entry}/shadow ${target}/shadow` : `cat ${entry} ${target}`
    const { shown, error, key } = await attempt(`${read} 2>/dev/null | tr a-z A-Z`)
    expect(shown).not.toContain(secret.toUpperCase())
    expect(error?.cause?.code).toBe('PROTECTED_PATH_SYMLINK')
    expect(error?.message).toContain(`${join(box.workspace, entry)} is a symbolic link (-> ${target})`)
    expect(await containersOf(key)).toEqual([])
  })

  it('a link further down the way to an entry is refused too (.git/hooks a link)', async () => {
    box = await compose()
    outside = mkdtempSync(join(tmpdir(), 'conch-victim-'))
    mkdirSync(join(box.workspace, '.git'))
    symlinkSync(outside, join(box.workspace, '.git', 'hooks'))
    const { shown, error } = await attempt('echo evil > .git/hooks/pre-commit')
    expect(existsSync(join(outside, 'pre-commit')), shown).toBe(false)
    expect(error?.cause?.code).toBe('PROTECTED_PATH_SYMLINK')
    expect(error?.message).toContain(`${join(box.workspace, '.git', 'hooks')} is a symbolic link (-> ${outside})`)
  })

  it('any other mount beneath the workspace through a link is refused (a protected path the seam did not check)', async () => {
    // Straight to the provider: the seam refuses a protected path given through a link, so only a
    // link swapped in after its check reaches the provider; its fence would bind the link's target.
    const workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-docker-ws-')))
    outside = mkdtempSync(join(tmpdir(), 'conch-victim-'))
    writeFileSync(join(outside, 'secret'), 'secret\n')
    symlinkSync(outside, join(workspace, 'data'))
    const provider = dockerProvider(Config.parse({ image: IMAGE }))
    const key = `links-${process.pid}-${Date.now()}`
    try {
      const agent = { key, owner: { onDispose: () => () => {} } }
      const policy = { mode: 'workspace-write' as const, workspaceRoot: workspace, protectedPaths: [join(workspace, 'data', 'secret')], agent }
      await expect(provider.confine(['bash'], policy)).rejects.toMatchObject({
        code: 'PROTECTED_PATH_SYMLINK',
        message: expect.stringContaining(`${join(workspace, 'data')} is a symbolic link (-> ${outside}) inside the workspace ${workspace}, and the container mounts`),
      })
      expect(await containersOf(key)).toEqual([])
    } finally {
      await provider.close()
      rmSync(workspace, { recursive: true, force: true })
    }
  })

  it('a folder swapped for a link between the check and the daemon\'s mounts: the container is removed before anything runs in it', async () => {
    const made = await compose()
    box = made
    outside = mkdtempSync(join(tmpdir(), 'conch-victim-'))
    mkdirSync(join(outside, 'hooks'))
    writeFileSync(join(outside, 'config'), '[core]\n')
    // Shaped like the .git it stands in for, the held commondir and config.worktree included: every bind's source is there, and the daemon mounts.
    writeFileSync(join(outside, 'commondir'), '.\n')
    writeFileSync(join(outside, 'config.worktree'), '')
    mkdirSync(join(made.workspace, '.git', 'hooks'), { recursive: true })
    writeFileSync(join(made.workspace, '.git', 'config'), '[core]\n')
    // The exact ordering a hostile process of another sandbox races for: after the check, before the daemon resolves the sources.
    const create = Docker.prototype.createContainer
    let swapped = 0
    const swap = vi.spyOn(Docker.prototype, 'createContainer').mockImplementation(function (this: Docker, ...args: Parameters<Docker['createContainer']>) {
      swap.mockRestore()
      swapped += 1
      renameSync(join(made.workspace, '.git'), join(made.workspace, '.git-old'))
      symlinkSync(outside!, join(made.workspace, '.git'))
      return create.apply(this, args)
    } as Docker['createContainer'])
    const { shown, error, key } = await attempt('echo PWNED > .git/authorized_keys')
    expect(swapped).toBe(1)
    expect(existsSync(join(outside, 'authorized_keys')), shown).toBe(false)
    expect(error?.cause?.code).toBe('PROTECTED_PATH_SYMLINK')
    expect(error?.message).toContain(`did not get ${join(made.workspace, '.git')} of the workspace`)
    expect(await containersOf(key)).toEqual([])
  })

  it('a held folder swapped for a link while the container lives: its removal does not follow the link', async () => {
    const made = await compose()
    box = made
    outside = mkdtempSync(join(tmpdir(), 'conch-victim-'))
    mkdirSync(join(outside, 'hooks'))
    mkdirSync(join(made.workspace, '.git'))
    const agent = await made.agent()
    const { sessionId } = await made.pty.spawn(agent, { type: 'shell' })
    expect((await made.send(agent, sessionId, 'ls -d .git/hooks')).viewport).toContain('.git/hooks')
    // What a process of another sandbox writing the same workspace can do meanwhile.
    renameSync(join(made.workspace, '.git'), join(made.workspace, '.git-old'))
    symlinkSync(outside, join(made.workspace, '.git'))
    await made.agents.dispose(agent)
    expect(readdirSync(outside)).toEqual(['hooks'])
  })

  it('a link elsewhere in the workspace is no reason to refuse', async () => {
    box = await compose()
    outside = mkdtempSync(join(tmpdir(), 'conch-elsewhere-'))
    symlinkSync(outside, join(box.workspace, 'data'))
    const { shown, error } = await attempt('ls -d data')
    expect(error).toBeUndefined()
    expect(shown).toContain('attacked-42')
  })
})
