/**
 * Input as a person types it, against real programs: Enter is its own key press (a raw-mode
 * reader that takes each read as keystrokes submits), and a multi-line block reaches a program
 * that turned bracketed paste on as one paste.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { linesEqual, openSession, send } from './local-harness.ts'

let dir = ''
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'conch-submit-'))
  // Takes each read as keystrokes, echoing nothing: a read that is exactly CR submits, a read
  // holding CR among other bytes is a paste (the reader reports it and fails).
  writeFileSync(
    path.join(dir, 'keys.js'),
    `process.stdin.setRawMode(true)
process.stdin.setEncoding('utf8')
let line = ''
process.stdout.write('name? ')
process.stdin.on('data', (chunk) => {
  if (chunk === '\\r') { process.stdout.write('\\r\\nSUBMIT:' + JSON.stringify(line) + '\\r\\n'); process.exit(0) }
  if (chunk.includes('\\r')) { process.stdout.write('\\r\\nPASTED:' + JSON.stringify(chunk) + '\\r\\n'); process.exit(1) }
  line += chunk
})
`,
  )
  // A prompt library's text prompt: echoes what is typed; a chunk containing CR is pasted text
  // (inserted, CR as a line break), only a lone CR submits.
  writeFileSync(
    path.join(dir, 'prompt.js'),
    `process.stdin.setRawMode(true)
process.stdin.setEncoding('utf8')
let value = ''
process.stdout.write('? Project name: ')
process.stdin.on('data', (chunk) => {
  if (chunk === '\\r') { process.stdout.write('\\r\\nANSWER:' + JSON.stringify(value) + '\\r\\n'); process.exit(0) }
  value += chunk.replace(/\\r/g, '\\n')
  process.stdout.write(chunk)
})
`,
  )
  // Reads the text, then stays busy without ever blocking again (as the Node REPL renders a
  // preview before it waits for the next key) until Enter is waiting in its input queue — polled
  // with a zero timeout, which never sleeps — and only then echoes. Enter written only after an
  // echo, or only once the reader blocked again, never arrives: it gives up after 10 s.
  writeFileSync(
    path.join(dir, 'busy.py'),
    `import os, select, sys, time, tty
tty.setraw(0)
os.write(1, b'name? ')
text = os.read(0, 100)
deadline = time.monotonic() + 10
while not select.select([0], [], [], 0)[0]:
    if time.monotonic() > deadline:
        os.write(1, b'\\r\\nNO-ENTER\\r\\n')
        sys.exit(1)
enter = os.read(0, 100)
os.write(1, text + b'\\r\\nGOT:' + repr([text.decode(), enter.decode()]).encode() + b'\\r\\n')
`,
  )
})
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

const ready = { idleSilenceMs: 15000, timeoutMs: 30000 }

/** Whether `program args` exits 0 here. */
function runs(program: string, args: string[]): boolean {
  return spawnSync(program, args, { stdio: 'ignore', timeout: 20000 }).status === 0
}

