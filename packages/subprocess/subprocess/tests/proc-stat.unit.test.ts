import { describe, expect, it } from 'vitest'
import { parseProcStat } from '../src/proc-stat.ts'

// Fields 10-17 (faults and times), 18 priority, 19 nice, 20 num_threads, 21 itrealvalue, 22 starttime, 23 vsize, …
const tail = '0 0 0 0 0 0 0 0 20 0 1 0 123456 1000 100 18446744073709551615'

describe('parseProcStat', () => {
  it('reads the fields proc(5) numbers 3 to 8, 20 and 22', () => {
    const stat = parseProcStat(`4121 (python3) S 4000 4121 4000 34816 4121 4194304 ${tail}`)
    expect(stat).toEqual({
      pid: 4121, comm: 'python3', state: 'S', ppid: 4000, pgrp: 4121, session: 4000,
      ttyNr: 34816, tpgid: 4121, threads: 1, startTime: '123456',
    })
  })

  it('splits after the last parenthesis so a comm with spaces and parentheses cannot shift fields', () => {
    const stat = parseProcStat(`77 (a) b (c)) R 1 77 77 0 -1 4194304 ${tail}`)
    expect(stat?.comm).toBe('a) b (c)')
    expect(stat?.state).toBe('R')
    expect(stat?.tpgid).toBe(-1)
    expect(stat?.startTime).toBe('123456')
  })

  it('returns undefined for truncated or malformed text', () => {
    expect(parseProcStat('')).toBeUndefined()
    expect(parseProcStat('12 (bash) S 1 12')).toBeUndefined()
    expect(parseProcStat(`x (bash) S 1 12 12 0 -1 0 ${tail}`)).toBeUndefined()
  })

  // /proc exists on Linux only; elsewhere this shows as skipped.
  it.skipIf(process.platform !== 'linux')('parses this process’s own stat file', async () => {
    const { readFile } = await import('node:fs/promises')
    const stat = parseProcStat(await readFile(`/proc/${process.pid}/stat`, 'utf8'))
    expect(stat?.pid).toBe(process.pid)
    expect(stat?.ppid).toBe(process.ppid)
  })
})
