/**
 * Where a run_code run's time goes, phase by phase: prints the median of each phase over a
 * number of runs, cold and with the spare, unconfined and under bubblewrap; then what one
 * nested tool call costs over the same call made directly (`terminal_list` with no terminal open: a
 * tool that does next to nothing, so the path is what is measured), in wall time and in this process's CPU time;
 * and one nested call step by step on the host's side, with the program's side (its wake-up, its
 * work and the host's wake-up) as the gap between the reply written and the next call read.
 *
 *   pnpm exec tsx bench/ptc-phases.ts [runs]
 *
 * Not part of `pnpm bench`: a diagnosis, printed, never compared with a target.
 */
import { FrameDecoder, FrameWriter, type HostMessage } from '../packages/ptc/ptc-node/src/channel.ts'
import { ProgramProcess } from '../packages/ptc/ptc-node/src/process.ts'
import ToolsService from '../packages/core/tools/src/index.ts'
import { delay, timed } from './harness.ts'
import { stack } from './ptc.ts'
import { median } from './stats.ts'

const marks: Record<string, number> = {}
const mark = (name: string) => void (marks[name] ??= performance.now())

const proto = ProgramProcess.prototype as unknown as Record<string, (...args: unknown[]) => unknown>
const wrap = (method: string, before: string, after?: string) => {
  const original = proto[method]!
  proto[method] = function (this: unknown, ...args: unknown[]) {
    mark(before)
    const out = original.apply(this, args)
    if (after && out instanceof Promise) void out.finally(() => mark(after))
    return out
  }
}
const originalStart = ProgramProcess.start
ProgramProcess.start = async function (...args: Parameters<typeof ProgramProcess.start>) {
  mark('start')
  const started = await originalStart.apply(this, args)
  mark('spawned')
  void started.ready.then(() => mark('ready'), () => {})
  return started
}
wrap('send', 'sent')
wrap('terminate', 'terminate', 'terminated')
const originalAttach = proto['attach']!
proto['attach'] = function (this: unknown, sink: unknown) {
  mark('attach')
  return originalAttach.call(this, (event: { type: string; message?: { t: string } }) => {
    if (event.type === 'message' && event.message?.t === 'done') mark('done')
    ;(sink as (e: unknown) => void)(event)
  })
}

const PHASES = [
  ['call → start', 'call', 'start'],
  ['start → spawned (confine + spawn)', 'start', 'spawned'],
  ['spawned → ready (boot)', 'spawned', 'ready'],
  ['call → sent', 'call', 'sent'],
  ['sent → done', 'sent', 'done'],
  ['done → terminate', 'done', 'terminate'],
  ['terminate → terminated', 'terminate', 'terminated'],
  ['terminated → result', 'terminated', 'result'],
  ['total', 'call', 'result'],
] as const

async function measure(label: string, spare: boolean, mode: 'danger-full-access' | 'workspace-write', runs: number) {
  const s = await stack({ spare, mode })
  const samples = new Map<string, number[]>()
  const hostCpu: number[] = []
  try {
    for (let i = 0; i < runs + 3; i++) {
      await delay(spare ? 150 : 20)
      for (const key of Object.keys(marks)) delete marks[key]
      const usage = process.cpuUsage()
      mark('call')
      const result = await s.call('run_code', { code: 'return 1+1' })
      mark('result')
      const used = process.cpuUsage(usage)
      hostCpu.push((used.user + used.system) / 1000)
      if (result.isError) throw new Error(JSON.stringify(result))
      if (i < 3) continue
      for (const [name, from, to] of PHASES) {
        if (marks[from] === undefined || marks[to] === undefined) continue
        samples.set(name, [...(samples.get(name) ?? []), marks[to]! - marks[from]!])
      }
    }
  } finally {
    await s.dispose()
  }
  console.log(`\n${label} (${runs} runs, p50 ms)`)
  for (const [name] of PHASES) {
    const list = samples.get(name)
    if (list) console.log(`  ${name.padEnd(36)} ${median(list).toFixed(2)}`)
  }
  console.log(`  ${'CPU of this process per run'.padEnd(36)} ${median(hostCpu.slice(3)).toFixed(2)}`)
}

