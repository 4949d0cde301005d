/**
 * `submit` — what Enter as its own key press costs: the same send at bash's prompt and in a
 * REPL, once with the text and Enter as two writes (Enter after the text was consumed, the
 * default) and once as one glued write, interleaved in the same run. Figures: end-to-end p50
 * of each and their difference, and the gap between the text's write and Enter's (the wait for
 * consumption) as the terminal saw it.
 */
import type { LocalSession } from '../packages/pty/pty-local/src/session.ts'
import type { Composition } from './compose.ts'
import { median, percentile, round, tally } from './stats.ts'

export interface SubmitFigures {
  /** Per program: end-to-end p50 of each form, their difference, and the text→Enter gap. */
  [program: string]: {
    separate_p50_ms: number
    glued_p50_ms: number
    added_p50_ms: number
    enter_gap_p50_ms: number
    enter_gap_p95_ms: number
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

export async function benchSubmit(c: Composition, sends: number, progress: (message: string) => void): Promise<SubmitFigures> {
  const figures: SubmitFigures = {}
  for (const program of PROGRAMS) {
    const session = (await c.direct()) as LocalSession
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
      for (let i = -5; i < sends; i++) {
        writes = []
        let start = performance.now()
        const apart = await session.startSend({ text: program.text, submit: true }).done
        const apartMs = performance.now() - start
        const enter = writes.findIndex((entry) => entry.data === '\r')
        const gap = enter > 0 ? writes[enter]!.at - writes[enter - 1]!.at : undefined
        start = performance.now()
        const together = await session.startSend({ text: program.text, submit: true, steps: [{ data: `${program.text}\r`, afterConsumed: false, echo: program.text }] }).done
        const togetherMs = performance.now() - start
        if (i < 0) continue
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
        separate_tiers: tally(tiers.separate),
        glued_tiers: tally(tiers.glued),
        sends,
      }
      progress(`submit: ${program.key} separate ${figures[program.key]!.separate_p50_ms} ms, glued ${figures[program.key]!.glued_p50_ms} ms, Enter gap ${figures[program.key]!.enter_gap_p50_ms} ms`)
    } finally {
      await session.close()
    }
  }
  return figures
}
