#!/usr/bin/env node
// The conch command. Runs the build in ../dist (scripts/build-bin.mjs, run by
// scripts/setup.sh) while every source file it was built from is unchanged; otherwise — or
// with CONCH_FROM_SOURCE=1 — runs the TypeScript sources directly, compiled by tsx on import.
//
// The build is one script, compiled here with V8's code cache from the build (Node 20 has no
// compile cache for ES modules; a `vm.Script` takes `cachedData`). CONCH_CODE_CACHE_OUT=FILE
// writes the code cache of everything this process compiled to FILE at exit (the build does).
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import vm from 'node:vm'
import { currentBuild } from './build-current.js'

const build = currentBuild(new URL('../dist/', import.meta.url), process.env)

if (build) {
  const filename = fileURLToPath(build.bundle)
  const script = new vm.Script(readFileSync(filename, build.encoding), {
    filename,
    ...(build.cachedData ? { cachedData: build.cachedData } : {}),
  })
  const out = process.env.CONCH_CODE_CACHE_OUT
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
  const { register } = await import('tsx/esm/api')
  register()
  await import('../src/main.ts')
}
