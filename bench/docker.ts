/**
 * `docker`: terminals in an agent's container (`@conch/sandbox-docker`) against terminals in an
 * agent's bubblewrap sandbox on the host, same run, each through its own composition under
 * workspace-write (the figures: docs/performance.md). The container side needs a daemon and the
 * test image (scripts/start-dockerd.sh, scripts/build-test-image.sh); without them it says why
 * and reports nothing.
 */
import AgentService from '../packages/core/agent/src/index.ts'
import PtcService from '../packages/ptc/ptc/src/index.ts'
import * as ptcNode from '../packages/ptc/ptc-node/src/index.ts'
import * as toolPtc from '../packages/ptc/tool-ptc/src/index.ts'
import * as ptyLocal from '../packages/pty/pty-local/src/index.ts'
import * as sandboxDocker from '../packages/sandbox/sandbox-docker/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import { terminalStack } from './compose.ts'
import { delay, expectReady, progress, timed } from './harness.ts'
import type { Bench } from './registry.ts'
import { median, ratio, round } from './stats.ts'
import { ms, x } from './table.ts'

/** The image the container side runs in. */
const IMAGE = process.env.CONCH_TEST_IMAGE ?? 'conch-test:bookworm'
const PLAN = { agents: 10, sends: 100, programs: 10, pauseMs: 3000 }

type DockerSide = Awaited<ReturnType<typeof measure>>

export interface DockerFigures {
  host: DockerSide
  container: DockerSide
  image: string
  agents: number
  sends: number
  programs: number
}

/** The sides, as data: the provider row each composition loads. */
const SIDES = [
  { side: 'host', label: 'bubblewrap', plugin: sandboxLocal, config: sandboxLocal.Config.parse({}) },
  { side: 'container', label: 'docker', plugin: sandboxDocker, config: sandboxDocker.Config.parse({ image: IMAGE }) },
] as const

async function measure(side: (typeof SIDES)[number]) {
  const stack = await terminalStack('docker-', 'workspace-write', ptyLocal.Config.parse({}), side)
  const { ctx, workspace, load } = stack
  try {
    await load(PtcService, PtcService.Config.parse({}))
    await load(ptcNode, ptcNode.Config.parse({}))
    await load(toolPtc, toolPtc.Config.parse({}))
    await load(AgentService, AgentService.Config.parse({}))
    const pty = ctx.pty
    const first: number[] = []
    const later: number[] = []
    const bash: number[] = []
    const python: number[] = []
    const cold: number[] = []
    const warm: number[] = []
    const send = async (owner: Parameters<typeof pty.startSend>[0], id: string, text: string, into?: number[]) => {
      const { value: result, ms } = await timed(() => pty.startSend(owner, id, { text, submit: true }).done)
      into?.push(ms)
      expectReady(`docker ${side.label} ${JSON.stringify(text)}`, result)
    }
    for (let i = 0; i < PLAN.agents; i++) {
      const agent = await ctx.agents.create({ workspaceRoot: workspace })
      try {
        const opened: string[] = []
        for (const into of [first, later]) {
          const { value, ms } = await timed(() => pty.spawn(agent, { type: 'shell' }))
          opened.push(value.sessionId)
          into.push(ms)
        }
        const program = async (into: number[]) => {
          const callId = `program-${into.length}`
          const { value: result, ms } = await timed(() => ctx.tools.execute(toolPtc.RUN_CODE, { code: 'return 1' }, { agent, signal: new AbortController().signal, callId }))
          into.push(ms)
          if (result.isError === true || !result.content[0]?.text.startsWith('1\n')) throw new Error(`docker ${side.label}: run_code answered ${JSON.stringify(result.content[0]?.text)}`)
        }
        await program(cold)
        if (i > 0) continue
        for (let k = 0; k < PLAN.programs; k++) {
          await delay(PLAN.pauseMs)
          await program(warm)
        }
        const [shell, repl] = opened as [string, string]
        for (let k = 0; k < PLAN.sends; k++) await send(agent, shell, 'true', bash)
        await send(agent, repl, 'python3 -q')
        for (let k = 0; k < PLAN.sends; k++) await send(agent, repl, 'print(1)', python)
      } finally {
        await ctx.agents.dispose(agent)
      }
    }
    const figures = {
      open_first_p50_ms: round(median(first)),
      open_later_p50_ms: round(median(later)),
      bash_true_p50_ms: round(median(bash)),
      python3_p50_ms: round(median(python)),
      run_code_cold_p50_ms: round(median(cold)),
      run_code_warm_p50_ms: round(median(warm)),
    }
    progress(`docker ${side.label}: first open p50 ${figures.open_first_p50_ms} ms, later open ${figures.open_later_p50_ms} ms, bash true ${figures.bash_true_p50_ms} ms, python3 ${figures.python3_p50_ms} ms, run_code cold ${figures.run_code_cold_p50_ms} ms, warm ${figures.run_code_warm_p50_ms} ms`)
    return figures
  } finally {
    await stack.dispose()
  }
}

/** Why the container side cannot run here, or undefined. */
function unavailable(): Promise<string | undefined> {
  return sandboxDocker
    .dockerProvider(SIDES[1].config)
    .check()
    .then(
      () => undefined,
      (error: Error) => error.message,
    )
}

export const dockerBench: Bench = {
  keys: ['docker'],
  composed: false,
  async run() {
    const reason = await unavailable()
    if (reason !== undefined) {
      progress(`docker: skipped: ${reason}`)
      return {}
    }
    progress(`docker: ${PLAN.agents} agents with two terminals each, ${PLAN.sends} sends of bash true and python3 print(1), run_code programs (one cold per agent, ${PLAN.programs} warm), in bubblewrap and in ${IMAGE}`)
    const host = await measure(SIDES[0])
    const container = await measure(SIDES[1])
    return { docker: { host, container, image: IMAGE, agents: PLAN.agents, sends: PLAN.sends, programs: PLAN.programs } }
  },
  rows(r, verdict) {
    const d = r.docker
    if (!d) return []
    const row = (name: string, key: keyof DockerSide, figure: string): string[] => [
      `docker ${name}`,
      ms(d.container[key]),
      `bubblewrap ${ms(d.host[key])}`,
      x(ratio(d.container[key], d.host[key])),
      verdict(figure),
    ]
    return [
      row('first open p50', 'open_first_p50_ms', 'docker.container.open_first_p50_ms'),
      row('later open p50', 'open_later_p50_ms', 'docker.container.open_later_p50_ms'),
      row('bash true p50', 'bash_true_p50_ms', 'docker.container.bash_true_p50_ms'),
      row('python3 p50', 'python3_p50_ms', 'docker.container.python3_p50_ms'),
      row('run_code cold p50', 'run_code_cold_p50_ms', 'docker.container.run_code_cold_p50_ms'),
      row('run_code warm p50', 'run_code_warm_p50_ms', 'docker.container.run_code_warm_p50_ms'),
    ]
  },
}
