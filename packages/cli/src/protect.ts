/**
 * What a running composition must keep out of its own sandboxes' reach: every file it was
 * composed from (the yml and each base it stacks on), every plugin module it loaded from a file,
 * and conch's installation (the code, dependencies and launch scripts it runs from). The boot
 * registers them with `ctx.sandbox.protect`, so each sandbox binds them read-only whatever the
 * workspace — a confined terminal cannot rewrite `cordis.yml` into `danger-full-access`, nor the
 * code the next run executes unconfined.
 */
import { existsSync, realpathSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { flattenRows, type Composition } from './compose.ts'
import { resolvePluginUrl } from './resolve.ts'

/**
 * Files at the root of a pnpm workspace that decide what runs: the packages and their
 * dependencies, the bundled pnpm, the launch scripts, and the manifests and settings pnpm and
 * tsx read.
 */
const WORKSPACE_ENTRIES = [
  'packages',
  'node_modules',
  '.tools',
  'scripts',
  'package.json',
  'pnpm-workspace.yaml',
  'pnpm-lock.yaml',
  'tsconfig.json',
  'tsconfig.base.json',
  '.npmrc',
]

/** The composition's files and the files of its plugins that are loaded from a path (absolute). */
export function compositionPaths(composition: Composition): string[] {
  const paths = [...composition.files]
  for (const row of flattenRows(composition.entries)) {
    let url: string
    try {
      url = resolvePluginUrl(row)
    } catch {
      continue // an unknown package fails the boot anyway
    }
    if (url.startsWith('file:')) paths.push(fileURLToPath(url))
  }
  return paths
}

/**
 * conch's installation, found from this package's own folder (`packages/cli`): installed as a
 * dependency (a `node_modules` folder above it), the outermost such `node_modules` and the
 * `package.json` beside it; otherwise, in a pnpm workspace (a folder above with
 * `pnpm-workspace.yaml`, as in a clone of the repository), the `WORKSPACE_ENTRIES` of its root.
 * Also the Node.js binary that runs conch. Only paths that exist are returned.
 */
export function installationPaths(from: string = dirname(fileURLToPath(import.meta.url))): string[] {
  const ancestors: string[] = []
  for (let dir = realpathSync(from); ; dir = dirname(dir)) {
    ancestors.push(dir)
    if (dirname(dir) === dir) break
  }
  const paths: string[] = [process.execPath]
  const modules = ancestors.filter((dir) => basename(dir) === 'node_modules').at(-1)
  const workspace = ancestors.find((dir) => existsSync(join(dir, 'pnpm-workspace.yaml')))
  if (modules !== undefined) paths.push(modules, join(dirname(modules), 'package.json'))
  else if (workspace !== undefined) paths.push(...WORKSPACE_ENTRIES.map((entry) => join(workspace, entry)))
  return paths.filter((path) => existsSync(path))
}

/** Everything `boot` protects for `composition`: its files, its plugin modules and the installation. */
export function protectedPathsOf(composition: Composition): string[] {
  return [...new Set([...compositionPaths(composition), ...installationPaths()])]
}
