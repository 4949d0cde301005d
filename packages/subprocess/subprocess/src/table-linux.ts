/**
 * The Linux process table, read from procfs (proc(5)): `/proc/<pid>/stat` for the tree and the
 * start identity (field 22, `starttime`), `/proc/<pid>/environ` for session tags.
 */
import { nodeProcFs } from './proc-fs.ts'
import { parseProcStat } from './proc-stat.ts'
import type { ProcessEntry, ProcessTable, ProcFs } from './types.ts'

/**
 * A `ProcessTable` over `fs` (default: the real /proc). Processes that vanish or cannot be
 * read while listing are skipped; `get` returns undefined for them. `environ` reads the
 * process's initial environment (`/proc/<pid>/environ`, NUL-separated `NAME=value` entries),
 * which needs the same user or root; a zombie's is empty.
 */
export function linuxProcessTable(fs: ProcFs = nodeProcFs): ProcessTable {
  const get = async (pid: number): Promise<ProcessEntry | undefined> => {
    let text: string
    try {
      text = await fs.readFile(`/proc/${pid}/stat`)
    } catch {
      return undefined
    }
    const stat = parseProcStat(text)
    if (stat === undefined || stat.pid !== pid) return undefined
    return {
      pid: stat.pid,
      ppid: stat.ppid,
      pgid: stat.pgrp,
      sid: stat.session,
      tpgid: stat.tpgid,
      state: stat.state,
      comm: stat.comm,
      startTime: stat.startTime,
    }
  }

  return {
    async snapshot() {
      const names = await fs.readdir('/proc')
      const pids = names.filter((name) => /^\d+$/.test(name)).map(Number)
      const entries = await Promise.all(pids.map(get))
      return entries.filter((entry): entry is ProcessEntry => entry !== undefined)
    },
    get,
    async environ(pid, name) {
      let text: string
      try {
        text = await fs.readFile(`/proc/${pid}/environ`)
      } catch {
        return undefined
      }
      const prefix = `${name}=`
      for (const entry of text.split('\0')) {
        if (entry.startsWith(prefix)) return entry.slice(prefix.length)
      }
      return undefined
    },
  }
}
