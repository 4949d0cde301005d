/**
 * Real interactive programs at their prompts: each must settle `stdin_read` when it waits for
 * input, show each command's own output in that command's result, and report secondary prompts
 * as `continuation`. A program missing from this machine is skipped with the reason; the test
 * setup (scripts/setup.sh) installs them on CI.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CONTINUATION_PROMPTS, isContinuation } from '../src/continuation.ts'
import { linesEqual, openSession, send } from './local-harness.ts'

/** Whether `program` runs here (`program args` exits 0). */
function runs(program: string, args: string[] = ['--version']): boolean {
  return spawnSync(program, args, { stdio: 'ignore', timeout: 20000 }).status === 0
}

let dir = ''
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'conch-programs-'))
})
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

const ready = { idleSilenceMs: 15000, timeoutMs: 30000 }

describe('interactive programs settle stdin_read at their prompts', () => {
  it.skipIf(!runs('python3'))('pdb: each step is its own result', async () => {
    writeFileSync(path.join(dir, 'p.py'), 'x = 40\nx += 2\nprint("x is", x)\n')
    const session = await openSession(ready, { cwd: dir })
    const start = await send(session, 'python3 -m pdb p.py')
    expect(start.waitReason).toBe('stdin_read')
    expect(start.viewport).toMatch(/\(Pdb\) $/)
    await send(session, 'n')
    const step = await send(session, 'n')
    expect(step.waitReason).toBe('stdin_read')
    const shown = await send(session, 'p x')
    expect(linesEqual(shown.viewport, '42')).toBe(1)
    await send(session, 'q')
  })

  it.skipIf(!runs('ipython', ['--version']))('ipython --simple-prompt, with a continuation for an open block', async () => {
    const session = await openSession(ready, { cwd: dir })
    const start = await send(session, 'ipython --simple-prompt --no-banner --no-confirm-exit --HistoryManager.enabled=False')
    expect(start.waitReason).toBe('stdin_read')
    const answer = await send(session, '6*7')
    expect(answer.waitReason).toBe('stdin_read')
    expect(answer.viewport).toMatch(/Out\[1\]: 42/)
    const open = await send(session, 'for i in range(2):')
    expect(open).toMatchObject({ waitReason: 'stdin_read', inputState: 'continuation' })
    await send(session, '    print("loop", i)')
    const closed = await send(session, '')
    expect(linesEqual(closed.viewport, 'loop 1')).toBe(1)
    await send(session, 'exit')
  }, 30_000)

  it.skipIf(!runs('gdb'))('gdb', async () => {
    const session = await openSession(ready, { cwd: dir })
    const start = await send(session, 'gdb -q -nx')
    expect(start.waitReason).toBe('stdin_read')
    const answer = await send(session, 'print 6*7')
    expect(answer.waitReason).toBe('stdin_read')
    expect(answer.viewport).toMatch(/^\$1 = 42$/m)
    await send(session, 'quit')
  })

  it.skipIf(!runs('bc'))('bc', async () => {
    const session = await openSession(ready)
    await send(session, 'bc -q')
    const answer = await send(session, '6*7')
    expect(answer.waitReason).toBe('stdin_read')
    expect(linesEqual(answer.viewport, '42')).toBe(1)
    await send(session, 'quit')
  })

  it.skipIf(!runs('ed', ['--version']))('ed', async () => {
    const session = await openSession(ready, { cwd: dir })
    await send(session, 'ed -p "*"')
    await send(session, 'a')
    await send(session, 'hello-ed')
    await send(session, '.')
    const printed = await send(session, ',p')
    expect(printed.waitReason).toBe('stdin_read')
    expect(linesEqual(printed.viewport, 'hello-ed')).toBe(1)
    await send(session, 'Q')
  })

  it.skipIf(!runs('git'))('git log with a pager', async () => {
    execFileSync('git', ['init', '-q', dir])
    execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-q', '--allow-empty', '-m', 'first-commit-subject'])
    const session = await openSession(ready, { cwd: dir })
    const paged = await send(session, 'GIT_PAGER=less LESS= git log')
    expect(paged.waitReason).toBe('stdin_read')
    expect(paged.viewport).toContain('first-commit-subject')
    const back = await send(session, 'q', false)
    expect(back.waitReason).toBe('stdin_read')
  })

  it.skipIf(!runs('sqlite3'))('sqlite3, with its continuation prompt', async () => {
    const session = await openSession(ready, { cwd: dir })
    await send(session, 'sqlite3')
    const answer = await send(session, 'select 6*7;')
    expect(answer.waitReason).toBe('stdin_read')
    expect(linesEqual(answer.viewport, '42')).toBe(1)
    const open = await send(session, 'select 1 +')
    expect(open).toMatchObject({ waitReason: 'stdin_read', inputState: 'continuation' })
    const closed = await send(session, '41;')
    expect(linesEqual(closed.viewport, '42')).toBe(1)
    await send(session, '.quit')
  })
})

