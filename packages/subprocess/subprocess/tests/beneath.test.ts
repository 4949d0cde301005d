/**
 * The beneath module on real files, as root: each test plants what a confined process could
 * (a link, a FIFO, a hard link, a folder swapped between two steps, a folder others may write)
 * and checks that nothing is followed, written through or trusted. `interceptedFs` changes the
 * file system at an exact step of a walk.
 */
import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import {
  appendFile,
  BeneathError,
  createFile,
  ensurePrivateFolder,
  interceptedFs,
  newestFile,
  nodeBeneathFs,
  openFolder,
  readFile,
  removeTree,
  type BeneathErrorCode,
} from '../src/index.ts'

const scratches: string[] = []
afterEach(() => {
  for (const dir of scratches.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A private scratch folder with `root` (trusted) and `host` (a folder nothing may reach through root) in it. */
function layout(): { root: string; host: string } {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'beneath-')))
  scratches.push(dir)
  mkdirSync(path.join(dir, 'root'), { mode: 0o700 })
  mkdirSync(path.join(dir, 'host'), { mode: 0o700 })
  return { root: path.join(dir, 'root'), host: path.join(dir, 'host') }
}

function refusal(code: BeneathErrorCode, run: () => unknown): BeneathError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(BeneathError)
    expect((error as BeneathError).code).toBe(code)
    return error as BeneathError
  }
  throw new Error(`expected ${code}`)
}

const close = (folder: { fd: number } | undefined) => folder && nodeBeneathFs.close(folder.fd)

describe('a folder on the way', () => {
  it('is refused when it is a symbolic link, wherever it is, and nothing is made through it', () => {
    const { root, host } = layout()
    symlinkSync(host, path.join(root, 'link'))
    expect(refusal('PATH_SYMLINK', () => createFile(path.join(root, 'link', 'sub', 'f'), 'X', { root })).details.path).toBe(path.join(root, 'link'))
    expect(refusal('PATH_SYMLINK', () => appendFile(path.join(root, 'link', 'f'), 'X')).message).toBe(`${path.join(root, 'link')} is a symbolic link`)
    expect(refusal('PATH_SYMLINK', () => openFolder(path.join(root, 'link'), { create: false })).details.path).toBe(path.join(root, 'link'))
    expect(readdirSync(host)).toEqual([])
  })

  it('swapped for a link the moment after it was opened, is not followed: the walk goes on in the folder it opened', () => {
    const { root, host } = layout()
    mkdirSync(path.join(root, 'a', 'b'), { recursive: true })
    mkdirSync(path.join(host, 'b'))
    let swapped = false
    const fs = interceptedFs((call, file) => {
      if (call === 'open' && !swapped && file.endsWith('/b')) {
        swapped = true
        renameSync(path.join(root, 'a'), path.join(root, 'a-moved'))
        symlinkSync(host, path.join(root, 'a'))
      }
    })
    createFile(path.join(root, 'a', 'b', 'f'), 'X', { root, fs })
    expect(swapped).toBe(true)
    expect(readFileSync(path.join(root, 'a-moved', 'b', 'f'), 'utf8')).toBe('X')
    expect(readdirSync(path.join(host, 'b'))).toEqual([])
  })

  it('planted as a link between the check that it is missing and its mkdir, is refused', () => {
    const { root, host } = layout()
    const fs = interceptedFs((call, file) => {
      if (call === 'mkdir' && file.endsWith('/new')) symlinkSync(host, path.join(root, 'new'))
    })
    refusal('PATH_SYMLINK', () => appendFile(path.join(root, 'new', 'log'), 'X', { fs }))
    expect(readdirSync(host)).toEqual([])
  })

  it('that is a file is refused as not a folder', () => {
    const { root } = layout()
    writeFileSync(path.join(root, 'file'), '')
    expect(refusal('PATH_NOT_FOLDER', () => openFolder(path.join(root, 'file', 'sub'), { create: true })).message).toBe(`${path.join(root, 'file')} is not a folder`)
  })

  it('is made mode 0700 when missing, and a relative or unnormalised path is refused', () => {
    const { root } = layout()
    close(openFolder(path.join(root, 'x', 'y'), { create: true }))
    expect(statSync(path.join(root, 'x')).mode & 0o777).toBe(0o700)
    expect(statSync(path.join(root, 'x', 'y')).mode & 0o777).toBe(0o700)
    expect(openFolder(path.join(root, 'missing'), { create: false })).toBeUndefined()
    refusal('PATH_INVALID', () => openFolder('relative/path', { create: true }))
    refusal('PATH_INVALID', () => openFolder(`${root}/x/../x`, { create: true }))
  })
})

