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
 * `pnpm-workspace.yaml`, as in a clone of the repository), the whole checkout: not only the code
 * and the launch scripts but every file a launcher or a tool reads there on the operator's next
 * step — `.npmrc` and `.pnpmfile.cjs` (pnpm runs them), `.git` (hooks, `core.fsmonitor`), the
 * test and CI entry points — including ones that do not exist yet. A workspace inside the
 * checkout is therefore read-only. Also the Node.js binary that runs conch. Only paths that
 * exist are returned.
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
  else if (workspace !== undefined) paths.push(workspace)
  return paths.filter((path) => existsSync(path))
}

/** Everything `boot` protects for `composition`: its files, its plugin modules and the installation. */
export function protectedPathsOf(composition: Composition): string[] {
  return [...new Set([...compositionPaths(composition), ...installationPaths()])]
}
