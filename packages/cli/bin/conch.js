#!/usr/bin/env node
// The conch command: the build in ../dist while its sources are unchanged, else (or with
// CONCH_FROM_SOURCE=1) the TypeScript sources through tsx. The build runs as a `vm.Script` with
// its V8 code cache (Node 20 has no compile cache for ES modules); CONCH_CODE_CACHE_OUT=FILE
// writes a fresh cache at exit. Modules load with `require`: each ES import costs a start more.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { readFileSync, writeFileSync } = require('node:fs')
const { dirname } = require('node:path')
const { fileURLToPath } = require('node:url')
const vm = require('node:vm')
const { currentBuild } = require('./build-current.cjs')

const build = currentBuild(new URL('../dist/', import.meta.url), process.env, process.argv[2])

if (build) {
  const filename = fileURLToPath(build.bundle)
  // A cache is written from nothing: one read in would add every function it holds.
  const out = process.env.CONCH_CODE_CACHE_OUT
  const script = new vm.Script(readFileSync(filename, build.encoding), {
    filename,
    ...(build.cachedData && !out ? { cachedData: build.cachedData } : {}),
  })
  if (out) process.once('exit', () => writeFileSync(out, script.createCachedData()))
  // import.meta of the bundled modules: the bundle's URL; bare names resolve from this package.
  // `import` loads an ES module for the bundle, which cannot use import() itself (see the build).
  // `preload` / `preloaded`: ES module packages left out of the build, imported before the
  // plugin that needs them is evaluated and then read synchronously.
  const preloaded = new Map()
  const host = {
    url: build.bundle.href,
    resolve: (specifier) => import.meta.resolve(specifier),
    import: (specifier) => import(specifier),
    preload: async (url) => void preloaded.set(url, await import(url)),
    preloaded: (url) => {
      if (!preloaded.has(url)) throw new Error(`conch: ${url} was not preloaded before the plugin that needs it`)
      return preloaded.get(url)
    },
  }
  script.runInThisContext()(createRequire(filename), filename, dirname(filename), host)
} else {
  // No tsconfig.json: tsx would read the one in the working directory — a workspace a confined
  // terminal may write — and apply its `paths` to every module it compiles, conch's own too.
  const { register } = await import('tsx/esm/api')
  register({ tsconfig: false })
  await import('../src/main.ts')
}
