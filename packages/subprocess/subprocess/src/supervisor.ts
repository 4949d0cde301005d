/**
 * The tag supervisor: a small detached process that outlives conch only to end what its
 * unconfined processes left behind (a conch killed with SIGKILL runs no teardown). When the pipe
 * from conch closes it KILLs every process carrying a registered tag, then exits (README: "The tag
 * supervisor"). Stdin lines: `+<name>=<value>` registers a tag, `-<name>=<value>` releases it.
 * Linux only (it reads /proc); elsewhere `watch` is a no-op.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import type { Writable } from 'node:stream'
import type { SessionTag } from './types.ts'

/** Environment variable naming the pid the supervisor watches (so tests and operators can find it). */
export const SUPERVISOR_VARIABLE = 'CONCH_SUPERVISOR_OF'

/**
 * The supervisor's program, run as `node -e`: plain JavaScript with no imports beyond Node's,
 * because it must start without conch's TypeScript loader.
 */
const PROGRAM = String.raw`
'use strict'
const fs = require('node:fs')
process.title = 'conch-tag-supervisor'
const tags = new Set()
let buffered = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  buffered += chunk
  let newline
  while ((newline = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, newline)
    buffered = buffered.slice(newline + 1)
    if (line.startsWith('+')) tags.add(line.slice(1))
    else if (line.startsWith('-')) tags.delete(line.slice(1))
  }
})
const read = (path, encoding) => {
  try {
    return fs.readFileSync(path, encoding)
  } catch {
    return undefined
  }
}
/** The fields of /proc/<pid>/stat after the command name (state first), or undefined. */
const statOf = (pid) => {
  const stat = read('/proc/' + pid + '/stat', 'utf8')
  return stat === undefined ? undefined : stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}
const startTime = (pid) => statOf(pid)?.[19]
/** A zombie leader whose other threads still run (pthread_exit(3) in main): the process lives in them. */
const leaderGone = (fields) => fields[0] === 'Z' && Number(fields[17]) > 1
const environOf = (pid) => {
  const own = read('/proc/' + pid + '/environ', 'latin1')
  if (own || !leaderGone(statOf(pid) ?? [])) return own?.split('\0')
  let tids = []
  try {
    tids = fs.readdirSync('/proc/' + pid + '/task')
  } catch {}
  for (const tid of tids) {
    const environ = Number(tid) === pid ? undefined : read('/proc/' + pid + '/task/' + tid + '/environ', 'latin1')
    if (environ) return environ.split('\0')
  }
  return own?.split('\0')
}
const kill = (pid) => {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {}
}
const sweep = () => {
  let found = 0
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue
    const pid = Number(entry)
    if (pid === process.pid) continue
    const before = startTime(pid)
    if (before === undefined) continue
    const environ = environOf(pid)
    if (environ === undefined || !environ.some((variable) => tags.has(variable))) continue
    found++
    if (startTime(pid) === before) kill(pid)
  }
  return found
}
// Where a tagged orphan hangs: init and this process's ancestors. Each look reads their children
// newest first, skipping pids passed over before: a process that keeps forking and leaving
// outruns full sweeps of /proc.
const passed = new Set()
const hosts = () => {
  const found = [1]
  let pid = process.ppid
  while (pid > 1 && !found.includes(pid)) {
    found.push(pid)
    const fields = statOf(pid)
    if (fields === undefined) break
    pid = Number(fields[1])
  }
  return found
}
const orphans = (from) => {
  let looked = 0
  for (const host of from) {
    const listed = read('/proc/' + host + '/task/' + host + '/children', 'utf8')
    if (listed === undefined) continue
    for (const pid of listed.trim().split(' ').filter(Boolean).map(Number).reverse()) {
      if (pid === process.pid || passed.has(pid)) continue
      looked++
      const fields = statOf(pid)
      if (fields === undefined) continue
      if ((fields[0] === 'Z' && !leaderGone(fields)) || fields[0] === 'X') {
        passed.add(pid)
        continue
      }
      const environ = environOf(pid)
      if (environ === undefined) continue
      if (!environ.some((variable) => tags.has(variable))) {
        // Mid-execve the environment reads empty until the new image lays it out (stat field
        // 51, env_end, still 0): look at this pid again next round instead of passing it over.
        if (environ.length <= 1 && fields[48] === '0') continue
        passed.add(pid)
        continue
      }
      if (startTime(pid) === fields[19]) kill(pid)
    }
  }
  return looked
}
const finish = () => {
  const rounds = Number(process.argv[1]) || 50
  const pause = new Int32Array(new SharedArrayBuffer(4))
  for (let round = 0; round < rounds && tags.size > 0; round++) {
    if (sweep() === 0) break
    Atomics.wait(pause, 0, 0, 20)
  }
  // The last looks: three in a row a millisecond apart that read no new pid end them (2 s at most).
  const from = hosts()
  const until = Date.now() + 2000
  for (let quiet = 0; tags.size > 0 && quiet < 3 && Date.now() < until; ) {
    if (orphans(from) === 0) {
      quiet++
      Atomics.wait(pause, 0, 0, 1)
    } else quiet = 0
  }
  process.exit(0)
}
process.stdin.on('end', finish)
process.stdin.on('error', finish)
`

