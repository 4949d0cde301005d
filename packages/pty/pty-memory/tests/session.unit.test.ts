import { describe, expect, it } from 'vitest'
import { PtyError, type SendResult } from '@conch/pty'
import type { Agent } from '@conch/agent'
import { Config, MemoryBackend, type MemorySession } from '../src/index.ts'

async function open(config: Partial<Config> = {}, cwd?: string): Promise<MemorySession> {
  const backend = new MemoryBackend(Config.parse(config))
  const session = await backend.spawn({
    owner: {} as Agent,
    sessionId: 'pty-1',
    signal: new AbortController().signal,
    ...(cwd === undefined ? {} : { cwd }),
  })
  return session as MemorySession
}

function send(session: MemorySession, text: string, submit = true): Promise<SendResult> {
  return session.startSend({ text, submit }).done
}

async function output(session: MemorySession, text: string): Promise<string> {
  return (await send(session, text)).viewport
}

describe('commands', () => {
  it('echoes words, expands variables and keeps quoting', async () => {
    const session = await open()
    expect(await output(session, 'echo hello   world')).toBe('hello world')
    expect(await output(session, `echo "a  b" 'c  $HOME' \\$HOME`)).toBe('a  b c  $HOME $HOME')
    expect(await output(session, 'echo ${UNSET:-fallback} "$HOME" ~/x')).toBe('fallback /home/conch /home/conch/x')
    expect(await output(session, 'echo -n no newline')).toBe('no newline')
    expect(await output(session, 'echo -e "a\\tb\\nc"')).toBe('a\tb\nc')
    expect(await output(session, 'echo one # a comment')).toBe('one')
  })

  it('keeps the working directory and exported variables between sends', async () => {
    const session = await open({}, '/srv/app')
    expect(await output(session, 'pwd')).toBe('/srv/app')
    await send(session, 'cd ../data && export FOO=bar')
    expect(await output(session, 'pwd; echo $FOO')).toBe('/srv/data\nbar')
    expect(await output(session, 'cd -')).toBe('/srv/app')
    expect(await output(session, 'cd; pwd')).toBe('/home/conch')
    await send(session, 'unset FOO')
    expect(await output(session, 'echo "[$FOO]"')).toBe('[]')
  })

  it('tracks $? and runs && and || lists by status', async () => {
    const session = await open()
    expect(await output(session, 'nosuch')).toBe('bash: nosuch: command not found')
    expect(await output(session, 'echo $?')).toBe('127')
    expect(await output(session, 'false && echo no || echo yes; echo $?')).toBe('yes\n0')
    expect(await output(session, 'false; echo $?')).toBe('1')
  })

  it('prints sequences, repeated text and printf formats', async () => {
    const session = await open()
    expect(await output(session, 'seq 3')).toBe('1\n2\n3')
    expect(await output(session, 'seq 10 -5 0')).toBe('10\n5\n0')
    expect(await output(session, 'repeat 3 😀')).toBe('😀😀😀')
    expect(await output(session, "printf '%s=%d\\n' a 1 b 2")).toBe('a=1\nb=2')
  })

  it('refuses pipes and background jobs it cannot model', async () => {
    const session = await open()
    expect(await output(session, 'seq 3 | cat')).toBe('bash: pipes are not supported by the memory shell')
    expect(await output(session, 'echo $?')).toBe('2')
  })

  it('prints its motd before the first prompt', async () => {
    const session = await open({ motd: 'memory shell ready\n' })
    expect(session.motd).toBe('memory shell ready')
    expect(session.pid).toBeUndefined()
    expect(session.read({ offset: 0, count: 10 }).text).toBe('memory shell ready')
  })
})

