/**
 * A configured secret against a program that prints it so the backend's byte pass misses it —
 * colour inside it, pieces further apart than `secretHoldMs` — where the text also splits it: the
 * cut of a line longer than `maxLineLength`, the right margin of a screen, the pieces a live send
 * is streamed in. Real terminals (pty-local) under each sandbox mode; every result, page, screen
 * and live update the model or a watcher gets must show only the name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ToolProgress } from '@conch/tools'
import { until } from '@conch/test-support/wait'
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

/**
 * A configured secret the program names its processes with: `$0` (prctl(2) `PR_SET_NAME` and
 * argv), cut to the 15 bytes of a name or split over two processes, and a path a reader holds
 * open. Every result that names processes or carries readiness evidence — terminal_signal,
 * terminal_close, terminal_send's meta, task_kill's report, terminal_list — must show the name
 * of the secret, never a piece of the value. Real processes, under each sandbox mode.
 */
describe.each(MODES)('a secret in the names of processes (%s)', (mode) => {
  /** 12 bytes: a process name holds it whole. */
  const SHORT = 'pw-12-chars!'
  const SHORT_VARIABLE = 'CONCH_TOOL_PTY_CASE_SHORT_SECRET'
  let harness: CaseHarness

  /** No piece of either value longer than four characters, in the text or the meta. */
  const expectClean = (seen: Seen, what: string) => {
    const all = `${seen.text}\n${JSON.stringify(seen.meta)}`
    expectHidden(all, what)
    for (let at = 0; at + 5 <= SHORT.length; at++) expect(all, `${what}: ${SHORT.slice(at, at + 5)} in\n${all.slice(-600)}`).not.toContain(SHORT.slice(at, at + 5))
  }

  /** A terminal whose shell holds the long value in $V and the short one in $W, typed as secrets. */
  const typed = async (): Promise<string> => {
    const session = await harness.open()
    for (const [variable, name] of [['V', 'DEMO'], ['W', 'SHORT']] as const) {
      expect((await harness.send(session, `read -s ${variable}`)).text).toContain('[input: hidden')
      expect((await harness.call('terminal_send', { sessionId: session, secret: name })).isError).toBe(false)
    }
    return session
  }

  beforeAll(async () => {
    process.env[VARIABLE] = VALUE
    process.env[SHORT_VARIABLE] = SHORT
    harness = await bootCase({ mode, toolPty: { secrets: { DEMO: { env: VARIABLE }, SHORT: { env: SHORT_VARIABLE } }, killEscalation: ['SIGTERM'] } })
  })

  afterAll(async () => {
    await harness?.dispose()
    delete process.env[VARIABLE]
    delete process.env[SHORT_VARIABLE]
  })

  it('terminal_signal names the foreground program by the secret, cut to 15 bytes or whole', async () => {
    const session = await typed()
    for (const [variable, label] of [['V', '[secret DEMO]'], ['W', '[secret SHORT]']] as const) {
      const started = await harness.call('terminal_send', { sessionId: session, text: `perl -e '$0 = shift; print "named\\n"; sleep 300' "$${variable}"`, idleMs: 300 })
      expect(started.text).toMatch(/^named$/m)
      const signalled = await harness.signal(session, 'SIGINT')
      expect(signalled.text).toMatch(new RegExp(`^\\[signal: SIGINT delivered to ${label.replace(/[[\]]/g, '\\$&')} in ${session}\\]$`, 'm'))
      expect(signalled.meta.target).toBe(label)
      expectClean(signalled, `signal ${variable}`)
    }
    await harness.close(session)
  })

  it('the stdin_read evidence names the reader by the secret, and a path it waits on is shown as the secret', async () => {
    const session = await typed()
    const read = await harness.send(session, `perl -e '$0 = shift; print "line? "; my $l = <STDIN>; print "got $l"' "$V"`)
    expect(read.meta.waitReason).toBe('stdin_read')
    const evidence = read.meta.evidence as { tier: string; detail: string; process?: { name: string } }
    expect(evidence.tier).toBe('proc')
    expect(evidence.process?.name).toBe('[secret DEMO]')
    expect(evidence.detail).toMatch(/^\[secret DEMO\]\[\d+\] read fd0 /)
    expectClean(read, 'evidence')
    expect((await harness.send(session, 'x')).text).toMatch(/^got x$/m)
    // A reader that also waits on a FIFO named with the value: the FIFO is a wake source the
    // evidence lists, by its path.
    await harness.send(session, 'mkfifo "$V.fifo"; echo made')
    const fifo = await harness.send(session, `python3 -c 'import os, select, sys; f = os.open(sys.argv[1], os.O_RDWR); print("fifo> ", end="", flush=True); select.select([0, f], [], []); print("woke")' "$V.fifo"`)
    const corroborated = fifo.meta.evidence as { detail: string; corroborated?: { sources: string[] } }
    expect(corroborated.detail, JSON.stringify(fifo.meta)).toMatch(/also waits on \[secret DEMO\]/)
    expectClean(fifo, 'fifo evidence')
    expect((await harness.send(session, '')).text).toMatch(/^woke$/m)
    await harness.close(session)
  })

  it('terminal_close and terminal_list show processes named with two halves of the value as the secret', async () => {
    const session = await typed()
    await harness.send(session, `perl -e '$0 = shift; print "half-", "up\\n"; sleep 300' "\${V:0:12}" & perl -e '$0 = shift; print "half-", "up\\n"; sleep 300' "\${V:12}" &`)
    await until(async () => (await harness.read(session, { count: 5000 })).text.match(/half-up/g)?.length === 2, 10_000, 'both halves named')
    expectClean(await harness.list(), 'terminal_list')
    const closed = await harness.close(session)
    expect(closed.text).toMatch(/ \[secret DEMO\] ×2[,\]]/)
    expectClean(closed, 'close')
  })

  it('task_kill reports a program that outlived the escalation by the secret', async () => {
    const session = await typed()
    const task = await harness.sendBackground(session, `perl -e '$0 = shift; $SIG{INT} = $SIG{TERM} = "IGNORE"; print "ignoring\\n"; sleep 300' "$V"`)
    await harness.waitForLine(session, 'ignoring')
    const killed = await harness.call('task_kill', { taskId: task })
    expect(killed.text).toMatch(/still runs after SIGTERM/)
    expect(killed.text).toContain('[secret DEMO]')
    expectClean(killed, 'task_kill')
    expectClean(await harness.taskOutput(task), 'task_output')
    const ended = await harness.signal(session, 'SIGKILL')
    expectClean(ended, 'SIGKILL')
    await harness.close(session)
  })
})
