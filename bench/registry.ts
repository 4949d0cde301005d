/**
 * The benches `pnpm bench` runs, in the order it runs them, and the shape of bench/results.json.
 * Each bench lives in its own file and fills one or more keys of the results.
 */
import type { Composition } from './compose.ts'
import type { Machine } from './harness.ts'
import { bashTrueBench, type BashTrueFigures } from './bash-true.ts'
import { dockerBench, type DockerFigures } from './docker.ts'
import { idleScaleBench, type IdleFigures, type ScaleFigures } from './idle-scale.ts'
import { lifecycleBench, type LifecycleFigures } from './lifecycle.ts'
import { longLineBench, type LongLineFigures } from './long-line.ts'
import { notifyBench, type NotifyFigures } from './notify.ts'
import { parserBench, type ParserFigures } from './parser.ts'
import { poolBench, type PoolFigures } from './pool.ts'
import { ptcBench, type PtcFigures } from './ptc.ts'
import { replBench, type ReplFigures } from './repl.ts'
import { startupBench, type StartupFigures } from './startup.ts'
import { subagentsBench, type SubagentFigures } from './subagents.ts'
import { submitBench, type SubmitFigures } from './submit.ts'
import { throughputBench, type ThroughputFigures } from './throughput.ts'
import { workflowsBench, type WorkflowFigures } from './workflows.ts'

/** The keys of results.json, in the order docs/performance.md lists them (and the table prints them). */
export const KEYS = ['bash_true', 'python_repl', 'node_repl', 'throughput', 'parser', 'idle', 'scale', 'lifecycle', 'ptc', 'long_line', 'startup', 'subagents', 'pool', 'submit', 'notify', 'workflows', 'docker'] as const
export type Key = (typeof KEYS)[number]

export interface Results {
  bash_true?: BashTrueFigures
  python_repl?: ReplFigures
  node_repl?: ReplFigures
  throughput?: ThroughputFigures
  parser?: ParserFigures
  idle?: IdleFigures
  scale?: ScaleFigures
  lifecycle?: LifecycleFigures
  ptc?: PtcFigures
  long_line?: LongLineFigures
  startup?: StartupFigures
  subagents?: SubagentFigures
  pool?: PoolFigures
  submit?: SubmitFigures
  notify?: NotifyFigures
  workflows?: WorkflowFigures
  docker?: DockerFigures
  machine: Machine
}

/** The verdict cell of a figure's row: `met (…)`, `MISSED by … (…)`, or empty without a target. */
export type Verdict = (figure: string) => string

export interface Bench {
  /** The results.json keys it fills; it runs when any of them is selected. */
  keys: readonly Key[]
  /** Programs the selected keys start: a missing one stops the run before anything is measured. */
  needs?: readonly { keys: readonly Key[]; program: string; args: readonly string[] }[]
  /** `false`: runs before the terminal composition is made (the composition is then not passed). */
  composed?: false
  run(c: Composition | undefined, only: ReadonlySet<Key>): Promise<Partial<Results>>
  /** Its rows of the printed table, for the keys present in `r`. */
  rows(r: Results, verdict: Verdict): string[][]
}

/** In running order. */
export const BENCHES: readonly Bench[] = [parserBench, bashTrueBench, replBench, throughputBench, idleScaleBench, lifecycleBench, ptcBench, startupBench, subagentsBench, poolBench, longLineBench, submitBench, notifyBench, workflowsBench, dockerBench]
