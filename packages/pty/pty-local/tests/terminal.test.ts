/**
 * The node-pty wrapper against a real terminal: what it reads from the master on its own
 * (`readPending`), outside libuv's polling.
 */
import { readFileSync } from 'node:fs'
import { beforeAll, describe, expect, it } from 'vitest'
import { loadNodePty, spawnTerminal } from '../src/terminal.ts'

beforeAll(() => loadNodePty())

/** Whether `pid`'s main task is blocked in syscall `number` (x86_64: read 0) on `fd` (proc(5) `stat` state, `syscall`). */
function blockedIn(pid: number, number: string, fd: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The syscall file of a running task waits until the task is off its CPU: asked only of a sleeper.
    if (stat[stat.lastIndexOf(')') + 2] !== 'S') return false
    const [call, first] = readFileSync(`/proc/${pid}/syscall`, 'utf8').split(' ')
    return call === number && first === fd
  } catch {
    return false
  }
}

/**
 * Waits, without giving the event loop a turn (so libuv cannot read the master meanwhile), until
 * `ready`; bounded in time (not in looks, whose cost varies with load), so that a program that
 * never gets there fails the test instead of hanging it.
 */
function spinUntil(ready: () => boolean, what: string): void {
  const deadline = Date.now() + 20_000
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`${what} never happened in 20 s`)
  }
}

describe('readPending', () => {
  it('hands over, before it returns, what a program wrote before it blocked in its read, and returns at once when nothing is left', async () => {
    const terminal = spawnTerminal({ argv: ['sh', '-c', 'printf before-the-read; read line; printf "got %s" "$line"'], cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, cols: 80, rows: 24 })
    const chunks: string[] = []
    terminal.onData((chunk) => chunks.push(chunk.toString('utf8')))
    // Its output is then in the kernel, maybe still in the flip buffer.
    spinUntil(() => blockedIn(terminal.pid, '0', '0x0'), `sh ${terminal.pid} blocking in its read`)
    expect(terminal.readPending()).toBe(true)
    expect(chunks.join('')).toBe('before-the-read')
    // Nothing more: a non-blocking read, not a wait for the program.
    expect(terminal.readPending()).toBe(false)
    const done = new Promise<void>((resolve) => {
      terminal.onData(() => chunks.join('').includes('got line-1') && resolve())
    })
    await terminal.write('line-1\r')
    await done
    await terminal.exit
    expect(terminal.readPending()).toBe(false)
  })

})
