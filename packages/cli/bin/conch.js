#!/usr/bin/env node
// The conch command. Runs the TypeScript sources directly: tsx compiles them on import.
import { register } from 'tsx/esm/api'

register()
await import('../src/main.ts')
