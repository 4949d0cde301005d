/**
 * The readiness rules for event-loop programs, on probe snapshots recorded from real programs on
 * Linux 6.18 (the counters of /proc/<pid>/task/<tid>/{status,sched,io,stat}): full ipython idle
 * at its prompt (prompt_toolkit's 0.5 s tick), `node inspect` before and at `debug>`, and
 * jshell's JLine reader.
 */
import { describe, expect, it } from 'vitest'
import type { ReadProbe, TaskObservation, WakeCounters } from '../src/inspect-linux.ts'
import { promptShaped } from '../src/read-evidence.ts'
import { corroborationCapMs, judgeStep, judgeWindow, type WindowRules, type WindowSample } from '../src/wait-evidence.ts'

const WINDOW: WindowRules = { quietMs: 100, capMs: 600, stepMs: 50, corroborating: true }

function wake(overrides: Partial<WakeCounters>): WakeCounters {
  return { voluntary: 0, execStartMs: 0, cpu: 0, execStartMonotonicMs: undefined, rchar: 12807282, syscr: 1498, ...overrides }
}

/** ipython's main thread in epoll_wait(5, …, 2, timeoutMs) on the terminal and its socketpair, plus two idle futex threads. */
function ipython(options: { switches: number; timeoutMs: number; wake: Partial<WakeCounters>; others?: [number, number] }): ReadProbe {
  const [a, b] = options.others ?? [16, 3]
  const tasks: TaskObservation[] = [
    { pid: 30644, tid: 30644, name: 'ipython3', state: 'S', syscall: 'epoll_wait', switches: options.switches, timeoutMs: options.timeoutMs, fds: [6, 0], terminalFd: 0, sources: ['socket fd 6', `timer in ${options.timeoutMs} ms`], wake: wake(options.wake) },
    { pid: 30644, tid: 30686, name: 'ipython3', state: 'S', syscall: '#202', switches: a, fds: [] },
    { pid: 30644, tid: 30691, name: 'ipython3', state: 'S', syscall: '#202', switches: b, fds: [] },
  ]
  return {
    verdict: 'reading',
    tpgid: 30644,
    tasks,
    reader: { name: 'ipython3', pid: 30644, tid: 30644, syscall: 'epoll_wait', fd: 0, path: '/dev/pts/0' },
    detail: 'ipython3[30644] epoll_wait fd0 /dev/pts/0',
    sources: ['socket fd 6', `timer in ${options.timeoutMs} ms`],
  }
}

const at = (atMs: number, probe: ReadProbe): WindowSample => ({ atMs, probe })

// Recorded: blocked at exec_start 10249227.03 with a 489 ms timeout; one wake later it waits
// again from 10249716.90 (489.9 ms on), with a fresh 500 ms timeout, having read nothing.
const tickBefore = ipython({ switches: 258, timeoutMs: 489, wake: { voluntary: 84, execStartMs: 10249227.027533 } })
const tickAfter = ipython({ switches: 259, timeoutMs: 500, wake: { voluntary: 85, execStartMs: 10249716.904517 } })

