import { describe, expect, it } from 'vitest'
import {
  environFromPsLine,
  linuxProcessTable,
  macosProcessTable,
  parsePsLine,
  treeOf,
  type ProcessEntry,
  type ProcFs,
} from '../src/index.ts'

const tail = '0 0 0 0 0 0 0 0 20 0 1 0'
const stat = (pid: number, comm: string, state: string, ppid: number, start: number): string =>
  `${pid} (${comm}) ${state} ${ppid} ${pid} ${ppid} 0 -1 4194304 ${tail} ${start} 1000 100`

/** A /proc made of a file map; missing files reject with ENOENT like the real one. */
function fixtureFs(files: Record<string, string>): ProcFs {
  const enoent = (path: string) => Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' })
  return {
    readFile: async (path) => {
      const text = files[path]
      if (text === undefined) throw enoent(path)
      return text
    },
    readdir: async (path) => {
      if (path !== '/proc') throw enoent(path)
      return [...new Set(Object.keys(files).map((file) => file.split('/')[2] ?? ''))].concat(['self', 'sys'])
    },
    readlink: async (path) => {
      throw enoent(path)
    },
  }
}

const entry = (pid: number, ppid: number, comm = `p${pid}`): ProcessEntry => ({
  pid, ppid, pgid: pid, sid: pid, tpgid: -1, state: 'S', comm, startTime: String(pid * 10),
})

