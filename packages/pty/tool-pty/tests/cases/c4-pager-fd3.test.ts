/**
 * C4 — a pager reads the terminal on fd 3 (readiness).
 * `git log` in a repository of 60 commits (the session environment disables pagers), then
 * `seq 1 500 | less` — less reads /dev/tty, not fd 0 — then `q` and `echo ok`. Every call
 * settles within 2 s and never by timeout: a proved read, not silence.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootCase, count, MODES, outputLines, type CaseHarness, type Seen } from './harness.ts'

/** The case's bound on each call, in ms (silence would take `idleSilenceMs`, 3000 by default). */
const SETTLE_MS = 2000

function expectPromptly(seen: Seen, what: string): void {
  expect(seen.isError, seen.text).toBe(false)
  expect(seen.meta.waitReason, `${what}\n${seen.text}`).toBe('stdin_read')
  expect(seen.meta.elapsedMs as number, what).toBeLessThan(SETTLE_MS)
}

/** A fresh repository with empty commits c1…c60 (made outside the terminal). */
function makeRepository(dir: string): void {
  mkdirSync(dir)
  const env = { ...process.env, GIT_AUTHOR_NAME: 'case', GIT_AUTHOR_EMAIL: 'case@example.invalid', GIT_COMMITTER_NAME: 'case', GIT_COMMITTER_EMAIL: 'case@example.invalid' }
  execFileSync('git', ['init', '-q', dir], { env })
  execFileSync('bash', ['-c', 'for i in $(seq 1 60); do git commit -q --allow-empty -m "c$i"; done'], { cwd: dir, env })
}

describe.each(MODES)('C4 a pager reading the terminal on fd 3 (%s)', (mode) => {
  let harness: CaseHarness

  beforeAll(async () => {
    harness = await bootCase({ mode })
  })

  afterAll(async () => {
    await harness?.dispose()
  })

  it('settles git log, less and its q promptly on a proved read, showing the output', async () => {
    const repo = path.join(harness.workspace, 'repo')
    makeRepository(repo)
    const sessionId = await harness.open({ cwd: repo })

    const log = await harness.send(sessionId, 'git log')
    expectPromptly(log, 'git log')
    let logLines = outputLines(log.text).map((line) => line.trim())
    if (!logLines.includes('c1')) {
      // A pager showed the first page after all: quit it (the case allows this) — the full
      // log must then be in the scrollback.
      expectPromptly(await harness.send(sessionId, 'q', { submit: false }), 'q (git log pager)')
      logLines = outputLines((await harness.read(sessionId, { count: 1000 })).text).map((line) => line.trim())
    }
    expect(count(logLines, 'c60'), log.text).toBe(1)
    expect(count(logLines, 'c1'), log.text).toBe(1)

    const less = await harness.send(sessionId, 'seq 1 500 | less')
    expectPromptly(less, 'seq 1 500 | less')
    const page = outputLines(less.text)
    for (let line = 1; line <= 23; line++) expect(count(page, String(line)), less.text).toBe(1)

    expectPromptly(await harness.send(sessionId, 'q', { submit: false }), 'q (less)')

    const ok = await harness.send(sessionId, 'echo ok')
    expectPromptly(ok, 'echo ok')
    expect(count(outputLines(ok.text), 'ok'), ok.text).toBe(1)
    expect(harness.logged).toEqual([])
  }, 60_000)
})
