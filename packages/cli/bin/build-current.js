// Whether the build in `dist` (a file URL of packages/cli/dist/) may run: its manifest lists
// every source file it was built from with the file's mtime, and each is unchanged. False
// with CONCH_FROM_SOURCE=1, and when the manifest is missing or unreadable.
import { readFileSync, statSync } from 'node:fs'

/**
 * @param {URL} dist
 * @param {Record<string, string | undefined>} env
 * @returns {boolean}
 */
export function buildIsCurrent(dist, env) {
  if (env.CONCH_FROM_SOURCE === '1') return false
  try {
    const { inputs } = JSON.parse(readFileSync(new URL('manifest.json', dist), 'utf8'))
    if (typeof inputs !== 'object' || inputs === null || Object.keys(inputs).length === 0) return false
    for (const [path, mtimeMs] of Object.entries(inputs)) {
      if (statSync(path).mtimeMs !== mtimeMs) return false
    }
    return true
  } catch {
    return false
  }
}