describe('linuxProcessTable', () => {
  const fs = fixtureFs({
    '/proc/1/stat': stat(1, 'init', 'S', 0, 5),
    '/proc/40/stat': stat(40, 'bash', 'S', 1, 900),
    '/proc/41/stat': stat(41, 'sleep (x)', 'Z', 40, 950),
    '/proc/42/stat': 'garbage',
    '/proc/40/environ': 'PATH=/bin\0CONCH_SESSION_TAG=abc123\0EMPTY=\0',
    // 43 is listed (it has an environ file) but its stat vanished: skipped, not an error.
    '/proc/43/environ': 'A=1\0',
  })

  it('lists every readable process with its start identity and skips vanished or malformed ones', async () => {
    const entries = await linuxProcessTable(fs).snapshot()
    expect(entries.map((e) => e.pid).sort((a, b) => a - b)).toEqual([1, 40, 41])
    expect(entries.find((e) => e.pid === 41)).toEqual({
      pid: 41, ppid: 40, pgid: 41, sid: 40, tpgid: -1, state: 'Z', comm: 'sleep (x)', startTime: '950',
    })
  })

  it('returns undefined for a pid whose stat cannot be read', async () => {
    const table = linuxProcessTable(fs)
    expect(await table.get(43)).toBeUndefined()
    expect(await table.get(42)).toBeUndefined()
    expect((await table.get(40))?.startTime).toBe('900')
  })

  it('reads one variable from the NUL-separated initial environment', async () => {
    const table = linuxProcessTable(fs)
    expect(await table.environ(40, 'CONCH_SESSION_TAG')).toBe('abc123')
    expect(await table.environ(40, 'EMPTY')).toBe('')
    expect(await table.environ(40, 'PAT')).toBeUndefined()
    expect(await table.environ(41, 'PATH')).toBeUndefined()
  })

  it('reads again an environment that is empty while the task is mid-exec, and only then', async () => {
    /** A /proc/<pid>/stat line to field 52 with the given state, flags (9) and env_end (51). */
    const fullStat = (pid: number, state: string, flags: number, envEnd: string): string => {
      const fields = Array.from({ length: 50 }, () => '0')
      fields[0] = state
      fields[9 - 3] = String(flags)
      fields[51 - 3] = envEnd
      return `${pid} (p${pid}) ${fields.join(' ')}`
    }
    let reads = 0
    const files: Record<string, () => string> = {
      // 50 is mid-exec for its first two reads: env_end 0, the environment empty.
      '/proc/50/environ': () => (++reads < 3 ? '' : 'CONCH_SESSION_TAG=t50\0'),
      '/proc/50/stat': () => fullStat(50, 'R', 0x400000, reads < 3 ? '0' : '140737488351200'),
      // 51 has an empty environment (env -i): laid out, so a second read answers.
      '/proc/51/environ': () => (reads++, ''),
      '/proc/51/stat': () => fullStat(51, 'S', 0x400000, '140737488351200'),
      // 52 is a kernel thread and 53 a zombie: no memory map, env_end 0 for good.
      '/proc/52/environ': () => (reads++, ''),
      '/proc/52/stat': () => fullStat(52, 'I', 0x208040, '0'),
      '/proc/53/environ': () => (reads++, ''),
      '/proc/53/stat': () => fullStat(53, 'Z', 0x400000, '0'),
    }
    const table = linuxProcessTable({ ...fs, readFile: async (path) => files[path]?.() ?? fs.readFile(path) })
    expect(await table.environ(50, 'CONCH_SESSION_TAG')).toBe('t50')
    expect(reads).toBe(3)
    for (const [pid, expected] of [[51, 2], [52, 1], [53, 1]] as const) {
      reads = 0
      expect(await table.environ(pid, 'CONCH_SESSION_TAG')).toBeUndefined()
      expect(reads).toBe(expected)
    }
  })

  it("lists a process's children from every thread's children file, and none once it is gone", async () => {
    const files: Record<string, string> = {
      [`/proc/${process.pid}/task/${process.pid}/children`]: '',
      '/proc/50/task/50/children': '51 52 ',
      '/proc/50/task/53/children': '54 ',
      '/proc/50/task/55/children': '',
    }
    const threaded: ProcFs = {
      ...fixtureFs(files),
      readdir: async (path) => {
        const tids = Object.keys(files).filter((file) => file.startsWith(`${path}/`)).map((file) => file.slice(path.length + 1).split('/')[0]!)
        if (tids.length === 0) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' })
        return [...new Set(tids)]
      },
    }
    const table = linuxProcessTable(threaded)
    expect((await table.children!(50))?.sort()).toEqual([51, 52, 54])
    expect(await table.children!(56)).toEqual([])
  })

  it("lists the children an orphan is adopted into: the leader thread's alone while it runs, every thread's once it is a zombie", async () => {
    const files: Record<string, string> = {
      [`/proc/${process.pid}/task/${process.pid}/children`]: '',
      '/proc/60/task/60/stat': stat(60, 'node', 'S', 1, 100),
      '/proc/60/task/60/children': '61 ',
      '/proc/60/task/62/children': '63 ',
      '/proc/70/task/70/stat': stat(70, 'node', 'Z', 1, 100),
      '/proc/70/task/70/children': '',
      '/proc/70/task/72/children': '73 ',
      '/proc/70/task/72/stat': stat(72, 'node', 'S', 1, 100),
    }
    const threaded: ProcFs = {
      ...fixtureFs(files),
      readdir: async (path) => {
        const tids = Object.keys(files).filter((file) => file.startsWith(`${path}/`)).map((file) => file.slice(path.length + 1).split('/')[0]!)
        if (tids.length === 0) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' })
        return [...new Set(tids)]
      },
    }
    const table = linuxProcessTable(threaded)
    expect(await table.adoptedChildren!(60)).toEqual([61])
    expect(await table.adoptedChildren!(70)).toEqual([73])
    expect(await table.adoptedChildren!(80)).toEqual([])
  })

  it('says it cannot list children when the kernel has no children files', async () => {
    expect(await linuxProcessTable(fs).children!(40)).toBeUndefined()
  })

  // /proc exists on Linux only; elsewhere this shows as skipped.
  it.skipIf(process.platform !== 'linux')('lists the real children of this process', async () => {
    const { spawn } = await import('node:child_process')
    const child = spawn('sleep', ['30'], { stdio: 'ignore' })
    try {
      expect(await linuxProcessTable().children!(process.pid)).toContain(child.pid)
    } finally {
      child.kill('SIGKILL')
    }
  })

  // /proc exists on Linux only; elsewhere this shows as skipped.
  it.skipIf(process.platform !== 'linux')('sees this process in the real /proc with its parent', async () => {
    const table = linuxProcessTable()
    const self = await table.get(process.pid)
    expect(self?.ppid).toBe(process.ppid)
    expect((await table.snapshot()).some((e) => e.pid === process.pid && e.startTime === self?.startTime)).toBe(true)
  })
})

