/** The Linux process table, read from procfs (proc(5)). */
import { nodeProcFs } from './proc-fs.ts'
import { parseProcStat } from './proc-stat.ts'
import { isEnded } from './signal.ts'
import type { ProcessEntry, ProcessTable, ProcFs } from './types.ts'

/**
 * A `ProcessTable` over `fs` (default: the real /proc). Processes that vanish or cannot be read
 * are skipped (`get`: undefined). `environ` needs the same user or root; a zombie's is empty.
 */
export function linuxProcessTable(fs: ProcFs = nodeProcFs): ProcessTable {
  // Whether this kernel has the children files (CONFIG_PROC_CHILDREN): asked once, of this process.
  let childrenFiles: Promise<boolean> | undefined
  const get = async (pid: number): Promise<ProcessEntry | undefined> => {
    const text = await fs.readFile(`/proc/${pid}/stat`).catch(() => undefined)
    const stat = text === undefined ? undefined : parseProcStat(text)
    if (stat === undefined || stat.pid !== pid) return undefined
    // A leader that left with pthread_exit(3) while its other threads run reads `Z`, yet the
    // process lives on in them, and a signal to its pid reaches them: its state is theirs.
    const living = leaderGone(stat) ? await livingThread(fs, pid) : undefined
    return {
      pid: stat.pid,
      ppid: stat.ppid,
      pgid: stat.pgrp,
      sid: stat.session,
      tpgid: stat.tpgid,
      state: living?.state ?? stat.state,
      comm: stat.comm,
      startTime: stat.startTime,
    }
  }

  const listed = (text: string): number[] => {
    const pids = new Set<number>()
    for (const word of text.split(' ')) if (/^\d+$/.test(word)) pids.add(Number(word))
    return [...pids]
  }
  const children = async (pid: number): Promise<number[] | undefined> => {
    childrenFiles ??= fs.readFile(`/proc/${process.pid}/task/${process.pid}/children`).then(
      () => true,
      () => false,
    )
    if (!(await childrenFiles)) return undefined
    const tids = await fs.readdir(`/proc/${pid}/task`).catch(() => undefined)
    if (tids === undefined) return []
    // A thread that exits while its list is read has no children left to list.
    const lists = await Promise.all(tids.map((tid) => fs.readFile(`/proc/${pid}/task/${tid}/children`).catch(() => '')))
    return listed(lists.join(' '))
  }

  return {
    async snapshot() {
      const names = await fs.readdir('/proc')
      const pids = names.filter((name) => /^\d+$/.test(name)).map(Number)
      const entries = await Promise.all(pids.map(get))
      return entries.filter((entry): entry is ProcessEntry => entry !== undefined)
    },
    get,
    children,
    async adoptedChildren(pid) {
      const leader = await fs.readFile(`/proc/${pid}/task/${pid}/stat`).catch(() => undefined)
      if (leader === undefined) return []
      // A zombie or dead leader adopts nothing itself.
      if (isEnded(leader.slice(leader.lastIndexOf(')') + 2, leader.lastIndexOf(')') + 3))) return children(pid)
      const own = await fs.readFile(`/proc/${pid}/task/${pid}/children`).catch(() => undefined)
      return own === undefined ? children(pid) : listed(own)
    },
    async namespaceInit(pid) {
      const text = await fs.readFile(`/proc/${pid}/status`).catch(() => undefined)
      if (text === undefined) return false
      // `NSpid:\t<pid here>\t…\t<pid in its own namespace>` (Linux 4.1+): one pid per namespace level.
      const line = /^NSpid:(.*)$/m.exec(text)?.[1]
      const pids = line?.trim().split(/\s+/) ?? []
      return pids.length > 1 && pids.at(-1) === '1'
    },
    async environ(pid, name) {
      let text: string
      try {
        text = await fs.readFile(`/proc/${pid}/environ`).catch(() => '')
        // Mid-execve(2) the environment reads empty: an empty read counts only once stat shows
        // the layout done (it may finish between the two reads: read once more).
        for (let attempt = 0; text === '' && attempt < EXEC_RETRIES; attempt++) {
          const during = await midExec(fs, pid)
          if (during === undefined) break
          if (during) await new Promise((resolve) => setTimeout(resolve, EXEC_RETRY_MS))
          text = await fs.readFile(`/proc/${pid}/environ`)
          if (!during) break
        }
        // A leader gone with its threads left (`get`) has no environment; a living thread has the process's.
        if (text === '' && (await threadsLeft(fs, pid))) {
          const living = await livingThread(fs, pid)
          if (living !== undefined) text = await fs.readFile(`/proc/${pid}/task/${living.tid}/environ`)
        }
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

/** A zombie whose thread count still counts others than its leader (a plain zombie's is 1). */
function leaderGone(stat: { state: string; threads: number }): boolean {
  return stat.state === 'Z' && stat.threads > 1
}

/** Whether `pid` reads as a leader gone with threads left (`leaderGone`). */
async function threadsLeft(fs: ProcFs, pid: number): Promise<boolean> {
  const text = await fs.readFile(`/proc/${pid}/stat`).catch(() => undefined)
  const stat = text === undefined ? undefined : parseProcStat(text)
  return stat !== undefined && leaderGone(stat)
}

/** A thread of `pid` other than its leader that has not exited, with its state; undefined when none is left. */
async function livingThread(fs: ProcFs, pid: number): Promise<{ tid: number; state: string } | undefined> {
  const tids = await fs.readdir(`/proc/${pid}/task`).catch(() => [] as string[])
  for (const tid of tids.filter((name) => /^\d+$/.test(name) && Number(name) !== pid)) {
    const text = await fs.readFile(`/proc/${pid}/task/${tid}/stat`).catch(() => undefined)
    const state = text === undefined ? undefined : parseProcStat(text)?.state
    if (state !== undefined && !isEnded(state)) return { tid: Number(tid), state }
  }
  return undefined
}

/** Bound on re-reading an environment that reads empty mid-execve: 20 × 1 ms. */
const EXEC_RETRIES = 20
const EXEC_RETRY_MS = 1
/** `PF_KTHREAD` in field 9 (`flags`) of /proc/<pid>/stat (include/linux/sched.h). */
const PF_KTHREAD = 0x00200000

/**
 * Whether `pid` is between installing a new image and laying out its environment: a live user
 * task whose stat field 51 (`env_end`, proc(5), Linux 3.5+) is still 0. Undefined for kernel
 * threads and zombies (0 there for good) and an unreadable stat.
 */
async function midExec(fs: ProcFs, pid: number): Promise<boolean | undefined> {
  const text = await fs.readFile(`/proc/${pid}/stat`).catch(() => undefined)
  if (text === undefined) return undefined
  // fields[0] is field 3 (state); field N is fields[N - 3].
  const fields = text.slice(text.lastIndexOf(')') + 1).trim().split(/\s+/)
  const state = fields[0] ?? ''
  const flags = Number(fields[9 - 3])
  const envEnd = fields[51 - 3]
  if (envEnd === undefined || !Number.isSafeInteger(flags) || (flags & PF_KTHREAD) !== 0) return undefined
  if (state === 'Z' || state === 'X') return undefined
  return envEnd === '0'
}
