import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { Config, createCodexHome, mergeTables, projectSandbox, resolveCodexExecutable, toToml } from '../src/index.ts'

const scratch = mkdtempSync('/var/tmp/conch-codex-config-')
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('config.toml', () => {
  it('writes nested tables under dotted headers and quotes keys that are not bare', () => {
    expect(toToml({ model: 'gpt-5.5', retries: 0, on: true, list: ['a', 1], model_providers: { fake: { base_url: 'http://x/v1' } }, projects: { '/w s': { trust_level: 'trusted' } } })).toBe(
      [
        'model = "gpt-5.5"',
        'retries = 0',
        'on = true',
        'list = ["a", 1]',
        '',
        '[model_providers.fake]',
        'base_url = "http://x/v1"',
        '',
        '[projects."/w s"]',
        'trust_level = "trusted"',
      ].join('\n'),
    )
  })

  it('escapes strings so a value cannot start a new key', () => {
    expect(toToml({ model: 'x"\nevil = true' })).toBe('model = "x\\"\\nevil = true"')
  })

  it('merges the configured settings over the offline defaults, table by table', () => {
    const merged = mergeTables({ features: { plugins: false, apps: false }, check: false }, { features: { apps: true }, model: 'm' })
    expect(merged).toEqual({ features: { plugins: false, apps: true }, check: false, model: 'm' })
  })

  it('creates a private home with the config and removes it', () => {
    const home = createCodexHome({ root: join(scratch, 'homes'), childTmpDir: '/tmp', config: { model: 'gpt-5.5' } })
    const text = readFileSync(join(home.path, 'config.toml'), 'utf8')
    expect(text).toContain('model = "gpt-5.5"')
    expect(text).toContain('check_for_update_on_startup = false')
    expect(text).toContain('[analytics]\nenabled = false')
    home.remove()
    home.remove()
    expect(() => readFileSync(join(home.path, 'config.toml'))).toThrow()
  })

  it('refuses a home root under the child temp dir', () => {
    expect(() => createCodexHome({ root: join(scratch, 'tmp', 'homes'), childTmpDir: join(scratch, 'tmp'), config: {} })).toThrow(/sandbox helper/)
  })
})

describe('sandbox projection', () => {
  it('inherits the parent mode, read-only without a policy, and never widens past the parent', () => {
    expect(projectSandbox('inherit', 'workspace-write')).toBe('workspace-write')
    expect(projectSandbox('inherit', undefined)).toBe('read-only')
    expect(projectSandbox('read-only', 'danger-full-access')).toBe('read-only')
    expect(projectSandbox('danger-full-access', 'workspace-write')).toBe('workspace-write')
    expect(projectSandbox('workspace-write', 'read-only')).toBe('read-only')
  })
})

describe('executable resolution', () => {
  const where = (env: Record<string, string>) => ({ platform: 'linux', arch: 'x64', env, from: '/' })
  const binary = (root: string) => {
    const dir = join(root, '@openai', 'codex-linux-x64', 'vendor', 'x86_64-unknown-linux-musl', 'bin')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'codex'), '#!/bin/sh\n')
    chmodSync(join(dir, 'codex'), 0o755)
    return join(dir, 'codex')
  }

  it('finds the platform binary in the products folder', () => {
    const products = join(scratch, 'products')
    const expected = binary(join(products, 'node_modules'))
    expect(resolveCodexExecutable(undefined, where({ CONCH_PRODUCTS_DIR: products, PATH: '' }))).toBe(expected)
  })

  it('follows an npm wrapper on PATH to the binary beside it', () => {
    const global = join(scratch, 'global', 'lib', 'node_modules')
    const expected = binary(global)
    mkdirSync(join(global, '@openai', 'codex', 'bin'), { recursive: true })
    writeFileSync(join(global, '@openai', 'codex', 'bin', 'codex.js'), '#!/usr/bin/env node\n')
    chmodSync(join(global, '@openai', 'codex', 'bin', 'codex.js'), 0o755)
    const bin = join(scratch, 'global', 'bin')
    mkdirSync(bin, { recursive: true })
    symlinkSync(join(global, '@openai', 'codex', 'bin', 'codex.js'), join(bin, 'codex'))
    expect(resolveCodexExecutable(undefined, where({ CONCH_PRODUCTS_DIR: join(scratch, 'none'), PATH: bin }))).toBe(expected)
  })

  it('finds nothing when there is nothing', () => {
    expect(resolveCodexExecutable(undefined, where({ CONCH_PRODUCTS_DIR: join(scratch, 'none'), PATH: '' }))).toBeUndefined()
  })
})

describe('Config', () => {
  it('names the field of a bad value', () => {
    expect(() => Config.parse({ executable: 'codex' })).toThrow(/absolute/)
    expect(() => Config.parse({ sandbox: 'wide-open' })).toThrow(/sandbox/)
    expect(() => Config.parse({ homeRoot: 'relative' })).toThrow(/absolute/)
    expect(Config.parse({})).toMatchObject({ name: 'codex', approvalPolicy: 'on-request', sandbox: 'inherit', config: {}, env: [] })
  })
})

describe('a row without config', () => {
  it('gets every default', () => {
    expect(Config.parse(undefined)).toMatchObject({ name: 'codex' })
  })
})