describe('macosProcessTable', () => {
  const listing = [
    '    1     0     1     0 Ss   Mon Nov  3 08:00:01 2025     /sbin/launchd',
    '  501     1   501   501 S+   Sun Nov 30 01:27:03 2025     /Applications/My App.app/Contents/MacOS/My App',
    '  502   501   502   501 Z    Sun Nov 30 01:27:04 2025     (sleep)',
    'not a process line',
    '',
  ].join('\n')
  const environ = [
    '  501 /bin/bash -c echo CONCH_SESSION_TAG=fake PATH=/usr/bin CONCH_SESSION_TAG=deadbeef HOME=/Users/me',
    '  502 sleep 30',
  ].join('\n')

  function recorded(): { run: (args: string[]) => Promise<string>; calls: string[][] } {
    const calls: string[][] = []
    return {
      calls,
      run: async (args) => {
        calls.push(args)
        if (args[0] === '-E') return environ
        if (args.includes('-p')) return listing.split('\n').filter((line) => line.trim().startsWith(`${args.at(-1)} `)).join('\n')
        return listing
      },
    }
  }

  it('parses pid, parent, group, state letter, lstart identity and a command with spaces', () => {
    expect(parsePsLine('  501     1   501   501 S+   Sun Nov 30 01:27:03 2025     /Applications/My App.app/x')).toEqual({
      pid: 501, ppid: 1, pgid: 501, sid: -1, tpgid: 501, state: 'S', startTime: 'Sun Nov 30 01:27:03 2025',
      comm: '/Applications/My App.app/x',
    })
    expect(parsePsLine('    1     0     1     0 Ss   Mon Nov  3 08:00:01 2025     /sbin/launchd')?.startTime).toBe(
      'Mon Nov 3 08:00:01 2025',
    )
    expect(parsePsLine('garbage')).toBeUndefined()
  })

  it('lists processes from one ps run and looks one up with -p', async () => {
    const { run, calls } = recorded()
    const table = macosProcessTable(run)
    expect((await table.snapshot()).map((e) => e.pid)).toEqual([1, 501, 502])
    expect((await table.get(502))?.state).toBe('Z')
    expect(await table.get(999)).toBeUndefined()
    expect(calls[0]).toEqual(['-A', '-ww', '-o', 'pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm='])
    expect(calls[1]).toEqual(['-ww', '-o', 'pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm=', '-p', '502'])
  })

  it('takes the environment from the words after the arguments, last occurrence winning', async () => {
    expect(environFromPsLine('/bin/bash -c x A=1 B=2', 'B')).toBe('2')
    const { run, calls } = recorded()
    const table = macosProcessTable(run)
    await table.snapshot()
    expect(await table.environ(501, 'CONCH_SESSION_TAG')).toBe('deadbeef')
    expect(await table.environ(502, 'CONCH_SESSION_TAG')).toBeUndefined()
    expect(await table.environ(7, 'PATH')).toBeUndefined()
    // One `ps -E` listing serves every environ() call until the next snapshot.
    expect(calls.filter((args) => args[0] === '-E')).toHaveLength(1)
    await table.snapshot()
    await table.environ(501, 'HOME')
    expect(calls.filter((args) => args[0] === '-E')).toHaveLength(2)
  })
})

describe('treeOf', () => {
  const entries = [entry(1, 0), entry(10, 1), entry(11, 10), entry(12, 11), entry(13, 10), entry(20, 1), entry(14, 13)]

  it('lists descendants children-first, each after its own descendants', () => {
    const pids = treeOf(entries, 10, { includeRoot: false }).map((e) => e.pid)
    expect(pids.sort((a, b) => a - b)).toEqual([11, 12, 13, 14])
    const order = treeOf(entries, 10, { includeRoot: false }).map((e) => e.pid)
    expect(order.indexOf(12)).toBeLessThan(order.indexOf(11))
    expect(order.indexOf(14)).toBeLessThan(order.indexOf(13))
  })

  it('puts the root last when asked and omits it otherwise', () => {
    expect(treeOf(entries, 10, { includeRoot: true }).at(-1)?.pid).toBe(10)
    expect(treeOf(entries, 10, { includeRoot: false }).some((e) => e.pid === 10)).toBe(false)
    expect(treeOf(entries, 99, { includeRoot: true })).toEqual([])
  })

  it('terminates on a parent cycle that a racing snapshot can produce', () => {
    const cyclic = [entry(5, 6), entry(6, 5), entry(7, 5)]
    expect(treeOf(cyclic, 5, { includeRoot: false }).map((e) => e.pid).sort()).toEqual([6, 7])
  })
})
