/**
 * The deny-write list, for real: a confined root shell in a writable workspace tries to write,
 * create, remove and rename each entry — where it exists, and where it does not yet.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SandboxAgent } from '@conch/sandbox'
import { nodeBeneathFs } from '@conch/subprocess'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Config, DEFAULT_DENY_WRITE, folderLedger, placeholders } from '../src/index.ts'
import { harness, hasBwrap, quote, type Harness } from './harness.ts'

let workspace: string
let box: Harness | undefined

beforeEach(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-deny-write-')))
})

afterEach(async () => {
  await box?.dispose()
  box = undefined
  rmSync(workspace, { recursive: true, force: true })
})

const folders = DEFAULT_DENY_WRITE.filter((entry) => entry.endsWith('/')).map((entry) => entry.slice(0, -1))
const files = DEFAULT_DENY_WRITE.filter((entry) => !entry.endsWith('/'))

/** Every file under `folder` with its content, relative to it (`name/` for a folder). */
function snapshot(folder: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (dir: string, prefix: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const name = `${prefix}${entry.name}`
      if (entry.isDirectory()) {
        out[`${name}/`] = ''
        walk(join(dir, entry.name), `${name}/`)
      } else out[name] = readFileSync(join(dir, entry.name), 'utf8')
    }
  }
  walk(folder, '')
  return out
}

/** The attack on each entry: write, append, create inside, remove, rename; one line per attempt that succeeded. */
const attack = (root: string) =>
  [
    ...files.map(
      (file) => `
      f=${quote(join(root, file))}
      echo evil >> "$f" 2>/dev/null && echo "appended $f"
      echo evil > "$f" 2>/dev/null && echo "wrote $f"
      sed -i s/a/b/ "$f" 2>/dev/null && echo "sed $f"
      rm -rf "$f" 2>/dev/null && echo "removed $f"
      mv "$f" "$f.old" 2>/dev/null && echo "renamed $f"
      ln -sfn /etc/hostname "$f" 2>/dev/null && echo "linked $f"`,
    ),
    ...folders.map(
      (folder) => `
      d=${quote(join(root, folder))}
      mkdir -p "$d" 2>/dev/null; echo evil > "$d/settings.json" 2>/dev/null && echo "created in $d"
      echo evil > "$d/pre-commit" 2>/dev/null && echo "created in $d"
      mkdir "$d/sub" 2>/dev/null && echo "made folder in $d"
      rm -rf "$d" 2>/dev/null && echo "removed $d"
      mv "$d" "$d.old" 2>/dev/null && echo "renamed $d"`,
    ),
    `mv ${quote(join(root, '.git'))} ${quote(join(root, '.git.old'))} 2>/dev/null && echo "renamed .git"`,
    'echo done',
  ].join('\n')