describe('how sends settle', () => {
  it('settles stdin_read at the prompt with fixed evidence and no elapsed time', async () => {
    const session = await open()
    const result = await send(session, 'echo hi')
    expect(result).toEqual({
      viewport: 'hi',
      waitReason: 'stdin_read',
      sessionStatus: { state: 'running' },
      truncated: false,
      inputState: 'prompt',
      evidence: { tier: 'fixed', detail: 'memory shell prompt' },
      elapsedMs: 0,
    })
  })

  it('settles session_exit with the exit code and keeps the scrollback readable', async () => {
    const session = await open()
    const exits: unknown[] = []
    session.onExit((status) => exits.push(status))
    const result = await send(session, 'echo bye; exit 3')
    expect(result).toMatchObject({ viewport: 'bye\nexit', waitReason: 'session_exit', sessionStatus: { state: 'exited', exitCode: 3, signal: null } })
    expect(result.inputState).toBeUndefined()
    expect(result.evidence).toEqual({ tier: 'fixed', detail: 'the shell exited with code 3' })
    expect(exits).toEqual([{ state: 'exited', exitCode: 3, signal: null }])
    expect(session.read({ offset: 0, count: 3 }).text).toBe('$ echo bye; exit 3\nbye\nexit')
  })

  it('ends the shell on ^D at an empty prompt with the last status', async () => {
    const session = await open()
    await send(session, 'false')
    const result = await send(session, '\x04', false)
    expect(result.sessionStatus).toEqual({ state: 'exited', exitCode: 1, signal: null })
  })

  it('rejects a send written after the shell exited, writing nothing', async () => {
    const session = await open()
    await send(session, 'exit')
    const error = await send(session, 'echo x').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(PtyError)
    expect((error as PtyError).code).toBe('SESSION_EXITED')
  })

  it('reports a continuation at an open quote, and runs the whole block when it closes', async () => {
    const session = await open()
    const open1 = await send(session, 'echo "abc')
    expect(open1).toMatchObject({ viewport: '', waitReason: 'stdin_read', inputState: 'continuation', evidence: { detail: 'memory shell continuation prompt (> )' } })
    const closed = await send(session, 'def"')
    expect(closed).toMatchObject({ viewport: 'abc\ndef', inputState: 'prompt' })
    expect(await send(session, 'echo a \\')).toMatchObject({ inputState: 'continuation' })
    expect(await output(session, 'b')).toBe('a b')
  })

  it('abandons a continuation on SIGINT with status 130', async () => {
    const session = await open()
    await send(session, "echo 'never")
    await expect(session.signal('SIGINT')).resolves.toEqual({ signal: 'SIGINT', delivered: true, targetPgid: 100, target: 'bash' })
    expect(await output(session, 'echo $?')).toBe('130')
  })

  it('settles inferred_idle and not_reading while a long sleep holds the foreground', async () => {
    const session = await open({ idleSilenceMs: 2000 })
    expect(await send(session, 'sleep 1')).toMatchObject({ waitReason: 'stdin_read', inputState: 'prompt' })
    const sleeping = await send(session, 'sleep 100')
    expect(sleeping).toMatchObject({
      viewport: '',
      waitReason: 'inferred_idle',
      inputState: 'not_reading',
      elapsedMs: 2000,
      evidence: { tier: 'fixed', detail: 'sleep 100 prints nothing and does not read the terminal' },
    })
    // Input sent now is typed ahead: the sleep does not read it.
    expect(await send(session, 'echo typed-ahead')).toMatchObject({ viewport: '', waitReason: 'inferred_idle', inputState: 'not_reading' })
    await expect(session.signal('SIGINT')).resolves.toMatchObject({ target: 'sleep', targetPgid: 101 })
    // bash reads the typed-ahead line once the sleep is gone (kill(2) does not flush the tty).
    expect(session.read({ offset: 0, count: 2 }).text).toBe('$ echo typed-ahead\ntyped-ahead')
  })

  it('flushes typed-ahead input when ^C is typed', async () => {
    const session = await open()
    await send(session, 'sleep 100')
    await send(session, 'echo lost')
    const result = await send(session, '\x03', false)
    expect(result).toMatchObject({ viewport: '', waitReason: 'stdin_read', inputState: 'prompt' })
    expect(await output(session, 'echo $?')).toBe('130')
    expect(session.read({ offset: 0, count: 100 }).text).not.toMatch(/^lost$/m)
  })

  it('settles timeout while yes keeps printing, with its lines as output', async () => {
    const session = await open({ yesLines: 3, timeoutMs: 5000 })
    const result = await send(session, 'yes ok')
    expect(result).toMatchObject({ viewport: 'ok\nok\nok', waitReason: 'timeout', inputState: 'not_reading', elapsedMs: 5000 })
    expect(await send(session, 'echo $?')).toMatchObject({ viewport: 'ok\nok\nok', waitReason: 'timeout' })
    await session.signal('SIGTERM')
    // The typed-ahead `echo $?` ran after yes ended, and saw its status.
    expect(session.read({ offset: 0, count: 3 }).text).toBe('Terminated\n$ echo $?\n143')
  })

  it('settles stdin_read while cat reads the terminal, and ends cat on ^D', async () => {
    const session = await open()
    expect(await send(session, 'cat')).toMatchObject({ viewport: '', waitReason: 'stdin_read', inputState: 'prompt', evidence: { detail: 'cat reads the terminal' } })
    expect(await output(session, 'line one')).toBe('line one')
    expect(await send(session, '\x04', false)).toMatchObject({ waitReason: 'stdin_read', evidence: { detail: 'memory shell prompt' } })
    expect(await output(session, 'echo after')).toBe('after')
  })

  it('keeps a hold send open until it is cancelled, which delivers SIGINT', async () => {
    const session = await open()
    const operation = session.startSend({ text: 'hold working...', submit: true })
    let settled = false
    void operation.done.then(() => (settled = true))
    await Promise.resolve()
    await Promise.resolve()
    expect(settled).toBe(false)
    expect(operation.readOutput()).toBe('working...\n')
    await operation.cancel()
    const result = await operation.done
    expect(result).toMatchObject({ viewport: 'working...', waitReason: 'stdin_read', evidence: { tier: 'fixed', detail: 'interrupted with SIGINT; memory shell prompt' } })
    expect(await output(session, 'echo $?')).toBe('130')
  })

  it('settles a hold send when the session is signalled or closed', async () => {
    const session = await open()
    const held = session.startSend({ text: 'hold', submit: true })
    await Promise.resolve()
    await session.signal('SIGTERM')
    expect(await held.done).toMatchObject({ viewport: 'Terminated', waitReason: 'stdin_read' })
    const closing = session.startSend({ text: 'hold', submit: true })
    await Promise.resolve()
    await expect(session.close()).resolves.toEqual({
      status: { state: 'exited', exitCode: null, signal: 'SIGHUP' },
      stopped: [{ pid: 102, name: 'hold' }, { pid: 100, name: 'bash' }],
      survivors: [],
    })
    expect(await closing.done).toMatchObject({ waitReason: 'session_exit', sessionStatus: { state: 'exited', signal: 'SIGHUP' } })
  })

  it('never writes input cancelled before its write', async () => {
    const session = await open()
    const operation = session.startSend({ text: 'export WRITTEN=yes', submit: true })
    await operation.cancel()
    const error = await operation.done.catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(PtyError)
    expect(error).toMatchObject({ code: 'SEND_CANCELLED', message: 'the send to pty-1 was cancelled before its input was written; nothing was written' })
    expect(await output(session, 'echo "[$WRITTEN]"')).toBe('[]')
  })

  it('leaves text sent without submit on the line until a later send finishes it', async () => {
    const session = await open()
    expect(await send(session, 'echo par', false)).toMatchObject({ viewport: '', waitReason: 'stdin_read', inputState: 'prompt' })
    expect(await output(session, 'tial')).toBe('partial')
  })

  it('streams output to onOutput listeners and consumes it with readOutput', async () => {
    const session = await open()
    const operation = session.startSend({ text: 'seq 2; echo done', submit: true })
    const chunks: string[] = []
    operation.onOutput(() => chunks.push(operation.readOutput()))
    await operation.done
    expect(chunks).toEqual(['1\n2\n', 'done\n'])
    expect(operation.readOutput()).toBe('')
  })

  it('cuts a large viewport to maxReadBytes keeping the newest bytes on a code point', async () => {
    const session = await open({ maxReadBytes: 64 })
    const result = await send(session, 'seq 1000')
    expect(result.truncated).toBe(true)
    expect(result.viewport.endsWith('999\n1000')).toBe(true)
    expect(Buffer.byteLength(result.viewport)).toBeLessThanOrEqual(64)
    const emoji = await send(session, 'repeat 100 😀')
    expect(emoji.truncated).toBe(true)
    expect(emoji.viewport).toBe('😀'.repeat(15))
  })
})

