/**
 * Confinement as a real `conch run` gives it. The boot keeps the composition and conch's
 * installation read-only in every sandbox: what it protects, and a run whose confined terminal
 * tries to rewrite its own cordis.yml into danger-full-access — after which the next run is
 * still confined. Then, through the same terminals: the kernel attacks under both confined
 * modes, and the private home with its masked credentials.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { compositionYaml, terminalComposition, writeComposition, type SandboxMode, type TerminalCompositionOptions } from '@conch/test-support/composition'
import { readComposition } from '../src/compose.ts'
import { compositionPaths, installationPaths, protectedPathsOf } from '../src/protect.ts'
import { CLI_ROOT, jsonLines, runConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

// The real runs need bubblewrap (CI installs it); the kernel attacks need root, as CI runs.
const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

describe('what the boot protects', () => {
  it('every file of the overlay chain and every plugin module loaded from a path', () => {
    ws.write('base.yml', "- id: sessions\n  name: '@conch/session'\n- id: echo\n  name: ./echo-tool.ts\n")
    mkdirSync(join(ws.dir, 'over'))
    ws.write('over/top.yml', "base: ../base.yml\npatches:\n  - insert: { id: local, name: ./local.ts }\n")
    const composition = readComposition(join(ws.dir, 'over', 'top.yml'))
    const paths = compositionPaths(composition)
    expect(paths.slice(0, 2)).toEqual([join(ws.dir, 'over', 'top.yml'), join(ws.dir, 'base.yml')])
    expect(paths).toEqual(expect.arrayContaining([join(ws.dir, 'echo-tool.ts'), join(ws.dir, 'over', 'local.ts')]))
    // A package plugin's module (inside the installation) is a file too.
    expect(paths.some((path) => path.endsWith(join('core', 'session', 'src', 'index.ts')))).toBe(true)
  })

  it('the whole checkout of the pnpm workspace conch runs from, files not yet written included', () => {
    const root = realpathSync(join(CLI_ROOT, '..', '..'))
    const paths = installationPaths()
    expect(paths).toEqual([process.execPath, root])
    expect(protectedPathsOf(readComposition(ws.write('c.yml', '[]\n')))).toEqual(expect.arrayContaining([join(ws.dir, 'c.yml'), root]))
  })

  it('installed as a dependency, the outermost node_modules and the manifest beside it', () => {
    const project = realpathSync(mkdtempSync(join(tmpdir(), 'conch-installed-')))
    try {
      const cli = join(project, 'node_modules', '.pnpm', '@conch+cli@0.1.0', 'node_modules', '@conch', 'cli', 'src')
      mkdirSync(cli, { recursive: true })
      writeFileSync(join(project, 'package.json'), '{}\n')
      writeFileSync(join(project, 'pnpm-workspace.yaml'), 'packages: []\n')
      mkdirSync(join(project, 'packages'))
      expect(installationPaths(cli)).toEqual([process.execPath, join(project, 'node_modules'), join(project, 'package.json')])
    } finally {
      rmSync(project, { recursive: true, force: true })
    }
  })
})

/** The terminal composition of a workspace under `mode` (default workspace-write), its model script included. */
const composition = (script: string, options: Partial<TerminalCompositionOptions> = {}) => terminalComposition({ script, mode: 'workspace-write', ...options })

const send = (text: string) => step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text } }])

/** Runs `conch run` on the workspace's cordis.yml, with `lines` as the model's script. */
async function conchRun(lines: string[], env?: NodeJS.ProcessEnv) {
  ws.write('script.jsonl', [step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]), ...lines, step('Done.')].join('\n'))
  const run = await runConch(['run', '--config', join(ws.dir, 'cordis.yml'), '--output', 'stream-json', 'task'], env ? { cwd: ws.dir, env } : { cwd: ws.dir })
  expect(run.stderr).toBe('')
  expect(run.code).toBe(0)
  return jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result').map((line) => String(line['text']))
}

describe.runIf(hasBwrap)('a confined terminal rewriting its own composition', () => {
  it('fails (the file is a read-only mount), and the next run is still confined', async () => {
    writeComposition(ws.dir, composition(join(ws.dir, 'script.jsonl')))
    const results = await conchRun([
      send(`sed -i 's/workspace-write/danger-full-access/' cordis.yml; echo "sed=$?"`),
      send(`echo '    mode: danger-full-access' >> cordis.yml; echo "append=$?"`),
      send(`grep -c danger-full-access cordis.yml`),
    ])
    const text = results.join('\n')
    expect(text).toMatch(/sed: cannot rename \.\/sed\w+: Device or resource busy/)
    expect(text).toMatch(/^sed=[1-9]$/m)
    expect(text).toMatch(/cordis\.yml: Read-only file system/)
    expect(text).toMatch(/^append=1$/m)
    expect(text).toMatch(/^0$/m)
    const written = readFileSync(join(ws.dir, 'cordis.yml'), 'utf8')
    expect(written).toContain('mode: workspace-write')
    expect(written).not.toContain('danger-full-access')

    // The next run boots the same file: its terminal is still confined.
    const next = await conchRun([send(`touch /etc/conch-escape-${process.pid}; echo "touch=$?"`)])
    expect(next.join('\n')).toMatch(/Read-only file system/)
    expect(next.join('\n')).toMatch(/^touch=1$/m)
  })
})