describe.runIf(hasBwrap)('the deny-write list in a writable workspace', () => {
  it('refuses writing, removing and renaming each entry that exists', async () => {
    execFileSync('git', ['init', '-q', workspace])
    for (const file of files.filter((file) => !existsSync(join(workspace, file)))) writeFileSync(join(workspace, file), file === '.git/commondir' ? '.\n' : 'a\n')
    for (const folder of folders.filter((folder) => !existsSync(join(workspace, folder)))) {
      mkdirSync(join(workspace, folder))
      writeFileSync(join(workspace, folder, 'settings.json'), 'a\n')
    }
    const before = snapshot(workspace)
    box = await harness(workspace)
    const result = await box.run(`${attack(workspace)}\necho x > .mcp.json`)
    expect(result.stdout).toBe('done\n')
    expect(result.stderr).toMatch(/^bash: line \d+: \.mcp\.json: Read-only file system$/m)
    expect(snapshot(workspace)).toEqual(before)
  })

  it('refuses creating each entry that does not exist, and removes its placeholder when conch stops', async () => {
    mkdirSync(join(workspace, '.git')) // a parent for .git/hooks and .git/config
    box = await harness(workspace)
    const result = await box.run(`${attack(workspace)}\nmkdir -p .vscode; echo x > .vscode/settings.json; echo x > .mcp.json`)
    expect(result.stdout).toBe('done\n')
    expect(result.stderr).toMatch(/^bash: line \d+: \.vscode\/settings\.json: Read-only file system$/m)
    expect(result.stderr).toMatch(/^bash: line \d+: \.mcp\.json: Is a directory$/m)
    // While conch runs, each missing entry is an empty folder on the host (git tracks none), but
    // .git/commondir, a file naming the repository's own folder (git stops on a folder there), and
    // .git/config.worktree, an empty file (git warns about a folder there).
    const placeholderFiles = { '.git/commondir': '.\n', '.git/config.worktree': '' } as Record<string, string>
    for (const entry of DEFAULT_DENY_WRITE.filter((entry) => placeholderFiles[entry] === undefined)) {
      expect(statSync(join(workspace, entry)).isDirectory(), entry).toBe(true)
      expect(readdirSync(join(workspace, entry)), entry).toEqual([])
    }
    for (const [entry, content] of Object.entries(placeholderFiles)) expect(readFileSync(join(workspace, entry), 'utf8'), entry).toBe(content)
    await box.dispose()
    box = undefined
    expect(snapshot(workspace)).toEqual({ '.git/': '' })
  })

  it('gives a process of no agent a .git of its own where the workspace has none: git init works, the host gets nothing', async () => {
    box = await harness(workspace)
    const result = await box.run('git init -q . && git -c user.name=a -c user.email=a@a commit -q --allow-empty -m inside && echo "commit=$?"')
    expect(result.stdout).toBe('commit=0\n')
    expect(readdirSync(join(workspace, '.git'))).toEqual([]) // the placeholder the tmpfs covered
    await box.dispose()
    box = undefined
    expect(existsSync(join(workspace, '.git'))).toBe(false)
  })

  it('guards readWritePaths too, and leaves a policy\'s own writable paths to their program', async () => {
    const extra = realpathSync(mkdtempSync(join(tmpdir(), 'conch-deny-extra-')))
    const own = join(workspace, 'cli-home')
    mkdirSync(own)
    try {
      box = await harness(workspace, { readWritePaths: [extra] })
      const result = await box.run(
        `echo evil > ${quote(join(extra, '.mcp.json'))} 2>/dev/null && echo "wrote extra"
         mkdir -p ${quote(join(own, '.claude'))} && echo ok > ${quote(join(own, '.claude', 'settings.json'))} && echo "own ok"`,
        { writablePaths: [own] },
      )
      expect(result.stdout).toBe('own ok\n')
      expect(readFileSync(join(own, '.claude', 'settings.json'), 'utf8')).toBe('ok\n')
    } finally {
      await box?.dispose()
      box = undefined
      rmSync(extra, { recursive: true, force: true })
    }
  })

  it('places nothing under read-only: nothing there is writable', async () => {
    box = await harness(workspace)
    const result = await box.run('echo x > .mcp.json', { mode: 'read-only' })
    expect(result.stderr).toMatch(/Read-only file system/)
    expect(readdirSync(workspace)).toEqual([])
  })

  it('refuses to confine where an entry is reached through a symbolic link in the workspace', async () => {
    const elsewhere = join(workspace, 'shared-settings')
    mkdirSync(elsewhere)
    symlinkSync(elsewhere, join(workspace, '.vscode'))
    box = await harness(workspace)
    await expect(box.run('true')).rejects.toMatchObject({
      code: 'PROTECTED_PATH_SYMLINK',
      message: expect.stringContaining(`${join(workspace, '.vscode')} is a symbolic link (-> ${elsewhere})`),
    })
  })
})

/** `git status` on the host, as the operator runs it after the agent, without conch's GIT_CONFIG_* entries. */
const hostGitStatus = (folder: string) => execFileSync('git', ['-C', folder, 'status', '--short'], { env: { PATH: process.env['PATH'] }, stdio: 'pipe' })

/** A config whose fsmonitor touches `marker`: what host git would run. */
const evilConfig = (marker: string) => `printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch ${marker}; false"\\n'`

