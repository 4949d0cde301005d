/**
 * The one PATH lookup of conch (`resolveExecutable`): execvp(3)'s search without relative entries,
 * and without a match reached through a folder an agent may write at any hop of its links — so a
 * program a confined agent put in `<workspace>/node_modules/.bin`, or one a link the agent can
 * repoint leads to, is never what conch runs outside the sandbox.
 */
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { isWithin, pathOutside, resolveExecutable, skippedExecutables, systemFolders } from '../src/index.ts'

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

  it('skips a link outside the writable folder whose chain passes through a link inside it, though the chain ends outside', () => {
    // The middle link points at a trusted program now; the agent can repoint it at any time.
    const relay = join(workspace, 'relay')
    symlinkSync(trusted, relay)
    const chain = join(scratch, 'chain')
    mkdirSync(chain)
    symlinkSync(relay, join(chain, 'cli'))
    expect(resolveExecutable('cli', chain)).toBe(join(chain, 'cli'))
    expect(resolveExecutable('cli', chain, [workspace])).toBeUndefined()
    expect(skippedExecutables('cli', chain, [workspace])).toBe(
      `cli was found only in ${join(chain, 'cli')} (a link into ${workspace}), which an agent may write; a program conch starts is never taken from there: give its absolute path`,
    )
    expect(resolveExecutable('cli', `${chain}:${join(scratch, 'opt', 'bin')}`, [workspace])).toBe(trusted)
  })

  it('follows relative links from their own folder: through the writable folder is skipped, beside it is taken', () => {
    const outside = join(scratch, 'relative-outside')
    mkdirSync(outside)
    symlinkSync('../opt/bin/cli', join(outside, 'cli'))
    expect(resolveExecutable('cli', outside, [workspace])).toBe(join(outside, 'cli'))
    // ../w/relay-relative → ../opt/bin/cli, resolved from inside w: the trusted program, through w.
    symlinkSync('../opt/bin/cli', join(workspace, 'relay-relative'))
    const through = join(scratch, 'relative-through')
    mkdirSync(through)
    symlinkSync('../w/relay-relative', join(through, 'cli'))
    expect(realpathSync(join(through, 'cli'))).toBe(trusted)
    expect(resolveExecutable('cli', through, [workspace])).toBeUndefined()
    // A ".." that climbs out of a folder reached through w: the agent could make that folder a link.
    const climbs = join(scratch, 'relative-climbs')
    mkdirSync(climbs)
    symlinkSync('../w/node_modules/../../opt/bin/cli', join(climbs, 'cli'))
    expect(resolveExecutable('cli', climbs, [workspace])).toBeUndefined()
  })

  it('skips a PATH folder reached through a link inside the writable folder, though its real path is outside', () => {
    symlinkSync(join(scratch, 'opt', 'bin'), join(workspace, 'bin-relay'))
    const via = join(scratch, 'via-bin')
    symlinkSync(join(workspace, 'bin-relay'), via)
    expect(resolveExecutable('cli', via, [workspace])).toBeUndefined()
    expect(skippedExecutables('cli', via, [workspace])).toBe(
      `cli was found only in ${via} (inside ${workspace}), which an agent may write; a program conch starts is never taken from there: give its absolute path`,
    )
  })

  it('takes no program from a link loop and goes on to the next folder, without hanging', () => {
    const loop = join(scratch, 'loop')
    mkdirSync(loop)
    symlinkSync('cli-again', join(loop, 'cli'))
    symlinkSync('cli', join(loop, 'cli-again'))
    expect(resolveExecutable('cli', `${loop}:${join(scratch, 'opt', 'bin')}`, [workspace])).toBe(trusted)
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

describe('pathOutside', () => {
  it('drops a folder reached through the writable folder at any hop, a missing one too, and keeps a link loop elsewhere', () => {
    symlinkSync(join(scratch, 'opt', 'bin'), join(workspace, 'opt-relay'))
    const via = join(scratch, 'via-opt')
    symlinkSync(join(workspace, 'opt-relay'), via)
    // Not made yet: the agent can make it, and put any program in it.
    const later = join(workspace, '.venv', 'bin')
    // A loop outside w: the kernel fails to resolve it (ELOOP), so nothing runs from it.
    const loop = join(scratch, 'folder-loop')
    symlinkSync(`${loop}-again`, loop)
    symlinkSync(loop, `${loop}-again`)
    // A loop through w: the agent can break it into a folder of its own.
    const agentLoop = join(scratch, 'agent-loop')
    symlinkSync(join(workspace, 'loop-relay'), agentLoop)
    symlinkSync(agentLoop, join(workspace, 'loop-relay'))
    const path = [bin, via, later, loop, agentLoop, join(scratch, 'opt', 'bin'), 'relative', ''].join(':')
    expect(pathOutside(path, [workspace])).toBe(`${loop}:${join(scratch, 'opt', 'bin')}`)
    expect(pathOutside(`${bin}:${later}`, [workspace])).toBe('/bin:/usr/bin')
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
