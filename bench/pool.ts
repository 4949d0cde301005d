/**
 * `pnpm bench:pool` — the warm CLI pool (@conch/pty-pool) against a fresh one-shot spawn of the
 * same CLI for the same prompt, measured in the same run, for the real Claude Code and Codex
 * binaries from .products/ against the fake model server on 127.0.0.1:
 *
 * - boot: spawn → input prompt of a pooled session, per kind;
 * - warm invoke: one sentinel round trip on a warm session (p50, p95);
 * - one-shot: the CLI's one-shot mode (`claude -p`, `codex exec`) in a fresh terminal, the
 *   same prompt (p50) — the path an invoke takes without the pool.
 *
 * Target: warm invoke p50 ≤ 0.2 × one-shot p50. Not a test: a missed target is reported,
 * never a failure. POOL_BENCH_RUNS sets the invokes per kind (default 10), POOL_BENCH_KINDS
 * the kinds (default `claude,codex`), POOL_BENCH_WORKER=managed runs the sessions in a
 * supervised `conch pool-worker`, POOL_BENCH_TERMINAL=conch runs each CLI as a conch terminal of
 * an agent under a workspace-write policy (bubblewrap) instead of one under danger-full-access.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import SubprocessService from '../packages/subprocess/subprocess/src/index.ts'
import AgentService from '../packages/core/agent/src/index.ts'
import LlmService from '../packages/core/llm/src/index.ts'
import SessionService from '../packages/core/session/src/index.ts'
import ToolsService from '../packages/core/tools/src/index.ts'
import PtyService from '../packages/pty/pty/src/index.ts'
import * as ptyLocal from '../packages/pty/pty-local/src/index.ts'
import SandboxService from '../packages/sandbox/sandbox/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import SandboxPolicyService from '../packages/sandbox/sandbox-policy/src/index.ts'
import { BUILTIN_KINDS, loadPoolConfig, policyTerminals, ptyTerminals, PtyPool, type PoolDeps } from '../packages/pool/pty-pool/src/index.ts'
import { CONCH_BIN, claudeEnv, claudeKind, codexEnv, codexKind, startModel } from '../packages/test-support/src/products.ts'
import { median, percentile, ratio, round } from './stats.ts'

const RUNS = Number(process.env.POOL_BENCH_RUNS ?? 10)
// POOL_BENCH_WORKER=managed runs the sessions in a supervised `conch pool-worker` (one more hop per turn).
const WORKER = process.env.POOL_BENCH_WORKER === 'managed' ? 'managed' : 'in-process'
const ctx = new Context()
const subprocessFiber = await ctx.plugin(SubprocessService, SubprocessService.Config.parse({}))
// POOL_BENCH_TERMINAL=conch: each CLI a conch terminal of an agent (workspace-write, bubblewrap).
const TERMINAL = process.env.POOL_BENCH_TERMINAL === 'conch' ? 'conch' : 'unconfined'
const fibers: { dispose(): Promise<void> }[] = []
const workspace = mkdtempSync(join('/var/tmp', 'pool-bench-ws-'))
for (const [plugin, config] of [[SessionService, {}], [ToolsService, {}], [LlmService, {}], [AgentService, {}], [SandboxService, {}], [sandboxLocal, {}], [SandboxPolicyService, { mode: 'workspace-write', workspaceRoot: workspace }], [PtyService, {}], [ptyLocal, {}]] as const) {
  fibers.push(await ctx.plugin(plugin as never, config as never))
}
const owner = TERMINAL === 'conch' ? await ctx.agents.create() : undefined
/** The pool's terminal dependencies for TERMINAL (the plugin's own wiring, written out). */
function terminalDeps(): Partial<PoolDeps> {
  if (WORKER === 'managed') return owner ? { owners: (id) => ctx.agents.get(id), policyOf: (agent) => ({ ...ctx.sandboxPolicy.resolve({ session: agent.session }), protectedPaths: ctx.sandbox.protectedPaths?.() ?? [] }) } : {}
  if (!owner) return { terminals: policyTerminals({ pty: ctx.pty, sessions: ctx.sessions, sandboxPolicy: ctx.sandboxPolicy }).terminals }
  return { owners: (id) => ctx.agents.get(id), terminals: ptyTerminals({ pty: ctx.pty, sandbox: ctx.sandbox }) }
}
const OWNER = owner?.id ?? 'bench'
const KINDS = (process.env.POOL_BENCH_KINDS ?? 'claude,codex').split(',').filter((kind): kind is 'claude' | 'codex' => kind === 'claude' || kind === 'codex')
const model = await startModel()
const results: Record<string, unknown> = {}

