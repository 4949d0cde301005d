import { describe, expect, it } from 'vitest'
import { KEPT_VARIABLES, SECRET_VARIABLES, TOKEN_VALUES } from '@conch/test-support/secrets'
import { createSessionTag, dropReason, scrubEnv, scrubbedEnv } from '../src/index.ts'

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

  it('drops every secret-bearing variable of a real deployment, by name, pointer or launch variable', () => {
    const { env, dropped } = scrubEnv({ ...SECRET_VARIABLES, ...KEPT_VARIABLES })
    expect(env).toEqual(KEPT_VARIABLES)
    expect(dropped.map((entry) => entry.name)).toEqual(Object.keys(SECRET_VARIABLES))
  })

  it('drops innocent names whose values are credentials: URLs with passwords and known token shapes', () => {
    for (const [name, value] of Object.entries(TOKEN_VALUES)) {
      expect(dropReason(name, value), name).toMatch(/^value looks like /)
    }
    expect(scrubbedEnv(TOKEN_VALUES)).toEqual({})
  })

  it('says why each variable went', () => {
    expect(dropReason('GH_PAT', 'x')).toBe('name looks like a secret (PAT)')
    expect(dropReason('GOOGLE_APPLICATION_CREDENTIALS', '/x')).toBe('name looks like a secret (CRED…)')
    expect(dropReason('KUBECONFIG', '/x')).toBe('points at credentials')
    expect(dropReason('npm_lifecycle_event', 'test')).toBe('package-manager launch variable')
    expect(dropReason('DATABASE_URL', 'mysql://u:p@h/db')).toBe('value looks like a URL with a password')
    expect(dropReason('PWD', '/x')).toBeUndefined()
  })

  it('drops conch-internal CONCH_ variables so a nested session cannot inherit an outer tag', () => {
    expect(scrubbedEnv({ CONCH_SESSION_TAG: 'outer', CONCHITA: 'kept' })).toEqual({ CONCHITA: 'kept' })
  })

  it('passes allow-listed names (exact or with *) through from the parent, but never CONCH_ variables', () => {
    const env = scrubbedEnv(
      { HF_TOKEN: 'hf', npm_config_registry: 'r', npm_config_cache: 'c', npm_lifecycle_event: 'e', DATABASE_URL: 'postgres://a:b@c/d', CONCH_SESSION_TAG: 't' },
      { allow: ['HF_TOKEN', 'npm_config_*', 'DATABASE_URL', 'CONCH_*'] },
    )
    expect(env).toEqual({ HF_TOKEN: 'hf', npm_config_registry: 'r', npm_config_cache: 'c', DATABASE_URL: 'postgres://a:b@c/d' })
  })

  it('matches allow-list names case-sensitively, as the environment does', () => {
    expect(scrubbedEnv({ HF_TOKEN: 'hf' }, { allow: ['hf_token'] })).toEqual({})
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
