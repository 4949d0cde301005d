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
  return currentBuild(dist, env) !== undefined
}

/**
 * The build to run, when it is current (see `buildIsCurrent`): the bundle's file URL and, when
 * the manifest records one for this very bundle (same size and mtime), its V8 code cache.
 * @param {URL} dist
 * @param {Record<string, string | undefined>} env
 * @returns {{ bundle: URL, encoding: 'latin1' | 'utf8', cachedData?: Buffer } | undefined}
 */
export function currentBuild(dist, env) {
  if (env.CONCH_FROM_SOURCE === '1') return undefined
  let manifest
  try {
    manifest = JSON.parse(readFileSync(new URL('manifest.json', dist), 'utf8'))
    const { inputs } = manifest
    if (typeof inputs !== 'object' || inputs === null || Object.keys(inputs).length === 0) return undefined
    for (const [path, mtimeMs] of Object.entries(inputs)) {
      if (statSync(path).mtimeMs !== mtimeMs) return undefined
    }
    if (typeof manifest.bundle !== 'string') return undefined
  } catch {
    return undefined
  }
  const build = { bundle: new URL(manifest.bundle, dist), encoding: manifest.encoding === 'latin1' ? 'latin1' : 'utf8' }
  const cache = manifest.codeCache
  if (typeof cache?.file !== 'string') return build
  try {
    const { size, mtimeMs } = statSync(build.bundle)
    if (size !== cache.bundleSize || mtimeMs !== cache.bundleMtimeMs) return build
    return { ...build, cachedData: readFileSync(new URL(cache.file, dist)) }
  } catch {
    return build
  }
}
