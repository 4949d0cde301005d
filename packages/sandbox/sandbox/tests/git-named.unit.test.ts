/**
 * The paths git config names for hooks and more config, which the deny-write list holds beside
 * its entries (git-config(1) syntax, read from files in a temporary repository).
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { denyWritePaths, gitConfigPaths, gitNamedPaths, placeholderContent } from '../src/index.ts'

const made: string[] = []
const folder = () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-git-named-')))
  made.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('gitConfigPaths', () => {
  it('reads core.hooksPath, include.path and includeIf paths whatever their case, quoting and comments', () => {
    const text = [
      '[core]',
      '\trepositoryformatversion = 0',
      '\thooksPath = .husky/_ # husky',
      '[include]',
      '\tpath = "../shared config.gitconfig"',
      '[includeIf "gitdir:~/work/"]',
      '\tPATH = ~/work.gitconfig ; theirs',
      '[Core] HOOKSPATH = "tools/\\"hooks\\""',
      '[remote "origin"]',
      '\tpath = not-an-include',
    ].join('\n')
    expect(gitConfigPaths(text)).toEqual({ hooks: ['.husky/_', 'tools/"hooks"'], includes: ['../shared config.gitconfig', '~/work.gitconfig'] })
  })
})

describe('gitNamedPaths', () => {
  it("names the hooks folder and included files inside the workspace, relative to the working tree and to .git, not those outside", () => {
    const root = folder()
    const home = folder()
    mkdirSync(join(root, '.git'))
    writeFileSync(join(root, '.git', 'config'), '[core]\n\thooksPath = .hooks\n[include]\n\tpath = ../project.gitconfig\n\tpath = /etc/gitconfig\n')
    writeFileSync(join(home, '.gitconfig'), '[core]\n\thooksPath = ci/hooks\n[include]\n\tpath = ~/elsewhere\n')
    expect(gitNamedPaths(root, home).sort()).toEqual([join(root, '.hooks'), join(root, 'ci/hooks'), join(root, 'project.gitconfig')])
  })

  it('follows included files, as deep as git does: the hooks folder and the includes they name are held too', () => {
    const root = folder()
    const home = folder()
    mkdirSync(join(root, '.git'))
    mkdirSync(join(root, 'team'))
    writeFileSync(join(root, '.git', 'config'), '[include]\n\tpath = ../team/team.gitconfig\n')
    writeFileSync(join(root, 'team', 'team.gitconfig'), '[core]\n\thooksPath = tools/hooks\n[include]\n\tpath = local.gitconfig\n')
    expect(gitNamedPaths(root, home).sort()).toEqual([join(root, 'team/local.gitconfig'), join(root, 'team/team.gitconfig'), join(root, 'tools/hooks')])
    expect(placeholderContent(join(root, 'team/local.gitconfig'))).toBe('')
  })

  it('reads a value continued on the next line as git does', () => {
    expect(gitConfigPaths('[core]\n\thooksPath = .gith\\\nooks2\n').hooks).toEqual(['.githooks2'])
  })

  it('puts them on the deny-write list, an included file held by an empty file where it is missing', () => {
    const root = folder()
    mkdirSync(join(root, '.git'))
    writeFileSync(join(root, '.git', 'config'), '[core]\n\thooksPath = .hooks\n[include]\n\tpath = ../project.gitconfig\n')
    const paths = denyWritePaths({ mode: 'workspace-write', workspaceRoot: root }, { denyWrite: ['.git/config'] })
    expect(paths).toEqual([join(root, '.git/config'), join(root, '.hooks'), join(root, 'project.gitconfig')])
    expect(placeholderContent(join(root, 'project.gitconfig'))).toBe('')
    expect(placeholderContent(join(root, '.hooks'))).toBeUndefined()
  })
})
