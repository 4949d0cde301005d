/**
 * `pool`: the warm CLI pool (@conch/pty-pool) against a fresh one-shot spawn of the same CLI for
 * the same prompt, in the same run, for the real Claude Code and Codex binaries from .products/
 * against the fake model server: boots, warm invokes, one-shot runs and each CLI's own per-turn
 * floors. The figures and the POOL_BENCH_* variables are in the @conch/pty-pool README
 * ("Performance"); the targets in targets.ts. `pnpm bench:pool` runs it alone and prints JSON.
 */
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync, type Dirent } from 'node:fs'
import os, { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Context } from 'cordis'
import SubprocessService from '../packages/subprocess/subprocess/src/index.ts'
import AgentService, { type Agent } from '../packages/core/agent/src/index.ts'
import LlmService from '../packages/core/llm/src/index.ts'
import SessionService from '../packages/core/session/src/index.ts'
import ToolsService from '../packages/core/tools/src/index.ts'
import PtyService from '../packages/pty/pty/src/index.ts'
import * as ptyLocal from '../packages/pty/pty-local/src/index.ts'
import SandboxService, { startEgressProxy } from '../packages/sandbox/sandbox/src/index.ts'
import * as sandboxDocker from '../packages/sandbox/sandbox-docker/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import SandboxPolicyService from '../packages/sandbox/sandbox-policy/src/index.ts'
import { BUILTIN_KINDS, loadPoolConfig, policyTerminals, ptyTerminals, PtyPool, type PoolDeps } from '../packages/pool/pty-pool/src/index.ts'
import type { FakeModelServer } from '../packages/test-support/src/fake-model/index.ts'
import { CLAUDE_BIN, CODEX_BIN, CONCH_BIN, claudeEnv, claudeKind, codexEnv, codexKind, startModel } from '../packages/test-support/src/products.ts'
import { TEST_IMAGE } from '../packages/test-support/src/docker.ts'
import { progress } from './harness.ts'
import type { Bench } from './registry.ts'
import { median, percentile, ratio, round } from './stats.ts'
import { ms, x } from './table.ts'

type Kind = 'claude' | 'codex'

type PoolKindFigures = Awaited<ReturnType<typeof benchKind>>

export interface PoolFigures {
  runs: number
  worker: 'managed' | 'in-process'
  terminal: 'conch' | 'unconfined'
  sandbox: 'bubblewrap' | 'docker'
  claude?: PoolKindFigures
  codex?: PoolKindFigures
  /** Products not installed; their rows are skipped. */
  skipped: string[]
}

export interface PoolOptions {
  runs: number
  kinds: readonly Kind[]
  worker: 'managed' | 'in-process'
  terminal: 'conch' | 'unconfined'
  /** Under `terminal: conch`, in-process: the agent's sandbox (`docker`: its container). */
  sandbox: 'bubblewrap' | 'docker'
}

/** The fake model's host as an agent in a container reaches it: through the egress proxy, resolved to 127.0.0.1. */
const MODEL_HOST = 'model.test'

const BINARIES: Record<Kind, string> = { claude: CLAUDE_BIN, codex: CODEX_BIN }

export async function benchPool(options: PoolOptions): Promise<PoolFigures> {
  const skipped = options.kinds.filter((kind) => !existsSync(BINARIES[kind])).map((kind) => `${kind}: not installed (${BINARIES[kind]}; run scripts/install-products.sh)`)
  for (const note of skipped) progress(`pool: skipping ${note}`)
  const kinds = options.kinds.filter((kind) => existsSync(BINARIES[kind]))
  const figures: PoolFigures = { runs: options.runs, worker: options.worker, terminal: options.terminal, sandbox: options.sandbox, skipped }
  if (kinds.length === 0) return figures
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  const workspace = realpathSync(mkdtempSync(join('/var/tmp', 'pool-bench-ws-')))
  const docker = options.sandbox === 'docker'
  const provider = docker
    ? { name: 'sandbox-docker', inject: ['sandbox'], apply: (inner: Context) => sandboxDocker.apply(inner, sandboxDocker.Config.parse({ image: TEST_IMAGE }), { startEgressProxy: (proxy) => startEgressProxy({ ...proxy, resolve: async (host) => (host === MODEL_HOST ? ['127.0.0.1'] : []) }) }) }
    : sandboxLocal
  const model = await startModel()
  // The allowlist names the model's port: a pattern without one allows 443 and 80 only.
  const policy = { mode: 'workspace-write', workspaceRoot: workspace, ...(docker && { network: 'allow', allow: [`${MODEL_HOST}:${new URL(model.url).port}`] }) }
  for (const [plugin, config] of [[SubprocessService, SubprocessService.Config.parse({})], [SessionService, {}], [ToolsService, {}], [LlmService, {}], [AgentService, {}], [SandboxService, {}], [provider, {}], [SandboxPolicyService, policy], [PtyService, {}], [ptyLocal, {}]] as const) {
    fibers.push(await ctx.plugin(plugin as never, config as never))
  }
  try {
    // An agent per kind: its sandbox (a container) is made with what that kind's pool provisioned.
    for (const kind of kinds) {
      const owner = options.terminal === 'conch' ? await ctx.agents.create() : undefined
      try {
        figures[kind] = await benchKind(kind, options, { ctx, owner, model, workspace })
      } finally {
        if (owner) await ctx.agents.dispose(owner)
      }
    }
  } finally {
    await model.close()
    for (const fiber of fibers.reverse()) await fiber.dispose()
    rmSync(workspace, { recursive: true, force: true })
  }
  return figures
}

