/**
 * The conch process that made something a provider leaves on the host when conch is killed, as
 * that thing records it, so a later conch can tell whether its maker has ended (`sweep`). A pid
 * names a process only in its PID namespace (pid_namespaces(7)), so the record keeps the
 * namespace, pid and start time, and a maker of another namespace is never judged ended.
 */
import { readFileSync, readlinkSync } from 'node:fs'
import { parseProcStat } from '@conch/subprocess'

export interface ProcessOwner {
  /**
   * The inode of the maker's PID namespace (`/proc/self/ns/pid` reads `pid:[<inode>]`). A record
   * made before it was kept has none, and is judged as one of this namespace, as it was then.
   */
  pidns?: string
  pid: number
  /** Clock ticks after boot (proc(5) stat field 22). */
  startTime: string
}

/** How an owner is read from /proc; injectable for tests. */
export interface OwnerProc {
  /** The text of `/proc/<pid>/stat`, or undefined when there is no such process. */
  stat(pid: number | 'self'): string | undefined
  /** The link `/proc/self/ns/pid`, or undefined without /proc. */
  pidNamespace(): string | undefined
}

const tried = <T>(read: () => T): T | undefined => {
  try {
    return read()
  } catch {
    return undefined
  }
}

export const nodeOwnerProc: OwnerProc = {
  stat: (pid) => tried(() => readFileSync(`/proc/${pid}/stat`, 'utf8')),
  pidNamespace: () => tried(() => readlinkSync('/proc/self/ns/pid')),
}

/** The inode in a namespace link (`pid:[4026531836]`), or undefined for any other text. */
export const namespaceInode = (link: string | undefined): string | undefined => (link === undefined ? undefined : /^\w+:\[(\d+)\]$/.exec(link)?.[1])

/** This process as an owner (its namespace, pid and start time); undefined without /proc. */
export function currentOwner(proc: OwnerProc = nodeOwnerProc): (ProcessOwner & { pidns: string }) | undefined {
  const stat = parseProcStat(proc.stat('self') ?? '')
  const pidns = namespaceInode(proc.pidNamespace())
  return stat === undefined || pidns === undefined ? undefined : { pidns, pid: stat.pid, startTime: stat.startTime }
}

/**
 * Whether `owner` has ended, as this process can tell: it is of this PID namespace (or names
 * none) and its pid no longer runs with its start time. A zombie has not ended (its parent still
 * runs). Never for an owner of another namespace, nor when this process cannot read its own.
 */
export function ownerEnded(owner: ProcessOwner, proc: OwnerProc = nodeOwnerProc): boolean {
  const here = namespaceInode(proc.pidNamespace())
  if (here === undefined || (owner.pidns !== undefined && owner.pidns !== here)) return false
  return parseProcStat(proc.stat(owner.pid) ?? '')?.startTime !== owner.startTime
}

/** The owner as a name records it: `<pidns>-<pid>-<start>`. */
export const ownerTag = (owner: ProcessOwner & { pidns: string }): string => `${owner.pidns}-${owner.pid}-${owner.startTime}`

/** The source of a RegExp that matches `ownerTag`, with three groups: namespace, pid, start time. */
export const OWNER_TAG = String.raw`(\d+)-(\d+)-(\d+)`

/** The owner three groups of `OWNER_TAG` name (the first undefined for a record that has no namespace). */
export const ownerOfTag = (pidns: string | undefined, pid: string, startTime: string): ProcessOwner => ({ ...(pidns !== undefined && { pidns }), pid: Number(pid), startTime })
