#!/usr/bin/env node
// The conch command. Runs the build in ../dist (scripts/build-bin.mjs, run by
// scripts/setup.sh) while every source file it was built from is unchanged; otherwise — or
// with CONCH_FROM_SOURCE=1 — runs the TypeScript sources directly, compiled by tsx on import,
// with no tsconfig.json (see docs/configuration.md, "What the boot protects").
//
// The build is one script, compiled here with V8's code cache from the build (Node 20 has no
// compile cache for ES modules; a `vm.Script` takes `cachedData`), the one made for this
// command when there is one. CONCH_CODE_CACHE_OUT=FILE compiles without a cache and writes the
// code cache of everything this process compiled to FILE at exit (the build does).
//
// Everything but node:module is loaded with `require`: each module an ES module imports, a
// built-in too, costs a start more than a required one.
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
