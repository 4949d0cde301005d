import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { conchSubagent, spine, terminalComposition, writeComposition } from '../src/composition.ts'
import { tempFolders } from '../src/homes.ts'
import { eventually, until } from '../src/wait.ts'

describe('until and eventually', () => {
  it('until resolves with the first truthy answer of the probe, sync or async', async () => {
    let looks = 0
    expect(await until(() => ++looks >= 3 && `look ${looks}`)).toBe('look 3')
    expect(await until(async () => 'at once')).toBe('at once')
  })

  it('until rejects naming what it waited for and what the test saw instead', async () => {
    await expect(until(() => false, 30, 'the token', () => 'saw: nothing')).rejects.toThrow('timed out after 30 ms waiting for the token\nsaw: nothing')
  })

  it('eventually answers false when the state never comes, and passes a probe error on', async () => {
    expect(await eventually(() => false, 30)).toBe(false)
    expect(await eventually(() => true, 30)).toBe(true)
    await expect(
      eventually(() => {
        throw new Error('probe broke')
      }, 30),
    ).rejects.toThrow('probe broke')
  })
})

describe('test compositions', () => {
  const folder = tempFolders('conch-composition-')

  it('writes rows as the YAML list the boot reads back, the agents last', () => {
    const path = writeComposition(folder(), terminalComposition({ script: '/s/a b.jsonl', mode: 'read-only', tasks: true, toolPty: { secrets: { A: { env: 'A' } } }, more: conchSubagent({ script: '/s/child.jsonl' }) }))
    const rows = parse(readFileSync(path, 'utf8')) as { id: string; name: string; config?: Record<string, unknown> }[]
    expect(rows.map((row) => row.id)).toEqual(['sessions', 'tools', 'llm', 'model', 'tasks', 'tool-tasks', 'subprocess', 'sandbox', 'sandbox-local', 'sandbox-policy', 'pty', 'pty-local', 'tool-pty', 'subagents', 'subagent-conch', 'tool-subagent', 'agents'])
    expect(rows.find((row) => row.id === 'model')).toEqual({ id: 'model', name: '@conch/llm-replay', config: { script: '/s/a b.jsonl' } })
    expect(rows.find((row) => row.id === 'sandbox-policy')?.config).toEqual({ mode: 'read-only' })
    expect(rows.find((row) => row.id === 'tool-pty')?.config).toEqual({ secrets: { A: { env: 'A' } } })
    expect(rows.find((row) => row.id === 'sandbox-local')).toEqual({ id: 'sandbox-local', name: '@conch/sandbox-local' })
  })

  it('the spine takes the sessions config and a file name', () => {
    const path = writeComposition(folder(), spine([], { persist: true }), 'base.yml')
    expect(path.endsWith('/base.yml')).toBe(true)
    expect(parse(readFileSync(path, 'utf8'))[0]).toEqual({ id: 'sessions', name: '@conch/session', config: { persist: true } })
  })
})

describe('tempFolders', () => {
  const folder = tempFolders('conch-temp-')
  let made = ''

  it('makes a folder with the prefix', () => {
    made = folder()
    expect(existsSync(made)).toBe(true)
    expect(made).toMatch(/\/conch-temp-\w+$/)
  })

  it('removed it after the test that made it', () => {
    expect(made).not.toBe('')
    expect(existsSync(made)).toBe(false)
  })
})
