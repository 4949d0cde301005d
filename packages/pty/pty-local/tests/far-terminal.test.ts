/**
 * Writing to a relayed terminal's far end from this host (`writeTerminal`, the relay sync's way
 * in): on a real PTY, as root — the output reaches the master in order, and a path that is no
 * longer that terminal (a relayed shell pointed its fd 0 at a file) gets nothing.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { writeTerminal } from '../src/backend.ts'
import { loadNodePty, spawnTerminal, type TerminalProcess } from '../src/terminal.ts'

const started: TerminalProcess[] = []
let folder: string | undefined
beforeAll(() => loadNodePty())
afterEach(async () => {
  for (const terminal of started.splice(0)) {
    process.kill(terminal.pid, 'SIGKILL')
    await terminal.exit
  }
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
  folder = undefined
})

/** A PTY whose program only waits (once its fd 0 is the slave); what reaches its master is collected. */
async function waiting(): Promise<{ terminal: TerminalProcess; output: () => string }> {
  const terminal = spawnTerminal({ argv: ['sleep', '300'], cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, cols: 80, rows: 24 })
  started.push(terminal)
  let output = ''
  terminal.onData((chunk) => (output += chunk.toString('latin1')))
  await until(() => statSync(`/proc/${terminal.pid}/fd/0`).rdev === terminal.slave.rdev, 10_000, 'the program on its terminal')
  return { terminal, output: () => output }
}

describe('writing to the far end of a relayed terminal', () => {
  it('puts the bytes on the terminal as output, read from the master in order', async () => {
    const { terminal, output } = await waiting()
    expect(await writeTerminal({ pid: terminal.pid, slave: terminal.slave, slavePath: `/proc/${terminal.pid}/fd/0`, relayed: true }, 'first\x1b]6973;sync;ab\x07')).toBe(true)
    await until(() => output().includes('\x07'), 10_000, 'the bytes on the master')
    expect(output()).toBe('first\x1b]6973;sync;ab\x07')
  })

  it('writes nothing when the path no longer is that terminal (a file swapped in behind fd 0), as root', async () => {
    const { terminal, output } = await waiting()
    folder = mkdtempSync(join(tmpdir(), 'conch-far-'))
    const file = join(folder, 'target')
    writeFileSync(file, 'original\n', { mode: 0o444 })
    expect(await writeTerminal({ pid: terminal.pid, slave: terminal.slave, slavePath: file, relayed: true }, 'planted')).toBe(false)
    expect(readFileSync(file, 'utf8')).toBe('original\n')
    // Another terminal of the same devpts instance (another device number) is refused alike.
    const other = await waiting()
    expect(await writeTerminal({ pid: terminal.pid, slave: terminal.slave, slavePath: other.terminal.slavePath, relayed: true }, 'planted')).toBe(false)
    // The bytes that do go in afterwards arrive alone: nothing was planted before them.
    expect(await writeTerminal({ pid: other.terminal.pid, slave: other.terminal.slave, slavePath: other.terminal.slavePath, relayed: true }, 'mine')).toBe(true)
    await until(() => other.output().includes('mine'), 10_000, "the second terminal's own bytes")
    expect(other.output()).toBe('mine')
    expect(output()).toBe('')
  })
})
