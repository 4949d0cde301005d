/**
 * A cordis.yml row may omit `config:` (the root cordis.yml does for most rows): the plugin then
 * receives `undefined`. Every plugin's schema must either fill its defaults from that or fail
 * naming the field that is required — never "expected object, received undefined" at the root.
 */
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { nearestName, suggestConfigKeys } from '../src/suggest.ts'

const packages = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const entries = readdirSync(packages, { withFileTypes: true })
  .filter((group) => group.isDirectory())
  .flatMap((group) => readdirSync(join(packages, group.name)).map((name) => join(packages, group.name, name, 'src', 'index.ts')))
  .filter((index) => existsSync(index))

interface Schema {
  safeParse(value: unknown): { success: true } | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string; keys?: string[] }> } }
}

/** The schema a plugin module declares: its `Config` export, or its service class's `static Config`. */
async function schemaOf(index: string): Promise<Schema | undefined> {
  const module = (await import(index)) as { Config?: Schema; default?: { Config?: Schema } }
  return module.Config?.safeParse !== undefined ? module.Config : module.default?.Config?.safeParse !== undefined ? module.default.Config : undefined
}

describe('a row without config', () => {
  it.each(entries.map((index) => [index.slice(packages.length + 1).replace('/src/index.ts', ''), index]))('%s: defaults, or names the missing field', async (_name, index) => {
    const module = (await import(index)) as { Config?: Schema }
    if (module.Config?.safeParse === undefined) return
    const parsed = module.Config.safeParse(undefined)
    if (parsed.success) return
    for (const issue of parsed.error.issues) expect(issue.path.length, issue.message).toBeGreaterThan(0)
  })

  it('covers the plugins that declare a config schema', async () => {
    const withSchema = await Promise.all(entries.map(async (index) => ((await import(index)) as { Config?: Schema }).Config !== undefined))
    expect(withSchema.filter(Boolean).length).toBeGreaterThanOrEqual(10)
  })
})

// A misspelled key must not be dropped in silence: `denyread:` for `denyRead:` would leave the
// protection it meant off. (@conch/pty-pool takes `unknown` and checks its section with a strict
// schema of its own, tested in that package.)
describe('a row with a key the plugin does not know', () => {
  it.each(entries.map((index) => [index.slice(packages.length + 1).replace('/src/index.ts', ''), index]))('%s: fails at load naming the key', async (name, index) => {
    const schema = await schemaOf(index)
    if (schema === undefined || name === 'pool/pty-pool') return
    const parsed = schema.safeParse({ misspelledKey: true })
    expect(parsed.success).toBe(false)
    if (parsed.success) return
    expect(parsed.error.issues.some((issue) => issue.keys?.includes('misspelledKey'))).toBe(true)
  })
})

describe('an unknown key close to a known one', () => {
  it('every plugin: a top-level key written in the wrong case is answered with the key', async () => {
    let checked = 0
    for (const index of entries) {
      const schema = await schemaOf(index)
      const shape = (schema as { _zod?: { def?: { innerType?: { _zod?: { def?: { shape?: object } } }; shape?: object } } } | undefined)?._zod?.def
      const keys = Object.keys(shape?.shape ?? shape?.innerType?._zod?.def?.shape ?? {})
      for (const key of keys) {
        const lower = key.toLowerCase()
        if (lower === key || keys.some((other) => other !== key && other.toLowerCase() === lower)) continue
        const line = `  - Unrecognized key: ${JSON.stringify(lower)} (at the top level)`
        expect(suggestConfigKeys(line, schema), index).toBe(`${line}; did you mean ${JSON.stringify(key)}?`)
        checked++
      }
    }
    expect(checked).toBeGreaterThanOrEqual(10)
  })

  it('is found at a nested path, through defaults, optionals, arrays and records; a far-off key gets no suggestion', () => {
    const schema = z
      .strictObject({
        pool: z.strictObject({ kinds: z.record(z.string(), z.strictObject({ command: z.string(), passEnv: z.array(z.string()) })) }).optional(),
        list: z.array(z.strictObject({ name: z.string() })).default([]),
      })
      .prefault({})
    const message = [
      'invalid config:',
      '  - Unrecognized key: "pasEnv" (at pool.kinds.claude)',
      '  - Unrecognized keys: "nmae", "bogus" (at list.0)',
      '  - Unrecognized key: "zzzz" (at )',
      '  - Invalid input: expected string, received number (at list.1.name)',
    ].join('\n')
    expect(suggestConfigKeys(message, schema)).toBe(
      [
        'invalid config:',
        '  - Unrecognized key: "pasEnv" (at pool.kinds.claude); did you mean "passEnv"?',
        '  - Unrecognized keys: "nmae", "bogus" (at list.0); did you mean "name" for "nmae"?',
        '  - Unrecognized key: "zzzz" (at )',
        '  - Invalid input: expected string, received number (at list.1.name)',
      ].join('\n'),
    )
  })

  it('nearestName takes the one nearest name, and none when two are as near', () => {
    expect(nearestName('outptu', ['output', 'script', 'config'])).toBe('output')
    expect(nearestName('CONFIG', ['output', 'config'])).toBe('config')
    expect(nearestName('ab', ['ax', 'ay'])).toBeUndefined()
    expect(nearestName('verbose', ['output', 'script'])).toBeUndefined()
  })
})
