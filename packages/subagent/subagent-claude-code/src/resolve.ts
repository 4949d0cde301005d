/**
 * Finding the native `claude` binary: the configured `executable`, else the search every part of
 * conch shares (`resolveClaudeExecutable` of @conch/subagent: the products folder, then `PATH`),
 * with one more place this provider knows — the SDK's own platform package, when it is installed.
 */
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { isExecutableFile, productsEnv, resolveClaudeExecutable as resolveShared, type ProductsEnv } from '@conch/subagent'

export { findProductsDir, isExecutableFile, platformPackage, type ProductsEnv as ResolveEnv } from '@conch/subagent'

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

/** The native claude binary, or undefined when none is found. */
export function resolveClaudeExecutable(configured: string | undefined, where: ProductsEnv = productsEnv()): string | undefined {
  return configured ?? resolveShared(where, besideSdk)
}

export const NOT_FOUND_HINT =
  'set `executable` in the claude-code provider config to the claude binary, or install it (./scripts/install-products.sh installs the pinned one into .products/)'
