/**
 * Where the private homes may live (`stateDir`): refusals at load, naming the field, on the real
 * file system.
 */
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadPoolConfig, PtyPool } from '../src/index.ts'
import { assertStateDirUnchanged, defaultStateDir, openStateDir } from '../src/state-dir.ts'

const made: string[] = []
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})
const scratch = () => {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'pool-state-dir-')))
  made.push(dir)
  return dir
}
const refusal = (run: () => unknown) => {
  try {
    run()
  } catch (error) {
    return error as { code: string; message: string }
  }
  throw new Error('expected a refusal')
}

describe('the pool’s state folder', () => {
  it('defaults to <state home>/conch/pool: $XDG_STATE_HOME when absolute, else ~/.local/state', () => {
    expect(defaultStateDir({ XDG_STATE_HOME: '/srv/state', HOME: '/home/u' })).toBe('/srv/state/conch/pool')
    expect(defaultStateDir({ XDG_STATE_HOME: 'relative', HOME: '/home/u' })).toBe('/home/u/.local/state/conch/pool')
    expect(defaultStateDir({ HOME: '/home/u' })).toBe('/home/u/.local/state/conch/pool')
  })

  it('is created mode 0700, component by component, and the pool takes the default from the environment', async () => {
    const dir = scratch()
    const pool = new PtyPool(loadPoolConfig({ terminal: 'unconfined' }), { env: { XDG_STATE_HOME: path.join(dir, 'state') } })
    try {
      expect(pool.stateDir).toBe(path.join(dir, 'state', 'conch', 'pool'))
      for (const folder of ['state', 'state/conch', 'state/conch/pool']) expect(statSync(path.join(dir, folder)).mode & 0o777).toBe(0o700)
    } finally {
      await pool.shutdown()
    }
  })

  it('refuses a symbolic link on the way, naming the field and the link', () => {
    const dir = scratch()
    mkdirSync(path.join(dir, 'real'))
    symlinkSync(path.join(dir, 'real'), path.join(dir, 'link'))
    const error = refusal(() => new PtyPool(loadPoolConfig({ terminal: 'unconfined', stateDir: path.join(dir, 'link', 'pool') })))
    expect(error.code).toBe('CONFIG_INVALID')
    expect(error.message).toBe(
      `pool config: stateDir: ${path.join(dir, 'link')} is a symbolic link; conch never follows links on the way to the pooled CLIs' homes (something may have replaced it to redirect them). Remove it, or configure a folder without links`,
    )
  })

  it('refuses a folder directly in a world-writable one such as /tmp, and a folder open to others', () => {
    expect(refusal(() => openStateDir('/tmp/conch-pool', { field: 'stateDir' })).message).toMatch(/^pool config: stateDir: \/tmp\/conch-pool lies directly in \/tmp, a folder every user can write/)
    const dir = scratch()
    mkdirSync(path.join(dir, 'open'), { mode: 0o755 })
    chmodSync(path.join(dir, 'open'), 0o755)
    expect(refusal(() => openStateDir(path.join(dir, 'open'), { field: 'stateDir' })).message).toMatch(/is not a private folder of uid \d+ \(mode 0700, it is 0755\); run `chmod 700/)
    // Below a world-writable folder, a component others may write is refused too.
    chmodSync(path.join(dir, 'open'), 0o777)
    expect(refusal(() => openStateDir(path.join(dir, 'open', 'x', 'pool'), { field: 'stateDir' })).message).toBe(
      `pool config: stateDir: ${dir}/open lies under a folder every user can write and is not a folder of uid ${process.getuid!()} closed to others' writes; choose a folder of your own`,
    )
  })

  it('refuses a folder inside the sandbox policy’s workspace, and a relative or unnormalised path', () => {
    const dir = scratch()
    expect(refusal(() => openStateDir(path.join(dir, 'ws', 'pool'), { field: 'stateDir', workspaces: [path.join(dir, 'ws')] })).message).toMatch(
      new RegExp(`^pool config: stateDir: ${dir}/ws/pool is inside the workspace ${dir}/ws, where terminals can write`),
    )
    expect(refusal(() => openStateDir('state/pool', { field: 'stateDir' })).message).toBe('pool config: stateDir: state/pool is not an absolute path')
    expect(refusal(() => openStateDir(`${dir}/a/../b`, { field: 'stateDir' })).message).toMatch(/is not a normalised absolute path/)
  })

  it('makes no home in a folder that took the place of the one it opened (moved, replaced, or a link)', () => {
    const dir = scratch()
    const stateDir = openStateDir(path.join(dir, 'state', 'pool'), { field: 'stateDir' })
    expect(() => assertStateDirUnchanged(stateDir)).not.toThrow()
    // A confined process whose workspace holds the folder renames a folder above it and puts its own in its place.
    renameSync(path.join(dir, 'state'), path.join(dir, 'moved'))
    mkdirSync(stateDir, { recursive: true, mode: 0o700 })
    expect(() => assertStateDirUnchanged(stateDir)).toThrow(/state folder .*pool was moved or replaced since the pool opened it/)
    rmSync(path.join(dir, 'state'), { recursive: true })
    mkdirSync(path.join(dir, 'state'))
    symlinkSync(path.join(dir, 'moved', 'pool'), stateDir)
    expect(() => assertStateDirUnchanged(stateDir)).toThrow(/moved or replaced/)
  })
})