describe('the trusted root', () => {
  it('moved and replaced since its identity was recorded, is refused', () => {
    const { root } = layout()
    const folder = openFolder(root, { create: false })!
    const identity = { dev: folder.stats.dev, ino: folder.stats.ino }
    close(folder)
    createFile(path.join(root, 'before'), 'X', { root, rootIdentity: identity })
    renameSync(root, `${root}-moved`)
    mkdirSync(root, { mode: 0o700 })
    expect(refusal('PATH_CHANGED', () => createFile(path.join(root, 'after'), 'X', { root, rootIdentity: identity })).details.path).toBe(root)
    expect(readdirSync(root)).toEqual([])
  })
})

describe('a file', () => {
  it('that is a link is neither created, appended to nor read through', () => {
    const { root, host } = layout()
    writeFileSync(path.join(host, 'secret'), 'host')
    symlinkSync(path.join(host, 'secret'), path.join(root, 'link'))
    refusal('PATH_EXISTS', () => createFile(path.join(root, 'link'), 'X'))
    refusal('PATH_NOT_REGULAR', () => appendFile(path.join(root, 'link'), 'X'))
    refusal('PATH_NOT_REGULAR', () => readFile(path.join(root, 'link'), 100))
    expect(readFileSync(path.join(host, 'secret'), 'utf8')).toBe('host')
  })

  it('that is a FIFO is refused without blocking, to read and to append', () => {
    const { root } = layout()
    execFileSync('mkfifo', [path.join(root, 'fifo')])
    refusal('PATH_NOT_REGULAR', () => readFile(path.join(root, 'fifo'), 100))
    refusal('PATH_NOT_REGULAR', () => appendFile(path.join(root, 'fifo'), 'X'))
  })

  it('replaced by a FIFO between the listing and the open, is skipped by the newest-file walk', () => {
    const { root } = layout()
    writeFileSync(path.join(root, 'a.jsonl'), 'old')
    utimesSync(path.join(root, 'a.jsonl'), 1, 1)
    writeFileSync(path.join(root, 'b.jsonl'), 'new')
    const fs = interceptedFs((call, file) => {
      if (call === 'open' && file.endsWith('/b.jsonl')) {
        rmSync(path.join(root, 'b.jsonl'))
        execFileSync('mkfifo', [path.join(root, 'b.jsonl')])
      }
    })
    const found = newestFile(root, (name) => name.endsWith('.jsonl'), { maxDepth: 2, maxEntries: 100 }, { fs })
    expect(found.file?.path).toBe(path.join(root, 'a.jsonl'))
    close(found.file)
  })

  it('that is another name of a host file (a hard link) is not appended to', () => {
    const { root, host } = layout()
    writeFileSync(path.join(host, 'passwd'), 'host\n')
    linkSync(path.join(host, 'passwd'), path.join(root, 'log'))
    expect(refusal('PATH_NOT_REGULAR', () => appendFile(path.join(root, 'log'), 'X\n')).message).toContain('single link')
    expect(readFileSync(path.join(host, 'passwd'), 'utf8')).toBe('host\n')
  })

  it('is created only when the name is free, exactly with the mode asked, and appended to and read back', () => {
    const { root } = layout()
    createFile(path.join(root, 'seed', 'settings.json'), '{}', { root, perm: 0o640 })
    expect(statSync(path.join(root, 'seed', 'settings.json')).mode & 0o777).toBe(0o640)
    refusal('PATH_EXISTS', () => createFile(path.join(root, 'seed', 'settings.json'), 'X', { root }))
    appendFile(path.join(root, 'logs', 'log'), 'one\n')
    appendFile(path.join(root, 'logs', 'log'), 'two\n')
    expect(statSync(path.join(root, 'logs', 'log')).mode & 0o777).toBe(0o600)
    expect(readFile(path.join(root, 'logs', 'log'), 5)?.toString()).toBe('one\nt')
    expect(readFile(path.join(root, 'missing', 'log'), 5)).toBeUndefined()
    expect(readFile(path.join(root, 'logs', 'missing'), 5)).toBeUndefined()
  })
})