describe.runIf(hasBwrap)("the host's git after a confined process wrote the repository", () => {
  it('runs no program named by a config a .git/commondir leads to, and git works on the host meanwhile', async () => {
    execFileSync('git', ['init', '-q', workspace])
    box = await harness(workspace)
    const marker = join(workspace, 'commondir-ran')
    const result = await box.run(
      `cd .git && mkdir -p x && ln -s ../objects x/objects && ln -s ../refs x/refs && ${evilConfig(marker)} > x/config && echo x > commondir; cd ..
       cp -r .git evil; ${evilConfig(marker)} > evil/config; echo ../evil > .git/commondir; rm -f .git/commondir
       ${evilConfig(marker)} > .git/config.worktree; echo done`,
    )
    expect(result.stdout).toBe('done\n')
    expect(result.stderr).toMatch(/\.git\/commondir: Read-only file system/)
    // The held commondir names the repository's own folder: the host's git runs as without one.
    expect(hostGitStatus(workspace).toString()).toContain('evil/')
    const worktreeConfig = spawnSync('git', ['-C', workspace, '-c', 'extensions.worktreeConfig=true', 'status'], { env: { PATH: process.env['PATH'] }, encoding: 'utf8' })
    expect([worktreeConfig.status, worktreeConfig.stderr]).toEqual([0, ''])
    expect(existsSync(marker)).toBe(false)
    await box.dispose()
    box = undefined
    expect(existsSync(join(workspace, '.git/commondir'))).toBe(false)
  })

  it('runs no hook or config that core.hooksPath and include.path name inside the workspace (a hook manager\'s)', async () => {
    execFileSync('git', ['init', '-q', workspace])
    mkdirSync(join(workspace, 'hooks'))
    writeFileSync(join(workspace, 'hooks', 'pre-commit'), '#!/bin/sh\nexit 0\n', { mode: 0o755 })
    execFileSync('git', ['-C', workspace, 'config', 'core.hooksPath', 'hooks'])
    execFileSync('git', ['-C', workspace, 'config', 'include.path', '../project.gitconfig'])
    box = await harness(workspace)
    const marker = join(workspace, 'hook-ran')
    const result = await box.run(
      `printf '#!/bin/sh\\ntouch ${marker}\\n' > hooks/pre-commit 2>/dev/null && echo "wrote the hook"
       printf '#!/bin/sh\\ntouch ${marker}\\n' > hooks/post-commit 2>/dev/null && echo "added a hook"
       ${evilConfig(marker)} > project.gitconfig 2>/dev/null && echo "wrote the included config"
       echo done`,
    )
    expect(result.stdout).toBe('done\n')
    // The included file was missing: an empty file holds it, which the host's git reads as an empty config.
    expect(readFileSync(join(workspace, 'project.gitconfig'), 'utf8')).toBe('')
    execFileSync('git', ['-C', workspace, 'commit', '-q', '--allow-empty', '-m', 'host'], { env: { PATH: process.env['PATH'], HOME: tmpdir(), GIT_AUTHOR_NAME: 'h', GIT_AUTHOR_EMAIL: 'h@h', GIT_COMMITTER_NAME: 'h', GIT_COMMITTER_EMAIL: 'h@h' } })
    expect(existsSync(marker)).toBe(false)
    await box.dispose()
    box = undefined
    expect(existsSync(join(workspace, 'project.gitconfig'))).toBe(false)
  })

  it("runs no program named by a config a rewritten .git file (a linked worktree's) leads to", async () => {
    const main = realpathSync(mkdtempSync(join(tmpdir(), 'conch-deny-main-')))
    try {
      execFileSync('git', ['init', '-q', main])
      execFileSync('git', ['-C', main, '-c', 'user.name=h', '-c', 'user.email=h@h', 'commit', '-q', '--allow-empty', '-m', 'host'])
      rmSync(workspace, { recursive: true, force: true })
      execFileSync('git', ['-C', main, 'worktree', 'add', '-q', workspace])
      const gitfile = readFileSync(join(workspace, '.git'), 'utf8')
      box = await harness(workspace)
      const marker = join(workspace, 'gitfile-ran')
      const result = await box.run(
        `git init -q .g; ${evilConfig(marker)} > .g/config; echo 'gitdir: .g' > .git; rm -f .git; mv .g .git; echo done`,
      )
      expect(result.stdout).toBe('done\n')
      expect(readFileSync(join(workspace, '.git'), 'utf8')).toBe(gitfile)
      hostGitStatus(workspace)
      expect(existsSync(marker)).toBe(false)
    } finally {
      rmSync(main, { recursive: true, force: true })
    }
  })

  // `git status` runs git in each populated gitlink of the index, and that git reads the nested
  // repository's own config; the list is matched at the writable paths' tops only.
  it.fails("runs no program named by a nested repository's config that the index lists as a gitlink", async () => {
    execFileSync('git', ['init', '-q', workspace])
    box = await harness(workspace)
    const marker = join(workspace, 'gitlink-ran')
    const result = await box.run(
      `git init -q sub && git -C sub -c user.name=a -c user.email=a@a commit -q --allow-empty -m s && git -C sub config core.fsmonitor 'touch ${marker}; false' && git update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub" && echo planted`,
    )
    expect(result.stdout).toBe('planted\n')
    hostGitStatus(workspace)
    expect(existsSync(marker)).toBe(false)
  })
})

