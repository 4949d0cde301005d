import { execFileSync } from 'node:child_process'
import pty from 'node-pty'
import { afterEach, describe, expect, it } from 'vitest'
import { nodeProcReader, readForegroundGroup } from '../src/inspect-linux.ts'
import { listProcessGroupMacos, parsePsProcesses, processNameMacos, PS_FIELDS, type PsRunner, readForegroundGroupMacos, runPs } from '../src/inspect-macos.ts'

/** Recorded `ps -A -ww -o pid=,pgid=,tpgid=,stat=,comm=` output from a macOS terminal session. */
const TABLE = [
  '    1     1     0 Ss   /sbin/launchd',
  '  412   412   412 Ss   /Applications/Utilities/Terminal App.app/Contents/MacOS/Terminal',
  ' 4100  4100  4300 Ss   -bash',
  ' 4300  4300  4300 S+   /usr/bin/sort',
  ' 4301  4300  4300 R+   /usr/bin/yes',
  ' 4302  4300  4300 S+   /usr/bin/less',
  ' 4500  4500     0 Ss   /usr/sbin/cfprefsd agent',
  'not a ps row',
  '',
].join('\n')

/** A fake ps that answers `-p` queries from TABLE and `-A` with all of it, recording every call. */
function fakePs(table = TABLE): PsRunner & { calls: string[][] } {
  const calls: string[][] = []
  const run = async (args: string[]) => {
    calls.push(args)
    expect(args).toContain(PS_FIELDS)
    if (args.includes('-A')) return table
    const wanted = new Set(args.flatMap((arg, i) => (args[i - 1] === '-p' ? [Number(arg)] : [])))
    return table
      .split('\n')
      .filter((line) => wanted.has(Number(line.trim().split(/\s+/)[0])))
      .map((line) => `${line}\n`)
      .join('')
  }
  return Object.assign(run, { calls })
}

describe('parsing ps output', () => {
  it('reads pid, group, foreground group, state and a command path with spaces', () => {
    const rows = parsePsProcesses(TABLE)
    expect(rows).toHaveLength(7)
    expect(rows[1]).toEqual({
      pid: 412,
      pgid: 412,
      tpgid: 412,
      state: 'S',
      foreground: false,
      command: '/Applications/Utilities/Terminal App.app/Contents/MacOS/Terminal',
      name: 'Terminal',
    })
    expect(rows[3]).toMatchObject({ pid: 4300, state: 'S', foreground: true, name: 'sort' })
    expect(rows[4]).toMatchObject({ pid: 4301, state: 'R', foreground: true, name: 'yes' })
  })

  it('names a login shell without its leading dash and reports no terminal group as -1', () => {
    const rows = parsePsProcesses(TABLE)
    expect(rows[2]).toMatchObject({ pid: 4100, name: 'bash', command: '-bash' })
    expect(rows[0]?.tpgid).toBe(-1)
    expect(parsePsProcesses('  9  9  -1 Ss  x\n')[0]?.tpgid).toBe(-1)
  })
})

describe('the foreground group from ps', () => {
  it('reports a child pipeline in front of the shell, with its leader', async () => {
    const ps = fakePs()
    expect(await readForegroundGroupMacos({ ps, pid: 4100 })).toEqual({ tpgid: 4300, leader: 'sort', shellIsForeground: false })
    expect(ps.calls).toEqual([
      ['-ww', '-o', PS_FIELDS, '-p', '4100'],
      ['-ww', '-o', PS_FIELDS, '-p', '4300'],
    ])
  })

  it('reports the shell in front when its own group is the foreground group', async () => {
    const table = ' 4100  4100  4100 Ss+  /bin/bash\n'
    const ps = fakePs(table)
    expect(await readForegroundGroupMacos({ ps, pid: 4100 })).toEqual({ tpgid: 4100, leader: 'bash', shellIsForeground: true })
    expect(ps.calls).toHaveLength(1)
  })

  it('asks about a separate shell when the terminal is held by a runner', async () => {
    const table = [' 4000  4000  4100 Ss   /usr/bin/sandbox-exec', ' 4100  4100  4100 S+   /bin/bash'].join('\n')
    const ps = fakePs(table)
    expect(await readForegroundGroupMacos({ ps, pid: 4000, shellPid: 4100 })).toEqual({ tpgid: 4100, leader: 'bash', shellIsForeground: true })
    expect(ps.calls[0]).toEqual(['-ww', '-o', PS_FIELDS, '-p', '4000', '-p', '4100'])
  })

  it('leaves the leader unnamed when the group leader has exited', async () => {
    const table = [' 4100  4100  4300 Ss   /bin/bash', ' 4302  4300  4300 S+   /usr/bin/less'].join('\n')
    expect(await readForegroundGroupMacos({ ps: fakePs(table), pid: 4100 })).toEqual({ tpgid: 4300, leader: undefined, shellIsForeground: false })
  })

  it('is undefined when the holder is gone or its terminal has no foreground group', async () => {
    expect(await readForegroundGroupMacos({ ps: fakePs(), pid: 9999 })).toBeUndefined()
    expect(await readForegroundGroupMacos({ ps: fakePs(), pid: 4500 })).toBeUndefined()
  })

  it('lists the members of a group in pid order and names a process', async () => {
    const members = await listProcessGroupMacos({ ps: fakePs(), pgid: 4300 })
    expect(members.map((m) => [m.pid, m.name, m.state])).toEqual([
      [4300, 'sort', 'S'],
      [4301, 'yes', 'R'],
      [4302, 'less', 'S'],
    ])
    expect(await processNameMacos({ ps: fakePs(), pid: 4302 })).toBe('less')
    expect(await processNameMacos({ ps: fakePs(), pid: 1234 })).toBeUndefined()
  })
})

// procps ps on Linux accepts the same -o keywords, so the real runner can be checked against /proc here.
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
    const group = await readForegroundGroup({ proc: nodeProcReader, pid: child.pid })
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

describe.skipIf(!hasPs)('the real ps runner', () => {
  it('agrees with /proc about a foreground sleep and resolves "no such process" to nothing', async () => {
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
    await expect.poll(async () => (await readForegroundGroup({ proc: nodeProcReader, pid: child.pid }))?.leader, { timeout: 20_000, interval: 50 }).toBe('sleep')
    const fromProc = await readForegroundGroup({ proc: nodeProcReader, pid: child.pid })
    expect(await readForegroundGroupMacos({ pid: child.pid })).toEqual(fromProc)
    expect(await runPs(['-o', PS_FIELDS, '-p', '999999999'])).toBe('')
  })
})
