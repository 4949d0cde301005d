/**
 * `long_line`: one unbroken 50 MB line through a real terminal against the same number of bytes
 * in ordinary 80-byte lines, in the same run and the same session. The send is watched the way
 * `terminal_send` does when the caller streams progress: `readOutput()` after every parsed chunk,
 * so a consumer that re-reads the open line per chunk (quadratic in the line's length) shows up.
 */
import type { Agent } from '../packages/core/agent/src/index.ts'
import type { PtyServiceApi, SendResult } from '../packages/pty/pty/src/index.ts'
import { median, ratio, round } from './stats.ts'
import { PLAN, progress, timed } from './harness.ts'
import type { Bench } from './registry.ts'
import { ms, x } from './table.ts'

export type LongLineFigures = Awaited<ReturnType<typeof benchLongLine>>

/** A send whose output is re-read after every parsed chunk, as a streaming caller does. */
async function streamedSend(pty: PtyServiceApi, agent: Agent, sessionId: string, text: string): Promise<SendResult> {
  const operation = pty.startSend(agent, sessionId, { text, submit: true })
  let streamed = 0
  const stop = operation.onOutput(() => {
    streamed += operation.readOutput().length
  })
  try {
    const result = await operation.done
    if (streamed === 0) throw new Error('long_line: readOutput() streamed nothing')
    return result
  } finally {
    stop()
  }
}

async function benchLongLine(pty: PtyServiceApi, agent: Agent, megabytes: number, runs: number) {
  const bytes = megabytes * 1e6
  // 79 x's and the newline: 80-byte lines, `bytes` in all.
  const short = `yes ${'x'.repeat(79)} | head -c ${bytes}; echo END`
  const long = `head -c ${bytes} /dev/zero | tr '\\0' x; echo END`
  const { sessionId } = await pty.spawn(agent, { type: 'shell' })
  const longMs: number[] = []
  const shortMs: number[] = []
  const longCpu: number[] = []
  const shortCpu: number[] = []
  try {
    for (let run = 0; run < runs; run++) {
      for (const [command, wall, cpu] of [[short, shortMs, shortCpu], [long, longMs, longCpu]] as const) {
        const { ms, cpuMs, value: result } = await timed(() => streamedSend(pty, agent, sessionId, command))
        if (result.waitReason !== 'stdin_read' || !/(^|\n|x)END\n/.test(result.viewport)) {
          throw new Error(`long_line: settled ${result.waitReason} without END: ${JSON.stringify(result.viewport.slice(-200))}`)
        }
        wall.push(ms)
        cpu.push(cpuMs)
      }
    }
  } finally {
    await pty.close(agent, sessionId)
  }
  return {
    long_ms: round(median(longMs)),
    /** The same bytes in 80-byte lines. */
    short_ms: round(median(shortMs)),
    ratio: ratio(median(longMs), median(shortMs)),
    long_cpu_ms: round(median(longCpu)),
    short_cpu_ms: round(median(shortCpu)),
    megabytes,
    runs,
    units: 'wall and CPU ms of one send, median over runs; MB = 10^6 bytes written by the program',
  }
}

export const longLineBench: Bench = {
  keys: ['long_line'],
  async run(c) {
    progress(`long_line: one ${PLAN.longLineMegabytes} MB line against ${PLAN.longLineMegabytes} MB of 80-byte lines, ${PLAN.longLineRuns} runs`)
    const figures = await benchLongLine(c!.ctx.pty, c!.agent, PLAN.longLineMegabytes, PLAN.longLineRuns)
    progress(`long_line: ${figures.long_ms} ms against ${figures.short_ms} ms`)
    return { long_line: figures }
  },
  rows(r, verdict) {
    const l = r.long_line
    return l ? [[`long line ${l.megabytes} MB`, ms(l.long_ms), `short lines ${ms(l.short_ms)}`, x(l.ratio), verdict('long_line.long_ms')]] : []
  },
}
