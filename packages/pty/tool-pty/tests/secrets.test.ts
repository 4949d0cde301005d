/**
 * A configured secret against a program that prints it so the backend's byte pass misses it —
 * colour inside it, pieces further apart than `secretHoldMs` — where the text also splits it: the
 * cut of a line longer than `maxLineLength`, the right margin of a screen, the pieces a live send
 * is streamed in. Real terminals (pty-local) under each sandbox mode; every result, page, screen
 * and live update the model or a watcher gets must show only the name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ToolProgress } from '@conch/tools'
import { bootCase, MODES, type CaseHarness, type Seen } from './cases/harness.ts'

const VALUE = 'hunter2-S3cretValue'
const VARIABLE = 'CONCH_TOOL_PTY_CASE_SECRET'

/** No piece of the value that says more than its first or last four characters. */
function expectHidden(text: string, what: string): void {
  for (let at = 0; at + 5 <= VALUE.length; at++) expect(text, `${what}: ${VALUE.slice(at, at + 5)} in\n${text.slice(-400)}`).not.toContain(VALUE.slice(at, at + 5))
}

describe.each(MODES)('a secret the text splits (%s)', (mode) => {
  let harness: CaseHarness
  let session: string

  beforeAll(async () => {
    process.env[VARIABLE] = VALUE
    harness = await bootCase({ mode, ptyLocal: { rows: 40, cols: 160 }, toolPty: { secrets: { DEMO: { env: VARIABLE } } } })
    session = await harness.open()
    expect((await harness.send(session, 'read -s X')).text).toContain('[input: hidden')
    expect((await harness.call('terminal_send', { sessionId: session, secret: 'DEMO' })).isError).toBe(false)
  })

  afterAll(async () => {
    await harness?.dispose()
    delete process.env[VARIABLE]
  })

  const seen = (results: Seen[], what: string) => {
    for (const result of results) expectHidden(result.text, what)
  }

  it('across the cut of a line longer than maxLineLength, with an SGR inside it or a pause, in results and terminal_read pages', async () => {
    for (const form of [`printf "%016379d" 0; printf '%s\\e[0m%s\\n' "\${X:0:8}" "\${X:8}"`, `printf "%016379d%s" 0 "\${X:0:8}"; sleep 0.3; printf '%s\\n' "\${X:8}"`]) {
      const result = await harness.send(session, `${form}; echo cut-done`)
      expect(result.text, form).toMatch(/^0+\[secret DEMO\]$/m)
      expect(result.text).toMatch(/^cut-done$/m)
      const pages = await Promise.all([0, 1, 2, 3, 4].map((offset) => harness.read(session, { offset, count: 1 })))
      seen([result, await harness.read(session, { count: 5000 }), ...pages], form)
    }
    const json = await harness.send(session, `echo "{\\"pad\\":\\"$(printf '%016362d' 0)\\",\\"token\\":\\"$X\\"}" > j.json; grep --color=always '3.r' j.json; echo grep-done`)
    expect(json.text).toContain('"token":"[secret DEMO]')
    seen([json, await harness.read(session, { count: 5000 }), await harness.read(session, { offset: 2, count: 1 })], 'grep --color')
  })

  it('across the right margin of a screen, in the result and terminal_read {screen: true}', async () => {
    await harness.send(session, `{ printf '%0155d%s\\n' 0 "$X"; seq 30; } > s.txt; echo written`)
    const paged = await harness.send(session, 'less -R -p 3.r s.txt')
    expect(paged.text).toMatch(/^\[screen: alternate 40x160/)
    expect(paged.text).toMatch(/^0+\[secret DEMO\]$/m)
    seen([paged, await harness.call('terminal_read', { sessionId: session, screen: true })], 'less')
    await harness.call('terminal_send', { sessionId: session, keys: ['q'] })
  })

  it('across a 0.3 s pause in the live output of a send, as the progress listener gets it', async () => {
    const updates: string[] = []
    const result = await harness.ctx.tools.execute(
      'terminal_send',
      { sessionId: session, text: `printf 'c:%s' "\${X:0:8}"; sleep 0.3; printf '%s\\n' "\${X:8}"; echo live-done` },
      {
        agent: harness.agent,
        signal: new AbortController().signal,
        callId: 'live-1',
        progress: (update: ToolProgress) => {
          if (update.type === 'output') updates.push(update.text)
        },
      },
    )
    expect(result.content.map((item) => item.text).join('\n')).toMatch(/^c:\[secret DEMO\]$/m)
    expect(updates.join('')).toMatch(/^c:\[secret DEMO\]$/m)
    for (const update of updates) expectHidden(update, 'live update')
  })
})