describe('signals and close', () => {
  it('refuses SIGKILL to the shell and ignores SIGTERM and SIGTSTP at the prompt', async () => {
    const session = await open()
    const error = await session.signal('SIGKILL').catch((caught: unknown) => caught)
    expect((error as PtyError).code).toBe('SIGNAL_REFUSED')
    await expect(session.signal('SIGTERM')).resolves.toMatchObject({ delivered: true, target: 'bash' })
    await expect(session.signal('SIGTSTP')).resolves.toMatchObject({ delivered: true, target: 'bash' })
    expect(session.status()).toEqual({ state: 'running' })
  })

  it('stops a foreground program on SIGTSTP and lists it as a job', async () => {
    const session = await open()
    await send(session, 'sleep 200')
    await session.signal('SIGTSTP')
    expect(await output(session, 'jobs')).toBe('[1]+  Stopped                 sleep 200')
    expect(await output(session, 'echo $?')).toBe('0')
  })

  it('kills a foreground program with SIGKILL and reports 137', async () => {
    const session = await open()
    await send(session, 'sleep 200')
    await expect(session.signal('SIGKILL')).resolves.toMatchObject({ target: 'sleep' })
    expect(await output(session, 'echo $?')).toBe('137')
  })

  it('exits on SIGHUP, after which signals are refused', async () => {
    const session = await open()
    await session.signal('SIGHUP')
    expect(session.status()).toEqual({ state: 'exited', exitCode: null, signal: 'SIGHUP' })
    const error = await session.signal('SIGINT').catch((caught: unknown) => caught)
    expect((error as PtyError).code).toBe('SESSION_EXITED')
  })

  it('closes once however often close is called, and reports nothing stopped after an exit', async () => {
    const session = await open()
    await send(session, 'exit 4')
    const first = session.close()
    expect(session.close()).toBe(first)
    await expect(first).resolves.toEqual({ status: { state: 'exited', exitCode: 4, signal: null }, stopped: [], survivors: [] })
  })

  it('rejects a spawn whose signal already aborted with that reason', async () => {
    const backend = new MemoryBackend(Config.parse({}))
    const reason = new Error('stop')
    const error = await backend.spawn({ owner: {} as Agent, sessionId: 'pty-1', signal: AbortSignal.abort(reason) }).catch((caught: unknown) => caught)
    expect(error).toBe(reason)
  })
})

