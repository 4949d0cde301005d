import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { checkLayers, readWorkspace, type WorkspacePackage } from './layers.ts'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

describe('the workspace’s layers', () => {
  const packages = readWorkspace(root)
  const kinds = new Map(packages.map((entry) => [entry.name, entry.kind]))

  it('finds the packages and reads each kind from its package.json', () => {
    expect(packages.length).toBeGreaterThan(10)
    expect(kinds.get('@conch/pty')).toBe('seam')
    expect(kinds.get('@conch/pty-local')).toBe('provider')
    expect(kinds.get('@conch/tool-pty')).toBe('tool')
    expect(kinds.get('@conch/cli')).toBe('entry')
    expect(kinds.get('@conch/fake-model')).toBe('test-support')
  })

  it('keeps every rule: each package has a kind and uses only what its kind may use', () => {
    expect(checkLayers(packages)).toEqual([])
  })

  it('docs/architecture.md names every package folder in its package tree', () => {
    const doc = readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8')
    const tree = /## Packages\n\n```\n([\s\S]*?)```/.exec(doc)?.[1] ?? ''
    // `  group/  a  b   what they are`, continued on indented lines: a group's folders are the words on its lines.
    const named = new Set<string>()
    let group = ''
    for (const line of tree.split('\n')) {
      const words = line.trim().split(/\s+/)
      const slash = words[0]!.indexOf('/')
      if (slash > 0) {
        group = words[0]!.slice(0, slash)
        words[0] = words[0]!.slice(slash + 1)
        named.add(`packages/${group}`)
      }
      for (const word of words) named.add(`packages/${group}/${word}`)
    }
    const missing = packages.map((entry) => entry.dir).filter((dir) => dir.startsWith('packages/') && !named.has(dir))
    expect(missing).toEqual([])
  })

  it('keeps the terminal contract free of the agent loop: @conch/pty and its backends need no @conch/agent', () => {
    for (const name of ['@conch/pty', '@conch/pty-local', '@conch/pty-memory']) {
      const entry = packages.find((candidate) => candidate.name === name)!
      expect([...entry.dependencies, ...entry.imports]).not.toContain('@conch/agent')
    }
  })
})

/** A small layered workspace; each rule's test breaks it in one place. */
function workspace(): WorkspacePackage[] {
  const made = (name: string, kind: string | undefined, more: Partial<WorkspacePackage> = {}): WorkspacePackage => ({ name, dir: `packages/${name.slice(7)}`, kind, command: false, dependencies: [], devDependencies: [], imports: [], ...more })
  return [
    made('@conch/s', 'seam'),
    made('@conch/s2', 'seam', { dependencies: ['@conch/s'], imports: ['@conch/s'] }),
    made('@conch/p', 'provider', { dependencies: ['@conch/s'], imports: ['@conch/s'], devDependencies: ['@conch/f', '@conch/p2'] }),
    made('@conch/p2', 'provider', { dependencies: ['@conch/s'] }),
    made('@conch/t', 'tool', { dependencies: ['@conch/s'], devDependencies: ['@conch/p'] }),
    made('@conch/e', 'entry', { dependencies: ['@conch/s', '@conch/p', '@conch/t'] }),
    made('@conch/cmd', 'entry', { command: true, dependencies: ['@conch/e', '@conch/p'] }),
    made('@conch/f', 'test-support', { dependencies: ['@conch/cmd', '@conch/p'], imports: ['@conch/cmd'] }),
  ]
}

function breaking(name: string, change: Partial<WorkspacePackage>): string[] {
  return checkLayers(workspace().map((entry) => (entry.name === name ? { ...entry, ...change } : entry)))
}