async function benchKind(kind: Kind, options: PoolOptions, env: { ctx: Context; owner: Agent | undefined; model: FakeModelServer; workspace: string }) {
  const { ctx, owner } = env
  // In a container the CLI reaches the model by a host name its agent's allowlist names, and works in the workspace (mounted there).
  const docker = options.sandbox === 'docker' && owner !== undefined && options.worker === 'in-process'
  const port = new URL(env.model.url).port
  const model = docker ? { ...env.model, url: `http://${MODEL_HOST}:${port}`, openaiBaseUrl: `http://${MODEL_HOST}:${port}/v1` } : env.model
  /** The pool's terminal dependencies for the terminal option (the plugin's own wiring, written out). */
  const terminalDeps = (): Partial<PoolDeps> => {
    if (options.worker === 'managed') return owner ? { owners: (id) => ctx.agents.get(id), policyOf: (agent) => ({ ...ctx.sandboxPolicy.resolve({ session: agent.session }), protectedPaths: ctx.sandbox.protectedPaths?.() ?? [] }) } : {}
    if (!owner) return { terminals: policyTerminals({ pty: ctx.pty, sessions: ctx.sessions, sandboxPolicy: ctx.sandboxPolicy }).terminals }
    return { owners: (id) => ctx.agents.get(id), terminals: ptyTerminals({ pty: ctx.pty, sandbox: ctx.sandbox }), agentHomes: docker }
  }
  const ownerId = owner?.id ?? 'bench'
  const dir = mkdtempSync(join(tmpdir(), `pool-bench-${kind}-`))
  const pool = new PtyPool(
    loadPoolConfig({
      // By default the CLIs' own speed, unconfined; POOL_BENCH_TERMINAL=conch confines them.
      terminal: options.terminal,
      kinds: { [kind]: kind === 'claude' ? claudeKind(model) : codexKind(model) },
      worker: options.worker,
      supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'] },
      stateDir: join(dir, 'state'),
      cwd: docker ? env.workspace : dir,
      accounts: { key: { type: 'api-key' } },
      agents: { [ownerId]: { runtime: 'pty-pool', kind, account: 'key' } },
    }, {}, BUILTIN_KINDS),
    { ...terminalDeps(), subprocess: ctx.subprocess, env: kind === 'claude' ? claudeEnv(model) : codexEnv(), fallback: async () => { throw new Error('the bench never falls back') } },
  )
  // What the plugin provisions at load (pty-pool's index.ts), for the container made at the first CLI.
  const provisioned = pool.agentHomes === undefined ? undefined : ctx.sandbox.provision({ programs: [dirname(realpathSync(BINARIES[kind]))], homes: [pool.agentHomes] })
  const boots: number[] = []
  const warm: number[] = []
  const oneShot: number[] = []
  const floor: number[] = []
  const written: number[] = []
  const phases: Record<'echo' | 'answer' | 'settle' | 'transcript', number[]> = { echo: [], answer: [], settle: [], transcript: [] }
  try {
    for (let boot = 0; boot < 3; boot++) {
      const key = { owner: ownerId, conversation: `boot-${boot}`, kind, model: '', account: '', bare: false }
      const result = await pool.acquireAndInvoke(key, `Q${boot}: boot`)
      if (result.path !== 'booted') throw new Error(`boot ${boot} of ${kind} took the ${result.path} path`)
      boots.push(result.bootMs!)
    }
    const key = { owner: ownerId, conversation: 'warm', kind, model: '', account: '', bare: false }
    await pool.acquireAndInvoke(key, 'Q0: warm up')
    // Alternate warm invokes and one-shot spawns so the machine's load hits both alike.
    for (let run = 1; run <= options.runs; run++) {
      const prompt = `Q${run}: the same prompt for both paths`
      const seen = model.requests.length
      const warmResult = await pool.acquireAndInvoke(key, prompt)
      const ended = Date.now()
      if (warmResult.path !== 'warm' || warmResult.text !== `answer ${run}: the same prompt for both paths`) throw new Error(`warm invoke ${run} of ${kind}: ${JSON.stringify(warmResult)}`)
      warm.push(warmResult.durationMs)
      for (const phase of Object.keys(phases) as Array<keyof typeof phases>) phases[phase].push(warmResult.phases?.[phase] ?? 0)
      const turn = warmResult.phases
      const request = model.requests.slice(seen).find((candidate) => candidate.userText.includes(`Q${run}: the same prompt`))
      if (turn === undefined || request === undefined) throw new Error(`warm invoke ${run} of ${kind}: no phases or no request of its own reached the model`)
      floor.push(request.receivedAt - (ended - turn.answer - turn.settle - turn.transcript))
      const transcript = newestTranscript(join(dir, 'state'))
      if (transcript !== undefined) written.push(transcript - (ended - turn.answer - turn.settle - turn.transcript))
      if (run <= Math.ceil(options.runs / 2)) {
        const started = performance.now()
        const fresh = await pool.invokeForAgent(ownerId, `one-${run}`, prompt)
        if (fresh.path !== 'one-shot-pty' || !fresh.text.includes(`answer ${run}:`)) throw new Error(`one-shot ${run} of ${kind}: ${JSON.stringify(fresh).slice(0, 400)}`)
        oneShot.push(performance.now() - started)
      }
      progress(`pool: ${kind} ${run}/${options.runs}`)
    }
  } finally {
    await pool.shutdown()
    provisioned?.()
    rmSync(dir, { recursive: true, force: true })
  }
  return {
    boot_p50_ms: round(median(boots)),
    warm_invoke_p50_ms: round(median(warm)),
    warm_invoke_p95_ms: round(percentile(warm, 95)),
    /** Where a warm turn's time goes (p50 per phase, ms): typed → echoed, Enter → a complete sentinel pair on the screen (or the answer's record read), pair → answer taken, transcript read after a screen settle. */
    warm_phases_p50_ms: Object.fromEntries(Object.entries(phases).map(([phase, values]) => [phase, round(median(values))])),
    one_shot_p50_ms: round(median(oneShot)),
    warm_over_one_shot: ratio(median(warm), median(oneShot)),
    /** Enter on a warm turn → the fake model received its request, p50 ms. */
    enter_to_request_p50_ms: round(median(floor)),
    /** Enter on a warm turn → the answer's record (the newest `.jsonl` of the homes: a transcript, Claude Code's Stop record) written (its mtime), p50 ms. */
    ...(written.length > 0 && { enter_to_record_p50_ms: round(median(written)) }),
  }
}

