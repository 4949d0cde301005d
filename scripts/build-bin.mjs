#!/usr/bin/env node
// Builds the JavaScript the `conch` bin runs (packages/cli/dist/), so a start does not
// transpile the TypeScript sources; the bin runs it only while every input listed in
// dist/manifest.json is unchanged. packages/cli's README ("The built bin") describes it.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { mkdirSync, mkdtempSync, realpathSync, statSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { isDeepStrictEqual } from 'node:util'
import { build } from 'esbuild'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const cli = join(root, 'packages', 'cli')
const dist = join(cli, 'dist')
/**
 * Kept out of the build, required by their absolute paths when first used: node-pty is native,
 * dockerode's ssh2 requires optional native bindings, and the others are text every start would
 * read for a first terminal, `run_code` program, live model call or metrics scrape.
 */
const EXTERNAL = ['node-pty', 'amaro', 'openai', '@xterm/headless', 'prom-client', 'dockerode']
/**
 * ES module packages kept out of the build: the bin imports one (`__conchHost.preload`) before
 * the plugin that depends on it is evaluated, and the bundle reads it from there synchronously.
 * The Claude agent SDK is 1.1 MB that every start would otherwise read.
 */
const ESM_EXTERNAL = ['@anthropic-ai/claude-agent-sdk']

const manifestOf = JSON.parse(readFileSync(join(cli, 'package.json'), 'utf8'))
const plugins = Object.keys(manifestOf.dependencies ?? {}).filter((name) => name.startsWith('@conch/') && name !== '@conch/cli')

/**
 * `conch:builtin-plugins`: `{ '@conch/x': () => import('@conch/x'), … }`; a plugin that depends
 * on an ESM_EXTERNAL package has it preloaded first.
 */
const builtinPlugins = {
  name: 'conch-builtin-plugins',
  setup(b) {
    b.onResolve({ filter: /^conch:builtin-plugins$/ }, () => ({ path: 'builtin-plugins', namespace: 'conch' }))
    b.onLoad({ filter: /.*/, namespace: 'conch' }, async () => {
      const entries = []
      for (const name of plugins) {
        const dir = realpathSync(join(cli, 'node_modules', name))
        const { dependencies = {} } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
        const preloads = []
        for (const external of ESM_EXTERNAL.filter((external) => external in dependencies)) {
          const resolved = await b.resolve(external, { kind: 'import-statement', resolveDir: dir, pluginData: { conchExternal: true } })
          if (resolved.errors.length) return { errors: resolved.errors }
          preloads.push(`await __conchHost.preload(${JSON.stringify(pathToFileURL(resolved.path).href)})`)
        }
        entries.push(`  ${JSON.stringify(name)}: async () => { ${preloads.map((line) => `${line}; `).join('')}return import(${JSON.stringify(name)}) },`)
      }
      return { contents: `export default {\n${entries.join('\n')}\n}\n`, resolveDir: cli, loader: 'js' }
    })
  },
}

