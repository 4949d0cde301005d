import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CliError, flattenRows, interpolateEnv, readComposition, expand, type EntryRow } from '../src/index.ts'
import { workspace, type Workspace } from './harness.ts'

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

const BASE = `- id: sessions
  name: '@conch/session'
- id: tools
  name: '@conch/tools'
- id: llm
  name: '@conch/llm'
  config:
    provider: openai
- id: llm-openai
  name: '@conch/llm-openai'
`

function ids(entries: readonly EntryRow[]): string[] {
  return flattenRows(entries).map((row) => row.id)
}

function failure(fn: () => unknown): CliError {
  try {
    fn()
  } catch (error) {
    if (error instanceof CliError) return error
    throw error
  }
  throw new Error('expected a CliError')
}

describe('reading a cordis.yml', () => {
  it('reads a YAML list of entries and remembers which file wrote each row', () => {
    const file = ws.write('cordis.yml', BASE)
    const composition = readComposition(file)
    expect(composition.file).toBe(file)
    expect(ids(composition.entries)).toEqual(['sessions', 'tools', 'llm', 'llm-openai'])
    expect(composition.entries[2]).toEqual({ id: 'llm', name: '@conch/llm', config: { provider: 'openai' }, source: file })
  })

  it('names the file, the entry and the field of an invalid entry', () => {
    const file = ws.write('cordis.yml', `- id: tools\n  name: '@conch/tools'\n- id: llm\n  name: '@conch/llm'\n  disable: true\n`)
    const error = failure(() => readComposition(file))
    expect(error.code).toBe('CONFIG_INVALID')
    expect(error.message).toMatch(/cordis\.yml: entry #2 "llm": .*Unrecognized key.*"disable"/)
  })

  it('says what a composition must look like when the file is neither a list nor an overlay', () => {
    const file = ws.write('cordis.yml', 'tools: {}\n')
    expect(failure(() => readComposition(file)).message).toMatch(/must be a YAML list of entries .* or an overlay mapping with base and patches/)
  })

  it('reports YAML syntax errors with the file name', () => {
    const file = ws.write('cordis.yml', '- id: [unclosed\n')
    expect(failure(() => readComposition(file)).message).toMatch(/cordis\.yml is not valid YAML/)
  })

  it('refuses two rows with the same id', () => {
    const file = ws.write('cordis.yml', `${BASE}- id: tools\n  name: '@conch/tools'\n`)
    const error = failure(() => readComposition(file))
    expect(error.code).toBe('DUPLICATE_ENTRY')
    expect(error.message).toContain('two entries have id "tools"')
  })

  it('reads group rows with their children in file order', () => {
    const file = ws.write(
      'cordis.yml',
      `- id: base\n  name: '@conch/tools'\n- id: terminals\n  group: true\n  config:\n    - id: pty\n      name: '@conch/pty'\n    - id: tool-pty\n      name: '@conch/tool-pty'\n`,
    )
    const { entries } = readComposition(file)
    expect(ids(entries)).toEqual(['base', 'terminals', 'pty', 'tool-pty'])
    expect(entries[1]).toMatchObject({ id: 'terminals', name: 'cordis:group', group: true })
  })
})

describe('overlays', () => {
  it('inserts rows after or before an id, or at the end, and patches config and disabled by id', () => {
    ws.write('cordis.yml', BASE)
    const overlay = ws.write(
      'replay.cordis.yml',
      `base: ./cordis.yml
patches:
  - insert: { id: llm-replay, name: '@conch/llm-replay', config: { script: ./s.jsonl } }
    after: llm
  - insert: { id: first, name: ./first.ts }
    before: sessions
  - insert: { id: last, name: ./last.ts }
  - patch: llm
    config: { provider: replay }
  - patch: llm-openai
    disabled: true
`,
    )
    const composition = readComposition(overlay)
    expect(ids(composition.entries)).toEqual(['first', 'sessions', 'tools', 'llm', 'llm-replay', 'llm-openai', 'last'])
    const byId = Object.fromEntries(composition.entries.map((row) => [row.id, row]))
    expect(byId['llm']?.config).toEqual({ provider: 'replay' })
    expect(byId['llm-openai']?.disabled).toBe(true)
    expect(byId['llm-replay']?.source).toBe(overlay)
    expect(byId['tools']?.source).toBe(ws.dir + '/cordis.yml')
    expect(composition.files).toEqual([overlay, ws.dir + '/cordis.yml'])
  })

  it('stacks an overlay over an overlay, applying the base overlay first', () => {
    ws.write('cordis.yml', BASE)
    ws.write('pty.cordis.yml', `base: cordis.yml\npatches:\n  - insert: { id: pty, name: '@conch/pty' }\n    after: tools\n`)
    const top = ws.write(
      'snapshot.yml',
      `base: ./pty.cordis.yml\npatches:\n  - insert: { id: tool-pty, name: '@conch/tool-pty' }\n    after: pty\n  - patch: pty\n    config: { backend: memory }\n`,
    )
    const composition = readComposition(top)
    expect(ids(composition.entries)).toEqual(['sessions', 'tools', 'pty', 'tool-pty', 'llm', 'llm-openai'])
    expect(composition.entries.find((row) => row.id === 'pty')?.config).toEqual({ backend: 'memory' })
    expect(composition.files.map((file) => file.slice(ws.dir.length + 1))).toEqual(['snapshot.yml', 'pty.cordis.yml', 'cordis.yml'])
  })

  it('a patch naming an unknown id is an error naming the overlay, the patch and the known ids', () => {
    ws.write('cordis.yml', BASE)
    const overlay = ws.write('bad.yml', `base: cordis.yml\npatches:\n  - patch: tools\n    disabled: true\n  - patch: llm-deepseek\n    disabled: true\n`)
    const error = failure(() => readComposition(overlay))
    expect(error.code).toBe('UNKNOWN_ENTRY')
    expect(error.message).toMatch(
      /bad\.yml: patches\[1\]: no entry has id "llm-deepseek"; the ids are sessions, tools, llm, llm-openai$/,
    )
  })

  it('an insert anchored on an unknown id is an error too', () => {
    ws.write('cordis.yml', BASE)
    const overlay = ws.write('bad.yml', `base: cordis.yml\npatches:\n  - insert: { id: x, name: ./x.ts }\n    after: nope\n`)
    expect(failure(() => readComposition(overlay)).message).toMatch(/patches\[0\]: no entry has id "nope"/)
  })

  it('an inserted row that reuses an id is refused', () => {
    ws.write('cordis.yml', BASE)
    const overlay = ws.write('bad.yml', `base: cordis.yml\npatches:\n  - insert: { id: tools, name: ./x.ts }\n`)
    expect(failure(() => readComposition(overlay)).code).toBe('DUPLICATE_ENTRY')
  })

  it('a malformed patch says what patches look like', () => {
    ws.write('cordis.yml', BASE)
    const overlay = ws.write('bad.yml', `base: cordis.yml\npatches:\n  - remove: tools\n`)
    expect(failure(() => readComposition(overlay)).message).toMatch(/patches\[0\]: a patch is either \{insert: .*\} or \{patch: id, config\?, disabled\?\}/)
  })

  it('overlays that include each other are an error listing the cycle', () => {
    ws.write('a.yml', 'base: b.yml\npatches: []\n')
    ws.write('b.yml', 'base: a.yml\npatches: []\n')
    const error = failure(() => readComposition(ws.dir + '/a.yml'))
    expect(error.code).toBe('OVERLAY_CYCLE')
    expect(error.message).toMatch(/a\.yml → .*b\.yml → .*a\.yml/)
  })

  it('a missing base names the overlay that wanted it', () => {
    const overlay = ws.write('top.yml', 'base: gone.yml\n')
    expect(failure(() => readComposition(overlay)).message).toMatch(/cannot read .*gone\.yml \(the base of .*top\.yml\): no such file/)
  })
})

describe('environment variables in config values', () => {
  const row = (config: unknown, extra: Partial<EntryRow> = {}): EntryRow => ({
    id: 'llm-openai',
    name: '@conch/llm-openai',
    config,
    source: '/work/cordis.yml',
    ...extra,
  })

  it('substitutes ${NAME}, ${NAME:-default}, ${NAME-default} and $$ at any depth', () => {
    const [result] = interpolateEnv(
      [row({ key: '${KEY}', url: 'https://${HOST:-api.example.com}/v1', empty: '${EMPTY-fallback}', list: ['$$HOME', '${KEY}'], n: 3 })],
      { KEY: 'sk-1', EMPTY: '' },
    )
    expect(result?.config).toEqual({ key: 'sk-1', url: 'https://api.example.com/v1', empty: '', list: ['$HOME', 'sk-1'], n: 3 })
  })

  it('uses the :- default when the variable is set but empty', () => {
    expect(expand('${HOST:-localhost}', { HOST: '' })).toBe('localhost')
    expect(expand('${HOST-localhost}', { HOST: '' })).toBe('')
  })

  it('a missing required variable is an error naming the variable, the entry and the field', () => {
    const error = failure(() => interpolateEnv([row({ auth: { apiKey: 'Bearer ${DEEPSEEK_API_KEY}' } })], {}))
    expect(error.code).toBe('MISSING_ENV')
    expect(error.message).toBe(
      '/work/cordis.yml: entry "llm-openai": config.auth.apiKey: environment variable DEEPSEEK_API_KEY is not set; export it, or write ${DEEPSEEK_API_KEY:-default} to give a default',
    )
  })

  it('leaves disabled rows as written, so a disabled live model needs no key', () => {
    const [result] = interpolateEnv([row({ apiKey: '${DEEPSEEK_API_KEY}' }, { disabled: true })], {})
    expect(result?.config).toEqual({ apiKey: '${DEEPSEEK_API_KEY}' })
  })

  it('substitutes inside group children', () => {
    const group: EntryRow = { id: 'g', name: 'cordis:group', group: true, source: '/w/c.yml', children: [row({ url: '${U}' })] }
    expect(interpolateEnv([group], { U: 'x' })[0]?.children?.[0]?.config).toEqual({ url: 'x' })
  })

  it('rejects a malformed reference', () => {
    expect(failure(() => expand('${1BAD}', {})).message).toMatch(/malformed reference \$\{1BAD\}/)
  })
})
