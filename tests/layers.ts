/**
 * The layers of the workspace (docs/architecture.md, "Layers"). Each package names its kind in its
 * package.json as `"conch": {"kind": …}`; `checkLayers` checks every package's runtime
 * dependencies (`dependencies`, `peerDependencies`, `optionalDependencies`) and the `@conch/*`
 * specifiers its src/ files import against what its kind may use.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'

export const KINDS = ['seam', 'provider', 'tool', 'entry', 'test-support'] as const
export type Kind = (typeof KINDS)[number]

export interface WorkspacePackage {
  name: string
  /** Folder, relative to the workspace root. */
  dir: string
  /** `conch.kind` as written (unchecked): `checkLayers` reports a missing or unknown one. */
  kind: string | undefined
  /** The package has a `bin`: it is a command, which nothing but test support imports. */
  command: boolean
  /** Workspace-scoped (`@conch/*`) runtime dependencies. */
  dependencies: string[]
  /** Workspace-scoped (`@conch/*`) devDependencies. */
  devDependencies: string[]
  /** `@conch/*` packages its src/ files import, itself excluded. */
  imports: string[]
}

/** What a package of each kind may depend on or import at run time. devDependencies are free. */
export const ALLOWED: Record<Kind, readonly Kind[]> = {
  seam: ['seam'],
  provider: ['seam'],
  tool: ['seam'],
  entry: ['seam', 'provider', 'tool', 'entry'],
  'test-support': ['seam', 'provider', 'tool', 'entry', 'test-support'],
}

const SCOPE = '@conch/'
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)['"](@conch\/[a-z0-9-]+)/g

/** Every package the pnpm workspace lists (`packages:` globs in pnpm-workspace.yaml, `*` segments only). */
export function readWorkspace(root: string): WorkspacePackage[] {
  const manifest = readFileSync(path.join(root, 'pnpm-workspace.yaml'), 'utf8')
  const block = /^packages:\n((?:[ \t]+-.*\n?)+)/m.exec(manifest)?.[1] ?? ''
  const globs = [...block.matchAll(/-\s*['"]?([^'"\s]+)/g)].map((match) => match[1]!)
  const dirs = new Set(globs.flatMap((glob) => expand(root, glob.split('/'))))
  return [...dirs].sort().filter((dir) => existsSync(path.join(root, dir, 'package.json'))).map((dir) => readPackage(root, dir))
}

function expand(root: string, segments: string[], prefix = ''): string[] {
  if (segments.length === 0) return [prefix]
  const [head, ...rest] = segments
  const names = head === '*' ? readdirSync(path.join(root, prefix), { withFileTypes: true }).filter((entry) => entry.isDirectory() && entry.name !== 'node_modules').map((entry) => entry.name) : [head!]
  return names.filter((name) => existsSync(path.join(root, prefix, name))).flatMap((name) => expand(root, rest, prefix ? `${prefix}/${name}` : name))
}

function readPackage(root: string, dir: string): WorkspacePackage {
  const manifest = JSON.parse(readFileSync(path.join(root, dir, 'package.json'), 'utf8')) as {
    name: string
    bin?: unknown
    conch?: { kind?: string }
    dependencies?: Record<string, string>
    peerDependencies?: Record<string, string>
    optionalDependencies?: Record<string, string>
    devDependencies?: Record<string, string>
  }
  const scoped = (...maps: (Record<string, string> | undefined)[]) => [...new Set(maps.flatMap((map) => Object.keys(map ?? {})))].filter((name) => name.startsWith(SCOPE))
  const imports = new Set<string>()
  for (const file of sourceFiles(path.join(root, dir, 'src'))) {
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) imports.add(match[1]!)
  }
  imports.delete(manifest.name)
  return {
    name: manifest.name,
    dir,
    kind: manifest.conch?.kind,
    command: manifest.bin !== undefined,
    dependencies: scoped(manifest.dependencies, manifest.peerDependencies, manifest.optionalDependencies),
    devDependencies: scoped(manifest.devDependencies),
    imports: [...imports].sort(),
  }
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry)
    if (statSync(full).isDirectory()) return sourceFiles(full)
    return /\.[cm]?[jt]s$/.test(entry) ? [full] : []
  })
}

function isKind(kind: string | undefined): kind is Kind {
  return (KINDS as readonly string[]).includes(kind ?? '')
}

/** One sentence per broken rule; empty when the workspace is layered. */
export function checkLayers(packages: readonly WorkspacePackage[]): string[] {
  const byName = new Map(packages.map((entry) => [entry.name, entry]))
  const wrong: string[] = []
  for (const entry of packages) {
    if (!isKind(entry.kind)) {
      const found = entry.kind === undefined ? 'has no' : `has an unknown kind "${entry.kind}" in its`
      wrong.push(`${entry.name} (${entry.dir}/package.json) ${found} "conch": {"kind": …}: give it one of ${KINDS.join(', ')}`)
      continue
    }
    const kind = entry.kind
    for (const [how, names] of [['depends on', entry.dependencies], ['imports', entry.imports]] as const) {
      for (const name of names) {
        const target = byName.get(name)
        if (target === undefined || !isKind(target.kind)) continue // not a workspace package, or reported above
        if (!ALLOWED[kind].includes(target.kind)) {
          const fix = target.kind === 'test-support' ? ': test support is only ever a devDependency' : ''
          wrong.push(`${entry.name} ${how} ${name}: ${kind === 'entry' ? 'an' : 'a'} ${kind} package may use ${ALLOWED[kind].join(', ')} packages only, and ${name} is ${target.kind}${fix}`)
        } else if (target.command && kind !== 'test-support') {
          wrong.push(`${entry.name} ${how} ${name}: ${name} is a command (it has a bin), and nothing but test support imports a command`)
        }
      }
    }
    for (const name of entry.imports) {
      if (byName.has(name) && !entry.dependencies.includes(name)) wrong.push(`${entry.name} imports ${name} from src/ without listing it in dependencies`)
    }
  }
  return [...wrong, ...cycles(packages, byName)]
}

/**
 * One sentence per cycle of runtime dependencies and imports that the kinds allow (an edge against
 * them is reported above), named from its least package.
 */
function cycles(packages: readonly WorkspacePackage[], byName: ReadonlyMap<string, WorkspacePackage>): string[] {
  const found = new Set<string>()
  const allowed = (from: WorkspacePackage, to: WorkspacePackage | undefined): to is WorkspacePackage =>
    to !== undefined && isKind(from.kind) && isKind(to.kind) && ALLOWED[from.kind].includes(to.kind) && (!to.command || from.kind === 'test-support')
  const walk = (path: readonly string[]): void => {
    const entry = byName.get(path.at(-1)!)!
    for (const next of new Set([...entry.dependencies, ...entry.imports])) {
      if (!allowed(entry, byName.get(next))) continue
      if (next === path[0]) {
        if (path.every((name) => name >= path[0]!)) found.add(`${[...path, next].join(' -> ')}: packages that use each other; move what they share into a package of its own`)
      } else if (!path.includes(next)) walk([...path, next])
    }
  }
  for (const entry of packages) walk([entry.name])
  return [...found]
}
