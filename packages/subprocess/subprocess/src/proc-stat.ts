import type { ProcStat } from './types.ts'

/**
 * Parses the text of /proc/<pid>/stat (proc(5)): `comm` may hold spaces and `)`, so the other
 * fields are split after the *last* `)`. Undefined for text of another shape (never a guess).
 */
export function parseProcStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(')
  const close = text.lastIndexOf(')')
  if (open < 0 || close < open) return undefined
  const pid = Number(text.slice(0, open).trim())
  const comm = text.slice(open + 1, close)
  // fields[0] is field 3 (state); field N is fields[N - 3].
  const fields = text.slice(close + 1).trim().split(/\s+/)
  if (!Number.isSafeInteger(pid) || fields.length < 20) return undefined
  const int = (n: number): number => Number(fields[n - 3])
  const stat: ProcStat = {
    pid,
    comm,
    state: fields[0] ?? '',
    ppid: int(4),
    pgrp: int(5),
    session: int(6),
    ttyNr: int(7),
    tpgid: int(8),
    threads: int(20),
    startTime: fields[22 - 3] ?? '',
  }
  const numbers = [stat.ppid, stat.pgrp, stat.session, stat.ttyNr, stat.tpgid, stat.threads]
  if (numbers.some((n) => !Number.isSafeInteger(n)) || !/^\d+$/.test(stat.startTime)) return undefined
  return stat
}
