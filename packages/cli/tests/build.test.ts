/**
 * The bin runs the build only while it matches the sources (bin/build-current.js).
 */
import { mkdtempSync, mkdirSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain JavaScript module of the bin, without declarations
import { buildIsCurrent } from '../bin/build-current.js'

function fixture(): { dist: URL; source: string; writeManifest(inputs: Record<string, number>): void } {
  const dir = mkdtempSync(join(tmpdir(), 'conch-build-'))
  const dist = join(dir, 'dist')
  mkdirSync(dist)
  const source = join(dir, 'main.ts')
  writeFileSync(source, 'export {}\n')
  return {
    dist: pathToFileURL(`${dist}/`),
    source,
    writeManifest: (inputs) => writeFileSync(join(dist, 'manifest.json'), JSON.stringify({ inputs })),
  }
}

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
})