/** An ESM_EXTERNAL package, as the module the bin preloaded (see builtinPlugins). */
const esmExternals = {
  name: 'conch-esm-externals',
  setup(b) {
    const filter = new RegExp(`^(${ESM_EXTERNAL.map((name) => name.replace(/[/.]/g, '\\$&')).join('|')})$`)
    b.onResolve({ filter }, async (args) => {
      if (args.pluginData?.conchExternal) return undefined
      const resolved = await b.resolve(args.path, { kind: 'import-statement', resolveDir: args.resolveDir, pluginData: { conchExternal: true } })
      if (resolved.errors.length) return { errors: resolved.errors }
      // A CommonJS stand-in (a `.cjs` name: esbuild treats any `.mjs` file as an ES module, and
      // `module.exports` in an ES module exports nothing, so every named import of it would be
      // undefined); named imports of it read the preloaded namespace's properties when used.
      return { path: `${resolved.path}.preloaded.cjs`, namespace: 'conch-esm', pluginData: { file: resolved.path } }
    })
    b.onLoad({ filter: /.*/, namespace: 'conch-esm' }, (args) => ({
      contents: `module.exports = __conchHost.preloaded(${JSON.stringify(pathToFileURL(args.pluginData.file).href)})\n`,
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
      // The build requires every external (see above): resolve the CommonJS entry of each.
      const resolved = await b.resolve(args.path, { kind: 'require-call', resolveDir: args.resolveDir, pluginData: { conchExternal: true } })
      if (resolved.errors.length) return { errors: resolved.errors }
      return { path: resolved.path, external: true }
    })
  },
}

/**
 * A source that finds a file beside itself (`new URL('./bootstrap.mjs', import.meta.url)`)
 * would look for it beside the chunk it was bundled into: point such URLs at the file in the
 * source tree instead, resolved now (the file itself is read at run time, so it stays current).
 */
const SELF_LOCATING = /new URL\((['"])(\.\.?\/[^'"]+)\1,\s*import\.meta\.url\)/g
const selfLocating = {
  name: 'conch-self-locating',
  setup(b) {
    b.onLoad({ filter: /\.[cm]?ts$/ }, (args) => {
      if (args.path.includes('node_modules')) return undefined
      const source = readFileSync(args.path, 'utf8')
      if (!source.includes('import.meta.url')) return undefined
      const contents = source.replace(SELF_LOCATING, (_match, _quote, rel) => {
        const target = resolve(dirname(args.path), rel)
        statSync(target)
        return `new URL(${JSON.stringify(pathToFileURL(target).href)})`
      })
      return { contents, loader: 'ts' }
    })
  },
}

/**
 * The compositions this repository ships (the root cordis.yml and the examples'), parsed while
 * building: in the bundle, compose.ts's `parse` of `yaml` looks a file's exact text up among
 * them and runs the real parser (bundled, evaluated on first use) for any other text. A
 * document is known only when JSON holds it exactly (no non-finite numbers, no `undefined`).
 */
const composeModule = join(cli, 'src', 'compose.ts')
// The very copy of yaml that compose.ts imports.
const { parse: parseYaml } = createRequire(composeModule)('yaml')
const KNOWN_COMPOSITIONS = ['cordis.yml', ...['acp-agent', 'headless-agent'].flatMap((example) => [`examples/${example}/cordis.yml`, `examples/${example}/pty.cordis.yml`])]
const knownCompositions = {
  name: 'conch-known-compositions',
  setup(b) {
    b.onResolve({ filter: /^yaml$/ }, (args) => (args.importer === composeModule ? { path: 'known-compositions', namespace: 'conch-yaml' } : undefined))
    b.onLoad({ filter: /.*/, namespace: 'conch-yaml' }, () => {
      const known = []
      for (const file of KNOWN_COMPOSITIONS) {
        let text
        try {
          text = readFileSync(join(root, file), 'utf8')
        } catch {
          continue
        }
        const document = parseYaml(text)
        const json = JSON.stringify(document)
        if (json !== undefined && isDeepStrictEqual(JSON.parse(json), document)) known.push([text, json])
      }
      const contents = `const known = new Map(${JSON.stringify(known)})
let yaml
export function parse(text, ...rest) {
  const json = rest.length === 0 ? known.get(text) : undefined
  if (json !== undefined) return JSON.parse(json)
  yaml ??= require('yaml')
  return yaml.parse(text, ...rest)
}
`
      return { contents, resolveDir: dirname(composeModule), loader: 'js' }
    })
  },
}

/**
 * Cordis wraps every context value it hands out in a Proxy (createTraceable), and its build
 * names each trap closure with `__name(fn, "get")`, an Object.defineProperty per closure. Here
 * the wrapper is dropped: a closure written as the value of a `get`, `set` or `apply` key gets
 * that very name from the language itself, so nothing observable changes. Cordis is pinned
 * exactly; the build fails if the text is not the one this expects.
 */
const CORDIS_TRAPS = { from: 'function withProps(', to: '__name(createTraceable, "createTraceable");', wrappers: 6 }
const cordisTraps = {
  name: 'conch-cordis-traps',
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/]cordis[\\/]lib[\\/]index\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8')
      const start = source.indexOf(CORDIS_TRAPS.from)
      const end = source.indexOf(CORDIS_TRAPS.to, start)
      if (start === -1 || end === -1) return { errors: [{ text: `cordis changed: ${args.path} has no ${CORDIS_TRAPS.from} … ${CORDIS_TRAPS.to}` }] }
      let opened = 0
      let closed = 0
      const region = source
        .slice(start, end)
        .replace(/\/\* @__PURE__ \*\/ __name\(\(/g, () => (opened++, '(('))
        .replace(/\}, "(get|set|apply)"\)/g, () => (closed++, '})'))
      if (opened !== CORDIS_TRAPS.wrappers || closed !== CORDIS_TRAPS.wrappers) {
        return { errors: [{ text: `cordis changed: expected ${CORDIS_TRAPS.wrappers} named trap closures in ${args.path}, found ${opened} / ${closed}` }] }
      }
      return { contents: source.slice(0, start) + region + source.slice(end), loader: 'js' }
    })
  },
}