/** An agent whose `end()` runs what the sandbox registered, as an Agent's disposal does. */
function agentOf(key: string): SandboxAgent & { end(): Promise<void> } {
  const cleanups: Array<() => void | Promise<void>> = []
  return {
    key,
    owner: { onDispose: (cleanup) => (cleanups.push(cleanup), () => cleanups.splice(cleanups.indexOf(cleanup), 1)) },
    async end() {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
    },
  }
}

describe.runIf(hasBwrap && process.getuid?.() === 0)('a workspace with no .git (bubblewrap, as root)', () => {
  const agent = agentOf('session-held')
  const stranger = agentOf('session-held-other')
  afterEach(async () => {
    await agent.end()
    await stranger.end()
  })

  it("keeps the hooks and config an agent plants in .git out of the repository the host makes there later", async () => {
    const markers = realpathSync(mkdtempSync(join(tmpdir(), 'conch-held-markers-')))
    try {
      box = await harness(workspace)
      const planted = await box.run(
        `mkdir -p .git/hooks && printf '#!/bin/sh\necho HOOK-RAN-ON-HOST; touch ${join(markers, 'hook')}\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit &&
         printf '[core]\n\tfsmonitor = touch ${join(markers, 'fsmonitor')}\n' > .git/config && echo planted`,
        { agent },
      )
      expect(planted.stdout).toBe('planted\n')
      await agent.end()
      await box.dispose()
      box = undefined
      // The person on the host makes a repository there (git init reuses a .git it finds) and commits.
      const env = { PATH: process.env['PATH'], HOME: markers }
      execFileSync('git', ['init', '-q', workspace], { env })
      execFileSync('git', ['-C', workspace, 'status', '--short'], { env })
      const commit = execFileSync('git', ['-C', workspace, '-c', 'user.name=h', '-c', 'user.email=h@h', 'commit', '-q', '--allow-empty', '-m', 'host'], { env, stdio: 'pipe' })
      expect(commit.toString()).not.toContain('HOOK-RAN-ON-HOST')
      expect(readdirSync(markers)).toEqual([])
      expect(existsSync(join(workspace, '.git', 'hooks', 'pre-commit'))).toBe(false)
    } finally {
      rmSync(markers, { recursive: true, force: true })
    }
  })

  it("gives the agent one .git of its own for all its processes, none to another agent, and an empty placeholder on the host removed at its end", async () => {
    box = await harness(workspace)
    const inside = await box.run('git init -q . && git -c user.name=a -c user.email=a@a commit -q --allow-empty -m inside && echo hook > .git/hooks/pre-commit && git log --format=%s', { agent })
    expect(inside.stdout).toBe('inside\n')
    const sibling = await box.run('cat .git/hooks/pre-commit; git log --format=%s', { agent })
    expect(sibling.stdout).toBe('hook\ninside\n')
    expect((await box.run('ls -A .git; echo "listed=$?"', { agent: stranger })).stdout).toBe('listed=0\n')
    expect(readdirSync(join(workspace, '.git'))).toEqual([])
    await agent.end()
    await stranger.end()
    expect(existsSync(join(workspace, '.git'))).toBe(false)
    await box.dispose()
    box = undefined
    expect(readdirSync(workspace)).toEqual([])
  })
})

describe('the denyWrite config', () => {
  it('defaults to the list, and refuses an entry outside the workspace, naming it', () => {
    expect(Config.parse({}).denyWrite).toEqual(DEFAULT_DENY_WRITE)
    expect(() => Config.parse({ denyWrite: ['.vscode/', '../x'] })).toThrow(/must be a path relative to the workspace, inside it/)
    expect(() => Config.parse({ denyWrite: ['/etc/x'] })).toThrow(/denyWrite/)
  })
})

