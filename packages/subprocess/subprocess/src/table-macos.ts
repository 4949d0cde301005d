/**
 * The macOS process table, read from ps(1): `ps -A -ww -o pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm=`
 * for the tree and the start identity (`lstart`, the start time to the second), and
 * `ps -E -A -ww -o pid=,command=` for session tags (the environment is printed after the arguments).
 */
import { execFile } from 'node:child_process'
import type { ProcessEntry, ProcessTable } from './types.ts'

/**
 * Runs `ps` with `args` and resolves its standard output; an exit status of 1 (no match) is not
 * an error. The default runs /bin/ps by its path: a `ps` on conch's PATH may be one a workspace
 * holds (`npm exec` puts `<repo>/node_modules/.bin` first).
 */
export type PsRunner = (args: string[]) => Promise<string>

const LIST_FIELDS = 'pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm='

const runPs: PsRunner = (args) =>
  new Promise((resolve, reject) => {
    execFile('/bin/ps', args, { maxBuffer: 256 * 1024 * 1024 }, (error, stdout) => {
      if (error && typeof error.code !== 'number') reject(error)
      else resolve(stdout)
    })
  })

/**
 * Parses one line of `ps -o pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm=` (`lstart`, five words,
 * kept with single spaces as the start identity); undefined for another shape. macOS ps has no
 * session id keyword, so `sid` is -1.
 */
export function parsePsLine(line: string): ProcessEntry | undefined {
  const match = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(-?\d+)\s+(\S+)\s+(\S+\s+\S+\s+\d+\s+\d+:\d+:\d+\s+\d+)\s+(.*)$/.exec(line)
  if (!match) return undefined
  const [, pid, ppid, pgid, tpgid, stat, lstart, comm] = match
  return {
    pid: Number(pid),
    ppid: Number(ppid),
    pgid: Number(pgid),
    sid: -1,
    tpgid: Number(tpgid),
    state: (stat ?? '?').charAt(0),
    startTime: (lstart ?? '').split(/\s+/).join(' '),
    comm: (comm ?? '').trim(),
  }
}

/**
 * The value of `name` in one line of `ps -E -o pid=,command=`, or undefined. ps prints the
 * environment as space-separated `NAME=value` words after the arguments, so the last such word
 * wins and a value containing spaces is cut at the first space (session tags are hex).
 */
export function environFromPsLine(line: string, name: string): string | undefined {
  const prefix = `${name}=`
  let value: string | undefined
  for (const word of line.trim().split(/\s+/)) {
    if (word.startsWith(prefix)) value = word.slice(prefix.length)
  }
  return value
}

/**
 * A `ProcessTable` over `ps` (`run` injectable for recorded output). Identity is `lstart`, to the
 * second: a pid recycled within one second is not detected. `environ` answers from one `ps -E`
 * listing per `snapshot()`; ps shows other users' environments only to root.
 */
export function macosProcessTable(run: PsRunner = runPs): ProcessTable {
  let environListing: Promise<Map<number, string>> | undefined

  const loadEnviron = async (): Promise<Map<number, string>> => {
    const lines = new Map<number, string>()
    for (const line of (await run(['-E', '-A', '-ww', '-o', 'pid=,command='])).split('\n')) {
      const match = /^\s*(\d+)\s+(.*)$/.exec(line)
      if (match) lines.set(Number(match[1]), match[2] ?? '')
    }
    return lines
  }

  return {
    async snapshot() {
      environListing = undefined
      const output = await run(['-A', '-ww', '-o', LIST_FIELDS])
      return output.split('\n').map(parsePsLine).filter((entry): entry is ProcessEntry => entry !== undefined)
    },
    async get(pid) {
      const output = await run(['-ww', '-o', LIST_FIELDS, '-p', String(pid)])
      return output
        .split('\n')
        .map(parsePsLine)
        .find((entry) => entry?.pid === pid)
    },
    async environ(pid, name) {
      environListing ??= loadEnviron()
      const line = (await environListing).get(pid)
      return line === undefined ? undefined : environFromPsLine(line, name)
    },
  }
}
