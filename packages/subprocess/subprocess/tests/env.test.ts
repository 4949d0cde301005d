import { describe, expect, it } from 'vitest'
import { createSessionTag, scrubbedEnv } from '../src/index.ts'

describe('scrubbedEnv', () => {
  const parent = {
    PATH: '/usr/bin',
    HOME: '/home/me',
    GITHUB_TOKEN: 'ghp_x',
    my_api_key: 'k',
    DB_PASSWORD: 'p',
    ClientSecret: 's',
    KEYBOARD: 'us',
    CONCH_SESSION_TAG: 'outer',
    conch_debug: '1',
    UNSET: undefined,
  }

  it('drops names containing KEY, PASSWORD, SECRET or TOKEN in any case, and undefined values', () => {
    expect(scrubbedEnv(parent)).toEqual({ PATH: '/usr/bin', HOME: '/home/me' })
  })

  it('drops conch-internal CONCH_ variables so a nested session cannot inherit an outer tag', () => {
    expect(scrubbedEnv({ CONCH_SESSION_TAG: 'outer', CONCHITA: 'kept' })).toEqual({ CONCHITA: 'kept' })
  })

  it('brings back trusted entries on purpose, and their values win over the parent', () => {
    const env = scrubbedEnv(parent, { trusted: { GITHUB_TOKEN: 'scoped', PATH: '/opt/bin', EXTRA: 'e' } })
    expect(env).toEqual({ PATH: '/opt/bin', HOME: '/home/me', GITHUB_TOKEN: 'scoped', EXTRA: 'e' })
  })

  it('returns a new object and leaves the parent untouched', () => {
    const input = { A: '1', SECRET_X: '2' }
    const env = scrubbedEnv(input)
    env.B = '3'
    expect(input).toEqual({ A: '1', SECRET_X: '2' })
  })
})

describe('createSessionTag', () => {
  it('makes a 128-bit hex value under the given name, different each time', () => {
    const a = createSessionTag('CONCH_SESSION_TAG')
    const b = createSessionTag('CONCH_SESSION_TAG')
    expect(a.name).toBe('CONCH_SESSION_TAG')
    expect(a.value).toMatch(/^[0-9a-f]{32}$/)
    expect(a.value).not.toBe(b.value)
  })
})
