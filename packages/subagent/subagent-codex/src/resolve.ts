/**
 * Finding the native `codex` binary. The npm package `@openai/codex` is a Node wrapper
 * (`bin/codex.js`) around a platform package (`@openai/codex-<platform>`, installed as an
 * optional dependency) holding the static binary at `vendor/<target triple>/bin/codex`. On
 * Node 20 the wrapper keeps an extra Node process alive for the child's whole life, so the
 * binary is spawned directly.
 *
 * Order: the configured `executable`; the products folder (`CONCH_PRODUCTS_DIR`, else the
 * nearest `.products/` above this package — where scripts/install-products.sh installs the
 * pinned version); then `codex` on `PATH`, following an npm wrapper to its binary.
 */
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** `@openai/codex-<platform>` and the target triple of its `vendor/` folder, per Node platform and arch. */
const PLATFORMS: Record<string, { pkg: string; triple: string }> = {
  'linux-x64': { pkg: 'codex-linux-x64', triple: 'x86_64-unknown-linux-musl' },
  'linux-arm64': { pkg: 'codex-linux-arm64', triple: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { pkg: 'codex-darwin-x64', triple: 'x86_64-apple-darwin' },
  'darwin-arm64': { pkg: 'codex-darwin-arm64', triple: 'aarch64-apple-darwin' },
}

export interface ResolveEnv {
  platform: string
  arch: string
  env: Readonly<Record<string, string | undefined>>
  /** Where the search for `.products/` starts (this package's folder). */
  from: string
}

const defaultEnv = (): ResolveEnv => ({
  platform: process.platform,
  arch: process.arch,
  env: process.env,
  from: dirname(fileURLToPath(import.meta.url)),
})

export function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The binary inside a `node_modules` folder that holds `@openai/codex-<platform>`, if any. */
function inNodeModules(nodeModules: string, where: ResolveEnv): string | undefined {
  const platform = PLATFORMS[`${where.platform}-${where.arch}`]
  if (!platform) return undefined
  const binary = join(nodeModules, '@openai', platform.pkg, 'vendor', platform.triple, 'bin', 'codex')
  return isExecutableFile(binary) ? binary : undefined
}

/** The nearest `.products/` folder at or above `from`. */
export function findProductsDir(from: string, env: Readonly<Record<string, string | undefined>> = process.env): string | undefined {
  const configured = env.CONCH_PRODUCTS_DIR
  if (configured) return existsSync(configured) ? configured : undefined
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, '.products')
    if (existsSync(candidate)) return candidate
    if (dirname(dir) === dir) return undefined
  }
}

/** `codex` on PATH: the binary itself, or the binary an npm wrapper (`…/@openai/codex/bin/codex.js`) would start. */
function onPath(where: ResolveEnv): string | undefined {
  for (const dir of (where.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, 'codex')
    if (!isExecutableFile(candidate)) continue
    let real: string
    try {
      real = realpathSync(candidate)
    } catch {
      continue
    }
    if (!real.endsWith('.js')) return candidate
    // …/node_modules/@openai/codex/bin/codex.js: the platform package is nested or a sibling.
    const wrapper = dirname(dirname(real))
    return inNodeModules(join(wrapper, 'node_modules'), where) ?? inNodeModules(dirname(dirname(wrapper)), where)
  }
  return undefined
}

/**
 * The native codex binary, or undefined when none is found.
 * @param configured the provider's `executable` (already checked at load).
 */
export function resolveCodexExecutable(configured: string | undefined, where: ResolveEnv = defaultEnv()): string | undefined {
  if (configured !== undefined) return configured
  const products = findProductsDir(where.from, where.env)
  return (products && inNodeModules(join(products, 'node_modules'), where)) ?? onPath(where)
}

export const NOT_FOUND_HINT =
  'set `executable` in the codex provider config to the native codex binary, or install @openai/codex (./scripts/install-products.sh installs the pinned version into .products/)'
