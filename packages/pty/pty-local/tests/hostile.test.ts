/**
 * Real-process attacks on a local session's readiness and input path: a program that prints the
 * private markers itself, a program that hands the foreground back to the shell while it keeps
 * running, and input large enough to keep the reader busy for seconds. Real bash, real PTY.
 */
import { spawnSync } from 'node:child_process'
import { chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, vi } from 'vitest'
import { sweepKeyFolders } from '../src/prompt.ts'
import { linesEqual, openSession, send } from './local-harness.ts'

/**
 * Defines `forge KIND` in the session's shell: it prints the marker of kind `prompt` or `exit`
 * exactly as the shell's own PROMPT_COMMAND would, taken from the shell itself — whatever secret
 * that holds, the forger has it too (as a program that reads the shell's memory would).
 */
const FIND_NONCE = fileURLToPath(new URL('./fixtures/find-nonce.py', import.meta.url))

const FORGE = String.raw`forge() { local pc="$PROMPT_COMMAND"; pc=\${pc//;prompt;/;$1;}; pc=\${pc%%; PS1=*}; eval "$pc"; }`.replace(/\\\$/g, '$')

async function forgerSession() {
  const session = await openSession({ idleSilenceMs: 10000 })
  const defined = await send(session, `${FORGE}; forge prompt | od -c | head -1`)
  // The forger really reproduces a marker: ESC ] 6973 …
  expect(defined.viewport).toMatch(/033\s+\]\s+6\s+9\s+7\s+3/)
  return session
}

describe('forged markers', () => {
  it('an exit marker printed by a program does not end the session or the wrapper', async () => {
    const session = await forgerSession()
    const result = await send(session, 'forge exit; sleep 0.3; echo SURVIVED-$((40+2))')
    expect(result.sessionStatus).toEqual({ state: 'running' })
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, 'SURVIVED-42')).toBe(1)
    const after = await send(session, 'echo alive-$((1+1))')
    expect(after.sessionStatus).toEqual({ state: 'running' })
    expect(linesEqual(after.viewport, 'alive-2')).toBe(1)
    expect(session.status()).toEqual({ state: 'running' })
  })

  it('a prompt marker and `$ ` printed by the foreground program do not settle the send while it runs', async () => {
    const session = await forgerSession()
    const result = await send(session, `(forge prompt; printf '$ '; sleep 1; echo FORGER-DONE-$((6*7)))`)
    expect(result.waitReason).toBe('stdin_read')
    expect(result.evidence.tier).toBe('prompt')
    expect(result.viewport).toMatch(/^\$ FORGER-DONE-42$/m)
    expect(result.elapsedMs).toBeGreaterThanOrEqual(900)
  })

  it('a program that gives the foreground back to the shell and then forges the prompt does not settle the send', async () => {
    const session = await forgerSession()
    // SIGTTOU is ignored so a process outside the foreground group may call tcsetpgrp(3).
    const forger = [
      'import os, signal, sys, time',
      'signal.signal(signal.SIGTTOU, signal.SIG_IGN)',
      'os.setpgid(0, 0)',
      'os.tcsetpgrp(0, os.getpgid(os.getppid()))',
      'sys.stdout.write(sys.argv[1] + "$ "); sys.stdout.flush()',
      'time.sleep(1)',
      'print("FORGER-DONE-" + str(6*7))',
    ].join('; ')
    const result = await send(session, `python3 -c '${forger}' "$(forge prompt)"`)
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport).toMatch(/^\$ FORGER-DONE-42$/m)
    expect(result.elapsedMs).toBeGreaterThanOrEqual(900)
    const after = await send(session, 'echo alive-$((1+1))')
    expect(linesEqual(after.viewport, 'alive-2')).toBe(1)
  })
})

