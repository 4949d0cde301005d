import { describe, expect, it } from 'vitest'
import { renderExec } from '../src/render.ts'

const base = { wallTimeSeconds: 1.5, originalTokenCount: 3, output: 'a\nb' }

describe('renderExec', () => {
  it('says exited with the code, or running with the session id and why', () => {
    expect(renderExec({ ...base, exitCode: 0 }, 100, 1000).text).toBe('Wall time: 1.500 seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\na\nb')
    const running = renderExec({ ...base, sessionId: 4, running: 'waiting for input' }, 100, 1000)
    expect(running.text).toContain('\nProcess running with session ID 4 (waiting for input)\n')
    expect(running.meta).toEqual({ wall_time_seconds: 1.5, session_id: 4, original_token_count: 3, truncated: false })
  })

  it('shows the counted marker alone, whole, when the budget cannot hold it', () => {
    const output = 'x'.repeat(500)
    const seen = renderExec({ ...base, exitCode: 0, output }, 4, 1000)
    expect(seen.text.endsWith('Output:\n[… 500 bytes omitted]')).toBe(true)
    expect(seen.meta.truncated).toBe(true)
  })

  it('marks output the backend cut without counting it', () => {
    const seen = renderExec({ ...base, exitCode: 0, truncated: true }, 100, 1000)
    expect(seen.text.endsWith('Output:\n[… output omitted]\na\nb')).toBe(true)
    expect(seen.meta.truncated).toBe(true)
  })

  it('keeps the whole result within maxResultBytes', () => {
    const seen = renderExec({ ...base, exitCode: 0, output: 'y\n'.repeat(10000) }, 1_000_000, 300)
    expect(Buffer.byteLength(seen.text)).toBeLessThanOrEqual(300)
  })
})
