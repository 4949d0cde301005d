/**
 * The bin runs the build only while it matches the sources (bin/build-current.js).
 */
import { mkdtempSync, mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain JavaScript module of the bin, without declarations
import { buildIsCurrent, currentBuild } from '../bin/build-current.js'

/** The fixtures' folders, removed after the file's last test. */
const folders: string[] = []
afterAll(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function fixture(): { dist: URL; source: string; bundle: string; writeManifest(inputs: Record<string, number>, extra?: object): void } {
  const dir = mkdtempSync(join(tmpdir(), 'conch-build-'))
  folders.push(dir)
  const dist = join(dir, 'dist')
  mkdirSync(dist)
  const source = join(dir, 'main.ts')
  writeFileSync(source, 'export {}\n')
  const bundle = join(dist, 'conch.cjs')
  writeFileSync(bundle, '(function () {})\n')
  return {
    dist: pathToFileURL(`${dist}/`),
    source,
    bundle,
    writeManifest: (inputs, extra = {}) => writeFileSync(join(dist, 'manifest.json'), JSON.stringify({ bundle: 'conch.cjs', inputs, ...extra })),
  }
}

type Build = { bundle: URL; encoding: string; cachedData?: Buffer } | undefined
const build = (dist: URL, command?: string): Build => (currentBuild as (d: URL, e: object, c?: string) => Build)(dist, {}, command)

const current = (dist: URL, env: Record<string, string> = {}): boolean => (buildIsCurrent as (d: URL, e: object) => boolean)(dist, env)

describe('buildIsCurrent', () => {
  it('is true while every listed source keeps its mtime', () => {
    const { dist, source, writeManifest } = fixture()
    writeManifest({ [source]: statSync(source).mtimeMs })
    expect(current(dist)).toBe(true)
  })

  it('is false once a source changed, so the bin runs the sources', () => {
    const { dist, source, writeManifest } = fixture()
    writeManifest({ [source]: statSync(source).mtimeMs })
    const later = new Date(Date.now() + 5000)
    utimesSync(source, later, later)
    expect(current(dist)).toBe(false)
  })

  it('is false for a missing source, a missing or empty manifest, and with CONCH_FROM_SOURCE=1', () => {
    const { dist, source, writeManifest } = fixture()
    expect(current(dist)).toBe(false)
    writeManifest({})
    expect(current(dist)).toBe(false)
    writeManifest({ [`${source}.gone`]: 1 })
    expect(current(dist)).toBe(false)
    writeManifest({ [source]: statSync(source).mtimeMs })
    expect(current(dist, { CONCH_FROM_SOURCE: '1' })).toBe(false)
  })

  it('gives the code cache only for the very bundle it was made from (same size and mtime)', () => {
    const { dist, source, bundle, writeManifest } = fixture()
    writeFileSync(join(fileURLToPath(dist), 'conch.cjs.cache'), 'cache')
    const { size, mtimeMs } = statSync(bundle)
    const inputs = { [source]: statSync(source).mtimeMs }
    writeManifest(inputs, { encoding: 'latin1', codeCache: { file: 'conch.cjs.cache', bundleSize: size, bundleMtimeMs: mtimeMs } })
    expect(build(dist)).toEqual({ bundle: new URL('conch.cjs', dist), encoding: 'latin1', cachedData: Buffer.from('cache') })
    // Rebuilt without a new cache: the bundle runs, compiled afresh.
    writeFileSync(bundle, '(function () { /* rebuilt */ })\n')
    expect(build(dist)).toEqual({ bundle: new URL('conch.cjs', dist), encoding: 'latin1' })
    // No cache recorded, and a manifest without an encoding (read as UTF-8).
    writeManifest(inputs)
    expect(build(dist)).toEqual({ bundle: new URL('conch.cjs', dist), encoding: 'utf8' })
  })

  it("gives a command the cache made for it, and every other command the general one", () => {
    const { dist, source, bundle, writeManifest } = fixture()
    writeFileSync(join(fileURLToPath(dist), 'conch.cjs.cache'), 'general')
    writeFileSync(join(fileURLToPath(dist), 'conch.cjs.run.cache'), 'run')
    const { size, mtimeMs } = statSync(bundle)
    writeManifest(
      { [source]: statSync(source).mtimeMs },
      { codeCache: { file: 'conch.cjs.cache', bundleSize: size, bundleMtimeMs: mtimeMs, commands: { run: 'conch.cjs.run.cache' } } },
    )
    expect(build(dist, 'run')?.cachedData).toEqual(Buffer.from('run'))
    expect(build(dist, 'acp')?.cachedData).toEqual(Buffer.from('general'))
    expect(build(dist)?.cachedData).toEqual(Buffer.from('general'))
  })
})