describe('the newest-file walk', () => {
  it('follows no link to a host folder or file', () => {
    const { root, host } = layout()
    mkdirSync(path.join(root, 't', 'sub'), { recursive: true })
    writeFileSync(path.join(root, 't', 'sub', 'own.jsonl'), 'own')
    utimesSync(path.join(root, 't', 'sub', 'own.jsonl'), 1, 1)
    writeFileSync(path.join(host, 'host.jsonl'), 'host')
    symlinkSync(host, path.join(root, 't', 'linked'))
    symlinkSync(path.join(host, 'host.jsonl'), path.join(root, 't', 'file.jsonl'))
    const found = newestFile(path.join(root, 't'), (name) => name.endsWith('.jsonl'), { maxDepth: 3, maxEntries: 100 })
    expect(found.file?.path).toBe(path.join(root, 't', 'sub', 'own.jsonl'))
    close(found.file)
  })
})

describe('a private folder', () => {
  it('is refused directly in, or under a folder of others in, a folder every user may write', () => {
    const { root } = layout()
    mkdirSync(path.join(root, 'open'))
    chmodSync(path.join(root, 'open'), 0o777)
    expect(refusal('PATH_SHARED', () => ensurePrivateFolder(path.join(root, 'open', 'pool'), { root })).message).toContain(`lies directly in ${path.join(root, 'open')}, a folder every user can write`)
    // /tmp is world-writable, so each folder below it must be this user's and closed to others' writes.
    expect(refusal('PATH_SHARED', () => ensurePrivateFolder(path.join(root, 'open', 'x', 'pool'), {})).details.path).toBe(path.join(root, 'open'))
    chmodSync(path.join(root, 'open'), 0o775)
    expect(refusal('PATH_SHARED', () => ensurePrivateFolder(path.join(root, 'open', 'x', 'pool'), {})).details.path).toBe(path.join(root, 'open'))
    // A trusted root that is world-writable (the runtime folder's /tmp) may hold it directly.
    chmodSync(path.join(root, 'open'), 0o777)
    close(ensurePrivateFolder(path.join(root, 'open', 'mine'), { root: path.join(root, 'open') }))
    close(ensurePrivateFolder(path.join(root, 'open', 'also'), { root: `${path.join(root, 'open')}/` }))
  })

  it('made world-writable between its open and its check, is refused', () => {
    const { root } = layout()
    mkdirSync(path.join(root, 'a'), { mode: 0o700 })
    const fs = interceptedFs((call, file) => {
      if (call === 'open' && file.endsWith('/a')) chmodSync(path.join(root, 'a'), 0o777)
    })
    refusal('PATH_SHARED', () => ensurePrivateFolder(path.join(root, 'a', 'pool'), { fs }))
  })

  it('is judged by the folder opened, not by whatever holds its name a moment later', () => {
    const { root } = layout()
    mkdirSync(path.join(root, 'a'))
    chmodSync(path.join(root, 'a'), 0o777)
    // Right after the world-writable folder is opened, a private one takes its name.
    const fs = {
      ...nodeBeneathFs,
      open: (file: string, flags: number, mode?: number) => {
        const fd = nodeBeneathFs.open(file, flags, mode)
        if (file.endsWith('/a')) {
          renameSync(path.join(root, 'a'), path.join(root, 'a-open'))
          mkdirSync(path.join(root, 'a'), { mode: 0o700 })
        }
        return fd
      },
    }
    refusal('PATH_SHARED', () => ensurePrivateFolder(path.join(root, 'a', 'x', 'pool'), { fs }))
  })

  it('must be this user’s with mode 0700, or is set to 0700 when repairing', () => {
    const { root } = layout()
    mkdirSync(path.join(root, 'loose'))
    chmodSync(path.join(root, 'loose'), 0o755)
    expect(refusal('PATH_NOT_PRIVATE', () => ensurePrivateFolder(path.join(root, 'loose'), {})).message).toMatch(/is not a private folder of uid \d+ \(mode 0700, it is 0755\)/)
    close(ensurePrivateFolder(path.join(root, 'loose'), { repair: true }))
    expect(statSync(path.join(root, 'loose')).mode & 0o777).toBe(0o700)
    mkdirSync(path.join(root, 'theirs'), { mode: 0o700 })
    chownSync(path.join(root, 'theirs'), 65534, 65534)
    refusal('PATH_NOT_PRIVATE', () => ensurePrivateFolder(path.join(root, 'theirs'), { repair: true }))
  })
})

