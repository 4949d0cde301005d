/**
 * Finding the native `claude` and `codex` binaries: one search for every part of conch that runs
 * them. Order, claude: the products folder, the SDK's platform package (`besideSdk`), `PATH`;
 * codex: the products folder, `PATH` (an npm wrapper followed to its binary, which is spawned
 * directly: on Node 20 the wrapper keeps a Node process alive for the child's whole life). The
 * products folder is `CONCH_PRODUCTS_DIR`, else the nearest `.products/` above `from`. `PATH` is
 * searched as `resolveExecutable` of @conch/subprocess does: absolute folders only, no match
 * reached through `writable` (a folder an agent may write could hold a program or a link it put there).
 */
import { existsSync, realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isExecutableFile, resolveExecutable } from '@conch/subprocess'

export interface ProductsEnv {
  platform: string
  arch: string
  /** `glibc` (default) or `musl` (Linux only; claude's platform package differs). */
  libc?: 'glibc' | 'musl'
  env: Readonly<Record<string, string | undefined>>
  /** Where the search for `.products/` starts. */
  from: string
  /** Folders an agent may write (its workspace root, …): no binary is taken from PATH folders there. */
  writable?: readonly string[]
}

function detectLibc(): 'glibc' | 'musl' {
  const report = process.report?.getReport?.() as { header?: { glibcVersionRuntime?: string } } | undefined
  return report?.header?.glibcVersionRuntime ? 'glibc' : 'musl'
}

/** This machine, this process's environment, the search starting at this package. */
export function productsEnv(overrides: Partial<ProductsEnv> = {}): ProductsEnv {
  return {
    platform: process.platform,
    arch: process.arch,
    libc: process.platform === 'linux' ? detectLibc() : 'glibc',
    env: process.env,
    from: dirname(fileURLToPath(import.meta.url)),
    ...overrides,
  }
}

/** The nearest `.products/` folder at or above `from` (or `CONCH_PRODUCTS_DIR` when set). */
export function findProductsDir(from: string, env: Readonly<Record<string, string | undefined>> = process.env): string | undefined {
  const configured = env.CONCH_PRODUCTS_DIR
  if (configured) return existsSync(configured) ? configured : undefined
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, '.products')
    if (existsSync(candidate)) return candidate
    if (dirname(dir) === dir) return undefined
  }
}

/** `@anthropic-ai/claude-agent-sdk-<platform>` for this machine (the SDK's optional dependency names). */
export function platformPackage(where: Pick<ProductsEnv, 'platform' | 'arch' | 'libc'>): string | undefined {
  if (where.arch !== 'x64' && where.arch !== 'arm64') return undefined
  if (where.platform === 'linux') return `@anthropic-ai/claude-agent-sdk-linux-${where.arch}${where.libc === 'musl' ? '-musl' : ''}`
  if (where.platform === 'darwin') return `@anthropic-ai/claude-agent-sdk-darwin-${where.arch}`
  return undefined
}

/**
 * The native claude binary, or undefined when none is found.
 * @param besideSdk the binary of a platform package installed beside the SDK, for a caller that depends on it.
 */
export function resolveClaudeExecutable(where: ProductsEnv = productsEnv(), besideSdk: (pkg: string) => string | undefined = () => undefined): string | undefined {
  const pkg = platformPackage(where)
  if (pkg !== undefined) {
    const products = findProductsDir(where.from, where.env)
    const fromProducts = products && join(products, 'node_modules', pkg, 'claude')
    if (fromProducts && isExecutableFile(fromProducts)) return fromProducts
    const sdk = besideSdk(pkg)
    if (sdk) return sdk
  }
  return resolveExecutable('claude', where.env.PATH ?? '', where.writable)
}

/** `@openai/codex-<platform>` and the target triple of its `vendor/` folder, per Node platform and arch. */
const CODEX_PLATFORMS: Record<string, { pkg: string; triple: string }> = {
  'linux-x64': { pkg: 'codex-linux-x64', triple: 'x86_64-unknown-linux-musl' },
  'linux-arm64': { pkg: 'codex-linux-arm64', triple: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { pkg: 'codex-darwin-x64', triple: 'x86_64-apple-darwin' },
  'darwin-arm64': { pkg: 'codex-darwin-arm64', triple: 'aarch64-apple-darwin' },
}

/** The codex binary inside a `node_modules` folder that holds `@openai/codex-<platform>`, if any. */
function codexIn(nodeModules: string, where: ProductsEnv): string | undefined {
  const platform = CODEX_PLATFORMS[`${where.platform}-${where.arch}`]
  if (!platform) return undefined
  const binary = join(nodeModules, '@openai', platform.pkg, 'vendor', platform.triple, 'bin', 'codex')
  return isExecutableFile(binary) ? binary : undefined
}

/** `codex` on PATH: the binary itself, or the binary an npm wrapper (`…/@openai/codex/bin/codex.js`) would start. */
function codexOnPath(where: ProductsEnv): string | undefined {
  const candidate = resolveExecutable('codex', where.env.PATH ?? '', where.writable)
  if (candidate === undefined) return undefined
  let real: string
  try {
    real = realpathSync(candidate)
  } catch {
    return undefined // gone since it was found
  }
  if (!real.endsWith('.js')) return candidate
  // …/node_modules/@openai/codex/bin/codex.js: the platform package is nested or a sibling.
  const wrapper = dirname(dirname(real))
  return codexIn(join(wrapper, 'node_modules'), where) ?? codexIn(dirname(dirname(wrapper)), where)
}

/** The native codex binary, or undefined when none is found. */
export function resolveCodexExecutable(where: ProductsEnv = productsEnv()): string | undefined {
  const products = findProductsDir(where.from, where.env)
  return (products && codexIn(join(products, 'node_modules'), where)) ?? codexOnPath(where)
}
