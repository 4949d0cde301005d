/**
 * The terminal's foreground process group on macOS, from ps(1).
 *
 * macOS has no /proc and no per-task syscall view, so there is no exact readiness tier there:
 * this module answers only what signalling and the controlled-prompt tier need — which process
 * group is in the foreground of the terminal (`tpgid`), its leader's name, whether the shell's
 * own group is that group, and the group's members. Every answer comes from one `ps` run with
 * explicit output fields and no header (`-o field=`), through an injectable runner so the
 * parsing is unit-tested with recorded output.
 *
 * Fields (ps(1) on macOS; procps on Linux accepts the same keywords): `pid`, `pgid`, `tpgid`
 * (process group id of the control terminal's foreground group; 0 or -1 when there is none),
 * `stat` (state letter — `R` runnable, `S` sleeping under 20 s, `I` idle, `U` uninterruptible,
 * `T` stopped, `Z` zombie — followed by flags, where `+` means "in the foreground process group
 * of its control terminal"), and `comm` (the command: on macOS the executable path, which may
 * contain spaces, so it is the last field).
 */
import { execFile } from 'node:child_process'
import type { ForegroundGroup } from './inspect-linux.ts'

/** Runs `ps` with `args` and resolves its standard output; "no such process" (exit status 1) resolves `''`. */
export type PsRunner = (args: string[]) => Promise<string>

/** Runs /bin/ps. */
export const runPs: PsRunner = (args) =>
  new Promise((resolve, reject) => {
    execFile('ps', args, { maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => {
      if (error === null) resolve(stdout)
      else if (error.code === 1) resolve('') // no process matched
      else reject(error)
    })
  })

/** The `-o` list every query uses. */
export const PS_FIELDS = 'pid=,pgid=,tpgid=,stat=,comm='

/** One row of `ps -o pid=,pgid=,tpgid=,stat=,comm=`. */
export interface PsProcess {
  pid: number
  pgid: number
  /** Foreground group of its control terminal; -1 when none (ps prints 0 or -1). */
  tpgid: number
  /** State letter (first character of `stat`). */
  state: string
  /** Whether `stat` carries `+`: the process is in its terminal's foreground group. */
  foreground: boolean
  /** `comm` as printed (on macOS the executable path). */
  command: string
  /** Base name of `command` without a login shell's leading `-`, e.g. `sleep`, `bash`. */
  name: string
}

const ROW = /^\s*(\d+)\s+(\d+)\s+(-?\d+)\s+(\S+)\s+(.*?)\s*$/

/** Parses `ps -o pid=,pgid=,tpgid=,stat=,comm=` output; lines of another shape are skipped. */
export function parsePsProcesses(output: string): PsProcess[] {
  const rows: PsProcess[] = []
  for (const line of output.split('\n')) {
    const match = ROW.exec(line)
    if (match === null) continue
    const [, pid, pgid, tpgid, stat = '', command = ''] = match
    const tty = Number(tpgid)
    rows.push({
      pid: Number(pid),
      pgid: Number(pgid),
      tpgid: tty > 0 ? tty : -1,
      state: stat.charAt(0),
      foreground: stat.includes('+'),
      command,
      name: baseName(command),
    })
  }
  return rows
}

function baseName(command: string): string {
  const base = command.slice(command.lastIndexOf('/') + 1)
  return base.startsWith('-') ? base.slice(1) : base
}

const query = async (ps: PsRunner, pids: number[]): Promise<PsProcess[]> =>
  parsePsProcesses(await ps(['-ww', '-o', PS_FIELDS, ...pids.flatMap((pid) => ['-p', String(pid)])]))

/**
 * Reads the foreground group of the terminal held by `pid` (the node-pty child), its leader's
 * name, and whether `shellPid`'s group (default `pid`) is in front. Two ps runs: one for the
 * holder and the shell, one for the leader. Undefined when `pid` is gone or the terminal has
 * no foreground group.
 */
export async function readForegroundGroupMacos(options: { ps?: PsRunner; pid: number; shellPid?: number }): Promise<ForegroundGroup | undefined> {
  const ps = options.ps ?? runPs
  const shellPid = options.shellPid ?? options.pid
  const rows = await query(ps, shellPid === options.pid ? [options.pid] : [options.pid, shellPid])
  const holder = rows.find((row) => row.pid === options.pid)
  if (holder === undefined || holder.tpgid <= 0) return undefined
  const shell = rows.find((row) => row.pid === shellPid)
  const leader = holder.tpgid === holder.pid ? holder : (await query(ps, [holder.tpgid])).find((row) => row.pid === holder.tpgid)
  return { tpgid: holder.tpgid, leader: leader?.name, shellIsForeground: shell?.pgid === holder.tpgid }
}

/** The members of process group `pgid`, from one `ps -A` listing, ordered by pid. */
export async function listProcessGroupMacos(options: { ps?: PsRunner; pgid: number }): Promise<PsProcess[]> {
  const ps = options.ps ?? runPs
  const rows = parsePsProcesses(await ps(['-A', '-ww', '-o', PS_FIELDS]))
  return rows.filter((row) => row.pgid === options.pgid).sort((a, b) => a.pid - b.pid)
}

/** The name of process `pid` (base name of its command), or undefined when it is gone. */
export async function processNameMacos(options: { ps?: PsRunner; pid: number }): Promise<string | undefined> {
  return (await query(options.ps ?? runPs, [options.pid])).find((row) => row.pid === options.pid)?.name
}
