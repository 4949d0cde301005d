/**
 * The dependency direction of the whole workspace (docs/architecture.md, layout): a seam imports
 * no provider, a provider imports seams only, a `tool-*` package imports seams only, and nothing
 * imports the CLI. Checked on every package's `dependencies` and on the `@conch/*` specifiers
 * its src/ files import (static `from '…'`, `import('…')` and `export … from '…'`).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..')

type Kind = 'seam' | 'provider' | 'tool' | 'entry'

interface Package {
  name: string
  dir: string
  kind: Kind
  dependencies: string[]
  imports: string[]
}

/**
 * What a package is, by its name: `@conch/cli` and `@conch/acp` are entry points (they compose
 * everything); `tool-*` packages are tools; a package named after a seam plus the mechanism it
 * provides (`pty-local`, `llm-openai`) is a provider; the rest are seams.
 */
function kindOf(name: string): Kind {
  if (name === '@conch/cli' || name === '@conch/acp') return 'entry'
  if (/^@conch\/tool-/.test(name)) return 'tool'
  if (/^@conch\/[a-z]+-(local|memory|openai|replay)$/.test(name)) return 'provider'
  return 'seam'
}

function sourceFiles(dir: string): string[] {
  const out: string[] = []
  for (const entry of readdirSync(dir)) {
    const full = path.join(dir, entry)
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full))
    else if (/\.(ts|js|mjs)$/.test(entry)) out.push(full)
  }
  return out
}

function workspacePackages(): Package[] {
  const dirs: string[] = []
  for (const group of readdirSync(path.join(root, 'packages'))) {
    const groupDir = path.join(root, 'packages', group)
    try {
      statSync(path.join(groupDir, 'package.json'))
      dirs.push(groupDir)
      continue
    } catch {
      // a group folder: its packages are one level down
    }
    for (const name of readdirSync(groupDir)) {
      try {
        statSync(path.join(groupDir, name, 'package.json'))
        dirs.push(path.join(groupDir, name))
      } catch {
        // not a package
      }
    }
  }
  return dirs.map((dir) => {
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name: string; dependencies?: Record<string, string> }
    const imports = new Set<string>()
    let files: string[] = []
    try {
      files = sourceFiles(path.join(dir, 'src'))
    } catch {
      // no src folder
    }
    for (const file of files) {
      const text = readFileSync(file, 'utf8')
      for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*)['"](@conch\/[a-z0-9-]+)/g)) imports.add(match[1]!)
    }
    return {
      name: manifest.name,
      dir,
      kind: kindOf(manifest.name),
      dependencies: Object.keys(manifest.dependencies ?? {}).filter((dependency) => dependency.startsWith('@conch/')),
      imports: [...imports].filter((name) => name !== manifest.name),
    }
  })
}

const packages = workspacePackages()
const kinds = new Map(packages.map((entry) => [entry.name, entry.kind]))

/** What a package of `kind` may depend on. */
const ALLOWED: Record<Kind, ReadonlySet<Kind>> = {
  seam: new Set(['seam']),
  provider: new Set(['seam']),
  tool: new Set(['seam']),
  // The CLI starts the ACP server; the check above keeps anything from importing the CLI.
  entry: new Set(['seam', 'provider', 'tool', 'entry']),
}

describe('the workspace’s dependency direction', () => {
  it('finds the packages and knows each kind', () => {
    expect(packages.length).toBeGreaterThan(10)
    expect(kinds.get('@conch/pty')).toBe('seam')
    expect(kinds.get('@conch/pty-local')).toBe('provider')
    expect(kinds.get('@conch/tool-pty')).toBe('tool')
    expect(kinds.get('@conch/cli')).toBe('entry')
  })

  it.each(packages.map((entry) => [entry.name, entry] as const))('%s depends and imports in the allowed direction only', (_, entry) => {
    const wrong: string[] = []
    for (const [how, names] of [['depends on', entry.dependencies], ['imports', entry.imports]] as const) {
      for (const name of names) {
        const kind = kinds.get(name)
        if (kind === undefined) continue // not a workspace package
        if (name === '@conch/cli') wrong.push(`${how} ${name}: nothing imports the CLI`)
        else if (!ALLOWED[entry.kind].has(kind)) wrong.push(`${how} ${name}: a ${entry.kind} package may use ${[...ALLOWED[entry.kind]].join(', ')} packages only, and ${name} is a ${kind} package`)
      }
    }
    expect(wrong).toEqual([])
  })

  it('keeps the terminal contract free of the agent loop: @conch/pty and its backends need no @conch/agent', () => {
    for (const name of ['@conch/pty', '@conch/pty-local', '@conch/pty-memory']) {
      const entry = packages.find((candidate) => candidate.name === name)!
      expect([...entry.dependencies, ...entry.imports]).not.toContain('@conch/agent')
    }
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
    const missing = packages.map((entry) => path.relative(root, entry.dir)).filter((dir) => !named.has(dir))
    expect(missing).toEqual([])
  })

  it('declares every workspace package it imports', () => {
    const undeclared = packages.flatMap((entry) => entry.imports.filter((name) => kinds.has(name) && !entry.dependencies.includes(name)).map((name) => `${entry.name} imports ${name}`))
    expect(undeclared).toEqual([])
  })
})
