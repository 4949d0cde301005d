import { spawn } from 'node:child_process'
import { writeSync } from 'node:fs'
import pty from 'node-pty'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { CANONICAL_LINE_MAX, helperTermiosReader, isHiddenInput, overlongLine, parseTermiosReply } from '../src/termios.ts'

describe('canonical line limit', () => {
  it('finds the longest line over the limit, in UTF-8 bytes, with its number', () => {
    expect(overlongLine('short')).toBeUndefined()
    expect(overlongLine('x'.repeat(CANONICAL_LINE_MAX))).toBeUndefined()
    expect(overlongLine('x'.repeat(CANONICAL_LINE_MAX + 1))).toEqual({ line: 1, bytes: 4096 })
    expect(overlongLine(`a\n${'é'.repeat(2048)}\r${'x'.repeat(5000)}`)).toEqual({ line: 3, bytes: 5000 })
    // 2048 two-byte characters are 4096 bytes: over the limit though only 2048 UTF-16 units.
    expect(overlongLine(`a\n${'é'.repeat(2048)}`)).toEqual({ line: 2, bytes: 4096 })
    expect(overlongLine(`${'x'.repeat(4000)}\n${'y'.repeat(4000)}`)).toBeUndefined()
  })

  it('hidden input is echo off in canonical mode only', () => {
    expect(isHiddenInput({ canonical: true, echo: false })).toBe(true)
    expect(isHiddenInput({ canonical: false, echo: false })).toBe(false)
    expect(isHiddenInput({ canonical: true, echo: true })).toBe(false)
    expect(isHiddenInput(undefined)).toBe(false)
  })

  it('parses helper replies; anything else is unknown', () => {
    expect(parseTermiosReply('ok 1 0')).toEqual({ canonical: true, echo: false })
    expect(parseTermiosReply('ok 0 0 7')).toEqual({ canonical: false, echo: false, queued: 7 })
    expect(parseTermiosReply('ok 0 0 -1')).toEqual({ canonical: false, echo: false })
    expect(parseTermiosReply('ok 0 1')).toEqual({ canonical: false, echo: true })
    expect(parseTermiosReply('err 2')).toBeUndefined()
    expect(parseTermiosReply('ok 1 0 extra')).toBeUndefined()
  })
})

describe('termios read from a real terminal', () => {
  const reader = helperTermiosReader()
  afterAll(() => reader.close())

  it('sees the modes a program sets with stty on its terminal', async () => {
    // A shell that changes its own terminal's modes on cue and says so.
    const term = pty.spawn('/bin/sh', ['-c', 'echo READY1; read a; stty -echo; echo READY2; read b; stty -icanon echo; echo READY3; sleep 30'], { cols: 80, rows: 24 })
    const path = (term as unknown as { ptsName: string }).ptsName
    let output = ''
    term.onData((data) => (output += data))
    const printed = (token: string) => until(() => output.includes(token), 10_000, token)
    try {
      await printed('READY1')
      expect(await reader.read(path)).toEqual({ canonical: true, echo: true, queued: 0 })
      term.write('x\r')
      await printed('READY2')
      expect(await reader.read(path)).toEqual({ canonical: true, echo: false, queued: 0 })
      term.write('y\r')
      await printed('READY3')
      expect(await reader.read(path)).toEqual({ canonical: false, echo: true, queued: 0 })
      // Nobody reads now (sleep): typed bytes wait in the input queue; their echo says they arrived.
      term.write('abc')
      await printed('abc')
      expect(await reader.read(path)).toEqual({ canonical: false, echo: true, queued: 3 })
    } finally {
      term.kill()
    }
  })

  it('counts a byte written just before the query, every time: the pending input is moved into the queue first', async () => {
    // A raw-mode program that never reads; on SIGUSR1 it empties its input queue and says so.
    const program = [
      'import os, signal, termios, tty',
      'tty.setraw(0)',
      'def drain(*_):',
      '    termios.tcflush(0, termios.TCIFLUSH)',
      "    os.write(1, b'FLUSHED\\r\\n')",
      'signal.signal(signal.SIGUSR1, drain)',
      "os.write(1, b'READY\\r\\n')",
      'while True: signal.pause()',
    ].join('\n')
    const term = pty.spawn('python3', ['-c', program], { cols: 80, rows: 24 })
    const path = (term as unknown as { ptsName: string }).ptsName
    const master = (term as unknown as { fd: number }).fd
    let output = ''
    term.onData((data) => (output += data))
    const count = (token: string) => output.split(token).length - 1
    try {
      await until(() => output.includes('READY'), 10_000, 'READY')
      // Asked right after write(2) returned, before the kernel's worker moved the byte from the
      // flip buffer into the line discipline: without the poll first FIONREAD often says 0.
      const seen: number[] = []
      for (let round = 1; round <= 100; round++) {
        writeSync(master, 'x')
        seen.push((await reader.read(path))?.queued ?? -1)
        process.kill(term.pid, 'SIGUSR1')
        await until(() => count('FLUSHED') >= round, 10_000, `FLUSHED ${round}`)
      }
      expect(seen.filter((queued) => queued !== 1)).toEqual([])
    } finally {
      term.kill()
    }
  })

  it('answers unknown for a path that is no terminal, and refuses a path with a line break', async () => {
    expect(await reader.read('/nonexistent/tty')).toBeUndefined()
    expect(await reader.read('/etc/hostname')).toBeUndefined()
    expect(await reader.read('/dev/null\n/dev/tty')).toBeUndefined()
  })

  it('a helper that cannot start answers unknown, and one that dies is replaced', async () => {
    const broken = helperTermiosReader({ perl: '/nonexistent/perl' })
    expect(await broken.read('/dev/null')).toBeUndefined()
    broken.close()
    let starts = 0
    const flaky = helperTermiosReader({
      spawnHelper: (perl, script) => {
        starts++
        // The first helper dies before answering; the second is real.
        return starts === 1 ? spawn('/bin/sh', ['-c', 'exit 3'], { stdio: ['pipe', 'pipe', 'ignore'] }) : spawn(perl, ['-e', script], { stdio: ['pipe', 'pipe', 'ignore'] })
      },
    })
    const term = pty.spawn('/bin/sh', ['-c', 'echo READY; read a'], { cols: 80, rows: 24 })
    const path = (term as unknown as { ptsName: string }).ptsName
    try {
      expect(await flaky.read(path)).toBeUndefined()
      expect(await flaky.read(path)).toMatchObject({ canonical: true, echo: true })
      expect(starts).toBe(2)
    } finally {
      term.kill()
      flaky.close()
    }
  })
})
