#!/usr/bin/env node
// The conch command. Runs the build in ../dist (scripts/build-bin.mjs, run by
// scripts/setup.sh) while every source file it was built from is unchanged; otherwise — or
// with CONCH_FROM_SOURCE=1 — runs the TypeScript sources directly, compiled by tsx on import.
import module from 'node:module'
import { buildIsCurrent } from './build-current.js'

const dist = new URL('../dist/', import.meta.url)

if (buildIsCurrent(dist, process.env)) {
  // Node ≥ 22.1 keeps compiled code between starts; Node 20 has no such cache.
  module.enableCompileCache?.(new URL('.compile-cache', dist).pathname)
  await import(new URL('conch.mjs', dist).href)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  await import('../src/main.ts')
}
