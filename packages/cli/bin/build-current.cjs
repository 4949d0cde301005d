// Whether the build in `dist` may run: every source file its manifest lists keeps its mtime.
// CommonJS, so bin/conch.js can `require` it; build-current.js gives it to ES modules.
'use strict'
const { readFileSync, statSync } = require('node:fs')

/**
 * @param {URL} dist
 * @param {Record<string, string | undefined>} env
 * @returns {boolean}
 */
function buildIsCurrent(dist, env) {
  return currentBuild(dist, env) !== undefined
}

/**
 * The build to run, when it is current (see `buildIsCurrent`): the bundle's file URL and, when
 * the manifest records one for this very bundle (same size and mtime), its V8 code cache —
 * the one made for `command` (`codeCache.commands`, e.g. `run`) if there is one, else the
 * general one.
 * @param {URL} dist
 * @param {Record<string, string | undefined>} env
 * @param {string} [command] the conch command about to run (`run`, `acp`, …)
 * @returns {{ bundle: URL, encoding: 'latin1' | 'utf8', cachedData?: Buffer } | undefined}
 */
function currentBuild(dist, env, command) {
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
    const own = command === undefined ? undefined : cache.commands?.[command]
    return { ...build, cachedData: readFileSync(new URL(typeof own === 'string' ? own : cache.file, dist)) }
  } catch {
    return build
  }
}

exports.buildIsCurrent = buildIsCurrent
exports.currentBuild = currentBuild
