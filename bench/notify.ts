/**
 * `notify`: push, not poll (the scenario: docs/performance.md). Each job writes the time
 * (`date +%s%N`) just before its event; the latency is from there to the model request that
 * carries the notification. Polling calls are counted from the model's responses. In the same
 * run, the pattern job again, waited for in the same turn (`task_output {wait: true}`): from
 * its event to the model request carrying the wait's result.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ModelAdapter, ModelChunk, ModelRequest } from '../packages/core/llm/src/index.ts'
import TasksService from '../packages/tasks/tasks/src/index.ts'
import * as toolTasks from '../packages/tasks/tool-tasks/src/index.ts'
import * as toolPty from '../packages/pty/tool-pty/src/index.ts'
import type { Composition } from './compose.ts'
import { progress } from './harness.ts'
import type { Bench } from './registry.ts'
import { median, round } from './stats.ts'
import { ms } from './table.ts'

export type NotifyFigures = Awaited<ReturnType<typeof benchNotify>>

const RUNS = 5
const POLLING = new Set(['task_output', 'task_list'])

/** The three jobs: what each types, and the event its notification must name. */
const JOBS = [
  { kind: 'exit', text: (file: string) => `sleep 0.3; date +%s%N >${file}; (exit 2)`, event: /^exited 2$/, options: { notify: true } },
  { kind: 'tty_read', text: (file: string) => `sleep 0.6; date +%s%N >${file}; read -r -p 'Password: ' x`, event: /^waiting for input: Password:$/, options: { notify: true } },
  { kind: 'pattern', text: (file: string) => `sleep 0.9; date +%s%N >${file}; echo Listening on 8080; sleep 60`, event: /^matched /, options: { notifyOn: 'Listening on \\d+' } },
] as const

const nowMs = () => performance.timeOrigin + performance.now()

function response(calls: { name: string; arguments: object }[], text = ''): AsyncIterable<ModelChunk> {
  return (async function* () {
    if (text !== '') yield { type: 'text-delta', text } as ModelChunk
    for (const [index, call] of calls.entries()) {
      yield { type: 'tool-call-delta', index, id: `call_${index}`, name: call.name, argumentsDelta: JSON.stringify(call.arguments) } as ModelChunk
    }
    yield { type: 'finish', reason: calls.length ? 'tool_calls' : 'stop' } as ModelChunk
  })()
}