describe('event-loop programs whose wait set holds more than the terminal', () => {
  it.skipIf(!runs('node') || !runs('python3'))('the Node REPL (epoll on the tty, a self-pipe and an eventfd) and python3 stay exact: no corroboration needed', async () => {
    const session = await openSession(ready)
    for (const repl of ['node', 'python3 -q']) {
      await send(session, repl)
      const answer = await send(session, '6*7')
      expect(answer.waitReason).toBe('stdin_read')
      expect(answer.evidence.tier).toBe('proc')
      expect(answer.evidence.corroborated).toBeUndefined()
      expect(linesEqual(answer.viewport, '42')).toBe(1)
      await send(session, repl === 'node' ? '.exit' : 'exit()')
    }
  })

  it.skipIf(!runs('node'))('node inspect: ready only at debug>, and each step shows its own output', async () => {
    writeFileSync(path.join(dir, 's.js'), 'let a = 40\na = a + 2\nconsole.log("a is", a)\nconsole.log("done")\n')
    const session = await openSession(ready, { cwd: dir })
    const start = await send(session, 'node inspect --port=0 s.js')
    expect(start.waitReason).toBe('stdin_read')
    // Its event loop also waits on the debugger's socket: the read alone proved nothing.
    expect(start.evidence.corroborated?.sources.some((source) => source.includes('socket'))).toBe(true)
    expect(start.viewport).toMatch(/debug> $/)
    expect(start.viewport).toContain('Break on start')
    const first = await send(session, 'n')
    expect(first.waitReason).toBe('stdin_read')
    expect(first.viewport).toMatch(/debug> $/)
    const second = await send(session, 'n')
    expect(second.viewport).toMatch(/debug> $/)
    const printed = await send(session, 'n')
    expect(printed.viewport).toMatch(/a is 42/)
    expect(printed.viewport).toMatch(/debug> $/)
    await send(session, '.exit')
  }, 60000)

  it.skipIf(!runs('jshell', ['--version']))('jshell: each statement’s output in its own result; /exit leaves the shell intact', async () => {
    // The JVM starts slowly on a loaded machine: give its first prompt time.
    const session = await openSession({ ...ready, idleSilenceMs: 30000, timeoutMs: 60000 }, { cwd: dir })
    const start = await send(session, 'jshell')
    expect(start.viewport).toMatch(/jshell> $/)
    for (const [statement, shown] of [['int x = 6*7', 'x ==> 42'], ['x + 1', '$2 ==> 43'], ['Thread.sleep(1500); System.out.println("slept-" + x)', 'slept-42'], ['System.out.println("hi-" + x)', 'hi-42']] as const) {
      const result = await send(session, statement)
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport).toContain(shown)
      expect(result.viewport).toMatch(/jshell> $/)
    }
    const exited = await send(session, '/exit')
    expect(exited.waitReason).toBe('stdin_read')
    expect(exited.viewport).toContain('Goodbye')
    const after = await send(session, 'echo after')
    expect(linesEqual(after.viewport, 'after')).toBe(1)
  }, 120000)
})

/**
 * An event loop in epoll on the terminal and a socketpair, waking on its own every 300 ms (like
 * prompt_toolkit). `peer`: none (the socketpair is only its own self-pipe), `group` (a forked
 * child in its process group writes a byte every 100 ms) or `outside` (the child leaves for its
 * own session first, so the probe does not see it). Each byte is received silently: the program
 * fakes a quiet prompt while it is woken from outside.
 */
