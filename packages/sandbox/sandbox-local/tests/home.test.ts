/**
 * The private home and the masked credentials, for real: a temporary folder plays the user's
 * home on the host side (`homeDir`, and `HOME` in the confined environment), so nothing here
 * touches the real one.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { scrubbedEnv } from '@conch/subprocess'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { harness, hasBwrap, readOnly, type Harness } from './harness.ts'

let workspace: string
let home: string
let box: Harness | undefined

const SECRET = 'ssh-private-key-material'
const hasVim = spawnSync('vim', ['--version'], { stdio: 'ignore' }).status === 0

beforeEach(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-home-ws-')))
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-home-')))
  mkdirSync(join(home, '.ssh'))
  writeFileSync(join(home, '.ssh', 'id_rsa'), SECRET, { mode: 0o600 })
  writeFileSync(join(home, '.netrc'), 'machine example.com login u password hunter2\n')
  writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Conch Test\n')
  mkdirSync(join(home, '.config', 'git'), { recursive: true })
  writeFileSync(join(home, '.config', 'git', 'ignore'), '*.swp\n')
  // A dotfile that leads into a credential folder must not bring it back.
  symlinkSync(join(home, '.ssh', 'id_rsa'), join(home, '.inputrc'))
})

afterEach(async () => {
  const errors = box?.logs.filter((message) => message.type === 'error').map((message) => message.args) ?? []
  await box?.dispose()
  box = undefined
  rmSync(workspace, { recursive: true, force: true })
  rmSync(home, { recursive: true, force: true })
  expect(errors).toEqual([])
})

const env = () => ({ ...scrubbedEnv(process.env), HOME: home })
/** The home's entries on the host, to show that nothing was added. */
const hostEntries = () => readdirSync(home).sort()

describe.runIf(hasBwrap).each(['read-only', 'workspace-write'] as const)('the home under %s', (mode) => {
  it('is private and writable, with the configuration dotfiles read-only and nothing written through to the real home', async () => {
    box = await harness(workspace, { homeDir: home })
    const before = hostEntries()
    const result = await box.run(
      `echo scratch > ~/notes && cat ~/notes
       git config --global user.name
       cat ~/.config/git/ignore
       echo '[x]' >> ~/.gitconfig`,
      { mode },
      env(),
    )
    expect(result.stdout).toBe('scratch\nConch Test\n*.swp\n')
    expect(result.stderr).toMatch(readOnly(`${home}/.gitconfig`))
    expect(hostEntries()).toEqual(before)
    expect(readFileSync(join(home, '.gitconfig'), 'utf8')).toBe('[user]\n\tname = Conch Test\n')
  })

  // vim is not part of a minimal system; where it is missing there is no vim to test.
  it.runIf(hasVim)('lets vim write its viminfo on exit (no E138), and the real home gets none', async () => {
    box = await harness(workspace, { homeDir: home })
    const result = await box.run(`vim -N -u NONE -i ~/.viminfo -es -c 'let g:x = 1' -c 'wviminfo' -c 'qa!' </dev/null; echo "vim=$?"; test -s ~/.viminfo && echo viminfo-written`, { mode }, env())
    expect(result.stdout).toBe('vim=0\nviminfo-written\n')
    expect(result.stdout + result.stderr).not.toContain('E138')
    expect(existsSync(join(home, '.viminfo'))).toBe(false)
  })

  it('masks the credential files and folders that exist: a planted ~/.ssh/id_rsa cannot be read', async () => {
    box = await harness(workspace, { homeDir: home, homeReadOnly: ['.ssh', '.netrc', '.inputrc', '.gitconfig'] })
    const result = await box.run(
      `cat ~/.ssh/id_rsa; echo "ssh=$(ls -A ~/.ssh | wc -l)"; echo "netrc=$(wc -c < ~/.netrc)"; cat ~/.inputrc 2>&1 | head -c 100; echo; git config --global user.name`,
      { mode },
      env(),
    )
    expect(result.stdout + result.stderr).not.toContain(SECRET)
    expect(result.stdout + result.stderr).not.toContain('hunter2')
    expect(result.stderr).toMatch(/cat: .*\.ssh\/id_rsa: No such file or directory/)
    expect(result.stdout).toContain('ssh=0\n')
    expect(result.stdout).toContain('netrc=0\n')
    expect(result.stdout).toContain('Conch Test\n')
  })
})

describe.runIf(hasBwrap)('credentials when the home is the workspace', () => {
  it('stay masked although the workspace is writable and holds them', async () => {
    box = await harness(home, { homeDir: home })
    const result = await box.run(`cat ~/.ssh/id_rsa; ls -A ~/.ssh | wc -l; cat .ssh/id_rsa; echo stolen > ~/.ssh/id_rsa.pub; echo "written=$?"`, { workspaceRoot: home }, env())
    expect(result.stdout + result.stderr).not.toContain(SECRET)
    expect(result.stdout).toMatch(/^0$/m)
    expect(result.stdout).toMatch(/^written=1$/m)
    expect(readdirSync(join(home, '.ssh'))).toEqual(['id_rsa'])
  })

  it('can be made readable on purpose by leaving them out of denyRead', async () => {
    box = await harness(home, { homeDir: home, denyRead: [] })
    const result = await box.run(`cat ~/.ssh/id_rsa`, { workspaceRoot: home }, env())
    expect(result.stdout).toBe(SECRET)
  })
})

// jshell comes with a JDK, which not every machine has.
describe.runIf(hasBwrap && existsSync('/usr/bin/jshell'))('a program that writes preferences into the home on exit', () => {
  it('jshell exits cleanly from /exit, without preference-lock errors, and writes nothing to the real home', async () => {
    box = await harness(workspace, { homeDir: home })
    const before = hostEntries()
    // Java takes its home from the password database, not $HOME: point both JVMs at the stand-in home.
    const result = await box.run(`printf '/exit\\n' | jshell -q; echo "jshell=$?"; test -d ~/.java && echo prefs-private`, {}, {
      ...env(),
      JAVA_TOOL_OPTIONS: `-Duser.home=${home}`,
    })
    expect(result.stdout, result.stderr).toContain('jshell=0')
    expect(result.stdout).toContain('prefs-private')
    expect(result.stderr).not.toMatch(/lock|Couldn't|Could not|Exception/i)
    expect(hostEntries()).toEqual(before)
  }, 120_000)
})