describe('an event loop whose wait holds other wake sources (judgeWindow)', () => {
  it('proves ipython idle: its one wake-up in the window came at the end of its own timeout and read nothing', () => {
    const samples = [at(453, tickBefore), at(503, tickBefore), at(555, tickBefore), at(606, tickAfter)]
    expect(judgeWindow(samples, WINDOW)).toEqual({ kind: 'proven', quietMs: 153, detail: 'the reader woke only at the end of its own timeout (489 ms) and read nothing; no other task ran' })
  })

  it('waits for a near timer to fire before proving anything, and decides at the cap when it does not', () => {
    const quiet = [at(0, tickBefore), at(50, tickBefore), at(100, tickBefore), at(150, tickBefore)]
    expect(judgeWindow(quiet, WINDOW)).toEqual({ kind: 'pending', nextInMs: 50 })
    const long = [...quiet, at(600, tickBefore)]
    expect(judgeWindow(long, WINDOW)).toMatchObject({ kind: 'ambiguous', why: 'its timer of 489 ms was not seen to fire within 600 ms' })
  })

  it('keeps a timer owed when the tick re-arms a shorter one, and needs the quiet time in any case', () => {
    const shorter = ipython({ switches: 259, timeoutMs: 50, wake: { voluntary: 85, execStartMs: 10249716.904517 } })
    expect(judgeWindow([at(0, tickBefore), at(50, shorter), at(100, shorter), at(150, shorter)], WINDOW)).toEqual({ kind: 'pending', nextInMs: 50 })
    expect(judgeWindow([at(0, tickBefore), at(40, tickAfter)], WINDOW)).toEqual({ kind: 'pending', nextInMs: 50 })
  })

  it('refutes a wake before the timeout ended: a descriptor woke it (node inspect before debug>)', () => {
    // Recorded: node inspect's main thread 68 ms into a 4906 ms timeout, woken by its debuggee's socket.
    const early = ipython({ switches: 259, timeoutMs: 500, wake: { voluntary: 85, execStartMs: 10249227.027533 + 68 } })
    expect(judgeWindow([at(0, tickBefore), at(50, early), at(100, early)], WINDOW)).toMatchObject({ kind: 'refuted', why: 'the reader 30644 woke after 68 ms, before its 489 ms timeout' })
  })

  it('refutes a window in which another task of the group ran (node inspect: the debuggee answers on its socket)', () => {
    const busyPeer = ipython({ switches: 258, timeoutMs: 489, wake: { voluntary: 84, execStartMs: 10249227.027533 }, others: [36, 3] })
    expect(judgeWindow([at(0, tickBefore), at(50, busyPeer)], WINDOW)).toMatchObject({ kind: 'refuted', why: 'task 30686 (ipython3) ran' })
  })

  it('proves node inspect at debug>: with far timers nothing in the group ran', () => {
    const idle = ipython({ switches: 80, timeoutMs: 4351, wake: { voluntary: 32, execStartMs: 9891863.14 } })
    expect(judgeWindow([at(0, idle), at(50, idle), at(101, idle)], WINDOW)).toEqual({ kind: 'proven', quietMs: 101, detail: 'the reader did not run; no other task ran' })
  })

  it('refutes a wake that read bytes, and a thread that started or ended', () => {
    const read = ipython({ switches: 259, timeoutMs: 500, wake: { voluntary: 85, execStartMs: 10249716.904517, rchar: 12807300, syscr: 1499 } })
    expect(judgeWindow([at(0, tickBefore), at(50, read), at(100, read)], WINDOW)).toMatchObject({ kind: 'refuted', why: 'the reader 30644 read 18 bytes when it woke' })
    const withThread: ReadProbe = { ...tickBefore, tasks: [...tickBefore.tasks, { pid: 30644, tid: 30700, name: 'ipython3', state: 'S', syscall: '#202', switches: 1, fds: [] }] }
    expect(judgeWindow([at(0, tickBefore), at(50, withThread)], WINDOW)).toMatchObject({ kind: 'refuted', why: 'task 30700 started' })
    expect(judgeWindow([at(0, withThread), at(50, tickBefore)], WINDOW)).toMatchObject({ kind: 'refuted', why: 'task 30700 ended' })
  })

  it('leaves out a sample that caught the reader in its wake-up, but not a reader that keeps running', () => {
    const midTick: ReadProbe = { ...tickBefore, verdict: 'not_reading', reader: undefined, tasks: tickBefore.tasks.map((t) => (t.tid === 30644 ? { ...t, state: 'R', syscall: 'running' } : t)) }
    expect(judgeWindow([at(453, tickBefore), at(503, tickBefore), at(555, midTick)], WINDOW)).toEqual({ kind: 'pending', nextInMs: 50 })
    expect(judgeWindow([at(453, tickBefore), at(503, tickBefore), at(555, midTick), at(606, tickAfter)], WINDOW)).toMatchObject({ kind: 'proven', quietMs: 153 })
    expect(judgeWindow([at(0, tickBefore), at(50, midTick), at(100, midTick), at(150, midTick)], WINDOW)).toMatchObject({ kind: 'refuted', why: 'ipython3[30644] keeps running' })
    const peerRunning: ReadProbe = { ...midTick, tasks: midTick.tasks.map((t) => (t.tid === 30686 ? { ...t, state: 'R', syscall: 'running' } : t)) }
    expect(judgeWindow([at(0, tickBefore), at(50, peerRunning)], WINDOW)).toMatchObject({ kind: 'refuted' })
  })

  it('refutes a reader that left its wait or the group that left the foreground', () => {
    const left: ReadProbe = { ...tickBefore, verdict: 'not_reading', reader: undefined }
    expect(judgeWindow([at(0, tickBefore), at(50, left)], WINDOW)).toMatchObject({ kind: 'refuted' })
    expect(judgeWindow([at(0, tickBefore), at(50, { ...tickBefore, tpgid: 1 })], WINDOW)).toMatchObject({ kind: 'refuted' })
  })

  describe('across CPUs and with several blocks per tick', () => {
    // Recorded: one tick that blocked twice (asyncio re-waits a millisecond when the kernel's
    // timeout ends just before its own deadline) and moved from CPU 0 to CPU 1, whose task clocks
    // differ; through each CPU's measured offset it waited 497.3 ms against a 494 ms timeout.
    const before = ipython({ switches: 265, timeoutMs: 494, wake: { voluntary: 67, execStartMs: 10620399.640465, cpu: 0, execStartMonotonicMs: 2990.6 } })
    const after = ipython({ switches: 267, timeoutMs: 498, wake: { voluntary: 69, execStartMs: 10620983.379772, cpu: 1, execStartMonotonicMs: 3487.9 } })

    it('proves a tick that blocked twice in one short step, compared on the monotonic clock', () => {
      expect(judgeWindow([at(419, before), at(471, before), at(523, before), at(575, after)], WINDOW)).toMatchObject({ kind: 'proven', quietMs: 156 })
    })

    it('does not judge several blocks in a long step (a loaded machine that probed late)', () => {
      expect(judgeWindow([at(0, before), at(400, after)], WINDOW)).toMatchObject({ kind: 'ambiguous', why: 'the reader 30644 blocked 2 times in one long step' })
    })

    it('is ambiguous when the reader moved to a CPU whose clock offset is unknown, or its sched file is unreadable', () => {
      const unknownOffset = ipython({ switches: 266, timeoutMs: 498, wake: { voluntary: 68, execStartMs: 10620983.379772, cpu: 1 } })
      expect(judgeWindow([at(0, before), at(50, unknownOffset)], WINDOW)).toMatchObject({ kind: 'ambiguous', why: 'the reader 30644 woke once on another CPU, whose clock offset is unknown' })
      const noSched = (probe: ReadProbe, voluntary: number): ReadProbe => ({ ...probe, tasks: probe.tasks.map((t) => (t.wake === undefined ? t : { ...t, wake: wake({ voluntary, execStartMs: undefined }) })) })
      expect(judgeWindow([at(0, noSched(tickBefore, 84)), at(50, noSched(tickAfter, 85))], WINDOW)).toMatchObject({ kind: 'ambiguous' })
    })

    it('refutes more blocks than a tick takes', () => {
      const many = ipython({ switches: 270, timeoutMs: 498, wake: { voluntary: 71, execStartMs: 10620983.379772, cpu: 0 } })
      expect(judgeStep(at(0, before), at(50, many), 30644, 100)).toMatchObject({ kind: 'refuted', why: 'the reader 30644 woke 4 times' })
    })
  })
})