describe('keys and secrets', () => {
  it('types characters, {text}, Enter and C-<letter>; refuses other names, every one at once, before anything is written', async () => {
    const session = await open()
    expect((await session.startSend({ keys: [{ text: 'echo' }, 'Space', 'h', 'i', 'Enter'], submit: false }).done).viewport).toBe('hi')
    expect(() => session.startSend({ keys: ['echo', 'Up'], submit: false })).toThrow(
      /^unknown keys "echo" \(entry 1 of keys\), "Up" \(entry 2 of keys\); nothing was written\. The memory shell understands/,
    )
    expect(() => session.startSend({ keys: ['a', 'Up'], submit: false })).toThrow(/^unknown key "Up" \(entry 2 of keys\); nothing was written/)
    expect(await output(session, 'echo still-clean')).toBe('still-clean')
  })

  it('types a secret, echoes its name, and shows the name wherever the value is printed', async () => {
    const session = await open()
    const typed = await session.startSend({ secret: { name: 'PW', value: 'memory-secret-1' }, submit: true }).done
    expect(typed.viewport).not.toContain('memory-secret-1')
    // Its echo in the scrollback is the name; so is a command's output that holds the value.
    expect(session.read({ offset: 0, count: 100 }).text).toMatch(/^\$ \[secret PW\]\nbash: \[secret PW\]: command not found/)
    expect(await output(session, 'echo memory-secret-1 and more')).toBe('[secret PW] and more')
  })
})