/**
 * The mtime (ms) of the newest `.jsonl` file below `dir` (the sessions' homes): a CLI's
 * transcript. The CLIs make and remove lock folders meanwhile: what vanishes is skipped.
 */
function newestTranscript(dir: string): number | undefined {
  let newest: number | undefined
  let entries: Dirent[]
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return undefined
  }
  for (const entry of entries) {
    const path = join(dir, entry.name)
    const mtime = entry.isDirectory() ? newestTranscript(path) : entry.isFile() && entry.name.endsWith('.jsonl') ? statSync(path, { throwIfNoEntry: false })?.mtimeMs : undefined
    if (mtime !== undefined && (newest === undefined || mtime > newest)) newest = mtime
  }
  return newest
}

export const poolBench: Bench = {
  keys: ['pool'],
  composed: false,
  async run() {
    const runs = 10
    progress(`pool: claude and codex warm invokes against one-shot spawns with the fake model server, ${runs} invokes each`)
    return { pool: await benchPool({ runs, kinds: ['claude', 'codex'], worker: 'in-process', terminal: 'unconfined', sandbox: 'bubblewrap' }) }
  },
  rows(r, verdict) {
    const rows: string[][] = []
    for (const kind of ['claude', 'codex'] as const) {
      const k = r.pool?.[kind]
      if (!k) continue
      rows.push([`pool ${kind} warm invoke p50`, ms(k.warm_invoke_p50_ms), `one-shot ${ms(k.one_shot_p50_ms)}`, x(k.warm_over_one_shot), kind === 'claude' ? verdict('pool.claude.warm_invoke_p50_ms') : ''])
      const phases = k.warm_phases_p50_ms
      rows.push([`  ${kind} phases p50: echo, answer, settle`, `${ms(phases['echo'] ?? 0)}, ${ms(phases['answer'] ?? 0)}, ${ms(phases['settle'] ?? 0)}`, '', '', ''])
      rows.push([`  ${kind} Enter → request p50 (its own floor)`, ms(k.enter_to_request_p50_ms), '', '', kind === 'codex' ? verdict('pool.codex.warm_invoke_p50_ms') : ''])
      rows.push([`  ${kind} Enter → answer record written p50 (its own floor)`, ms(k.enter_to_record_p50_ms), '', '', ''])
    }
    for (const note of r.pool?.skipped ?? []) rows.push([`pool: skipped ${note}`, '', '', '', ''])
    return rows
  },
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const figures = await benchPool({
    runs: Number(process.env.POOL_BENCH_RUNS ?? 10),
    kinds: (process.env.POOL_BENCH_KINDS ?? 'claude,codex').split(',').filter((kind): kind is Kind => kind === 'claude' || kind === 'codex'),
    worker: process.env.POOL_BENCH_WORKER === 'managed' ? 'managed' : 'in-process',
    terminal: process.env.POOL_BENCH_TERMINAL === 'conch' ? 'conch' : 'unconfined',
    sandbox: process.env.POOL_BENCH_SANDBOX === 'docker' ? 'docker' : 'bubblewrap',
  })
  console.log(JSON.stringify({ ...figures, cores: os.cpus().length }, null, 2))
  process.exit(0)
}
