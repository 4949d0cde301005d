/**
 * Finding the native `codex` binary: the configured `executable`, else the search every part of
 * conch shares (`resolveCodexExecutable` of @conch/subagent: the products folder, then `codex` on
 * `PATH`, following an npm wrapper to its binary).
 */
import { productsEnv, resolveCodexExecutable as resolveShared, type ProductsEnv } from '@conch/subagent'

export { findProductsDir, isExecutableFile, type ProductsEnv as ResolveEnv } from '@conch/subagent'

/**
 * The native codex binary, or undefined when none is found.
 * @param configured the provider's `executable` (already checked at load).
 */
export function resolveCodexExecutable(configured: string | undefined, where: ProductsEnv = productsEnv()): string | undefined {
  return configured ?? resolveShared(where)
}

export const NOT_FOUND_HINT =
  'set `executable` in the codex provider config to the native codex binary, or install @openai/codex (./scripts/install-products.sh installs the pinned version into .products/)'