/**
 * Node's built-in modules that `node -e 0` does not load and a start may never use (a `conch
 * run` without a terminal spawns nothing): the bundle's `require` gives each as a stand-in that
 * requires the module at its first property access (esbuild reads a named import of a built-in
 * as a property of the required module at each use).
 */
const LAZY_BUILTINS = ['node:child_process', 'node:crypto', 'node:http', 'node:net', 'node:os', 'node:stream', 'node:string_decoder', 'node:timers/promises', 'node:fs/promises', 'node:util']

/** The bundle's `require`: `load`, with LAZY_BUILTINS as stand-ins (see above). Runs inside the bundle. */
function lazyBuiltins(load, names) {
  const lazy = new Set(names)
  const standIns = new Map()
  return Object.assign((id) => {
    if (!lazy.has(id)) return load(id)
    let standIn = standIns.get(id)
    if (standIn === undefined) {
      let module
      const real = () => (module ??= load(id))
      standIn = new Proxy(
        {},
        {
          get: (_, key) => Reflect.get(real(), key),
          set: (_, key, value) => Reflect.set(real(), key, value),
          has: (_, key) => Reflect.has(real(), key),
          ownKeys: () => Reflect.ownKeys(real()),
          getOwnPropertyDescriptor: (_, key) => {
            const descriptor = Reflect.getOwnPropertyDescriptor(real(), key)
            return descriptor && { ...descriptor, configurable: true }
          },
          defineProperty: (_, key, descriptor) => Reflect.defineProperty(real(), key, descriptor),
          deleteProperty: (_, key) => Reflect.deleteProperty(real(), key),
          getPrototypeOf: () => Reflect.getPrototypeOf(real()),
        },
      )
      standIns.set(id, standIn)
    }
    return standIn
  }, load)
}

