/**
 * Finding the native `claude` binary. The Claude Agent SDK ships it as one npm package per
 * platform (`@anthropic-ai/claude-agent-sdk-<platform>`, an optional dependency the workspace
 * does not install); scripts/install-products.sh puts the pinned one under `.products/`.
 *
 * Order: the configured `executable`; the products folder (`CONCH_PRODUCTS_DIR`, else the
 * nearest `.products/` above this package); the SDK's own platform package, when it is
 * installed; then `claude` on `PATH`.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export interface ResolveEnv {
  platform: string
  arch: string
  /** `glibc` or `musl` (Linux only). */
  libc: 'glibc' | 'musl'
  env: Readonly<Record<string, string | undefined>>
  /** Where the search for `.products/` starts (this package's folder). */
  from: string
}

function detectLibc(): 'glibc' | 'musl' {
  const report = process.report?.getReport?.() as { header?: { glibcVersionRuntime?: string } } | undefined
  return report?.header?.glibcVersionRuntime ? 'glibc' : 'musl'
}

const defaultEnv = (): ResolveEnv => ({
  platform: process.platform,
  arch: process.arch,
  libc: process.platform === 'linux' ? detectLibc() : 'glibc',
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

/** `@anthropic-ai/claude-agent-sdk-<platform>` for this machine (the SDK's optional dependency names). */
export function platformPackage(where: Pick<ResolveEnv, 'platform' | 'arch' | 'libc'>): string | undefined {
  if (where.arch !== 'x64' && where.arch !== 'arm64') return undefined
  if (where.platform === 'linux') return `@anthropic-ai/claude-agent-sdk-linux-${where.arch}${where.libc === 'musl' ? '-musl' : ''}`
  if (where.platform === 'darwin') return `@anthropic-ai/claude-agent-sdk-darwin-${where.arch}`
  return undefined
}

export function findProductsDir(from: string, env: Readonly<Record<string, string | undefined>> = process.env): string | undefined {
  const configured = env.CONCH_PRODUCTS_DIR
  if (configured) return existsSync(configured) ? configured : undefined
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, '.products')
    if (existsSync(candidate)) return candidate
    if (dirname(dir) === dir) return undefined
  }
}

/** The binary of the SDK's platform package, if the package manager installed it. */
function besideSdk(pkg: string): string | undefined {
  try {
    const sdk = createRequire(import.meta.url).resolve('@anthropic-ai/claude-agent-sdk')
    const manifest = createRequire(sdk).resolve(`${pkg}/package.json`)
    const binary = join(dirname(manifest), 'claude')
    return isExecutableFile(binary) ? binary : undefined
  } catch {
    return undefined
  }
}

function onPath(env: Readonly<Record<string, string | undefined>>): string | undefined {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, 'claude')
    if (isExecutableFile(candidate)) return candidate
  }
  return undefined
}

/** The native claude binary, or undefined when none is found. */
export function resolveClaudeExecutable(configured: string | undefined, where: ResolveEnv = defaultEnv()): string | undefined {
  if (configured !== undefined) return configured
  const pkg = platformPackage(where)
  if (pkg !== undefined) {
    const products = findProductsDir(where.from, where.env)
    const fromProducts = products && join(products, 'node_modules', pkg, 'claude')
    if (fromProducts && isExecutableFile(fromProducts)) return fromProducts
    const sdk = besideSdk(pkg)
    if (sdk) return sdk
  }
  return onPath(where.env)
}

export const NOT_FOUND_HINT =
  'set `executable` in the claude-code provider config to the claude binary, or install it (./scripts/install-products.sh installs the pinned one into .products/)'
