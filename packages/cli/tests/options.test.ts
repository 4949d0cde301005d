import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { OWN_COMPOSITION } from '../src/args.ts'
import { checkApiKey, CliError, flattenRows, parseAcpArgs, parseRunArgs, useScript, type EntryRow } from '../src/index.ts'
import { CLI_ROOT } from './harness.ts'

const source = '/work/cordis.yml'
const row = (id: string, name: string, config?: unknown, extra: Partial<EntryRow> = {}): EntryRow => ({
  id,
  name,
  source,
  ...(config === undefined ? {} : { config }),
  ...extra,
})

function failure(fn: () => unknown): CliError {
  try {
    fn()
  } catch (error) {
    if (error instanceof CliError) return error
    throw error
  }
  throw new Error('expected a CliError')
}

describe('parseRunArgs', () => {
  it("in the checkout, defaults to the checkout's cordis.yml, text output, the current directory and warn logs", () => {
    const checkout = dirname(OWN_COMPOSITION)
    expect(parseRunArgs(['do it'], checkout)).toEqual({
      task: 'do it',
      config: join(checkout, 'cordis.yml'),
      output: 'text',
      cwd: checkout,
      logLevel: 'warn',
    })
  })

  it("in any other folder, defaults to conch's own root composition, a cordis.yml there only when named", () => {
    const folder = mkdtempSync(join(tmpdir(), 'conch-project-'))
    try {
      expect(parseRunArgs(['do it'], folder)).toMatchObject({ config: OWN_COMPOSITION, ownComposition: true })
      expect(parseRunArgs(['do it'], folder)).not.toHaveProperty('ignored')
      expect(parseRunArgs(['--config', 'mine.yml', 'do it'], folder)).toEqual(expect.not.objectContaining({ ownComposition: true }))
      writeFileSync(join(folder, 'cordis.yml'), '[]\n')
      expect(parseRunArgs(['do it'], folder)).toMatchObject({ config: OWN_COMPOSITION, ownComposition: true, ignored: join(folder, 'cordis.yml') })
      expect(parseAcpArgs([], folder)).toMatchObject({ config: OWN_COMPOSITION, ownComposition: true, ignored: join(folder, 'cordis.yml') })
      expect(parseRunArgs(['--config', './cordis.yml', 'do it'], folder)).toEqual(expect.objectContaining({ config: join(folder, 'cordis.yml') }))
      expect(parseRunArgs(['--config', './cordis.yml', 'do it'], folder)).not.toHaveProperty('ownComposition')
    } finally {
      rmSync(folder, { recursive: true, force: true })
    }
    expect(OWN_COMPOSITION).toBe(join(CLI_ROOT, '..', '..', 'cordis.yml'))
  })

  it('asks for one quoted task when the task is missing or split', () => {
    expect(failure(() => parseRunArgs([], '/')).message).toMatch(/missing the task/)
    expect(failure(() => parseRunArgs(['list', 'files'], '/')).message).toBe(
      'conch run: expected one task argument, got 2; quote the task: conch run "list files"',
    )
  })

  it('names the flag of a missing script file and exits 2', () => {
    const error = failure(() => parseRunArgs(['--script', 'nope.jsonl', 'task'], '/tmp'))
    expect(error.message).toBe('--script nope.jsonl: no such file')
    expect(error.exitCode).toBe(2)
  })

  it('returns help for -h', () => {
    expect(parseRunArgs(['-h'])).toBe('help')
  })
})

describe('useScript', () => {
  it('inserts a replay entry after @conch/llm, selects it, and disables the live model', () => {
    const entries = useScript(
      [row('llm', '@conch/llm', { provider: 'openai' }), row('openai', '@conch/llm-openai'), row('agents', '@conch/agent')],
      'demo.jsonl',
      source,
    )
    expect(entries.map((entry) => [entry.id, entry.config, entry.disabled])).toEqual([
      ['llm', { provider: 'replay' }, undefined],
      ['llm-replay', { script: 'demo.jsonl' }, undefined],
      ['openai', undefined, true],
      ['agents', undefined, undefined],
    ])
  })

  it('points an existing replay entry at the script, keeping its provider name', () => {
    const entries = useScript(
      [row('llm', '@conch/llm'), row('scripted', '@conch/llm-replay', { script: 'old.jsonl', provider: 'canned' }, { disabled: true })],
      'new.jsonl',
      source,
    )
    expect(flattenRows(entries).map((entry) => [entry.id, entry.config, entry.disabled])).toEqual([
      ['llm', { provider: 'canned' }, undefined],
      ['scripted', { script: 'new.jsonl', provider: 'canned' }, false],
    ])
  })
})

describe('checkApiKey', () => {
  const live = [row('llm', '@conch/llm'), row('openai', '@conch/llm-openai')]

  it('accepts DEEPSEEK_API_KEY or OPENAI_API_KEY by default', () => {
    expect(() => checkApiKey(live, { DEEPSEEK_API_KEY: 'k' })).not.toThrow()
    expect(() => checkApiKey(live, { OPENAI_API_KEY: 'k' })).not.toThrow()
  })

  it('without a key explains how to set one or use --script, with exit code 2', () => {
    const error = failure(() => checkApiKey(live, {}))
    expect(error.code).toBe('NO_API_KEY')
    expect(error.exitCode).toBe(2)
    expect(error.message).toContain('export DEEPSEEK_API_KEY=')
    expect(error.message).toContain('--script FILE')
  })

  it('in a conch started as a sub-agent, names the parent entry\'s script setting instead of a command line', () => {
    const error = failure(() => checkApiKey(live, { CONCH_SUBAGENT_DEPTH: '1' }))
    expect(error.code).toBe('NO_API_KEY')
    expect(error.message).toContain('This conch is a sub-agent (CONCH_SUBAGENT_DEPTH=1)')
    expect(error.message).toContain('`script` setting of the parent\'s\n@conch/subagent-conch entry (the root cordis.yml reads CONCH_SUBAGENT_SCRIPT there)')
    expect(error.message).not.toContain('conch run --script')
  })

  it('reads the variables of the configured endpoints, or a named endpoint without a key', () => {
    const custom = [row('openai', '@conch/llm-openai', { endpoints: [{ apiKeyEnv: 'MY_KEY', baseURL: 'http://127.0.0.1:1/v1', model: 'm' }] })]
    expect(failure(() => checkApiKey(custom, { DEEPSEEK_API_KEY: 'k' })).message).toContain('set MY_KEY (sent to http://127.0.0.1:1/v1)')
    expect(() => checkApiKey(custom, { MY_KEY: 'k' })).not.toThrow()
    expect(() => checkApiKey(live, { CONCH_BASE_URL: 'http://127.0.0.1:8000/v1' })).not.toThrow()
  })

  it('needs no key when the composition selects a scripted model, or the live model is disabled', () => {
    expect(() =>
      checkApiKey([row('llm', '@conch/llm', { provider: 'replay' }), row('r', '@conch/llm-replay', { script: 's' }), live[1]!], {}),
    ).not.toThrow()
    expect(() => checkApiKey([row('openai', '@conch/llm-openai', undefined, { disabled: true })], {})).not.toThrow()
  })
})
