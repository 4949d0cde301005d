/**
 * `workflows`: what a model reads, how many calls it makes and how long it waits to get eight
 * everyday terminal jobs done (bench/workflows/definitions.ts) through conch's tools, through a
 * Terminus-shaped tmux harness and through a one-shot pipe tool, in the same run
 * (bench/workflows/harnesses.ts). Every run of every way must reach the workflow's end state.
 *
 * The conch terminals are unconfined (`danger-full-access`), as the tmux and pipe shells are.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import TasksService from '../packages/tasks/tasks/src/index.ts'
import * as toolTasks from '../packages/tasks/tool-tasks/src/index.ts'
import * as toolPty from '../packages/pty/tool-pty/src/index.ts'
import type { Composition } from './compose.ts'
import { progress } from './harness.ts'
import type { Bench } from './registry.ts'
import { median, ratio, round } from './stats.ts'
import { WORKFLOWS, type Workflow } from './workflows/definitions.ts'
import { runConch, runPipe, runTmux, type HarnessRun } from './workflows/harnesses.ts'

export const HARNESSES = ['conch', 'tmux', 'pipe'] as const
export type Harness = (typeof HARNESSES)[number]

/** One way's figures for one workflow (the median of the rounds). */
export interface WorkflowCost {
  bytes: number
  /** Of those, the harness's own lines (harnesses.ts, `OWN`). */
  harness_bytes: number
  calls: number
  wall_ms: number
}

export type WorkflowRow = { name: string } & Record<Harness, WorkflowCost>

const COSTS = ['bytes', 'harness_bytes', 'calls', 'wall_ms'] as const

/** Per way, the totals over the workflows (`conch_bytes`, `tmux_calls`, …). */
type Totals = Record<`${Harness}_${(typeof COSTS)[number]}`, number>

export type WorkflowFigures = Totals & {
  /** conch over tmux, in total. */
  bytes_ratio: number | undefined
  wall_ratio: number | undefined
  rounds: number
  workflows: WorkflowRow[]
}

const ROUNDS = 2

/** Per way, the median of the rounds' figures. */
export function workflowCost(runs: readonly Omit<HarnessRun, 'read'>[]): WorkflowCost {
  const of = (key: keyof WorkflowCost) => median(runs.map((run) => run[key]))
  return { bytes: of('bytes'), harness_bytes: of('harness_bytes'), calls: of('calls'), wall_ms: round(of('wall_ms')) }
}

/** The totals over the workflows and conch's ratios to the tmux harness. */
export function summarise(workflows: readonly WorkflowRow[], rounds: number): WorkflowFigures {
  const total = (harness: Harness, key: keyof WorkflowCost) => round(workflows.reduce((sum, row) => sum + row[harness][key], 0))
  return {
    ...(Object.fromEntries(COSTS.flatMap((key) => HARNESSES.map((harness) => [`${harness}_${key}`, total(harness, key)]))) as Totals),
    bytes_ratio: ratio(total('conch', 'bytes'), total('tmux', 'bytes')),
    wall_ratio: ratio(total('conch', 'wall_ms'), total('tmux', 'wall_ms')),
    rounds,
    workflows: [...workflows],
  }
}

/** A fresh workspace for one run: the workflow's files, then its setup command. */
function prepare(workflow: Workflow, dir: string): void {
  mkdirSync(dir, { recursive: true })
  for (const [path, content] of Object.entries(workflow.files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), content)
  }
  if (workflow.setup !== undefined) execFileSync('bash', ['-c', workflow.setup], { cwd: dir, stdio: 'ignore' })
}

function verify(workflow: Workflow, harness: Harness, dir: string, run: HarnessRun): void {
  const file = (path: string) => {
    try {
      return readFileSync(join(dir, path), 'utf8')
    } catch {
      return undefined
    }
  }
  const wrong = workflow.check(run.read, file)
  if (wrong !== undefined) throw new Error(`workflows: "${workflow.name}" through ${harness} did not reach its end state: ${wrong}; it read:\n${run.read.slice(-2000)}`)
}

async function benchWorkflows(c: Composition): Promise<WorkflowFigures> {
  const fibers = [
    await c.ctx.plugin(TasksService, TasksService.Config.parse({})),
    await c.ctx.plugin(toolPty, toolPty.Config.parse({})),
    await c.ctx.plugin(toolTasks, toolTasks.Config.parse({})),
  ]
  const runs = new Map<string, HarnessRun[]>()
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [k, workflow] of WORKFLOWS.entries()) {
        progress(`workflows: round ${round + 1}/${ROUNDS}, ${workflow.name}`)
        for (const harness of HARNESSES) {
          const dir = join(c.workspace, `workflow-${round}-${k}-${harness}`)
          prepare(workflow, dir)
          const run = harness === 'conch' ? await runConch(c, workflow, dir) : harness === 'tmux' ? await runTmux(workflow, dir) : await runPipe(workflow, dir)
          verify(workflow, harness, dir, run)
          runs.set(`${k}/${harness}`, [...(runs.get(`${k}/${harness}`) ?? []), run])
        }
      }
    }
  } finally {
    for (const fiber of fibers.reverse()) await fiber.dispose()
  }
  const rows = WORKFLOWS.map((workflow, k) => ({ name: workflow.name, ...Object.fromEntries(HARNESSES.map((harness) => [harness, workflowCost(runs.get(`${k}/${harness}`)!)])) }) as WorkflowRow)
  const figures = summarise(rows, ROUNDS)
  progress(`workflows: conch ${figures.conch_bytes} B in ${figures.conch_calls} calls, ${figures.conch_wall_ms} ms; tmux ${figures.tmux_bytes} B, ${figures.tmux_wall_ms} ms; pipe ${figures.pipe_bytes} B, ${figures.pipe_wall_ms} ms`)
  return figures
}

const cost = (w: WorkflowCost) => `${w.bytes} B, ${w.calls} calls, ${w.wall_ms} ms`

export const workflowsBench: Bench = {
  keys: ['workflows'],
  needs: ['tmux', 'gcc', 'gdb', 'git', 'vim', 'less', 'curl', 'python3'].map((program) => ({ keys: ['workflows'] as const, program, args: program === 'tmux' ? ['-V'] : ['--version'] })),
  async run(c) {
    return { workflows: await benchWorkflows(c!) }
  },
  rows(r, verdict) {
    const w = r.workflows
    if (!w) return []
    return [
      ...w.workflows.map((row) => [`workflow ${row.name}`, cost(row.conch), `tmux ${cost(row.tmux)}; pipe ${cost(row.pipe)}`, '', '']),
      ['workflows: bytes the model read, total', `${w.conch_bytes} B`, `tmux ${w.tmux_bytes} B; pipe ${w.pipe_bytes} B`, w.bytes_ratio === undefined ? '' : `×${w.bytes_ratio}`, verdict('workflows.conch_bytes')],
      ['  of which the harness\'s own lines', `${w.conch_harness_bytes} B`, `tmux ${w.tmux_harness_bytes} B; pipe ${w.pipe_harness_bytes} B`, '', ''],
      ['workflows: tool calls, total', String(w.conch_calls), `tmux ${w.tmux_calls}; pipe ${w.pipe_calls}`, '', ''],
      ['workflows: wall time, total', `${w.conch_wall_ms} ms`, `tmux ${w.tmux_wall_ms} ms; pipe ${w.pipe_wall_ms} ms`, w.wall_ratio === undefined ? '' : `×${w.wall_ratio}`, verdict('workflows.conch_wall_ms')],
    ]
  },
}
