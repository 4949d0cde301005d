/**
 * Entry of the built bin (scripts/build-bin.mjs bundles it into packages/cli/dist/conch.mjs):
 * registers the built-in plugins — every `@conch/*` dependency of this package, compiled in
 * and loaded lazily — and how to load tsx for `./` plugins written in TypeScript, then runs
 * the command. Not used when conch runs from its sources.
 */
// A virtual module the build generates: `{ '@conch/x': () => import('@conch/x'), … }`.
import plugins from 'conch:builtin-plugins'
import { useBuiltinPlugins } from './resolve.ts'

useBuiltinPlugins(plugins, async () => {
  const { register } = await import('tsx/esm/api')
  register()
})
await import('./main.ts')