describe('a tree removal', () => {
  /** `root/tree` holding a link to `host`, a hard link to a host file, a FIFO and a nested folder. */
  function plantedTree(): { root: string; host: string; tree: string } {
    const { root, host } = layout()
    writeFileSync(path.join(host, 'keep'), 'host')
    const tree = path.join(root, 'tree')
    mkdirSync(path.join(tree, 'a', 'b'), { recursive: true })
    writeFileSync(path.join(tree, 'a', 'b', 'f'), 'x')
    symlinkSync(host, path.join(tree, 'to-host'))
    symlinkSync(host, path.join(tree, 'a', 'to-host'))
    linkSync(path.join(host, 'keep'), path.join(tree, 'a', 'hard'))
    execFileSync('mkfifo', [path.join(tree, 'a', 'fifo')])
    return { root, host, tree }
  }

  it('removes the tree and unlinks the links in it without following them', () => {
    const { root, host, tree } = plantedTree()
    removeTree(tree, { root })
    expect(readdirSync(root)).toEqual([])
    expect(readdirSync(host)).toEqual(['keep'])
    expect(readFileSync(path.join(host, 'keep'), 'utf8')).toBe('host')
  })

  it('a folder swapped for a link between its listing and its open is unlinked, not followed', () => {
    const { root, host, tree } = plantedTree()
    let swapped = false
    const fs = interceptedFs((call, file) => {
      if (call === 'open' && !swapped && file.endsWith('/a')) {
        swapped = true
        renameSync(path.join(tree, 'a'), path.join(root, 'a-moved'))
        symlinkSync(host, path.join(tree, 'a'))
      }
    })
    removeTree(tree, { root, fs })
    expect(swapped).toBe(true)
    expect(readdirSync(root)).toEqual(['a-moved'])
    expect(readdirSync(host)).toEqual(['keep'])
  })

  it('a tree far deeper than its descent is removed, and a link at its bottom is not followed', () => {
    const { root, host } = layout()
    writeFileSync(path.join(host, 'keep'), 'host')
    const bottom = path.join(root, 'tree', ...Array.from({ length: 300 }, () => 'd'))
    mkdirSync(bottom, { recursive: true })
    symlinkSync(host, path.join(bottom, 'to-host'))
    writeFileSync(path.join(bottom, 'f'), 'x')
    let renames = 0
    removeTree(path.join(root, 'tree'), { root, fs: interceptedFs((call) => void (call === 'rename' && renames++)) })
    expect(renames).toBeGreaterThan(0)
    expect(readdirSync(root)).toEqual([])
    expect(readdirSync(host)).toEqual(['keep'])
  })

  it('a missing tree, or one whose folder above is missing, is nothing to remove', () => {
    const { root } = layout()
    removeTree(path.join(root, 'none'), { root })
    removeTree(path.join(root, 'none', 'deeper'), { root })
  })
})
