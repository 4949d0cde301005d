/**
 * The tag supervisor as a real detached process: when its pipe closes with tags registered it
 * kills every process carrying them, then exits; released tags are left alone.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { markedProcesses } from '@conch/test-support/procs'
import { eventually } from '@conch/test-support/wait'
import { createSessionTag, createTagSupervisor, SUPERVISOR_VARIABLE } from '../src/index.ts'

/** A process that keeps changing its pid (see the file). */
const HOPPER = fileURLToPath(new URL('./fixtures/hopper.py', import.meta.url))
/** A process whose main thread left while another runs on (see the file). */
const LEADERLESS = fileURLToPath(new URL('./fixtures/leaderless.py', import.meta.url))

const started: number[] = []

afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
})

/** A tagged daemon in its own session, as `setsid cmd &` leaves one; resolves once it runs. */
async function daemon(tag: { name: string; value: string }): Promise<number> {
  const child = spawn('sleep', [`77.${randomInt(100000, 999999)}`], { detached: true, stdio: 'ignore', env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', [tag.name]: tag.value } })
  child.unref()
  started.push(child.pid!)
  expect(await eventually(() => markedProcesses(tag.name, tag.value).includes(child.pid!), 5000)).toBe(true)
  return child.pid!
}

/** `tag` watched by a supervisor of its own, started as the default one is; returns its process. */
function watchedBySupervisor(tag: { name: string; value: string }): () => ChildProcess {
  let supervisor: ChildProcess | undefined
  createTagSupervisor({
    watchedPid: 900000 + randomInt(0, 99999),
    start: (program, args, env) => (supervisor = spawn(process.execPath, ['-e', program, ...args], { detached: true, stdio: ['pipe', 'ignore', 'ignore'], env })),
  }).watch(tag)
  return () => supervisor!
}

describe.runIf(process.platform === 'linux')('the tag supervisor', () => {
  it('kills the processes of every tag still registered when its pipe closes, then exits', async () => {
    const watchedPid = 900000 + randomInt(0, 99999)
    let supervisor: ChildProcess | undefined
    const supervisors = createTagSupervisor({
      watchedPid,
      start: (program, args, env) => (supervisor = spawn(process.execPath, ['-e', program, ...args], { detached: true, stdio: ['pipe', 'ignore', 'ignore'], env })),
    })
    const kept = createSessionTag('CONCH_SESSION_TAG')
    const released = createSessionTag('CONCH_SESSION_TAG')
    supervisors.watch(kept)
    const release = supervisors.watch(released)
    const victim = await daemon(kept)
    const spared = await daemon(released)
    expect(markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid))).toEqual([supervisor!.pid])
    release()
    // As when this process dies: the write end of the pipe closes with `kept` still registered.
    supervisor!.stdin!.destroy()
    expect(await eventually(() => markedProcesses(kept.name, kept.value).length === 0, 10_000)).toBe(true)
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid)).length === 0, 10_000)).toBe(true)
    expect(markedProcesses(released.name, released.value)).toEqual([spared])
    expect(victim).not.toBe(spared)
  })

  it('kills a tagged process whose main thread left while another runs on (its leader reads Z)', async () => {
    const tag = createSessionTag('CONCH_SESSION_TAG')
    const supervisor = watchedBySupervisor(tag)
    const child = spawn('python3', [LEADERLESS], { detached: true, stdio: ['ignore', 'pipe', 'ignore'], env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', [tag.name]: tag.value } })
    child.unref()
    started.push(child.pid!)
    const leaderGone = () => {
      try {
        const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
        return fields[0] === 'Z' && Number(fields[17]) > 1
      } catch {
        return false
      }
    }
    expect(await eventually(leaderGone, 10_000)).toBe(true)
    // As when this process dies: the write end of the pipe closes with the tag registered.
    supervisor().stdin!.destroy()
    expect(await eventually(() => !leaderGone(), 10_000), 'the process lived on in its thread').toBe(true)
  }, 30_000)

  it('kills a tagged process that keeps changing its pid (it forks, the parent leaves at once)', async () => {
    const tag = createSessionTag('CONCH_SESSION_TAG')
    const supervisor = watchedBySupervisor(tag)
    // Its stdout is this test's pipe: its end is the proof that the hopper is gone.
    const hopper = spawn('python3', [HOPPER], { detached: true, stdio: ['ignore', 'pipe', 'ignore'], env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', [tag.name]: tag.value } })
    let seen = ''
    const ended = new Promise<void>((resolve) => hopper.stdout!.once('end', () => resolve()))
    await new Promise<void>((resolve) => {
      hopper.stdout!.on('data', (chunk: Buffer) => {
        seen += chunk.toString('latin1')
        if (seen.includes('hopping')) resolve()
      })
    })
    // As when this process dies: the write end of the pipe closes with the tag registered.
    supervisor().stdin!.destroy()
    await ended
    expect(markedProcesses(tag.name, tag.value)).toEqual([])
  }, 30_000)

  it('with no linger, exits at once when its last tag is released, and a later watch starts a new one', async () => {
    const watchedPid = 900000 + randomInt(0, 99999)
    const supervisors = createTagSupervisor({ watchedPid, lingerMs: 0 })
    const release = supervisors.watch(createSessionTag('CONCH_SESSION_TAG'))
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid)).length === 1, 5000)).toBe(true)
    release()
    release()
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid)).length === 0, 10_000)).toBe(true)
    const again = supervisors.watch(createSessionTag('CONCH_SESSION_TAG'))
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid)).length === 1, 5000)).toBe(true)
    again()
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid)).length === 0, 10_000)).toBe(true)
  })

  it('lingers after its last tag is released: a watch meanwhile reuses it, and it exits when the linger ends', async () => {
    const watchedPid = 900000 + randomInt(0, 99999)
    const running = () => markedProcesses(SUPERVISOR_VARIABLE, String(watchedPid))
    const supervisors = createTagSupervisor({ watchedPid, lingerMs: 60_000 })
    supervisors.watch(createSessionTag('CONCH_SESSION_TAG'))()
    expect(await eventually(() => running().length === 1, 5000)).toBe(true)
    const [first] = running()
    started.push(first!)
    supervisors.watch(createSessionTag('CONCH_SESSION_TAG'))()
    expect(running()).toEqual([first])

    const briefPid = watchedPid + 1
    const brief = createTagSupervisor({ watchedPid: briefPid, lingerMs: 200 })
    brief.watch(createSessionTag('CONCH_SESSION_TAG'))()
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(briefPid)).length === 1, 5000)).toBe(true)
    expect(await eventually(() => markedProcesses(SUPERVISOR_VARIABLE, String(briefPid)).length === 0, 10_000)).toBe(true)
  })
})
