/** What the terminal benches share: the progress line, latency summaries and the checks every send passes. */
import { execFileSync } from 'node:child_process'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import type { SendResult } from '../packages/pty/pty/src/index.ts'
import { percentile, round } from './stats.ts'

/** Sizes of every phase. */
export const PLAN = {
  bashSends: 200,
  replSends: 100,
  /** Silence-only REPL sends run in this many sessions at once (each settles after idleSilenceMs). */
  silenceSessions: 10,
  throughputLines: 3_000_000,
  throughputRuns: 3,
  parserMegabytes: 50,
  longLineMegabytes: 50,
  longLineRuns: 2,
  idleSessions: 32,
  idleSeconds: 10,
  idleBaselineSeconds: 5,
  scaleSends: 50,
  scaleSingleSends: 100,
  lifecycleRuns: 15,
  laterPairs: 3,
  descendants: 10,
  warmup: 5,
  submitSends: 100,
} as const

export const startedAt = performance.now()

/** One progress line on stderr, stamped with the seconds since the bench started. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${((performance.now() - startedAt) / 1000).toFixed(1).padStart(6)} s] ${message}\n`)
}

export const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Runs `run`; its value, the wall time and this process's CPU time (user + system) it took, ms. */
export async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number; cpuMs: number }> {
  const usage = process.cpuUsage()
  const start = performance.now()
  const value = await run()
  const ms = performance.now() - start
  const used = process.cpuUsage(usage)
  return { value, ms, cpuMs: (used.user + used.system) / 1000 }
}

/** Summary of latency samples in ms. */
export function latency(samples: readonly number[]): { p50_ms: number; p95_ms: number } {
  return { p50_ms: round(percentile(samples, 50)), p95_ms: round(percentile(samples, 95)) }
}

/** Throws when a send did not settle the way a correct terminal must. */
export function expectReady(what: string, result: SendResult, reasons: readonly string[] = ['stdin_read']): void {
  if (!reasons.includes(result.waitReason)) {
    throw new Error(`${what}: settled ${result.waitReason} (${result.evidence.detail}), expected ${reasons.join(' or ')}; viewport: ${JSON.stringify(result.viewport.slice(-300))}`)
  }
}

/** Whether a REPL's viewport shows the line `2` (the answer to `1+1`, not the echoed input). */
export function showsAnswer(viewport: string): boolean {
  return viewport.split('\n').some((line) => line.trim() === '2')
}

/** The machine and the commit a run measured. */
export function machine() {
  const cpus = os.cpus()
  const git = (...args: string[]): string | undefined => {
    try {
      return execFileSync('git', args, { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    } catch {
      return undefined
    }
  }
  const commit = git('rev-parse', '--short', 'HEAD')
  // Whether the measured packages differ from that commit (uncommitted changes under packages/).
  const changed = git('status', '--porcelain', '--', 'packages')
  return {
    node: process.version,
    cpu_model: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memory_gib: round(os.totalmem() / 2 ** 30, 1),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    date: new Date().toISOString(),
    load_average_start: os.loadavg().map((load) => round(load)),
    ...(commit !== undefined ? { commit, packages_modified: changed !== undefined && changed !== '' } : {}),
    run_seconds: 0,
  }
}

export type Machine = ReturnType<typeof machine>