async function benchNotify(c: Composition) {
  const fibers = [
    await c.ctx.plugin(TasksService, TasksService.Config.parse({})),
    await c.ctx.plugin(toolPty, toolPty.Config.parse({})),
    await c.ctx.plugin(toolTasks, toolTasks.Config.parse({})),
  ]
  const latencies: Record<string, number[]> = { exit: [], tty_read: [], pattern: [] }
  const waited: number[] = []
  let polling = 0
  let modelCalls = 0
  try {
    for (let run = 0; run < RUNS; run++) {
      const files = JOBS.map((job) => `notify-${run}-${job.kind}`)
      // Each job's task id, from its start line: an id-less background send opens a shell of its own.
      let tasks: string[] = []
      const steps: ((request: ModelRequest) => AsyncIterable<ModelChunk>)[] = [
        () => response(JOBS.map((job, k) => ({ name: 'terminal_send', arguments: { text: job.text(files[k]!), run_in_background: true, ...job.options } }))),
        (request) => {
          tasks = request.messages.flatMap((message) => (message.role === 'tool' ? [...message.content.matchAll(/^\[task: (task-\d+) started/gm)].map((m) => m[1]!) : []))
          if (tasks.length !== JOBS.length) throw new Error(`notify: ${tasks.length} of the ${JOBS.length} background sends started a task`)
          return response([], 'Waiting for the three jobs.')
        },
      ]
      const seen = new Set<string>()
      const adapter: ModelAdapter = {
        provider: 'bench-notify',
        stream(request) {
          modelCalls++
          const at = nowMs()
          const step = steps.shift()
          if (step) return step(request)
          // A wake: the prompt is the notifications' text.
          const last = request.messages.at(-1)
          const text = last?.role === 'user' ? last.content : ''
          for (const [k, job] of JOBS.entries()) {
            const header = text.split('\n').find((line) => line.startsWith(`[notification: ${tasks[k]} `))
            if (header === undefined || seen.has(job.kind)) continue
            const event = /^\[notification: task-\d+ (.*?)(?:; evidence: .*)?\]$/.exec(header)?.[1] ?? ''
            if (!job.event.test(event)) throw new Error(`notify: the ${job.kind} job's notification says ${JSON.stringify(event)}`)
            seen.add(job.kind)
            const eventAt = Number(readFileSync(join(c.workspace, files[k]!), 'utf8').trim()) / 1e6
            latencies[job.kind]!.push(at - eventAt)
          }
          return response([], 'Noted.')
        },
      }
      const unregister = c.ctx.llm.register(adapter)
      const agent = await c.ctx.agents.create({ workspaceRoot: c.workspace })
      try {
        const result = await c.ctx.agents.run(agent, {
          prompt: 'run three jobs in the background and wait for them',
          onEvent: (event) => {
            if (event.type === 'tool-call' && POLLING.has(event.name)) polling++
          },
        })
        if (result.status !== 'completed') throw new Error(`notify: the run ended ${result.status}: ${result.text}`)
        if (seen.size !== JOBS.length) throw new Error(`notify: the model was woken for ${[...seen].join(', ') || 'nothing'}, not all three jobs`)
      } finally {
        await c.ctx.agents.dispose(agent)
        unregister()
      }
      waited.push(await waitedPattern(c, `notify-${run}-waited`))
    }
  } finally {
    for (const fiber of fibers.reverse()) await fiber.dispose()
  }
  const all = Object.values(latencies).flat()
  const figures = {
    /** `task_output` / `task_list` calls the model made, all runs. */
    polling_calls: polling,
    /** Start, end turn, and one per wake. */
    model_calls_per_run: round(modelCalls / RUNS, 1),
    /** Event → the model request carrying its notification, ms. */
    latency_p50_ms: round(median(all)),
    latency_max_ms: round(Math.max(...all)),
    exit_p50_ms: round(median(latencies['exit']!)),
    tty_read_p50_ms: round(median(latencies['tty_read']!)),
    pattern_p50_ms: round(median(latencies['pattern']!)),
    /** The pattern job's event → the model request carrying `task_output {wait: true}`'s result (the same turn), ms. */
    waited_pattern_p50_ms: round(median(waited)),
    waited_pattern_max_ms: round(Math.max(...waited)),
    runs: RUNS,
  }
  progress(`notify: ${polling} polling calls, latency p50 ${figures.latency_p50_ms} ms, max ${figures.latency_max_ms} ms`)
  return figures
}

/** The pattern job, waited for by `task_output {wait: true}` in the turn that started it: its event → the next model request, ms. */
async function waitedPattern(c: Composition, file: string): Promise<number> {
  const job = JOBS.find((candidate) => candidate.kind === 'pattern')!
  let latency: number | undefined
  const toolText = (request: ModelRequest) => {
    const last = request.messages.at(-1)
    return last?.role === 'tool' ? last.content : ''
  }
  const steps: ((request: ModelRequest) => AsyncIterable<ModelChunk>)[] = [
    () => response([{ name: 'terminal_send', arguments: { text: job.text(file), run_in_background: true, ...job.options } }]),
    (request) => {
      const taskId = /^\[task: (task-\d+) started/m.exec(toolText(request))?.[1]
      if (taskId === undefined) throw new Error('notify: the waited background send started no task')
      return response([{ name: 'task_output', arguments: { taskId, wait: true } }])
    },
    (request) => {
      const at = nowMs()
      if (!/\[status: running, matched "/.test(toolText(request))) throw new Error(`notify: the wait returned ${JSON.stringify(toolText(request))}, not at the match`)
      latency = at - Number(readFileSync(join(c.workspace, file), 'utf8').trim()) / 1e6
      return response([], 'Ready.')
    },
  ]
  const unregister = c.ctx.llm.register({ provider: 'bench-notify-wait', stream: (request) => steps.shift()!(request) })
  const agent = await c.ctx.agents.create({ workspaceRoot: c.workspace })
  try {
    const result = await c.ctx.agents.run(agent, { prompt: 'start a server and wait until it is ready' })
    if (result.status !== 'completed' || latency === undefined) throw new Error(`notify: the waited run ended ${result.status}: ${result.text}`)
    return latency
  } finally {
    await c.ctx.agents.dispose(agent)
    unregister()
  }
}

export const notifyBench: Bench = {
  keys: ['notify'],
  async run(c) {
    return { notify: await benchNotify(c!) }
  },
  rows(r, verdict) {
    if (!r.notify) return []
    const n = r.notify
    return [
      ['notify: polling calls (3 background jobs)', String(n.polling_calls), `${n.model_calls_per_run} model calls per run`, '', verdict('notify.polling_calls')],
      [
        'notify: event → notification max',
        ms(n.latency_max_ms),
        `p50 ${ms(n.latency_p50_ms)}; exit ${ms(n.exit_p50_ms)}, tty read ${ms(n.tty_read_p50_ms)}, pattern ${ms(n.pattern_p50_ms)}`,
        '',
        verdict('notify.latency_max_ms'),
      ],
      ['notify: pattern → task_output wait result', ms(n.waited_pattern_max_ms), `p50 ${ms(n.waited_pattern_p50_ms)} (same turn; woken: ${ms(n.pattern_p50_ms)})`, '', ''],
    ]
  },
}