describe('Enter is its own key press', () => {
  it('a raw-mode reader taking each read as keystrokes receives the text, then Enter alone, and submits', async () => {
    const session = await openSession(ready, { cwd: dir })
    const start = await send(session, 'node keys.js')
    expect(start.viewport).toMatch(/name\? $/)
    const result = await send(session, 'hello')
    expect(linesEqual(result.viewport, 'SUBMIT:"hello"')).toBe(1)
    expect(result.viewport).not.toContain('PASTED')
    const status = await send(session, 'echo "status=$?"')
    expect(linesEqual(status.viewport, 'status=0')).toBe(1)
  })

  it('Enter follows as soon as a raw-mode reader has read the text, while it is still busy with it (no echo yet, not blocked again)', async () => {
    // The bound is far away: only the evidence that the read happened can write Enter in time.
    const session = await openSession({ ...ready, submitWaitMs: 60000 }, { cwd: dir })
    const start = await send(session, 'python3 busy.py')
    expect(start.viewport).toMatch(/name\? $/)
    const result = await send(session, 'hello')
    expect(linesEqual(result.viewport, "GOT:['hello', '\\r']")).toBe(1)
    expect(result.viewport).not.toContain('NO-ENTER')
  })

  it('a prompt library that takes a chunk with CR as a paste gets the answer and submits it', async () => {
    const session = await openSession(ready, { cwd: dir })
    await send(session, 'node prompt.js')
    const result = await send(session, 'my-app')
    expect(linesEqual(result.viewport, 'ANSWER:"my-app"')).toBe(1)
  })

  it('without submit nothing but the text is written: the reader waits, and a later Enter submits', async () => {
    const session = await openSession(ready, { cwd: dir })
    await send(session, 'node keys.js')
    const typed = await session.startSend({ text: 'abc', submit: false, idleMs: 300 }).done
    expect(typed.viewport).not.toContain('SUBMIT')
    const entered = await send(session, '')
    expect(linesEqual(entered.viewport, 'SUBMIT:"abc"')).toBe(1)
  })

  it.skipIf(!runs('npm', ['--version']))('npm init answers all its prompts, one send each', async () => {
    const project = mkdtempSync(path.join(dir, 'npm-'))
    // npm init needs no network; the cache and config stay inside the test's directory.
    const session = await openSession(ready, { cwd: project, env: { ...process.env, npm_config_cache: path.join(project, '.cache'), npm_config_userconfig: path.join(project, '.npmrc'), npm_config_update_notifier: 'false' } })
    let result = await send(session, 'npm init')
    const answers: Record<string, string> = { 'package name': 'submitted-name', version: '1.2.3', description: 'typed by conch' }
    for (let prompt = 0; prompt < 12 && !/Is this OK\?/.test(result.viewport); prompt++) {
      expect(result.waitReason).toBe('stdin_read')
      const asked = Object.keys(answers).find((question) => result.viewport.includes(`${question}:`))
      result = await send(session, asked === undefined ? '' : answers[asked]!)
    }
    expect(result.viewport).toMatch(/Is this OK\?/)
    await send(session, 'yes')
    const written = path.join(project, 'package.json')
    expect(existsSync(written)).toBe(true)
    expect(JSON.parse(readFileSync(written, 'utf8'))).toMatchObject({ name: 'submitted-name', version: '1.2.3', description: 'typed by conch' })
  }, 60_000)
})

describe('bracketed paste', () => {
  it('a three-line for loop at bash’s prompt (bracketed paste on) arrives as one paste and runs once, as one command line', async () => {
    const session = await openSession(ready, { cwd: dir })
    const loop = await send(session, 'for i in 1 2 3; do\n  echo "round $i"\ndone')
    expect(loop.waitReason).toBe('stdin_read')
    for (const round of ['round 1', 'round 2', 'round 3']) expect(linesEqual(loop.viewport, round)).toBe(1)
    // Typed line by line, bash would have shown its continuation prompt for the open block.
    expect(loop.viewport.split('\n').filter((line) => line.startsWith('> '))).toEqual([])
    // bash's history holds the block as one command line.
    const history = await send(session, 'HISTTIMEFORMAT= history 2 | sed "s/^ *[0-9]* *//"; echo "count=$(history | wc -l)"')
    expect(history.viewport).toContain('for i in 1 2 3; do')
    expect(linesEqual(history.viewport, 'count=2')).toBe(1)
  })
})

describe('signal characters in text', () => {
  it('text after a ^C reaches the shell whole: it is typed once the interrupted prompt reads again', async () => {
    const session = await openSession(ready, { cwd: dir })
    for (const text of ['\x03echo "after-$((6*7))"', '\x00\x03echo "after-$((6*7))"', 'half typed\x03echo "after-$((6*7))"']) {
      const result = await send(session, text)
      expect(result.waitReason).toBe('stdin_read')
      expect(linesEqual(result.viewport, 'after-42'), JSON.stringify(result.viewport)).toBe(1)
    }
  })
})
