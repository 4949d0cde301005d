/**
 * The kept /proc descriptors on real processes: a kept descriptor answers like a fresh open —
 * fresh text on every read, nothing of a process that is gone, the new process when a pid is
 * read again after its first owner exited, another address space after an exec.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { contextSwitches } from '../src/inspect-linux.ts'
import { ProcFileCache } from '../src/proc-files.ts'
import { parseSyscallFile } from '../src/syscalls.ts'

const onLinux = process.platform === 'linux'
const children: ChildProcess[] = []

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
})

/** Starts `argv` and resolves once it printed `token` (so it runs its own code by then). */
async function started(argv: string[], token: string): Promise<ChildProcess> {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] })
  children.push(child)
  await new Promise<void>((resolve, reject) => {
    let seen = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.includes(token)) resolve()
    })
    child.on('exit', () => reject(new Error(`${argv.join(' ')} exited before printing ${token}`)))
  })
  return child
}

/** Resolves once `pid` is blocked in syscall `nr` (read from /proc afresh each time). */
async function blockedIn(pid: number, nr: number): Promise<bigint[]> {
  for (;;) {
    const state = parseSyscallFile(readFileSync(`/proc/${pid}/syscall`, 'utf8'))
    if (state?.kind === 'syscall' && state.nr === nr) return [...state.args]
    await new Promise((resolve) => setImmediate(resolve))
  }
}

describe.skipIf(!onLinux)('kept /proc descriptors', () => {
  it('read fresh text each time: the counters of a task that ran since move', async () => {
    const cache = new ProcFileCache()
    const path = `/proc/thread-self/status`
    const before = contextSwitches(await cache.readFile(path))!
    // Sleeping blocks this thread: its voluntary switch count moves.
    await new Promise((resolve) => setTimeout(resolve, 5))
    await new Promise((resolve) => setTimeout(resolve, 5))
    const after = contextSwitches(await cache.readFile(path))!
    expect(cache.size).toBe(1)
    expect(after).toBeGreaterThan(before)
    cache.close()
    expect(cache.size).toBe(0)
  })

  it('say nothing of a process that is gone, and drop its descriptor', async () => {
    const cache = new ProcFileCache()
    const child = await started(['sh', '-c', 'echo up; exec sleep 600'], 'up')
    const path = `/proc/${child.pid}/stat`
    // This process's stat (sh, or sleep once it exec'd: `up` comes before the exec).
    expect(await cache.readFile(path)).toMatch(new RegExp(`^${child.pid} \\((sh|sleep)\\) `))
    expect(cache.size).toBe(1)
    child.kill('SIGKILL')
    await new Promise((resolve) => child.once('exit', resolve))
    await expect(cache.readFile(path)).rejects.toMatchObject({ code: 'ENOENT' })
    expect(cache.size).toBe(0)
  })

  it('read a process’s memory, and after it exec’d another program read the new one, never the old address space', async () => {
    const cache = new ProcFileCache()
    // bash waits in read(2) on its stdin pipe; the buffer pointer is argument 1.
    const child = await started(['bash', '-c', 'echo up; read -r line; echo "got $line"; exec sleep 600'], 'up')
    const pid = child.pid!
    const [, buffer] = await blockedIn(pid, 0)
    expect((await cache.readMemory(pid, buffer!, 1)).length).toBe(1)
    child.stdin!.write('x\n')
    // After the exec, sleep waits in clock_nanosleep (230 on x86_64, 115 on arm64): its memory
    // is another address space, read through a fresh descriptor (the kept one reads nothing).
    await blockedIn(pid, process.arch === 'arm64' ? 115 : 230)
    const maps = readFileSync(`/proc/${pid}/maps`, 'utf8')
    const stack = /^([0-9a-f]+)-[0-9a-f]+ .*\[stack\]$/m.exec(maps)![1]!
    const memory = await cache.readMemory(pid, BigInt(`0x${stack}`), 8)
    expect(memory.length).toBe(8)
    child.kill('SIGKILL')
    await new Promise((resolve) => child.once('exit', resolve))
    await expect(cache.readMemory(pid, BigInt(`0x${stack}`), 8)).rejects.toThrow()
  })

  it('keep at most maxOpen descriptors, the least recently used closed first', async () => {
    const cache = new ProcFileCache(2)
    const self = process.pid
    await cache.readFile(`/proc/${self}/stat`)
    await cache.readFile(`/proc/${self}/status`)
    await cache.readFile(`/proc/${self}/stat`)
    await cache.readFile(`/proc/${self}/io`)
    expect(cache.size).toBe(2)
    // Files that are not per-task seq_files are read afresh, never kept.
    expect(await cache.readFile('/proc/loadavg')).toMatch(/^\d/)
    expect(cache.size).toBe(2)
    cache.close()
  })
})
