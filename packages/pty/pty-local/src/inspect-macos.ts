/**
 * The terminal's foreground process group on macOS, from ps(1).
 *
 * macOS has no /proc and no per-task syscall view, so there is no exact readiness tier there:
 * this module answers only what signalling and the controlled-prompt tier need — which process
 * group is in the foreground of the terminal, its leader's name, whether the shell's own group
 * is that group, and the group's members.
 *
 * The answers come from the `ProcessTable` of `@conch/subprocess` (`macosProcessTable`, which
 * runs `ps -ww -o pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm= [-p pid | -A]` and parses it), so
 * there is one ps parser in the project. ps(1) fields used: `pgid` (process group), `tpgid`
 * (process group id of the control terminal's foreground group, 0 or -1 when there is none)
 * and `comm` (on macOS the executable path). Any process whose controlling terminal is the
 * session's terminal reports the same `tpgid`, so one row answers "who is in front".
 */
import { macosProcessTable, type ProcessEntry, type ProcessTable } from '@conch/subprocess'
import type { ForegroundGroup } from './inspect-linux.ts'

export interface MacosInspectOptions {
  /** Where processes are read; default `macosProcessTable()` (runs /bin/ps). */
  table?: ProcessTable
}

/** Base name of a ps `comm` (an executable path on macOS) without a login shell's leading `-`. */
export function processName(comm: string): string {
  const base = comm.slice(comm.lastIndexOf('/') + 1)
  return base.startsWith('-') ? base.slice(1) : base
}

/**
 * Reads the foreground group of the terminal held by `pid` (the node-pty child) from its
 * `tpgid`, the leader's name, and whether `shellPid`'s group (default `pid`) is in front. One
 * ps run when the shell itself is in front, two otherwise (three when the terminal is held by
 * a separate runner). Undefined when `pid` is gone or the terminal has no foreground group.
 */
export async function readForegroundGroupMacos(options: MacosInspectOptions & { pid: number; shellPid?: number }): Promise<ForegroundGroup | undefined> {
  const table = options.table ?? macosProcessTable()
  const holder = await table.get(options.pid)
  if (holder === undefined || holder.tpgid <= 0) return undefined
  const shell = options.shellPid === undefined || options.shellPid === options.pid ? holder : await table.get(options.shellPid)
  const leader = holder.tpgid === holder.pid ? holder : shell?.pid === holder.tpgid ? shell : await table.get(holder.tpgid)
  return {
    tpgid: holder.tpgid,
    leader: leader === undefined ? undefined : processName(leader.comm),
    shellIsForeground: shell?.pgid === holder.tpgid,
  }
}

/** The members of process group `pgid` from one listing, ordered by pid (zombies excluded). */
export async function listProcessGroupMacos(options: MacosInspectOptions & { pgid: number }): Promise<ProcessEntry[]> {
  const table = options.table ?? macosProcessTable()
  const rows = await table.snapshot()
  return rows.filter((row) => row.pgid === options.pgid && row.state !== 'Z').sort((a, b) => a.pid - b.pid)
}

/** The name of process `pid` (base name of its command), or undefined when it is gone. */
export async function processNameMacos(options: MacosInspectOptions & { pid: number }): Promise<string | undefined> {
  const entry = await (options.table ?? macosProcessTable()).get(options.pid)
  return entry === undefined ? undefined : processName(entry.comm)
}
