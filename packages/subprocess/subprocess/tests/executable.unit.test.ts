/**
 * The one PATH lookup of conch (`resolveExecutable`): execvp(3)'s search without relative entries,
 * and without a match in a folder an agent may write (or a link there) — so a program a confined
 * agent put in `<workspace>/node_modules/.bin` is never what conch runs outside the sandbox.
 */
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { isWithin, resolveExecutable, skippedExecutables, systemFolders } from '../src/index.ts'

const scratch = realpathSync(mkdtempSync('/var/tmp/conch-executable-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** An executable script `name` in `folder` (made); returns its path. */
function program(folder: string, name: string): string {
  mkdirSync(folder, { recursive: true })
  const file = join(folder, name)
  writeFileSync(file, '#!/bin/sh\n')
  chmodSync(file, 0o755)
  return file
}

const workspace = join(scratch, 'w')
const planted = program(join(workspace, 'node_modules', '.bin'), 'cli')
const trusted = program(join(scratch, 'opt', 'bin'), 'cli')
const bin = join(workspace, 'node_modules', '.bin')

describe('resolveExecutable', () => {
  it('takes the first match on PATH when no folder is an agent’s', () => {
    expect(resolveExecutable('cli', `${bin}:${join(scratch, 'opt', 'bin')}`)).toBe(planted)
  })

  it('skips a PATH folder inside a folder an agent may write, and finds the next one', () => {
    expect(resolveExecutable('cli', `${bin}:${join(scratch, 'opt', 'bin')}`, [workspace])).toBe(trusted)
    expect(resolveExecutable('cli', [bin, join(scratch, 'opt', 'bin')], [workspace])).toBe(trusted)
  })

  it('skips a match outside the writable folder whose file is a link into it', () => {
    const links = join(scratch, 'links')
    mkdirSync(links)
    symlinkSync(planted, join(links, 'cli'))
    expect(resolveExecutable('cli', links, [workspace])).toBeUndefined()
    expect(skippedExecutables('cli', links, [workspace])).toBe(
      `cli was found only in ${join(links, 'cli')} (a link into ${workspace}), which an agent may write; a program conch starts is never taken from there: give its absolute path`,
    )
  })

  it('skips a PATH folder reached through a link into the writable folder', () => {
    const alias = join(scratch, 'alias-bin')
    symlinkSync(bin, alias)
    expect(resolveExecutable('cli', alias, [workspace])).toBeUndefined()
  })

  it('never searches a relative or empty PATH entry (the working directory)', () => {
    expect(resolveExecutable('cli', `${relative(process.cwd(), join(scratch, 'opt', 'bin'))}::.`)).toBeUndefined()
  })

  it('runs a program named by its path as given, inside a writable folder too', () => {
    expect(resolveExecutable(planted, '', [workspace])).toBe(planted)
    expect(resolveExecutable(join(scratch, 'missing'), '', [])).toBeUndefined()
  })
})

describe('skippedExecutables', () => {
  it('names each skipped folder and the writable folder it lies in, only when nothing else was found', () => {
    expect(skippedExecutables('cli', bin, [workspace])).toBe(
      `cli was found only in ${bin} (inside ${workspace}), which an agent may write; a program conch starts is never taken from there: give its absolute path`,
    )
    expect(skippedExecutables('cli', `${bin}:${join(scratch, 'opt', 'bin')}`, [workspace])).toBeUndefined()
    expect(skippedExecutables('absent', bin, [workspace])).toBeUndefined()
    expect(skippedExecutables(planted, bin, [workspace])).toBeUndefined()
  })
})

describe('the helpers', () => {
  it('isWithin compares names: a sibling with the same prefix is outside', () => {
    expect(isWithin('/w/node_modules/.bin', '/w')).toBe(true)
    expect(isWithin('/w', '/w')).toBe(true)
    expect(isWithin('/work', '/w')).toBe(false)
    expect(isWithin('/w/..x', '/w')).toBe(true)
    expect(isWithin('/anything', '/')).toBe(true)
  })

  it('systemFolders keeps the system folders of a PATH, in its order', () => {
    expect(systemFolders(`${bin}:/usr/bin:/home/u/bin:/bin:.`)).toEqual(['/usr/bin', '/bin'])
  })
})