function eventLoop(peer: 'none' | 'group' | 'outside'): string {
  return [
    'import os, selectors, socket, sys, time',
    'a, b = socket.socketpair()',
    `peer = ${JSON.stringify(peer)}`,
    "if peer != 'none' and os.fork() == 0:",
    "    if peer == 'outside': os.setsid()",
    '    a.close()',
    '    while True:',
    "        b.send(b'x'); time.sleep(0.1)",
    'sel = selectors.EpollSelector()',
    'sel.register(0, selectors.EVENT_READ)',
    'sel.register(a, selectors.EVENT_READ)',
    "sys.stdout.write('loop> '); sys.stdout.flush()",
    'while True:',
    '    for key, _ in sel.select(timeout=0.3):',
    '        if key.fileobj is a: a.recv(64)',
    '        else:',
    '            line = os.read(0, 1024).decode().strip()',
    "            if line == 'quit': os._exit(0)",
    "            sys.stdout.write('got ' + line + '\\nloop> '); sys.stdout.flush()",
    '',
  ].join('\n')
}

describe.skipIf(!runs('python3'))('an event loop that wakes on its own or is woken from outside (hostile)', () => {
  it('settles stdin_read when its only wake-ups are its own timer, and each answer is its own result', async () => {
    writeFileSync(path.join(dir, 'loop-none.py'), eventLoop('none'))
    const session = await openSession({ idleSilenceMs: 3000 }, { cwd: dir })
    const start = await send(session, 'python3 loop-none.py')
    expect(start.waitReason, start.evidence.detail).toBe('stdin_read')
    expect(start.evidence.corroborated?.sources).toContainEqual(expect.stringMatching(/^timer in \d+ ms$/))
    const answer = await send(session, 'hello')
    expect(answer.waitReason, `${answer.evidence.detail}: ${JSON.stringify(answer.viewport.slice(-300))}`).toBe('stdin_read')
    expect(answer.evidence.detail).toMatch(/woke only at the end of its own timeout/)
    expect(linesEqual(answer.viewport, 'got hello')).toBe(1)
    await send(session, 'quit')
  }, 30_000)

  it.each(['group', 'outside'] as const)('does not settle stdin_read at a quiet prompt while a socket peer (%s its process group) keeps waking it', async (peer) => {
    writeFileSync(path.join(dir, `loop-${peer}.py`), eventLoop(peer))
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    const start = await send(session, `python3 loop-${peer}.py`)
    expect(start.viewport).toMatch(/loop> $/)
    expect(start.waitReason, start.evidence.detail).toBe('inferred_idle')
    const answer = await send(session, 'hello')
    expect(answer.waitReason, answer.evidence.detail).toBe('inferred_idle')
    expect(linesEqual(answer.viewport, 'got hello')).toBe(1)
    // The peer's next send fails once the program has gone (EPIPE), and it exits.
    await send(session, 'quit')
  }, 30_000)
})

describe('continuation prompts', () => {
  const cases: [string, boolean, boolean][] = [
    ['> ', true, true],
    ['> ', false, false],
    ['... ', false, true],
    ['...: ', false, true],
    ['   ...: ', false, true],
    ['   ...> ', false, true],
    ['postgres-# ', false, true],
    ["postgres'# ", false, true],
    ['postgres(> ', false, true],
    ['postgres=# ', false, false],
    ['    -> ', false, true],
    ['>', false, true],
    ['+ ', false, true],
    ['>> ', false, true],
    ['ghci| ', false, true],
    ['$ ', true, false],
    ['>>> ', false, false],
    ['sqlite> ', false, false],
    ['x ... ', false, false],
  ]
  it.each(cases)('%j (shell reads: %s) → %s', (partial, shellReads, expected) => {
    expect(isContinuation(partial, shellReads)).toBe(expected)
  })

  it('documents a program for every row', () => {
    for (const row of CONTINUATION_PROMPTS) expect(row.program).not.toBe('')
  })
})
