/** terminal_send's other input forms — keys and secrets — and what the model sees for them. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Config } from '../src/config.ts'
import { renderSend } from '../src/index.ts'
import { readSecret } from '../src/secrets.ts'
import { boot, type Harness } from './harness.ts'

let harness: Harness | undefined
const dirs: string[] = []
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('keys', () => {
  it('types key presses and literal text', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    const text = await harness.text('terminal_send', { sessionId: 'pty-1', keys: [{ text: 'echo keyed' }, 'Space', 'x', 'Enter'] })
    expect(text).toBe('keyed x\n[wait: stdin_read]')
  })

  it('refuses a call with none or two of text, keys and secret, naming them', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell' })
    expect(await harness.text('terminal_send', { sessionId: 'pty-1' })).toContain('give one of text, keys or secret')
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'ls', secret: 'X' })).toContain('give exactly one of text, keys or secret, not text and secret')
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', keys: [] })).toMatch(/keys/)
  })

  it('titles a keys send and a secret send without any value', async () => {
    harness = await boot()
    const title = (input: unknown) => harness!.ctx.tools.get('terminal_send')!.title!(input)
    expect(title({ sessionId: 'pty-1', keys: ['Up', { text: 'ls' }, 'Enter'], submit: true })).toBe('pty-1: keys Up "ls" Enter')
    expect(title({ sessionId: 'pty-1', secret: 'DEMO_PASSWORD', submit: true })).toBe('pty-1: secret DEMO_PASSWORD')
  })
})

describe('secrets', () => {
  it('reads a value at call time from the environment or a file, and names only the secret in errors', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-secret-'))
    dirs.push(dir)
    const file = join(dir, 'value')
    writeFileSync(file, 'from-the-file\n')
    const secrets = { ENV_ONE: { env: 'CONCH_TEST_SECRET' }, FILE_ONE: { file }, MISSING: { file: join(dir, 'absent') } }
    expect(readSecret(secrets, 'ENV_ONE', { CONCH_TEST_SECRET: 'env-value-1' })).toEqual({ name: 'ENV_ONE', value: 'env-value-1' })
    expect(readSecret(secrets, 'FILE_ONE')).toEqual({ name: 'FILE_ONE', value: 'from-the-file' })
    writeFileSync(file, 'rotated-value\n')
    expect(readSecret(secrets, 'FILE_ONE').value).toBe('rotated-value')
    expect(() => readSecret(secrets, 'ENV_ONE', {})).toThrow(/SECRET_UNAVAILABLE|environment variable CONCH_TEST_SECRET, which is not set/)
    expect(() => readSecret(secrets, 'MISSING')).toThrow(/cannot be read \(ENOENT\)/)
    expect(() => readSecret(secrets, 'toString')).toThrow(/unknown secret "toString"; configured secrets: ENV_ONE, FILE_ONE, MISSING/)
  })

  it('refuses bad secret config at load, naming the field', () => {
    expect(() => Config.parse({ secrets: { 'bad name': { env: 'X' } } })).toThrow(/secret name/)
    expect(() => Config.parse({ secrets: { REL: { file: 'relative/path' } } })).toThrow(/absolute path/)
    expect(() => Config.parse({ secrets: { BOTH: { env: 'X', file: '/x' } } })).toThrow()
  })

  it('types a configured secret and lists the names; the secret field names them', async () => {
    process.env['CONCH_TOOL_TEST_SECRET'] = 'memory-secret-42'
    try {
      harness = await boot({ toolPty: { secrets: { DEMO_PASSWORD: { env: 'CONCH_TOOL_TEST_SECRET' } } } })
      const send = harness.ctx.tools.specs().find((spec) => spec.name === 'terminal_send')!
      expect((send.parameters['properties'] as Record<string, { description: string }>)['secret']!.description).toMatch(/Configured: DEMO_PASSWORD$/)
      await harness.call('terminal_open', { type: 'shell' })
      const typed = await harness.call('terminal_send', { sessionId: 'pty-1', secret: 'DEMO_PASSWORD' })
      expect(JSON.stringify(typed)).not.toContain('memory-secret-42')
      const read = await harness.text('terminal_read', { sessionId: 'pty-1' })
      expect(read).toContain('[secret DEMO_PASSWORD]')
      expect(read).not.toContain('memory-secret-42')
      expect(await harness.text('terminal_list', {})).toBe('pty-1 shell running\n[secrets: DEMO_PASSWORD — terminal_send with secret: NAME types one]')
      expect(await harness.text('terminal_send', { sessionId: 'pty-1', secret: 'OTHER' })).toBe(
        'UNKNOWN_SECRET: unknown secret "OTHER"; configured secrets: DEMO_PASSWORD; nothing was written — terminal_list shows the configured secrets',
      )
    } finally {
      delete process.env['CONCH_TOOL_TEST_SECRET']
    }
  })

  it('renders hidden input', () => {
    const rendered = renderSend(
      { viewport: 'Password: ', waitReason: 'stdin_read', sessionStatus: { state: 'running' }, truncated: false, inputState: 'hidden', evidence: { tier: 'proc', detail: 'bash[1] read fd0 /dev/pts/1' }, elapsedMs: 3 },
      4096,
    )
    expect(rendered.text).toBe('Password: \n[wait: stdin_read]\n[input: hidden — the program is reading a secret]')
  })
})
