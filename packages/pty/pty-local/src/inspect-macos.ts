/**
 * The terminal's foreground process group on macOS, from ps(1) through the `ProcessTable` of
 * `@conch/subprocess` (one ps parser): what signalling and the controlled prompt need, as macOS
 * has no exact tier. Every process on the terminal reports the same `tpgid` (≤ 0: none).
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
 * The foreground group of the terminal held by `pid`, its leader's name, and whether
 * `shellPid`'s group (default `pid`'s) is in front. Undefined when `pid` is gone or none is.
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
  const rows = await (options.table ?? macosProcessTable()).snapshot()
  return rows.filter((row) => row.pgid === options.pgid && row.state !== 'Z').sort((a, b) => a.pid - b.pid)
}

/** The name of process `pid` (base name of its command), or undefined when it is gone. */
export async function processNameMacos(options: MacosInspectOptions & { pid: number }): Promise<string | undefined> {
  const entry = await (options.table ?? macosProcessTable()).get(options.pid)
  return entry === undefined ? undefined : processName(entry.comm)
}
