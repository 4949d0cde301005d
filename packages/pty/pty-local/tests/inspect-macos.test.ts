import { execFileSync } from 'node:child_process'
import { macosProcessTable, type PsRunner } from '@conch/subprocess'
import pty from 'node-pty'
import { afterEach, describe, expect, it } from 'vitest'
import { readForegroundGroup } from '../src/inspect-linux.ts'
import { listProcessGroupMacos, processName, processNameMacos, readForegroundGroupMacos } from '../src/inspect-macos.ts'
import { procFiles } from '../src/proc-files.ts'

/**
 * Recorded `ps -A -ww -o pid=,ppid=,pgid=,tpgid=,stat=,lstart=,comm=` output from a macOS
 * terminal session running `sort | yes | less` in the foreground of a login bash.
 */
const TABLE = [
  '    1     0     1     0 Ss   Sun Nov 30 01:00:00 2025     /sbin/launchd',
  '  412     1   412   412 Ss   Sun Nov 30 01:00:05 2025     /Applications/Utilities/Terminal App.app/Contents/MacOS/Terminal',
  ' 4100   412  4100  4300 Ss   Sun Nov 30 01:27:03 2025     -bash',
  ' 4300  4100  4300  4300 S+   Sun Nov 30 01:27:09 2025     /usr/bin/sort',
  ' 4301  4100  4300  4300 R+   Sun Nov 30 01:27:09 2025     /usr/bin/yes',
  ' 4302  4100  4300  4300 S+   Sun Nov 30 01:27:09 2025     /usr/bin/less',
  ' 4303  4100  4300  4300 Z+   Sun Nov 30 01:27:09 2025     (true)',
  ' 4500     1  4500     0 Ss   Sun Nov 30 01:00:09 2025     /usr/sbin/cfprefsd agent',
  '',
].join('\n')

/** A fake ps answering `-p` queries from `table` and `-A` with all of it, recording every call. */
function fakePs(table = TABLE): { run: PsRunner; calls: string[][] } {
  const calls: string[][] = []
  const run: PsRunner = async (args) => {
    calls.push(args)
    if (args.includes('-A')) return table
    const wanted = new Set(args.flatMap((arg, i) => (args[i - 1] === '-p' ? [Number(arg)] : [])))
    return table
      .split('\n')
      .filter((line) => wanted.has(Number(line.trim().split(/\s+/)[0])))
      .map((line) => `${line}\n`)
      .join('')
  }
  return { run, calls }
}

const tableOf = (ps: { run: PsRunner }) => macosProcessTable(ps.run)

describe('process names from ps', () => {
  it('takes the base name of an executable path and drops a login shell’s dash', () => {
    expect(processName('/Applications/Utilities/Terminal App.app/Contents/MacOS/Terminal')).toBe('Terminal')
    expect(processName('-bash')).toBe('bash')
    expect(processName('sleep')).toBe('sleep')
  })
})

describe('the foreground group from recorded ps output', () => {
  it('reports a child pipeline in front of the shell, with its leader, from two ps runs', async () => {
    const ps = fakePs()
    expect(await readForegroundGroupMacos({ table: tableOf(ps), pid: 4100 })).toEqual({ tpgid: 4300, leader: 'sort', shellIsForeground: false })
    expect(ps.calls.map((args) => args.at(-1))).toEqual(['4100', '4300'])
  })

  it('reports the shell in front from a single ps run', async () => {
    const ps = fakePs(' 4100   412  4100  4100 Ss+  Sun Nov 30 01:27:03 2025     /bin/bash\n')
    expect(await readForegroundGroupMacos({ table: tableOf(ps), pid: 4100 })).toEqual({ tpgid: 4100, leader: 'bash', shellIsForeground: true })
    expect(ps.calls).toHaveLength(1)
  })

  it('asks about the shell separately when a runner holds the terminal', async () => {
    const ps = fakePs(
      [
        ' 4000   412  4000  4100 Ss   Sun Nov 30 01:27:02 2025     /usr/bin/sandbox-exec',
        ' 4100  4000  4100  4100 S+   Sun Nov 30 01:27:03 2025     /bin/bash',
      ].join('\n'),
    )
    expect(await readForegroundGroupMacos({ table: tableOf(ps), pid: 4000, shellPid: 4100 })).toEqual({ tpgid: 4100, leader: 'bash', shellIsForeground: true })
    expect(ps.calls.map((args) => args.at(-1))).toEqual(['4000', '4100'])
  })

  it('leaves the leader unnamed when the group leader has exited', async () => {
    const ps = fakePs(
      [
        ' 4100   412  4100  4300 Ss   Sun Nov 30 01:27:03 2025     /bin/bash',
        ' 4302  4100  4300  4300 S+   Sun Nov 30 01:27:09 2025     /usr/bin/less',
      ].join('\n'),
    )
    expect(await readForegroundGroupMacos({ table: tableOf(ps), pid: 4100 })).toEqual({ tpgid: 4300, leader: undefined, shellIsForeground: false })
  })

  it('is undefined when the holder is gone or its terminal has no foreground group', async () => {
    expect(await readForegroundGroupMacos({ table: tableOf(fakePs()), pid: 9999 })).toBeUndefined()
    expect(await readForegroundGroupMacos({ table: tableOf(fakePs()), pid: 4500 })).toBeUndefined()
  })

  it('lists the live members of a group in pid order and names a process', async () => {
    const members = await listProcessGroupMacos({ table: tableOf(fakePs()), pgid: 4300 })
    expect(members.map((m) => [m.pid, processName(m.comm), m.state])).toEqual([
      [4300, 'sort', 'S'],
      [4301, 'yes', 'R'],
      [4302, 'less', 'S'],
    ])
    expect(await processNameMacos({ table: tableOf(fakePs()), pid: 4302 })).toBe('less')
    expect(await processNameMacos({ table: tableOf(fakePs()), pid: 1234 })).toBeUndefined()
  })
})

// procps ps on Linux accepts the same -o keywords and lstart format, so the ps path can be checked against /proc here.
const hasPs = (() => {
  try {
    execFileSync('ps', ['-o', 'pid=', '-p', String(process.pid)])
    return process.platform === 'linux'
  } catch {
    return false
  }
})()

const children: pty.IPty[] = []
afterEach(async () => {
  for (const child of children.splice(0)) {
    const exited = new Promise<void>((resolve) => child.onExit(() => resolve()))
    const group = await readForegroundGroup({ proc: procFiles, pid: child.pid })
    if (group !== undefined && group.tpgid !== child.pid) {
      try {
        process.kill(-group.tpgid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    child.kill('SIGKILL')
    await exited
  }
})

describe.skipIf(!hasPs)('the real ps', () => {
  it('agrees with /proc about a foreground sleep', async () => {
    const child = pty.spawn('/bin/bash', ['--noprofile', '--norc', '-i'], { encoding: null, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PS1: 'READY> ', TERM: 'xterm' } })
    children.push(child)
    let output = ''
    const ready = new Promise<void>((resolve) =>
      child.onData((data) => {
        output += data.toString()
        if (output.includes('READY> ')) resolve()
      }),
    )
    await ready
    child.write('sleep 30\r')
    await expect.poll(async () => (await readForegroundGroup({ proc: procFiles, pid: child.pid }))?.leader, { timeout: 20_000, interval: 50 }).toBe('sleep')
    const fromProc = await readForegroundGroup({ proc: procFiles, pid: child.pid })
    expect(await readForegroundGroupMacos({ pid: child.pid })).toEqual(fromProc)
    expect(await readForegroundGroupMacos({ pid: 999_999_999 })).toBeUndefined()
  })
})
