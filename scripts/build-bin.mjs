#!/usr/bin/env node
// Builds the JavaScript the `conch` bin runs (packages/cli/dist/), so a start does not
// transpile the TypeScript sources. The sources stay the truth: the bin runs the build only
// while every input it was built from is unchanged (packages/cli/dist/manifest.json lists
// them with their mtimes) and falls back to the sources through tsx otherwise.
//
// - Entry: packages/cli/src/bundle.ts (registers the built-in plugins, then runs main.ts).
// - Built-in plugins: every @conch/* dependency of packages/cli/package.json, as a virtual
//   module of lazy imports; each becomes its own chunk, loaded only when a yml names it.
// - Kept out of the build, resolved to absolute paths now: native or self-locating packages
//   (node-pty and its .node binding; tsx, loaded only for `./` plugins written in TypeScript).
import { statSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const cli = join(root, 'packages', 'cli')
const dist = join(cli, 'dist')
const EXTERNAL = ['node-pty', 'tsx']

const manifestOf = JSON.parse(readFileSync(join(cli, 'package.json'), 'utf8'))
const plugins = Object.keys(manifestOf.dependencies ?? {}).filter((name) => name.startsWith('@conch/') && name !== '@conch/cli')

/** `conch:builtin-plugins`: `{ '@conch/x': () => import('@conch/x'), … }`. */
const builtinPlugins = {
  name: 'conch-builtin-plugins',
  setup(b) {
    b.onResolve({ filter: /^conch:builtin-plugins$/ }, () => ({ path: 'builtin-plugins', namespace: 'conch' }))
    b.onLoad({ filter: /.*/, namespace: 'conch' }, () => ({
      contents: `export default {\n${plugins.map((name) => `  ${JSON.stringify(name)}: () => import(${JSON.stringify(name)}),`).join('\n')}\n}\n`,
      resolveDir: cli,
      loader: 'js',
    }))
  },
}

/** Keeps EXTERNAL packages out of the build, imported by the absolute path they resolve to from their importer. */
const externals = {
  name: 'conch-externals',
  setup(b) {
    const filter = new RegExp(`^(${EXTERNAL.map((name) => name.replace(/[/.]/g, '\\$&')).join('|')})(/.*)?$`)
    b.onResolve({ filter }, async (args) => {
      if (args.pluginData?.conchExternal) return undefined
      const resolved = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: { conchExternal: true } })
      if (resolved.errors.length) return { errors: resolved.errors }
      return { path: resolved.path, external: true }
    })
  },
}

rmSync(dist, { recursive: true, force: true })
const result = await build({
  entryPoints: { conch: join(cli, 'src', 'bundle.ts') },
  outdir: dist,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  sourcemap: 'linked',
  // Less to parse on every start; names stay readable in stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  metafile: true,
  absWorkingDir: root,
  logLevel: 'warning',
  // Bundled CommonJS dependencies call require(); give the ES module output one.
  banner: { js: "import { createRequire as __conchCreateRequire } from 'node:module'; const require = __conchCreateRequire(import.meta.url);" },
  plugins: [builtinPlugins, externals],
})

// The inputs the bin checks before using the build: every file of this repository that went
// in (not node_modules, which only changes through an install that reruns the build), and the
// cli's package.json (the list of built-in plugins).
const inputs = {}
for (const input of [...Object.keys(result.metafile.inputs), relative(root, join(cli, 'package.json'))]) {
  if (input.includes(':') || input.includes('node_modules')) continue
  const path = resolve(root, input)
  inputs[path] = statSync(path).mtimeMs
}
writeFileSync(join(dist, 'manifest.json'), `${JSON.stringify({ builtAt: new Date().toISOString(), plugins, inputs }, null, 1)}\n`)
process.stderr.write(`built ${relative(root, join(dist, 'conch.mjs'))} (${plugins.length} built-in plugins, ${Object.keys(inputs).length} source files)\n`)
