/**
 * What a running composition must keep out of its own sandboxes' reach: every file it was
 * composed from (the yml and each base it stacks on), every plugin module it loaded from a file,
 * and conch's installation (the code, dependencies and launch scripts it runs from). The boot
 * registers them with `ctx.sandbox.protect`, so each sandbox binds them read-only whatever the
 * workspace — a confined terminal cannot rewrite `cordis.yml` into `danger-full-access`, nor the
 * code the next run executes unconfined.
 */
import { existsSync, lstatSync, realpathSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isWithin } from '@conch/sandbox'
import type { Resolution } from './closure.ts'
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

/** The plugin modules of `composition` loaded from a file outside `installation` (local plugins). */
export function localPluginPaths(composition: Composition, installation: readonly string[] = installationPaths()): string[] {
  const files = new Set(composition.files)
  return compositionPaths(composition).filter((path) => !files.has(path) && !installation.some((root) => isWithin(path, root)))
}

/**
 * What the import closure of the local plugins adds (`resolutions`: what the boot resolved,
 * see closure.ts), for each resolution to a file outside `installation`:
 *
 * - the file, and the nearest `package.json` above it (its `type` decides how the file loads, its
 *   `imports` what `#name` means);
 * - for a package name (a bare specifier, Node's `node_modules` lookup from the importer's folder,
 *   https://nodejs.org/api/modules.html#loading-from-node_modules-folders): the package folder it
 *   was found in, whole — when that is a symbolic link (as pnpm installs), the folder holding the
 *   link (`node_modules`, or `node_modules/@scope`) so the link cannot be replaced, and the
 *   link's target — and the package root of the file itself when it lies in a `node_modules`.
 *
 * Paths that do not exist are left out.
 */
export function closurePaths(resolutions: readonly Resolution[], installation: readonly string[] = installationPaths()): string[] {
  const out: string[] = []
  const outside = (path: string) => !installation.some((root) => isWithin(path, root))
  for (const resolution of resolutions) {
    if (outside(resolution.path)) {
      out.push(resolution.path)
      const manifest = nearestPackageJson(dirname(resolution.path))
      if (manifest !== undefined) out.push(manifest)
      const root = packageRootOf(resolution.path)
      if (root !== undefined) out.push(root)
    }
    const name = packageName(resolution.specifier)
    if (name === undefined || resolution.parent === undefined || !outside(resolution.parent)) continue
    for (let dir = dirname(resolution.parent); ; dir = dirname(dir)) {
      const found = join(dir, 'node_modules', name)
      const stat = lstatOf(found)
      if (stat !== undefined) {
        if (stat.isSymbolicLink()) {
          out.push(dirname(found))
          const target = realpathOf(found)
          if (target !== undefined) out.push(target)
        } else {
          out.push(found)
        }
        break
      }
      if (dirname(dir) === dir) break
    }
  }
  return out.filter((path) => outside(path) && existsSync(path))
}

/**
 * The code the host runs from outside the installation: the local plugin modules and the import
 * closure they add (`closurePaths`). Registered with `protect(paths, {code: true})`: a confined
 * process may write none of its folders, since a read-only mount of these paths does not cover
 * what Node would resolve instead (a `lib.ts` that tsx prefers to the `lib.js` imported, a nearer
 * `node_modules` or `package.json`), what a plugin imports after the boot, nor another hard link
 * to a file inside a protected package folder.
 */
export function localCodePaths(composition: Composition, resolutions: readonly Resolution[] = []): string[] {
  const installation = installationPaths()
  return [...new Set([...localPluginPaths(composition, installation), ...closurePaths(resolutions, installation)])]
}

/**
 * Everything `boot` protects for `composition`: its files, its plugin modules, the import closure
 * of its local plugins (`resolutions`, see `closurePaths`) and the installation; a path inside
 * another one that is protected is left out (the folder covers it).
 */
export function protectedPathsOf(composition: Composition, resolutions: readonly Resolution[] = []): string[] {
  const installation = installationPaths()
  const paths = [...new Set([...compositionPaths(composition), ...installation, ...closurePaths(resolutions, installation)])]
  return paths.filter((path) => !paths.some((other) => other !== path && isWithin(path, other)))
}

/** `@scope/name` or `name` of a bare specifier (`zod`, `zod/v4`, `@scope/pkg/sub`); undefined for any other. */
function packageName(specifier: string): string | undefined {
  if (specifier === '' || specifier.startsWith('.') || specifier.startsWith('#') || isAbsolute(specifier)) return undefined
  if (/^[a-z][a-z0-9+.-]*:/i.test(specifier)) return undefined
  const parts = specifier.split('/')
  if (specifier.startsWith('@')) return parts.length >= 2 ? `${parts[0]}/${parts[1]}` : undefined
  return parts[0]
}

/** The package folder (`…/node_modules/name` or `…/node_modules/@scope/name`) that holds `path`, if any. */
function packageRootOf(path: string): string | undefined {
  const parts = path.split(sep)
  const index = parts.lastIndexOf('node_modules')
  if (index < 0 || index + 1 >= parts.length - 1) return undefined
  const length = parts[index + 1]!.startsWith('@') ? index + 3 : index + 2
  return length < parts.length ? parts.slice(0, length).join(sep) : undefined
}

function nearestPackageJson(from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'package.json')
    if (existsSync(candidate)) return candidate
    if (dirname(dir) === dir) return undefined
  }
}

function lstatOf(path: string) {
  try {
    return lstatSync(path)
  } catch {
    return undefined
  }
}

/** The canonical path of `path`, or undefined when it cannot be resolved. */
export function realpathOf(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}
