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
import type { LocalSession } from '../packages/pty/pty-local/src/session.ts'
import type { Composition } from './compose.ts'
import { median, percentile, round, tally } from './stats.ts'
import { PLAN, progress } from './harness.ts'
import type { Bench } from './registry.ts'

export interface SubmitFigures {
  /** Per program: end-to-end p50 of each form, their difference, and the text→Enter gap. */
  [program: string]: {
    separate_p50_ms: number
    glued_p50_ms: number
    added_p50_ms: number
    enter_gap_p50_ms: number
    enter_gap_p95_ms: number
    /** conch's CPU per send, ms (user + system). */
    separate_cpu_ms: number
    glued_cpu_ms: number
    /** The termios helper's CPU per send, ms (0 when it never ran). */
    separate_helper_cpu_ms: number
    glued_helper_cpu_ms: number
    separate_tiers: Record<string, number>
    glued_tiers: Record<string, number>
    sends: number
  }
}

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

/** conch's CPU so far, ms. */
function cpuMs(): number {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

export async function benchSubmit(c: Composition, sends: number, progress: (message: string) => void): Promise<SubmitFigures> {
  const figures: SubmitFigures = {}
  for (const program of PROGRAMS) {
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
    try {
      if (program.start !== undefined) await session.startSend({ text: program.start, submit: true }).done
      const separate: number[] = []
      const glued: number[] = []
      const gaps: number[] = []
      const tiers = { separate: [] as string[], glued: [] as string[] }
      const cpu = { separate: 0, glued: 0, separateHelper: 0, gluedHelper: 0 }
      for (let i = -5; i < sends; i++) {
        writes = []
        let helperBefore = helperRunNs()
        let cpuBefore = cpuMs()
        let start = performance.now()
        const apart = await session.startSend({ text: program.text, submit: true, steps: [{ data: program.text, afterConsumed: false, echo: program.text }, { data: '\r', afterConsumed: true, echo: '' }] }).done
        const apartMs = performance.now() - start
        const apartCpu = cpuMs() - cpuBefore
        const apartHelper = (helperRunNs() - helperBefore) / 1e6
        const enter = writes.findIndex((entry) => entry.data === '\r')
        const gap = enter > 0 ? writes[enter]!.at - writes[enter - 1]!.at : undefined
        helperBefore = helperRunNs()
        cpuBefore = cpuMs()
        start = performance.now()
        const together = await session.startSend({ text: program.text, submit: true, steps: [{ data: `${program.text}\r`, afterConsumed: false, echo: program.text }] }).done
        const togetherMs = performance.now() - start
        const togetherCpu = cpuMs() - cpuBefore
        const togetherHelper = (helperRunNs() - helperBefore) / 1e6
        if (i < 0) continue
        cpu.separate += apartCpu
        cpu.glued += togetherCpu
        cpu.separateHelper += apartHelper
        cpu.gluedHelper += togetherHelper
        separate.push(apartMs)
        glued.push(togetherMs)
        if (gap !== undefined) gaps.push(gap)
        tiers.separate.push(`${apart.waitReason}/${apart.evidence.tier}${apart.evidence.corroborated ? '+corroborated' : ''}`)
        tiers.glued.push(`${together.waitReason}/${together.evidence.tier}${together.evidence.corroborated ? '+corroborated' : ''}`)
      }
      figures[program.key] = {
        separate_p50_ms: round(median(separate)),
        glued_p50_ms: round(median(glued)),
        added_p50_ms: round(median(separate) - median(glued)),
        enter_gap_p50_ms: round(median(gaps), 3),
        enter_gap_p95_ms: round(percentile(gaps, 95), 3),
        separate_cpu_ms: round(cpu.separate / sends, 3),
        glued_cpu_ms: round(cpu.glued / sends, 3),
        separate_helper_cpu_ms: round(cpu.separateHelper / sends, 3),
        glued_helper_cpu_ms: round(cpu.gluedHelper / sends, 3),
        separate_tiers: tally(tiers.separate),
        glued_tiers: tally(tiers.glued),
        sends,
      }
      progress(`submit: ${program.key} separate ${figures[program.key]!.separate_p50_ms} ms, glued ${figures[program.key]!.glued_p50_ms} ms, Enter gap ${figures[program.key]!.enter_gap_p50_ms} ms (p95 ${figures[program.key]!.enter_gap_p95_ms}), CPU per send separate ${figures[program.key]!.separate_cpu_ms} + helper ${figures[program.key]!.separate_helper_cpu_ms} ms, glued ${figures[program.key]!.glued_cpu_ms} + helper ${figures[program.key]!.glued_helper_cpu_ms} ms`)
    } finally {
      await session.close()
    }
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
