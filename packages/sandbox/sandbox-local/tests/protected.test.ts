/**
 * Self-reconfiguration, for real: the composition lies inside the writable workspace (as in the
 * quick start), and a confined root shell tries to rewrite it — in place, by rename (what
 * `sed -i` does), by deleting it, and by renaming the folder that holds it and putting a new one
 * where it was.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { harness, hasBwrap, readOnly, type Harness } from './harness.ts'

let workspace: string
let box: Harness | undefined
const CONFIG = '- id: sandbox-policy\n  name: "@conch/sandbox-policy"\n  config:\n    mode: workspace-write\n'

beforeEach(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-protected-')))
  writeFileSync(join(workspace, 'cordis.yml'), CONFIG)
  mkdirSync(join(workspace, 'examples', 'agent'), { recursive: true })
  writeFileSync(join(workspace, 'examples', 'agent', 'over.yml'), CONFIG)
  mkdirSync(join(workspace, 'plugins'))
  writeFileSync(join(workspace, 'plugins', 'tool.ts'), 'export const apply = () => {}\n')
})

afterEach(async () => {
  const errors = box?.logs.filter((message) => message.type === 'error').map((message) => message.args) ?? []
  await box?.dispose()
  box = undefined
  rmSync(workspace, { recursive: true, force: true })
  expect(errors).toEqual([])
})

/** The workspace's names but the deny-write placeholders (empty dot-folders while the sandbox lives). */
const visible = (folder: string): string[] => readdirSync(folder).filter((name) => !name.startsWith('.')).sort()

async function protectedBox(): Promise<Harness> {
  const created = await harness(workspace)
  created.ctx.sandbox.protect([join(workspace, 'cordis.yml'), join(workspace, 'examples', 'agent', 'over.yml'), join(workspace, 'plugins')])
  return created
}

describe.runIf(hasBwrap)('protected paths inside a writable workspace', () => {
  it('refuse the sed attack on cordis.yml, and the file stays as it was', async () => {
    box = await protectedBox()
    const result = await box.run(`sed -i 's/workspace-write/danger-full-access/' cordis.yml; echo "sed=$?"; echo "- id: x" >> cordis.yml`)
    expect(result.stdout).toMatch(/^sed=[1-9]\d*$/m)
    // sed writes a temporary file and renames it over the original: a mount point cannot be replaced.
    expect(result.stderr).toMatch(/^sed: cannot rename \.\/sed\w+: Device or resource busy$/m)
    expect(result.stderr).toMatch(readOnly('cordis.yml'))
    expect(readFileSync(join(workspace, 'cordis.yml'), 'utf8')).toBe(CONFIG)
    expect(visible(workspace)).toEqual(['cordis.yml', 'examples', 'plugins'])
  })

  it('refuse deleting or replacing the file, and renaming the folders above a nested one', async () => {
    box = await protectedBox()
    const result = await box.run(
      `rm -f cordis.yml; echo "rm=$?"
       echo evil > evil.yml; mv -f evil.yml cordis.yml; echo "mv=$?"
       mv examples examples.old; echo "mv-examples=$?"
       mv examples/agent examples/agent.old; echo "mv-agent=$?"
       echo 'console.log(1)' > plugins/tool.ts; echo "plugin=$?"
       touch plugins/other.ts; echo "plugin-dir=$?"
       echo ok > notes.txt && cat notes.txt`,
    )
    for (const step of ['rm', 'mv', 'mv-examples', 'mv-agent', 'plugin', 'plugin-dir']) expect(result.stdout).toMatch(new RegExp(`^${step}=[1-9]\\d*$`, 'm'))
    expect(result.stdout).toMatch(/^ok$/m)
    expect(readFileSync(join(workspace, 'cordis.yml'), 'utf8')).toBe(CONFIG)
    expect(readFileSync(join(workspace, 'examples', 'agent', 'over.yml'), 'utf8')).toBe(CONFIG)
    expect(readFileSync(join(workspace, 'plugins', 'tool.ts'), 'utf8')).toBe('export const apply = () => {}\n')
    expect(readdirSync(join(workspace, 'plugins'))).toEqual(['tool.ts'])
    expect(readdirSync(join(workspace, 'examples'))).toEqual(['agent'])
  })

  it('cannot be given a second name: a hard link to a protected file fails across its mount (EXDEV)', async () => {
    box = await protectedBox()
    const result = await box.run(`ln cordis.yml .cfg-link; echo "ln=$?"; ln plugins/tool.ts tool-link.ts; echo "ln-folder=$?"`)
    expect(result.stdout).toMatch(/^ln=1$/m)
    expect(result.stdout).toMatch(/^ln-folder=1$/m)
    expect(result.stderr).toMatch(/Invalid cross-device link/)
    expect(visible(workspace)).toEqual(['cordis.yml', 'examples', 'plugins'])
  })

  it('leave the rest of the workspace writable, the folders above a protected file included', async () => {
    box = await protectedBox()
    const result = await box.run(`echo a > examples/new.txt && echo b > examples/agent/new.txt && cat examples/new.txt examples/agent/new.txt`)
    expect(result.stdout).toBe('a\nb\n')
  })

  it('are read-only under read-only too, and a request can add its own', async () => {
    box = await protectedBox()
    writeFileSync(join(workspace, 'extra.yml'), 'x\n')
    const result = await box.run(`echo y >> extra.yml`, { protectedPaths: [join(workspace, 'extra.yml')] })
    expect(result.stderr).toMatch(readOnly('extra.yml'))
    const readOnlyMode = await box.run(`echo y >> cordis.yml`, { mode: 'read-only' })
    expect(readOnlyMode.stderr).toMatch(readOnly('cordis.yml'))
    expect(readFileSync(join(workspace, 'extra.yml'), 'utf8')).toBe('x\n')
  })
})
