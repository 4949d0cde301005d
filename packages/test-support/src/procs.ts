/**
 * The process table as /proc shows it (proc(5)), for the checks that a test left nothing
 * running: which live processes carry a mark in their environment, and whether a pid is alive.
 */
import { readFileSync, readdirSync } from 'node:fs'

/**
 * `/proc/<pid>/environ` (NUL-separated `NAME=value`; throws when the process is gone or not
 * readable). Mid-execve the file reads empty until the new image has laid its environment out
 * (stat field 51, `env_end`, still 0 in a user task: proc(5)); it is read again then, 1 ms apart,
 * for at most 20 ms. `stat` is the process's stat line when the caller has read it already.
 */
export function environOf(pid: number | string, stat = readFileSync(`/proc/${pid}/stat`, 'utf8')): string {
  let text = readFileSync(`/proc/${pid}/environ`, 'latin1')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const kernelThread = (Number(fields[9 - 3]) & 0x00200000) !== 0
  for (let attempt = 0; text === '' && !kernelThread && attempt < 20; attempt++) {
    const now = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const midExec = now.slice(now.lastIndexOf(')') + 2).split(' ')[51 - 3] === '0'
    if (midExec) Atomics.wait(PAUSE, 0, 0, 1)
    text = readFileSync(`/proc/${pid}/environ`, 'utf8')
    if (!midExec) break
  }
  return text
}
const PAUSE = new Int32Array(new SharedArrayBuffer(4))

/** Live (non-zombie) processes whose initial environment holds the entry `NAME=value`. */
export function carrying(entry: string): number[] {
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue
      if (environOf(name, stat).split('\0').includes(entry)) found.push(Number(name))
    } catch {
      // gone while listing, or not ours to read
    }
  }
  return found
}

/** Live processes whose initial environment carries `variable=value`. */
export const markedProcesses = (variable: string, value: string): number[] => carrying(`${variable}=${value}`)

/** Processes other than this one whose command line (`/proc/<pid>/cmdline`) contains `text`. */
export function naming(text: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text)
      } catch {
        return false
      }
    })
    .map(Number)
}

/** The children of this process (zombies included: not reaped yet) whose command line contains `text`. */
export function childrenNaming(text: string): number[] {
  return naming(text).filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid
    } catch {
      return false
    }
  })
}

/** Whether a pid is alive (not a zombie). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/** The `CONCH_SUBPROCESS_TAG=…` entry of a process's environment (the tag its teardown sweeps). */
export function tagOf(pid: number): string {
  const entry = environOf(pid).split('\0').find((line) => line.startsWith('CONCH_SUBPROCESS_TAG='))
  if (!entry) throw new Error(`process ${pid} carries no CONCH_SUBPROCESS_TAG`)
  return entry
}