/** Per nested call: a program making `count` `terminal_list` calls, less an empty program, against `count` direct calls. */
async function perCall(count: number, rounds: number) {
  const s = await stack({ spare: true, mode: 'danger-full-access' })
  const code = `for (let i = 0; i < ${count}; i++) await tools.terminal_list({})\nreturn 1`
  const nested: number[] = []
  const nestedCpu: number[] = []
  const direct: number[] = []
  const directCpu: number[] = []
  try {
    for (let round = 0; round < rounds + 1; round++) {
      await delay(200)
      const empty = await timed(() => s.call('run_code', { code: 'return 1' }))
      await delay(200)
      const run = await timed(() => s.call('run_code', { code }))
      if (run.value.isError) throw new Error(JSON.stringify(run.value))
      const plain = await timed(async () => {
        for (let i = 0; i < count; i++) await s.call('terminal_list', {})
      })
      if (round === 0) continue
      nested.push((run.ms - empty.ms) / count)
      nestedCpu.push((run.cpuMs - empty.cpuMs) / count)
      direct.push(plain.ms / count)
      directCpu.push(plain.cpuMs / count)
    }
  } finally {
    await s.dispose()
  }
  console.log(`\none nested call against one direct call (${rounds} programs of ${count} calls, p50 ms)`)
  console.log(`  nested: ${median(nested).toFixed(3)} wall, ${median(nestedCpu).toFixed(3)} CPU of this process`)
  console.log(`  direct: ${median(direct).toFixed(3)} wall, ${median(directCpu).toFixed(3)} CPU`)
}

/**
 * One nested call, step by step (p50 over `count` calls of `terminal_list` from one program):
 * the host reads the call frame, decodes it, dispatches it to the binding (the call checks, the
 * nested `tool/call` event), runs the tools pipeline, returns (the `tool/result` event, the reply
 * value checked), encodes and writes the reply; then the program's side until the next call
 * frame is read.
 */
async function nestedSteps(count: number) {
  const s = await stack({ spare: true, mode: 'danger-full-access' })
  const marks: [string, number][] = []
  const at = (name: string) => void marks.push([name, performance.now()])
  const feed = FrameDecoder.prototype.feed
  const write = FrameWriter.prototype.write
  const tools = ToolsService.prototype as unknown as { execute: (...args: unknown[]) => Promise<unknown> }
  const execute = tools.execute
  FrameDecoder.prototype.feed = function (this: FrameDecoder, chunk: Buffer) {
    at('read')
    const out = feed.call(this, chunk)
    at('decoded')
    return out
  }
  FrameWriter.prototype.write = function (this: FrameWriter, message: HostMessage) {
    if (message.t === 'reply') at('encode + write')
    write.call(this, message)
    if (message.t === 'reply') at('written')
  }
  tools.execute = async function (this: unknown, ...args: unknown[]) {
    const nested = (args[2] as { parentCallId?: string }).parentCallId !== undefined
    if (nested) at('tools pipeline')
    try {
      return await execute.apply(this, args)
    } finally {
      if (nested) at('executed')
    }
  }
  try {
    await delay(200)
    marks.length = 0
    const result = await s.call('run_code', { code: `for (let i = 0; i < ${count}; i++) await tools.terminal_list({})\nreturn 1` })
    if (result.isError) throw new Error(JSON.stringify(result))
  } finally {
    FrameDecoder.prototype.feed = feed
    FrameWriter.prototype.write = write
    tools.execute = execute
    await s.dispose()
  }
  const order = ['read', 'decoded', 'tools pipeline', 'executed', 'encode + write', 'written', 'read']
  const labels = ['decode', 'dispatch, tool/call event', 'tools pipeline and tool', 'tool/result event, reply checked', 'encode + write the reply', 'the program: wake-ups and its work']
  const steps = labels.map(() => [] as number[])
  let calls = 0
  for (let index = 0; index < marks.length; index++) {
    if (marks[index]![0] !== 'read') continue
    const times: number[] = []
    let cursor = index
    for (const name of order) {
      while (cursor < marks.length && marks[cursor]![0] !== name) cursor++
      if (cursor >= marks.length) break
      times.push(marks[cursor]![1])
      if (times.length < order.length) cursor++
    }
    if (times.length < order.length) break
    if (++calls <= 3) continue
    times.slice(1).forEach((time, step) => steps[step]!.push((time - times[step]!) * 1000))
  }
  console.log(`\none nested call step by step (${steps[0]!.length} calls, p50 µs)`)
  labels.forEach((label, step) => console.log(`  ${label.padEnd(36)} ${median(steps[step]!).toFixed(0)}`))
}

const runs = Number(process.argv[2] ?? 15)
await measure('cold, unconfined', false, 'danger-full-access', runs)
await measure('spare, unconfined', true, 'danger-full-access', runs)
await measure('cold, bubblewrap', false, 'workspace-write', runs)
await measure('spare, bubblewrap', true, 'workspace-write', runs)
await perCall(500, 3)
await nestedSteps(300)
process.exit(0)