for (const kind of KINDS) {
  const dir = mkdtempSync(join(tmpdir(), `pool-bench-${kind}-`))
  const pool = new PtyPool(
    loadPoolConfig({
      // By default the CLIs' own speed, unconfined; POOL_BENCH_TERMINAL=conch confines them.
      terminal: TERMINAL,
      kinds: { [kind]: kind === 'claude' ? claudeKind(model) : codexKind(model) },
      worker: WORKER,
      supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'] },
      stateDir: join(dir, 'state'),
      cwd: dir,
      accounts: { key: { type: 'api-key' } },
      agents: { [OWNER]: { runtime: 'pty-pool', kind, account: 'key' } },
    }, {}, BUILTIN_KINDS),
    { ...terminalDeps(), subprocess: ctx.subprocess, env: kind === 'claude' ? claudeEnv(model) : codexEnv(), fallback: async () => { throw new Error('the bench never falls back') } },
  )
  const boots: number[] = []
  const warm: number[] = []
  const oneShot: number[] = []
  const phases: Record<'echo' | 'answer' | 'settle' | 'transcript', number[]> = { echo: [], answer: [], settle: [], transcript: [] }
  for (let boot = 0; boot < 3; boot++) {
    const key = { owner: OWNER, conversation: `boot-${boot}`, kind, model: '', account: '', bare: false }
    const result = await pool.acquireAndInvoke(key, `Q${boot}: boot`)
    if (result.path !== 'booted') throw new Error(`boot ${boot} of ${kind} took the ${result.path} path`)
    boots.push(result.bootMs!)
  }
  const key = { owner: OWNER, conversation: 'warm', kind, model: '', account: '', bare: false }
  await pool.acquireAndInvoke(key, 'Q0: warm up')
  // Alternate warm invokes and one-shot spawns so the machine's load hits both alike.
  for (let run = 1; run <= RUNS; run++) {
    const prompt = `Q${run}: the same prompt for both paths`
    const warmResult = await pool.acquireAndInvoke(key, prompt)
    if (warmResult.path !== 'warm' || warmResult.text !== `answer ${run}: the same prompt for both paths`) throw new Error(`warm invoke ${run} of ${kind}: ${JSON.stringify(warmResult)}`)
    warm.push(warmResult.durationMs)
    for (const phase of Object.keys(phases) as Array<keyof typeof phases>) phases[phase].push(warmResult.phases?.[phase] ?? 0)
    if (run <= Math.ceil(RUNS / 2)) {
      const started = performance.now()
      const fresh = await pool.invokeForAgent(OWNER, `one-${run}`, prompt)
      if (fresh.path !== 'one-shot-pty' || !fresh.text.includes(`answer ${run}:`)) throw new Error(`one-shot ${run} of ${kind}: ${JSON.stringify(fresh).slice(0, 400)}`)
      oneShot.push(performance.now() - started)
    }
    process.stderr.write(`[bench pool] ${kind} ${run}/${RUNS}\n`)
  }
  await pool.shutdown()
  results[kind] = {
    boot_p50_ms: round(median(boots)),
    warm_invoke_p50_ms: round(median(warm)),
    warm_invoke_p95_ms: round(percentile(warm, 95)),
    // Where a warm turn's time goes (p50 per phase, ms): typed → echoed, Enter → a complete
    // sentinel pair on the screen, pair → answer taken, transcript read after a screen settle.
    warm_phases_p50_ms: Object.fromEntries(Object.entries(phases).map(([phase, values]) => [phase, round(median(values))])),
    one_shot_p50_ms: round(median(oneShot)),
    warm_over_one_shot: ratio(median(warm), median(oneShot)),
    target: 'warm_over_one_shot ≤ 0.2',
    met: (ratio(median(warm), median(oneShot)) ?? 1) <= 0.2,
  }
}
await model.close()
if (owner) await ctx.agents.dispose(owner)
for (const fiber of fibers.reverse()) await fiber.dispose()
await subprocessFiber.dispose()
console.log(JSON.stringify({ runs: RUNS, worker: WORKER, terminal: TERMINAL, cores: (await import('node:os')).cpus().length, results }, null, 2))
