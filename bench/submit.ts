/**
 * `submit` — what Enter as its own key press costs: the same send at bash's prompt and in a
 * REPL, once with the text and Enter as two writes (Enter after the text was consumed, the
 * default for every reader but the shell at its own prompt) and once as one glued write (the
 * default there), both as explicit steps, interleaved in the same run. Figures: end-to-end p50
 * of each and their difference, and the gap between the text's write and Enter's (the wait for
 * consumption) as the terminal saw it. CPU per send of each form: conch's process
 * (`process.cpuUsage`) and the termios helper it asks (the `perl` child; its
 * /proc/<pid>/schedstat run time), so a faster Enter that costs more CPU shows.
 */
import { readdirSync, readFileSync } from 'node:fs'
import type { WriteStep } from '../packages/pty/pty-local/src/input-steps.ts'
import type { LocalSession } from '../packages/pty/pty-local/src/session.ts'
import type { Composition } from './compose.ts'
import { median, percentile, round, tally } from './stats.ts'
import { PLAN, progress, timed } from './harness.ts'
import type { Bench } from './registry.ts'

/** Per program: end-to-end p50 of each form, their difference, the text→Enter gap, and CPU per send. */
export type SubmitFigures = Record<string, Awaited<ReturnType<typeof benchProgram>>>

const PROGRAMS = [
  { key: 'bash', start: undefined, text: 'true' },
  { key: 'python3', start: 'python3', text: '1+1' },
  { key: 'node', start: 'node', text: '1+1' },
] as const

/** Run time of this process's `perl` children so far, ns (proc(5), /proc/<pid>/schedstat: first field). */
function helperRunNs(): number {
  let total = 0
  for (const task of readdirSync(`/proc/${process.pid}/task`)) {
    let children: string[]
    try {
      children = readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8').split(' ').filter((pid) => pid !== '')
    } catch {
      continue
    }
    for (const pid of children) {
      try {
        if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'perl') continue
        total += Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])
      } catch {
        // Gone meanwhile.
      }
    }
  }
  return total
}

/** `sends` sends of `program` in each form, interleaved, on a direct session with termios. */
async function benchProgram(c: Composition, program: (typeof PROGRAMS)[number], sends: number) {
  // With termios, as the plugin's sessions are: the input queue is part of the consumption check.
  const session = (await c.direct({ termios: true })) as LocalSession
  // Bench-only instrumentation: when each write reached the terminal.
  const terminal = (session as unknown as { terminal: { write(data: string): Promise<void> } }).terminal
  const write = terminal.write.bind(terminal)
  let writes: { data: string; at: number }[] = []
  terminal.write = (data: string) => {
    writes.push({ data, at: performance.now() })
    return write(data)
  }
  /** One send of the program's text written as `steps`: its wall time, conch's and the helper's CPU (ms), how it settled. */
  const measured = async (steps: WriteStep[]) => {
    const helperBefore = helperRunNs()
    const { value: result, ms, cpuMs: cpu } = await timed(() => session.startSend({ text: program.text, submit: true, steps }).done)
    const helper = (helperRunNs() - helperBefore) / 1e6
    return { ms, cpu, helper, tier: `${result.waitReason}/${result.evidence.tier}${result.evidence.corroborated ? '+corroborated' : ''}` }
  }
  const form = () => ({ ms: [] as number[], cpu: 0, helper: 0, tiers: [] as string[] })
  const separate = form()
  const glued = form()
  const gaps: number[] = []
  try {
    if (program.start !== undefined) await session.startSend({ text: program.start, submit: true }).done
    for (let i = -5; i < sends; i++) {
      writes = []
      const apart = await measured([{ data: program.text, afterConsumed: false, echo: program.text }, { data: '\r', afterConsumed: true, echo: '' }])
      const enter = writes.findIndex((entry) => entry.data === '\r')
      const gap = enter > 0 ? writes[enter]!.at - writes[enter - 1]!.at : undefined
      const together = await measured([{ data: `${program.text}\r`, afterConsumed: false, echo: program.text }])
      if (i < 0) continue
      if (gap !== undefined) gaps.push(gap)
      for (const [into, send] of [[separate, apart], [glued, together]] as const) {
        into.ms.push(send.ms)
        into.cpu += send.cpu
        into.helper += send.helper
        into.tiers.push(send.tier)
      }
    }
  } finally {
    await session.close()
  }
  return {
    separate_p50_ms: round(median(separate.ms)),
    glued_p50_ms: round(median(glued.ms)),
    added_p50_ms: round(median(separate.ms) - median(glued.ms)),
    enter_gap_p50_ms: round(median(gaps), 3),
    enter_gap_p95_ms: round(percentile(gaps, 95), 3),
    /** conch's CPU per send, ms (user + system). */
    separate_cpu_ms: round(separate.cpu / sends, 3),
    glued_cpu_ms: round(glued.cpu / sends, 3),
    /** The termios helper's CPU per send, ms (0 when it never ran). */
    separate_helper_cpu_ms: round(separate.helper / sends, 3),
    glued_helper_cpu_ms: round(glued.helper / sends, 3),
    separate_tiers: tally(separate.tiers),
    glued_tiers: tally(glued.tiers),
    sends,
  }
}

export async function benchSubmit(c: Composition, sends: number, progress: (message: string) => void): Promise<SubmitFigures> {
  const figures: SubmitFigures = {}
  for (const program of PROGRAMS) {
    const f = await benchProgram(c, program, sends)
    figures[program.key] = f
    progress(`submit: ${program.key} separate ${f.separate_p50_ms} ms, glued ${f.glued_p50_ms} ms, Enter gap ${f.enter_gap_p50_ms} ms (p95 ${f.enter_gap_p95_ms}), CPU per send separate ${f.separate_cpu_ms} + helper ${f.separate_helper_cpu_ms} ms, glued ${f.glued_cpu_ms} + helper ${f.glued_helper_cpu_ms} ms`)
  }
  return figures
}

export const submitBench: Bench = {
  keys: ['submit'],
  needs: [{ keys: ['submit'], program: 'node', args: ['-e', ''] }],
  async run(c) {
    progress(`submit: ${PLAN.submitSends} sends each at bash, python3 and node, Enter apart and glued, interleaved`)
    return { submit: await benchSubmit(c!, PLAN.submitSends, progress) }
  },
  rows() {
    return []
  },
}
