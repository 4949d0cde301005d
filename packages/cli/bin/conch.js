#!/usr/bin/env node
// The conch command. Runs the build in ../dist (scripts/build-bin.mjs, run by
// scripts/setup.sh) while every source file it was built from is unchanged; otherwise — or
// with CONCH_FROM_SOURCE=1 — runs the TypeScript sources directly, compiled by tsx on import.
import { readFileSync, statSync } from 'node:fs'

const dist = new URL('../dist/', import.meta.url)

function buildIsCurrent() {
  if (process.env.CONCH_FROM_SOURCE === '1') return false
  try {
    const { inputs } = JSON.parse(readFileSync(new URL('manifest.json', dist), 'utf8'))
    for (const [path, mtimeMs] of Object.entries(inputs)) {
      if (statSync(path).mtimeMs !== mtimeMs) return false
    }
    return true
  } catch {
    return false
  }
}

if (buildIsCurrent()) {
  await import(new URL('conch.mjs', dist).href)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  await import('../src/main.ts')
}