export interface TagSupervisorOptions {
  /** The pid being watched, recorded in the supervisor's environment. Default: this process. */
  watchedPid?: number
  /** Sweeps at most this many rounds (20 ms apart) after the pipe closes. Default 50. */
  maxRounds?: number
  /**
   * How long the supervisor stays after its last tag is released, ms, so that the next watch
   * (a terminal opened after one closed) does not start another: a start is a Node start, some
   * 40 ms on the way to every such open. Default 30 000; 0 ends it at once.
   */
  lingerMs?: number
  /** Starts the supervisor; injectable for tests. Default: `node -e` detached, stdin a pipe. */
  start?: (program: string, args: string[], env: Record<string, string>) => ChildProcess
}

export interface TagSupervisor {
  /**
   * Registers `tag` so that processes carrying it are killed if this process dies before
   * `release` runs. Starts the supervisor on first use. Returns `release`, idempotent; once the
   * last tag is released the supervisor exits after `lingerMs` unless another watch comes first.
   */
  watch(tag: SessionTag): () => void
}

/** Creates a supervisor handle (one per conch process is enough: see `tagSupervisor`). */
export function createTagSupervisor(options: TagSupervisorOptions = {}): TagSupervisor {
  const watched = new Set<string>()
  let stdin: Writable | undefined
  // Ends the pipe once the supervisor has lingered with no tag; cleared by the next watch.
  let lingering: NodeJS.Timeout | undefined
  const end = () => {
    lingering = undefined
    stdin?.end()
    stdin = undefined
  }
  const start =
    options.start ??
    ((program, args, env) =>
      spawn(process.execPath, ['-e', program, ...args], { detached: true, stdio: ['pipe', 'ignore', 'ignore'], env }))

  const ensure = (): Writable | undefined => {
    if (stdin !== undefined) return stdin
    const env: Record<string, string> = { [SUPERVISOR_VARIABLE]: String(options.watchedPid ?? process.pid) }
    if (process.env['PATH'] !== undefined) env['PATH'] = process.env['PATH']
    const child = start(PROGRAM, [String(options.maxRounds ?? 50)], env)
    child.on('error', () => {})
    child.unref()
    const pipe = child.stdin
    if (!pipe) return undefined
    pipe.on('error', () => {})
    // The pipe must not keep this process alive; it closes when this process exits.
    ;(pipe as unknown as { unref?: () => void }).unref?.()
    child.once('exit', () => {
      if (stdin === pipe) stdin = undefined
    })
    stdin = pipe
    // Tags registered with an earlier supervisor that has exited are registered again.
    for (const line of watched) pipe.write(`+${line}\n`)
    return pipe
  }

  return {
    watch(tag) {
      if (process.platform !== 'linux') return () => {}
      const line = `${tag.name}=${tag.value}`
      clearTimeout(lingering)
      lingering = undefined
      const fresh = stdin === undefined
      watched.add(line)
      const pipe = ensure()
      if (!fresh) pipe?.write(`+${line}\n`)
      let released = false
      return () => {
        if (released) return
        released = true
        watched.delete(line)
        if (!stdin) return
        stdin.write(`-${line}\n`)
        if (watched.size > 0) return
        const lingerMs = options.lingerMs ?? 30_000
        if (lingerMs <= 0) return end()
        // Never keeps this process alive; its exit closes the pipe, and with no tag left the supervisor exits at once.
        lingering = setTimeout(end, lingerMs).unref()
      }
    },
  }
}

let shared: TagSupervisor | undefined

/** The process-wide supervisor, created on first use. */
export function tagSupervisor(): TagSupervisor {
  shared ??= createTagSupervisor()
  return shared
}
