import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { Config, platformPackage, projectSandbox, resolveClaudeExecutable } from '../src/index.ts'

const scratch = mkdtempSync('/var/tmp/conch-claude-config-')
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('sandbox projection', () => {
  it('read-only removes the write tools and denies writes in the cwd; no policy counts as read-only', () => {
    for (const mode of ['read-only', undefined] as const) {
      const projected = projectSandbox(mode, '/w')
      expect(projected.disallowedTools).toEqual(['Edit', 'Write', 'NotebookEdit'])
      expect(projected.sandbox).toMatchObject({ enabled: true, failIfUnavailable: true, allowUnsandboxedCommands: false, filesystem: { denyWrite: ['/w'] } })
    }
  })

  it('workspace-write sandboxes commands without an escape hatch; danger-full-access leaves the sandbox off', () => {
    expect(projectSandbox('workspace-write', '/w')).toEqual({
      sandbox: { enabled: true, failIfUnavailable: true, allowUnsandboxedCommands: false, autoAllowBashIfSandboxed: false },
      disallowedTools: [],
    })
    expect(projectSandbox('danger-full-access', '/w')).toEqual({ disallowedTools: [] })
  })
})

describe('executable resolution', () => {
  const where = (env: Record<string, string>) => ({ platform: 'linux', arch: 'x64', libc: 'glibc' as const, env, from: '/' })

  it('names the platform package the SDK would have installed', () => {
    expect(platformPackage({ platform: 'linux', arch: 'x64', libc: 'glibc' })).toBe('@anthropic-ai/claude-agent-sdk-linux-x64')
    expect(platformPackage({ platform: 'linux', arch: 'arm64', libc: 'musl' })).toBe('@anthropic-ai/claude-agent-sdk-linux-arm64-musl')
    expect(platformPackage({ platform: 'win32', arch: 'x64', libc: 'glibc' })).toBeUndefined()
  })

  it('finds the binary in the products folder, else claude on PATH', () => {
    const products = join(scratch, 'products')
    const dir = join(products, 'node_modules', '@anthropic-ai', 'claude-agent-sdk-linux-x64')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'claude'), '#!/bin/sh\n')
    chmodSync(join(dir, 'claude'), 0o755)
    expect(resolveClaudeExecutable(undefined, where({ CONCH_PRODUCTS_DIR: products, PATH: '' }))).toBe(join(dir, 'claude'))
    const bin = join(scratch, 'bin')
    mkdirSync(bin)
    writeFileSync(join(bin, 'claude'), '#!/bin/sh\n')
    chmodSync(join(bin, 'claude'), 0o755)
    expect(resolveClaudeExecutable(undefined, { ...where({ CONCH_PRODUCTS_DIR: join(scratch, 'none'), PATH: bin }), arch: 'ia32' })).toBe(join(bin, 'claude'))
    // A relative PATH entry names the working directory (the workspace): never searched.
    expect(resolveClaudeExecutable(undefined, { ...where({ CONCH_PRODUCTS_DIR: join(scratch, 'none'), PATH: relative(process.cwd(), bin) }), arch: 'ia32' })).toBeUndefined()
  })
})

describe('Config', () => {
  it('defaults to an unattended child and names the field of a bad value', () => {
    expect(Config.parse({})).toMatchObject({ name: 'claude-code', allowedTools: [], disallowedTools: [], settingSources: [], configDir: 'private', env: [] })
    expect(() => Config.parse({ executable: 'claude' })).toThrow(/absolute/)
    expect(() => Config.parse({ settingSources: ['everything'] })).toThrow(/settingSources/)
  })
})

describe('a row without config', () => {
  it('gets every default', () => {
    expect(Config.parse(undefined)).toMatchObject({ name: 'claude-code' })
  })
})