describe('checkLayers', () => {
  it('passes a layered workspace, devDependencies included', () => {
    expect(checkLayers(workspace())).toEqual([])
  })

  it('fails a package without a kind, and one with an unknown kind', () => {
    expect(breaking('@conch/t', { kind: undefined })).toEqual(['@conch/t (packages/t/package.json) has no "conch": {"kind": …}: give it one of seam, provider, tool, entry, test-support'])
    expect(breaking('@conch/t', { kind: 'plugin' })).toEqual([expect.stringContaining('@conch/t (packages/t/package.json) has an unknown kind "plugin"')])
  })

  it('fails a seam that imports a provider or depends on a tool', () => {
    expect(breaking('@conch/s2', { dependencies: ['@conch/s', '@conch/p'], imports: ['@conch/p'] })).toEqual([
      '@conch/s2 depends on @conch/p: a seam package may use seam packages only, and @conch/p is provider',
      '@conch/s2 imports @conch/p: a seam package may use seam packages only, and @conch/p is provider',
    ])
    expect(breaking('@conch/s2', { dependencies: ['@conch/s', '@conch/t'] })).toEqual(['@conch/s2 depends on @conch/t: a seam package may use seam packages only, and @conch/t is tool'])
  })

  it('fails a provider that imports another provider', () => {
    expect(breaking('@conch/p', { dependencies: ['@conch/s', '@conch/p2'], imports: ['@conch/p2'] })).toContain('@conch/p imports @conch/p2: a provider package may use seam packages only, and @conch/p2 is provider')
  })

  it('fails a tool that imports a provider', () => {
    expect(breaking('@conch/t', { dependencies: ['@conch/s', '@conch/p'], imports: ['@conch/p'] })).toContain('@conch/t imports @conch/p: a tool package may use seam packages only, and @conch/p is provider')
  })

  it('fails a seam that points back up to an entry', () => {
    expect(breaking('@conch/s2', { dependencies: ['@conch/s', '@conch/e'] })).toEqual(['@conch/s2 depends on @conch/e: a seam package may use seam packages only, and @conch/e is entry'])
  })

  it('fails test support anywhere but in devDependencies', () => {
    expect(breaking('@conch/p', { dependencies: ['@conch/s', '@conch/f'] })).toEqual(['@conch/p depends on @conch/f: a provider package may use seam packages only, and @conch/f is test-support: test support is only ever a devDependency'])
    expect(breaking('@conch/e', { dependencies: ['@conch/s', '@conch/f'] })).toEqual(['@conch/e depends on @conch/f: an entry package may use seam, provider, tool, entry packages only, and @conch/f is test-support: test support is only ever a devDependency'])
  })

  it('fails an entry that imports a command', () => {
    expect(breaking('@conch/e', { dependencies: ['@conch/s', '@conch/cmd'] })).toEqual(['@conch/e depends on @conch/cmd: @conch/cmd is a command (it has a bin), and nothing but test support imports a command'])
  })

  it('fails packages that use each other, however long the cycle', () => {
    expect(breaking('@conch/s', { dependencies: ['@conch/s2'] })).toEqual(['@conch/s -> @conch/s2 -> @conch/s: packages that use each other; move what they share into a package of its own'])
    const three = [...workspace(), { name: '@conch/s3', dir: 'packages/s3', kind: 'seam', command: false, dependencies: ['@conch/s2'], devDependencies: [], imports: [] }]
    expect(checkLayers(three.map((entry) => (entry.name === '@conch/s' ? { ...entry, imports: ['@conch/s3'], dependencies: ['@conch/s3'] } : entry)))).toEqual(['@conch/s -> @conch/s3 -> @conch/s2 -> @conch/s: packages that use each other; move what they share into a package of its own'])
  })

  it('fails a src import the package does not list in dependencies', () => {
    expect(breaking('@conch/s2', { dependencies: [] })).toEqual(['@conch/s2 imports @conch/s from src/ without listing it in dependencies'])
  })
})

describe('readWorkspace', () => {
  let dir: string | undefined
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    dir = undefined
  })

  function write(file: string, text: string): void {
    mkdirSync(path.dirname(path.join(dir!, file)), { recursive: true })
    writeFileSync(path.join(dir!, file), text)
  }

  it('reads the listed packages, their kinds and every form of src import, and the check fails the one without a kind', () => {
    dir = mkdtempSync(path.join(tmpdir(), 'conch-layers-'))
    write('pnpm-workspace.yaml', "packages:\n  - packages/*/*\n  - examples/*\n\nignoredOptionalDependencies:\n  - 'nothing/*'\n")
    write('packages/g/a/package.json', JSON.stringify({ name: '@conch/a', conch: { kind: 'seam' }, dependencies: { '@conch/b': 'workspace:*', zod: '4' }, devDependencies: { '@conch/c': 'workspace:*' } }))
    write('packages/g/a/src/index.ts', "import type { B } from '@conch/b'\nexport * from \"@conch/c/sub\"\nawait import('@conch/d')\nimport '@conch/e'\nimport { self } from '@conch/a'\n")
    write('packages/g/a/tests/a.test.ts', "import '@conch/test-only'\n")
    write('packages/g/b/package.json', JSON.stringify({ name: '@conch/b', bin: { b: './b.js' } }))
    write('examples/x/package.json', JSON.stringify({ name: '@conch/x', conch: { kind: 'entry' } }))
    write('examples/x/node_modules/y/package.json', '{}')
    write('nothing/z/package.json', JSON.stringify({ name: '@conch/z' }))

    const packages = readWorkspace(dir)
    expect(packages).toEqual([
      { name: '@conch/x', dir: 'examples/x', kind: 'entry', command: false, dependencies: [], devDependencies: [], imports: [] },
      { name: '@conch/a', dir: 'packages/g/a', kind: 'seam', command: false, dependencies: ['@conch/b'], devDependencies: ['@conch/c'], imports: ['@conch/b', '@conch/c', '@conch/d', '@conch/e'] },
      { name: '@conch/b', dir: 'packages/g/b', kind: undefined, command: true, dependencies: [], devDependencies: [], imports: [] },
    ])
    expect(checkLayers(packages)).toEqual([expect.stringContaining('@conch/b (packages/g/b/package.json) has no "conch": {"kind": …}')])
  })
})