describe("the marker's nonce", () => {
  it('a key folder a conch no longer running left behind is removed; a running one keeps its own', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-sweep-'))
    try {
      // A pid that was a process and has ended (and nothing else was started in between here).
      const gone = spawnSync('true').pid!
      const names = [`conch-prompt-${gone}-dead01`, `conch-prompt-${process.ppid}-live01`, `conch-prompt-${process.pid}-mine01`, 'conch-prompt-other', `conch-prompt-${gone}-theirs`]
      for (const name of names) mkdirSync(join(dir, name))
      // Another user's folder named as a dead conch's (as root, as CI runs, it is made so here):
      // root removing it could be led through links they swap in.
      chownSync(join(dir, names[4]!), 65534, 65534)
      symlinkSync(join(dir, names[1]!), join(dir, `conch-prompt-${gone}-link`))
      sweepKeyFolders(dir)
      expect(names.map((name) => existsSync(join(dir, name)))).toEqual([false, true, true, true, true])
      expect(lstatSync(join(dir, `conch-prompt-${gone}-link`)).isSymbolicLink()).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a program in the terminal finds it in no environment, argv or open file in /proc, and its forged markers leave the exit status true', async () => {
    const session = await openSession()
    // The shell itself knows its nonce; its output goes to conch alone.
    const own = await send(session, 'echo "$PROMPT_COMMAND"')
    const nonce = /6973;([0-9a-f]{16});prompt/.exec(own.viewport)?.[1]
    expect(nonce).toBeDefined()
    const search = await send(session, `found=$(python3 ${FIND_NONCE} | tr '\\n' ' '); echo "found: [$found]"`)
    const found = /^found: \[(.*)\]$/m.exec(search.viewport)?.[1]
    expect(found).toBeDefined()
    // Another session's nonce (one started elsewhere on this machine) may be found; this one's is not.
    expect(found!.split(' ')).not.toContain(nonce)
    // The shell keeps no descriptor beyond its terminal's (255: bash's own copy of it).
    expect(linesEqual((await send(session, "ls /proc/$$/fd | paste -sd ' '")).viewport, '0 1 2 255')).toBe(1)
    // A forger that prints its markers, status 0, with whatever it found and a guess, right after
    // every real one: from the shell's own PROMPT_COMMAND, so that no race decides the order.
    await send(session, `PROMPT_COMMAND+="; builtin printf '\\033]6973;%s;prompt;0\\007' $found 0123456789abcdef"`)
    const failed = await send(session, 'false')
    expect(failed.waitReason).toBe('stdin_read')
    expect(failed.exitStatus).toBe(1)
    const exited = await send(session, '(exit 7)')
    expect(exited.exitStatus).toBe(7)
  })
})

describe('large input', () => {
  it('a 1 MiB send settles only after bash has read and run all of it, and the next send starts on a fresh line', async () => {
    const session = await openSession({ idleSilenceMs: 3000, timeoutMs: 120000 })
    const filler = 'x'.repeat(1024 * 1024 - 64)
    const result = await send(session, `: ${filler}; echo BIG-DONE-$((2*21))`)
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport, `${JSON.stringify(result.evidence)} ${JSON.stringify(result.viewport.slice(-300))}`).toMatch(/BIG-DONE-42\n/)
    const next = await send(session, 'echo next-$((1+1))')
    expect(next.waitReason).toBe('stdin_read')
    expect(linesEqual(next.viewport, 'next-2')).toBe(1)
  }, 180000)

  it('input still queued when the session closes is dropped quietly (no EBADF write error)', async () => {
    const errors = vi.spyOn(console, 'error')
    try {
      const session = await openSession({ idleSilenceMs: 300 })
      // A reader that never reads: everything past the terminal's input queue stays queued here.
      await send(session, 'stty -icanon; sleep 600')
      const operation = session.startSend({ text: 'y'.repeat(256 * 1024), submit: true })
      operation.done.catch(() => {})
      await session.close()
      await operation.done.catch(() => undefined)
      // node-pty retried a queued write on the next turns of the event loop.
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve))
      expect(errors.mock.calls.map((call) => String(call[0]))).not.toContainEqual(expect.stringMatching(/pty write error/i))
    } finally {
      errors.mockRestore()
    }
  })
})

describe('programs with many threads', () => {
  it('a Python REPL with 1000 idle threads is still proved ready at its prompt', async () => {
    const session = await openSession({ idleSilenceMs: 20000 })
    const started = await send(session, `python3 -q -i -c 'import threading; ev = threading.Event(); [threading.Thread(target=ev.wait, daemon=True).start() for _ in range(1000)]; print("threads", threading.active_count())'`)
    expect(started.waitReason).toBe('stdin_read')
    expect(linesEqual(started.viewport, 'threads 1001')).toBe(1)
    const answer = await send(session, '6*7')
    expect(answer.waitReason).toBe('stdin_read')
    expect(answer.evidence.tier).toBe('proc')
    expect(linesEqual(answer.viewport, '42')).toBe(1)
    await send(session, 'exit()')
  }, 60000)
})

describe('per-send time limits', () => {
  it('a send’s own timeoutMs ends the wait on a program that prints forever, far before the configured timeout', async () => {
    const session = await openSession({ timeoutMs: 30000, idleSilenceMs: 3000 })
    const result = await session.startSend({ text: 'while :; do echo tick-$((1+1)); sleep 0.05; done', submit: true, timeoutMs: 700 }).done
    expect(result.waitReason).toBe('timeout')
    expect(result.evidence.detail).toBe('not ready after 700 ms')
    expect(result.viewport).toContain('tick-2')
    expect(result.elapsedMs).toBeLessThan(10000)
  })

  it('a send’s own idleMs settles on a shorter silence, and the next send uses the configured one again', async () => {
    const session = await openSession({ idleSilenceMs: 20000 })
    const quiet = await session.startSend({ text: 'sleep 2; echo late-$((1+1))', submit: true, idleMs: 300 }).done
    expect(quiet.waitReason).toBe('inferred_idle')
    expect(quiet.evidence.detail).toBe('no output for 300 ms')
    const next = await send(session, 'echo next-$((1+1))')
    expect(next.waitReason).toBe('stdin_read')
    expect(linesEqual(next.viewport, 'late-2')).toBe(1)
    expect(linesEqual(next.viewport, 'next-2')).toBe(1)
  })
})