describe('reads without an event loop (judgeWindow)', () => {
  const read = (switches: number, syscall: 'read' | 'pselect6' = 'read'): ReadProbe => ({
    verdict: 'reading',
    tpgid: 500,
    tasks: [{ pid: 500, tid: 512, name: 'java', state: 'S', syscall, switches, fds: [0], terminalFd: 0 }],
    reader: { name: 'java', pid: 500, tid: 512, syscall, fd: 0, path: '/dev/pts/1' },
    detail: 'java[500] read fd0 /dev/pts/1',
  })
  const exact: WindowRules = { quietMs: 5, capMs: 5, stepMs: 50, corroborating: false }

  it('proves an uncorroborated read that did not run after the gap, and refutes one that ran', () => {
    expect(judgeWindow([at(0, read(9))], exact)).toEqual({ kind: 'pending', nextInMs: 5 })
    expect(judgeWindow([at(0, read(9, 'pselect6')), at(6, read(9, 'pselect6'))], exact)).toMatchObject({ kind: 'proven' })
    expect(judgeWindow([at(0, read(9, 'pselect6')), at(6, read(10, 'pselect6'))], exact)).toMatchObject({ kind: 'refuted' })
  })

  it('lets a corroborated read(2) reader wake on its termios VTIME timeout (JLine, in jshell)', () => {
    expect(judgeWindow([at(0, read(100)), at(101, read(104))], WINDOW)).toMatchObject({ kind: 'proven', quietMs: 101 })
  })
})

describe('the window and the prompt shape', () => {
  it('runs past the wait’s own near timer, at most idleMs', () => {
    expect(corroborationCapMs(['socket fd 6', 'timer in 489 ms'], 100, 3000)).toBe(589)
    expect(corroborationCapMs(['socket fd 6', 'task 4122 epoll_pwait timer in 20 ms'], 100, 3000)).toBe(100)
    expect(corroborationCapMs(['timer in 900 ms'], 100, 500)).toBe(500)
  })

  it('takes a non-blank open line, or the last line above reserved blank rows, that is not the echo of the input', () => {
    expect(promptShaped({ outputSinceWrite: true, promptLine: 'In [2]: ', lastNonBlankLine: () => '', inputText: 'x = 6 * 7' })).toBe(true)
    expect(promptShaped({ outputSinceWrite: true, promptLine: '  ', lastNonBlankLine: () => 'In [2]:', inputText: 'x' })).toBe(true)
    expect(promptShaped({ outputSinceWrite: true, promptLine: 'In [1]: x = 6 * 7', lastNonBlankLine: () => '', inputText: 'x = 6 * 7' })).toBe(false)
    expect(promptShaped({ outputSinceWrite: false, promptLine: 'debug> ', lastNonBlankLine: () => '', inputText: 'n' })).toBe(false)
    expect(promptShaped({ outputSinceWrite: true, promptLine: '', lastNonBlankLine: () => '', inputText: 'n' })).toBe(false)
  })
})
