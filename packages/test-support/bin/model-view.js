#!/usr/bin/env node
// Prints what a composition offers the model (see src/model-view.ts). Runs the TypeScript
// sources directly: tsx compiles them on import, as the conch bin does, so the plugin loader's
// own imports of the packages' .ts files work too.
import { register } from 'tsx/esm/api'

register()
await import('../src/snapshot/model-view.ts')
