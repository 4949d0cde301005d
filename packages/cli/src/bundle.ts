/**
 * Entry of the built bin (scripts/build-bin.mjs bundles it into packages/cli/dist/conch.cjs,
 * which bin/conch.js runs with V8's code cache): registers the built-in plugins — every
 * `@conch/*` dependency of this package, compiled in and evaluated only when a row names one —
 * how to load tsx for `./` plugins written in TypeScript and how to import modules outside the
 * build, then runs the command. Not used
 * when conch runs from its sources.
 */
import './zod-jitless.ts'
// A virtual module the build generates: `{ '@conch/x': () => import('@conch/x'), … }`.
import plugins from 'conch:builtin-plugins'
import { runProcess } from './process.ts'
import { useBuiltinPlugins } from './resolve.ts'

/** What bin/conch.js passes the bundle: its `import()`, for ES modules outside the build. */
declare const __conchHost: { import(specifier: string): Promise<unknown> }

useBuiltinPlugins(
  plugins,
  async () => {
    // tsx's ES module API (its CommonJS one cannot register the loader from here), with no
    // tsconfig.json: the one in the working directory is a file a confined terminal may write.
    const { register } = (await __conchHost.import('tsx/esm/api')) as typeof import('tsx/esm/api')
    register({ tsconfig: false })
  },
  (url) => __conchHost.import(url),
)
void runProcess()