describe('deny-write placeholders', () => {
  it('left by a conch that was killed are removed by the next one to stop, through the ledger', () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-placeholders-')))
    const runtime = realpathSync(mkdtempSync(join(tmpdir(), 'conch-ledger-')))
    try {
      const ledger = folderLedger(() => join(runtime, 'placeholders'))
      const paths = [join(root, '.vscode'), join(root, '.idea'), join(root, '.git', 'hooks')]
      expect(placeholders({ ledger, mounted: () => new Set() }).hold(paths, [root])).toEqual([join(root, '.git')])
      expect(readdirSync(root).sort()).toEqual(['.git', '.idea', '.vscode'])
      expect(statSync(join(runtime, 'placeholders')).mode & 0o777).toBe(0o700)
      // Another conch finds the held .git through the ledger: it holds it too, and makes nothing in it.
      expect(placeholders({ ledger, mounted: () => new Set() }).hold(paths, [root])).toEqual([join(root, '.git')])
      expect(readdirSync(join(root, '.git'))).toEqual([])
      // While the process that made them runs, another one leaves them to it.
      expect(placeholders({ ledger, mounted: () => new Set() }).release()).toEqual([])
      expect(readdirSync(root).sort()).toEqual(['.git', '.idea', '.vscode'])
      // That process is gone without releasing; a user's own empty .idea took the place of one placeholder.
      rmdirSync(join(root, '.idea'))
      mkdirSync(join(root, '.idea'))
      expect(placeholders({ ledger, mounted: () => new Set(), ended: () => true }).release()).toEqual([])
      expect(readdirSync(root)).toEqual(['.idea'])
      expect(ledger.entries()).toEqual([])
    } finally {
      rmSync(root, { recursive: true, force: true })
      rmSync(runtime, { recursive: true, force: true })
    }
  })

  it('whose workspace is gone are forgotten, and keep no other from being removed', () => {
    const [gone, kept, runtime] = ['conch-placeholders-', 'conch-placeholders-', 'conch-ledger-'].map((prefix) => realpathSync(mkdtempSync(join(tmpdir(), prefix))))
    try {
      const ledger = folderLedger(() => join(runtime!, 'placeholders'))
      // A conch that was killed left placeholders in a workspace since removed, and in another one.
      placeholders({ ledger, mounted: () => new Set() }).hold([join(gone!, '.vscode'), join(kept!, '.vscode')], [gone!, kept!])
      rmSync(gone!, { recursive: true, force: true })
      expect(placeholders({ ledger, mounted: () => new Set(), ended: () => true }).release()).toEqual([])
      expect(readdirSync(kept!)).toEqual([])
      expect(ledger.entries()).toEqual([])
    } finally {
      for (const folder of [gone, kept, runtime]) rmSync(folder!, { recursive: true, force: true })
    }
  })

  it('are not made, and confinement goes on, in a folder this user cannot write', () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-placeholders-')))
    try {
      const refuse = (code: string) => () => {
        throw Object.assign(new Error(`mkdir: ${code}`), { code })
      }
      for (const code of ['EACCES', 'EROFS', 'EPERM']) placeholders({ fs: { ...nodeBeneathFs, mkdir: refuse(code) } }).hold([join(root, '.vscode')], [root])
      expect(readdirSync(root)).toEqual([])
      expect(() => placeholders({ fs: { ...nodeBeneathFs, mkdir: refuse('ENOSPC') } }).hold([join(root, '.vscode')], [root])).toThrow(/ENOSPC/)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it('are removed only when empty, unchanged and mounted nowhere', () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-placeholders-')))
    try {
      let mounted = new Set([join(root, '.vscode')])
      const held = placeholders({ mounted: () => mounted })
      const paths = [join(root, '.vscode'), join(root, '.idea'), join(root, '.claude'), join(root, 'missing', '.codex')]
      // An entry whose folder is missing too holds that folder, empty, again on the next confinement.
      expect(held.hold(paths, [root])).toEqual([join(root, 'missing')])
      expect(held.hold(paths, [root])).toEqual([join(root, 'missing')])
      expect(readdirSync(root).sort()).toEqual(['.claude', '.idea', '.vscode', 'missing'])
      expect(readdirSync(join(root, 'missing'))).toEqual([])
      expect(held.release([join(root, 'missing')])).toEqual([])
      expect(readdirSync(root).sort()).toEqual(['.claude', '.idea', '.vscode'])
      writeFileSync(join(root, '.claude', 'mine.json'), '{}')
      expect(held.release()).toEqual([join(root, '.vscode')])
      expect(readdirSync(root).sort()).toEqual(['.claude', '.vscode'])
      mounted = new Set()
      expect(held.release()).toEqual([])
      expect(readdirSync(root)).toEqual(['.claude'])
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
