/**
 * Hidden paths, for real: a folder of host state (the private homes of pooled agent CLIs) is
 * hidden with `ctx.sandbox.hide`, and a confined root shell tries to list it, read a file in it and
 * plant one — from a separate workspace, from a workspace that contains it, and under read-only.
 * A confinement whose own writable path lies inside the folder sees that path and nothing else.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { harness, hasBwrap, type Harness } from './harness.ts'

let base: string
let state: string
let box: Harness | undefined
const SETTINGS = '{"permissions":{}}\n'

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'conch-hidden-')))
  state = join(base, 'state', 'pool')
  for (const home of ['home-A', 'home-B']) {
    mkdirSync(join(state, home, '.claude'), { recursive: true, mode: 0o700 })
    writeFileSync(join(state, home, '.claude', 'settings.json'), SETTINGS)
    writeFileSync(join(state, home, 'transcript.jsonl'), `{"text":"secret of ${home}"}\n`)
  }
  mkdirSync(join(base, 'workspace'))
})

afterEach(async () => {
  const errors = box?.logs.filter((message) => message.type === 'error').map((message) => message.args) ?? []
  await box?.dispose()
  box = undefined
  rmSync(base, { recursive: true, force: true })
  expect(errors).toEqual([])
})

const ATTACK = (pool: string) => `
  echo "list=[$(ls -A ${pool} 2>&1 | tr '\\n' ' ')]"
  cat ${pool}/home-B/transcript.jsonl; echo "read=$?"
  echo '{"hooks":{"SessionStart":[]}}' > ${pool}/home-B/.claude/settings.json; echo "write=$?"
  mkdir -p ${pool}/home-B/.claude 2>/dev/null; echo "mkdir=$?"
  rm -rf ${pool} 2>/dev/null; mv ${pool} ${pool}.old 2>/dev/null; echo "moved=$?"
`

function expectUntouched(): void {
  for (const home of ['home-A', 'home-B']) {
    expect(readFileSync(join(state, home, '.claude', 'settings.json'), 'utf8')).toBe(SETTINGS)
    expect(readFileSync(join(state, home, 'transcript.jsonl'), 'utf8')).toBe(`{"text":"secret of ${home}"}\n`)
  }
  expect(readdirSync(state).sort()).toEqual(['home-A', 'home-B'])
}

describe.runIf(hasBwrap)('hidden paths', () => {
  for (const mode of ['workspace-write', 'read-only'] as const) {
    it(`cannot be listed, read or written from a ${mode} sandbox, whose workspace may even contain them`, async () => {
      box = await harness(join(base, 'workspace'))
      box.ctx.sandbox.hide([state])
      for (const workspaceRoot of [join(base, 'workspace'), base]) {
        const result = await box.run(ATTACK(state), { mode, workspaceRoot })
        expect(result.stdout).toMatch(/^list=\[\]$/m)
        expect(result.stdout).toMatch(/^read=1$/m)
        expect(result.stderr).toMatch(/home-B\/transcript\.jsonl: No such file or directory/)
        expect(result.stdout).toMatch(/^write=1$/m)
        expect(result.stdout).toMatch(/^mkdir=1$/m)
        expect(result.stdout).toMatch(/^moved=1$/m)
        expect(result.stdout).not.toContain('secret of')
        expectUntouched()
      }
    })
  }

  it('hides what is created in the folder after it was hidden', async () => {
    box = await harness(join(base, 'workspace'))
    box.ctx.sandbox.hide([state])
    mkdirSync(join(state, 'home-C'))
    writeFileSync(join(state, 'home-C', 'late.txt'), 'late secret\n')
    const result = await box.run(`cat ${state}/home-C/late.txt; echo "read=$?"; ls -A ${state}`, { workspaceRoot: base })
    expect(result.stdout).toBe('read=1\n')
  })

  it('leave a confinement its own writable path inside them, and nothing else of them', async () => {
    box = await harness(join(base, 'workspace'))
    box.ctx.sandbox.hide([state])
    const own = join(state, 'home-A')
    for (const mode of ['workspace-write', 'read-only'] as const) {
      const result = await box.run(
        `echo "list=[$(ls -A ${state} | tr '\\n' ' ')]"
         cat ${own}/transcript.jsonl
         echo '{"ok":1}' > ${own}/.claude/settings.json && echo "own-write=$?"
         cat ${state}/home-B/transcript.jsonl 2>/dev/null; echo "other-read=$?"
         touch ${state}/planted 2>/dev/null; echo "plant=$?"`,
        { mode, workspaceRoot: join(base, 'workspace'), writablePaths: [own] },
      )
      expect(result.stdout).toBe(`list=[home-A ]\n{"text":"secret of home-A"}\nown-write=0\nother-read=1\nplant=1\n`)
      expect(readFileSync(join(own, '.claude', 'settings.json'), 'utf8')).toBe('{"ok":1}\n')
      writeFileSync(join(own, '.claude', 'settings.json'), SETTINGS)
      expectUntouched()
    }
  })

  it('keep a protected path inside the own writable path read-only', async () => {
    box = await harness(join(base, 'workspace'))
    box.ctx.sandbox.hide([state])
    const own = join(state, 'home-A')
    box.ctx.sandbox.protect([join(own, '.claude', 'settings.json')])
    const result = await box.run(`echo x > ${own}/.claude/settings.json; echo "write=$?"; echo y > ${own}/free.txt && echo "free=$?"`, {
      workspaceRoot: join(base, 'workspace'),
      writablePaths: [own],
    })
    expect(result.stdout).toBe('write=1\nfree=0\n')
    expect(result.stderr).toMatch(/settings\.json: Read-only file system/)
    expect(readFileSync(join(own, '.claude', 'settings.json'), 'utf8')).toBe(SETTINGS)
  })
})
