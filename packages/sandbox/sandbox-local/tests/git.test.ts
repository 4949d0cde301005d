/**
 * A hostile repository, for real: its `.git/config` names programs git runs on its own (a hooks
 * folder, an fsmonitor command, a credential helper, an ssh command) and it carries a
 * `pre-commit` hook; a confined root shell runs the git commands that would start each one.
 */
import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { scrubbedEnv } from '@conch/subprocess'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { harness, hasBwrap, quote, type Harness } from './harness.ts'

let workspace: string
let markers: string
let box: Harness | undefined

const git = (...args: string[]) => execFileSync('git', ['-C', workspace, ...args], { stdio: 'pipe' })
/** A program that leaves `name` in the markers folder when it runs. */
const planter = (name: string) => `#!/bin/sh\ntouch ${quote(join(markers, name))}\n`

beforeEach(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-git-')))
  markers = join(workspace, 'markers')
  mkdirSync(markers)
  git('init', '-q')
  git('config', 'user.name', 'Repo')
  git('config', 'user.email', 'repo@example.invalid')
  writeFileSync(join(workspace, 'a.txt'), 'a\n')
  git('add', 'a.txt')
  git('commit', '-q', '-m', 'first')
  // The hostile part: a default-folder hook, a hooks folder of its own, and each command key.
  writeFileSync(join(workspace, '.git', 'hooks', 'pre-commit'), planter('hook-default'), { mode: 0o755 })
  mkdirSync(join(workspace, 'evil-hooks'))
  writeFileSync(join(workspace, 'evil-hooks', 'pre-commit'), planter('hook-path'), { mode: 0o755 })
  writeFileSync(join(workspace, 'evil-fsmonitor'), planter('fsmonitor'), { mode: 0o755 })
  chmodSync(join(workspace, 'evil-fsmonitor'), 0o755)
  git('config', 'core.hooksPath', join(workspace, 'evil-hooks'))
  git('config', 'core.fsmonitor', join(workspace, 'evil-fsmonitor'))
  git('config', 'credential.helper', `!touch ${quote(join(markers, 'credential-helper'))}; true`)
  git('config', 'core.sshCommand', `touch ${quote(join(markers, 'ssh-command'))}; exit 1 #`)
  git('remote', 'add', 'origin', 'ssh://git@example.invalid/repo.git')
})

afterEach(async () => {
  await box?.dispose()
  box = undefined
  rmSync(workspace, { recursive: true, force: true })
})

const ATTACK = `
  git status --short >/dev/null; echo "status=$?"
  git commit -q --allow-empty -m second; echo "commit=$?"
  printf 'protocol=https\\nhost=example.invalid\\n\\n' | git credential fill; echo "credential=$?"
  git fetch -q origin; echo "fetch=$?"
`

describe.runIf(hasBwrap)('git in a confined terminal', () => {
  it("runs none of a hostile repository's hooks, fsmonitor, credential helper or ssh command", async () => {
    box = await harness(workspace)
    const result = await box.run(ATTACK)
    expect(result.stdout).toMatch(/^status=0$/m)
    expect(result.stdout).toMatch(/^commit=0$/m)
    expect(result.stdout).toMatch(/^credential=[1-9]\d*$/m)
    expect(result.stderr).toMatch(/terminal prompts disabled/)
    expect(result.stdout).toMatch(/^fetch=[1-9]\d*$/m)
    expect(result.stderr).toMatch(/^git over ssh is disabled in the sandbox \(core\.sshCommand\); use an https remote$/m)
    expect(readdirSync(markers)).toEqual([])
    expect(git('log', '--format=%s').toString()).toBe('second\nfirst\n')
  })

  it('runs no hook from the repository\'s own .git/hooks', async () => {
    git('config', '--unset', 'core.hooksPath')
    box = await harness(workspace)
    const result = await box.run('git commit -q --allow-empty -m second; echo "commit=$?"')
    expect(result.stdout).toMatch(/^commit=0$/m)
    expect(readdirSync(markers)).toEqual([])
  })

  it("keeps a caller's own GIT_CONFIG entries, and they cannot bring the hooks back", async () => {
    box = await harness(workspace)
    const env = {
      ...scrubbedEnv(process.env),
      GIT_CONFIG_COUNT: '3',
      GIT_CONFIG_KEY_0: 'user.name',
      GIT_CONFIG_VALUE_0: 'Agent',
      GIT_CONFIG_KEY_1: 'core.hooksPath',
      GIT_CONFIG_VALUE_1: join(workspace, 'evil-hooks'),
      GIT_CONFIG_KEY_2: 'core.fsmonitor',
      GIT_CONFIG_VALUE_2: join(workspace, 'evil-fsmonitor'),
    }
    const result = await box.run(`git config user.name; ${ATTACK}`, {}, env)
    expect(result.stdout).toMatch(/^Agent$/m)
    expect(result.stdout).toMatch(/^commit=0$/m)
    expect(readdirSync(markers)).toEqual([])
    expect(git('log', '-1', '--format=%an').toString()).toBe('Agent\n')
  })

  it('the planted programs do run when git runs unconfined (the attack is real)', () => {
    execFileSync('bash', ['-c', ATTACK], { cwd: workspace, stdio: 'pipe', env: { ...scrubbedEnv(process.env), GIT_TERMINAL_PROMPT: '0' } })
    expect(readdirSync(markers).sort()).toEqual(['credential-helper', 'fsmonitor', 'hook-path', 'ssh-command'])
    expect(existsSync(join(markers, 'hook-default'))).toBe(false) // core.hooksPath moved the hooks away from .git/hooks
  })
})