describe.runIf(hasBwrap)('a confined terminal whose workspace is conch\'s own checkout', () => {
  it('cannot plant what a launcher runs next (.npmrc, .pnpmfile.cjs), nor git hooks or settings', async () => {
    const root = realpathSync(join(CLI_ROOT, '..', '..'))
    // The files git reads: under `.git/` in a clone, in the common folder in a worktree (where `.git` is a file).
    const gitPath = (name: string) => execFileSync('git', ['rev-parse', '--path-format=absolute', '--git-path', name], { cwd: root, encoding: 'utf8' }).trim()
    const planted = [join(root, '.npmrc'), join(root, '.pnpmfile.cjs'), gitPath('hooks/pre-commit')].filter((path) => !existsSync(path))
    const configPath = gitPath('config')
    const config = readFileSync(configPath, 'utf8')
    writeComposition(ws.dir, composition(join(ws.dir, 'script.jsonl')))
    ws.write('script.jsonl', [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell', cwd: root } }]),
      send(`printf 'node-options=--require=./evil.cjs\\n' > .npmrc; echo "npmrc=$?"; echo 'x' > .pnpmfile.cjs; echo "pnpmfile=$?"; echo 'touch /tmp/x' > .git/hooks/pre-commit; echo "hook=$?"; git config core.fsmonitor 'touch /tmp/x'; echo "git=$?"`),
      step('Done.'),
    ].join('\n'))
    try {
      const run = await runConch(['run', '--config', join(ws.dir, 'cordis.yml'), '--cwd', root, '--output', 'stream-json', 'task'], { cwd: root })
      expect(run.code, run.stderr).toBe(0)
      const text = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result').map((line) => String(line['text'])).join('\n')
      expect(text).toMatch(/Read-only file system/)
      for (const name of ['npmrc', 'pnpmfile', 'hook', 'git']) expect(text).toMatch(new RegExp(`^${name}=[1-9]\\d*$`, 'm'))
      for (const path of planted) expect(existsSync(path), path).toBe(false)
      expect(readFileSync(configPath, 'utf8')).toBe(config)
    } finally {
      for (const path of planted) rmSync(path, { force: true })
    }
  })
})

describe.runIf(hasBwrap && process.getuid?.() === 0).each(['read-only', 'workspace-write'])('a %s terminal of a real conch run, as root', (mode) => {
  it('cannot write kernel settings, make namespaces, see the filter’s descriptor or reach the network', async () => {
    writeComposition(ws.dir, composition(join(ws.dir, 'script.jsonl'), { mode: mode as SandboxMode }))
    const before = readFileSync('/proc/sys/kernel/core_pattern', 'utf8')
    const results = await conchRun([
      send(`v=$(cat /proc/sys/kernel/core_pattern); printf '%s\\n' "$v" > /proc/sys/kernel/core_pattern; echo "core=$?"`),
      send(`printf '%s' "$(hostname)" > /proc/sys/kernel/hostname; echo "hostname=$?"`),
      send(`unshare -r true; echo "unshare=$?"`),
      send(`[ -e /proc/self/fd/9 ] && echo fd9-open || echo fd9-closed; echo "interfaces=$(tail -n +3 /proc/net/dev | wc -l)"`),
    ])
    const text = results.join('\n')
    expect(text).toMatch(/\/proc\/sys\/kernel\/core_pattern: Read-only file system/)
    expect(text).toMatch(/^core=1$/m)
    expect(text).toMatch(/\/proc\/sys\/kernel\/hostname: Read-only file system/)
    expect(text).toMatch(/^unshare: unshare failed: Operation not permitted$/m)
    expect(text).toMatch(/^unshare=1$/m)
    expect(text).toMatch(/^fd9-closed$/m)
    expect(text).toMatch(/^interfaces=1$/m)
    expect(readFileSync('/proc/sys/kernel/core_pattern', 'utf8')).toBe(before)
  })
})

describe.runIf(hasBwrap)('the home of a real conch run’s terminal', () => {
  it('is private: a planted ~/.ssh/id_rsa cannot be read, dotfiles are read-only, and the home on the host gets nothing', async () => {
    // A stand-in home on the host side, named by HOME and by the provider's homeDir.
    const home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-cli-home-')))
    try {
      mkdirSync(join(home, '.ssh'))
      writeFileSync(join(home, '.ssh', 'id_rsa'), 'PRIVATE-KEY-MATERIAL', { mode: 0o600 })
      writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Conch Cli\n')
      const yml = compositionYaml(composition(join(ws.dir, 'script.jsonl'), { sandboxLocal: { homeDir: home } }))
      expect(yml).toContain('homeDir')
      ws.write('cordis.yml', yml)
      const results = await conchRun(
        [
          send(`cat ~/.ssh/id_rsa; echo "ssh=$?"`),
          send(`echo scratch > ~/.notes && cat ~/.notes; echo x >> ~/.gitconfig; echo "gitconfig=$?"`),
          send(`git config --global user.name`),
        ],
        { HOME: home },
      )
      const text = results.join('\n')
      expect(text).not.toContain('PRIVATE-KEY-MATERIAL')
      expect(text).toMatch(/^ssh=1$/m)
      expect(text).toMatch(/^scratch$/m)
      expect(text).toMatch(/\.gitconfig: Read-only file system/)
      expect(text).toMatch(/^gitconfig=1$/m)
      expect(text).toMatch(/^Conch Cli$/m)
      expect(readdirSync(home).sort()).toEqual(['.gitconfig', '.ssh'])
    } finally {
      rmSync(home, { recursive: true, force: true })
    }
  })
})