rmSync(dist, { recursive: true, force: true })
const bundle = join(dist, 'conch.cjs')
const result = await build({
  entryPoints: [join(cli, 'src', 'bundle.ts')],
  outfile: bundle,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  // import.meta of every bundled module is the bundle's (bin/conch.js passes it in).
  define: { 'import.meta.url': '__conchHost.url', 'import.meta.resolve': '__conchHost.resolve' },
  // import('x') becomes require('x') for every module outside the bundle: under Node 20 an
  // import() in code restored from V8's code cache fails.
  supported: { 'dynamic-import': false },
  // Less to parse on every start; names stay readable in stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  metafile: true,
  absWorkingDir: root,
  logLevel: 'warning',
  // A named import the bundle leaves undefined fails only when the code runs: fail the build.
  logOverride: { 'import-is-undefined': 'error' },
  // A script, not an ES module: Node 20 gives a script a code cache (`cachedData`), not a module.
  banner: { js: `(function (require, __filename, __dirname, __conchHost) {require = (${lazyBuiltins})(require, ${JSON.stringify(LAZY_BUILTINS)});` },
  footer: { js: '})' },
  plugins: [builtinPlugins, esmExternals, externals, knownCompositions, cordisTraps, selfLocating],
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
// esbuild escapes non-ASCII text except inside regular expressions. While every character is
// below U+0100 the bundle is stored as Latin-1, one byte per character, which Node decodes
// about twice as fast as UTF-8 (a few ms per start).
const text = readFileSync(bundle, 'utf8')
const leftover = Object.values(result.metafile.outputs).flatMap((output) => output.imports.filter((entry) => entry.kind === 'dynamic-import'))
if (leftover.length) {
  throw new Error(`the bundle still contains import() of ${leftover.map((entry) => entry.path).join(', ')}; under Node 20 such an import fails in code from the code cache`)
}
const encoding = /[^\u0000-\u00ff]/.test(text) ? 'utf8' : 'latin1'
if (encoding === 'latin1') writeFileSync(bundle, text, 'latin1')
const manifest = { builtAt: new Date().toISOString(), bundle: 'conch.cjs', encoding, plugins, inputs }
writeFileSync(join(dist, 'manifest.json'), `${JSON.stringify(manifest, null, 1)}\n`)
process.stderr.write(`built ${relative(root, bundle)} (${plugins.length} built-in plugins, ${Object.keys(inputs).length} source files)\n`)

const cacheFile = join(dist, 'conch.cjs.cache')
const runCacheFile = join(dist, 'conch.cjs.run.cache')
try {
  await trainCodeCache(cacheFile)
  const { size, mtimeMs } = statSync(bundle)
  manifest.codeCache = { file: 'conch.cjs.cache', bundleSize: size, bundleMtimeMs: mtimeMs }
  writeFileSync(join(dist, 'manifest.json'), `${JSON.stringify(manifest, null, 1)}\n`)
  process.stderr.write(`wrote ${relative(root, cacheFile)} (${Math.round(statSync(cacheFile).size / 1024)} KiB of V8 code cache)\n`)
  // `conch run` runs code that a session of `conch acp` does not (and not all the code it does):
  // its own cache, from one scripted run, is the one the bin compiles `conch run` with.
  try {
    await trainRunCache(runCacheFile)
    manifest.codeCache.commands = { run: 'conch.cjs.run.cache' }
    writeFileSync(join(dist, 'manifest.json'), `${JSON.stringify(manifest, null, 1)}\n`)
    process.stderr.write(`wrote ${relative(root, runCacheFile)} (${Math.round(statSync(runCacheFile).size / 1024)} KiB, for conch run)\n`)
  } catch (error) {
    rmSync(runCacheFile, { force: true })
    process.stderr.write(`note: conch run uses the acp session's code cache: ${error instanceof Error ? error.message : String(error)}\n`)
  }
} catch (error) {
  // The bin runs without a cache, only slower to start.
  rmSync(cacheFile, { force: true })
  process.stderr.write(`note: no code cache for the bin: ${error instanceof Error ? error.message : String(error)}\n`)
}

/**
 * One scripted `conch run` on the root cordis.yml (a one-line script), in a scratch workspace
 * and state folder; the bin writes the code cache of everything it compiled as it exits.
 */
async function trainRunCache(out) {
  await inScratch(out, async ({ workspace, script, env }) => {
    const argv = [join(cli, 'bin', 'conch.js'), 'run', '--config', join(root, 'cordis.yml'), '--script', script, 'start']
    const child = spawn(process.execPath, argv, { cwd: workspace, env, stdio: ['ignore', 'ignore', 'pipe'] })
    await trained(child, out, 'the training run')
  })
}

/**
 * Runs `train` with a scratch workspace (the session log folder must lie outside it), a
 * one-line script answering `done`, and the environment of a training child (the cache goes to
 * `out`, the state folder into the scratch, no API key); removes the scratch afterwards.
 */
async function inScratch(out, train) {
  const scratch = mkdtempSync(join(tmpdir(), 'conch-code-cache-'))
  try {
    const workspace = join(scratch, 'workspace')
    mkdirSync(workspace)
    const script = join(scratch, 'script.jsonl')
    writeFileSync(script, '{"text":"done"}\n')
    const env = { ...process.env, CONCH_CODE_CACHE_OUT: out, XDG_STATE_HOME: join(scratch, 'state'), CONCH_FROM_SOURCE: '0' }
    delete env.DEEPSEEK_API_KEY
    delete env.OPENAI_API_KEY
    await train({ workspace, script, env })
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

/**
 * Waits (60 s at most) for a training child to exit 0, then checks it wrote the cache `out`;
 * `what` names it in the error, with its stderr.
 */
async function trained(child, out, what) {
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk))
  const timer = setTimeout(() => child.kill(), 60_000)
  const code = await new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', resolve)
  }).finally(() => clearTimeout(timer))
  if (code !== 0) throw new Error(`${what} exited ${code}: ${stderr.trim()}`)
  statSync(out)
}

/**
 * One scripted `conch acp` session on the root cordis.yml, in a scratch workspace and state
 * folder: initialize, session/new, a prompt the script answers, then end of input. The bin
 * writes the code cache of everything it compiled as it exits.
 */
async function trainCodeCache(out) {
  await inScratch(out, async ({ workspace, script, env }) => {
    const child = spawn(process.execPath, [join(cli, 'bin', 'conch.js'), 'acp', '--config', join(root, 'cordis.yml'), '--script', script], {
      cwd: workspace,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const frames = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1 } },
      { jsonrpc: '2.0', id: 2, method: 'session/new', params: { cwd: workspace, mcpServers: [] } },
    ]
    const send = (frame) => child.stdin.write(`${JSON.stringify(frame)}\n`)
    let buffered = ''
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      buffered += chunk
      for (let newline = buffered.indexOf('\n'); newline !== -1; newline = buffered.indexOf('\n')) {
        const message = JSON.parse(buffered.slice(0, newline))
        buffered = buffered.slice(newline + 1)
        if (message.error) {
          child.kill()
          return
        }
        if (message.id === 1 && 'result' in message) send(frames[1])
        else if (message.id === 2 && 'result' in message) {
          send({ jsonrpc: '2.0', id: 3, method: 'session/prompt', params: { sessionId: message.result.sessionId, prompt: [{ type: 'text', text: 'start' }] } })
        } else if (message.id === 3) child.stdin.end()
      }
    })
    send(frames[0])
    await trained(child, out, 'the training session')
  })
}
