/**
 * What a running composition keeps out of its own sandboxes' reach: its files, the plugin modules
 * it loaded from a file, and conch's installation. The boot registers them with
 * `ctx.sandbox.protect`, so a confined terminal cannot rewrite `cordis.yml` into
 * `danger-full-access`, nor the code the next run executes unconfined.
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
 * conch's installation, found from this package's folder, as the paths that exist: the Node.js
 * binary; installed as a dependency, the outermost `node_modules` above and the `package.json`
 * beside it; else the whole pnpm workspace checkout, since the operator's next step runs files
 * anywhere in it (`.npmrc`, `.pnpmfile.cjs`, `.git` hooks), even ones not written yet.
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
 * What the local plugins' import closure (`resolutions`, see closure.ts) adds outside
 * `installation`, as the paths that exist: each file, its nearest `package.json` (`type`,
 * `imports`) and its package root inside a `node_modules`; for a bare specifier, the package
 * folder Node's lookup found (https://nodejs.org/api/modules.html#loading-from-node_modules-folders)
 * — for a symbolic link, the folder holding the link, so it cannot be replaced, and its target.
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
 * The code the host runs from outside the installation: the local plugins and their closure.
 * Registered with `protect(paths, {code: true})`, so no folder of it is writable: a read-only
 * mount would not cover what Node resolves instead (a `lib.ts` tsx prefers, a nearer
 * `package.json`), later imports, nor hard links into a protected package.
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
