/**
 * `pnpm bench:subagents` — what conch adds to a sub-agent run. For Codex and Claude Code,
 * spawn → answer through the conch provider (`ctx.subagents.start` … `result`) against the
 * raw product driven directly with the same fake model server, in the same run:
 *
 * - raw Codex: the native binary spawned with child_process, a fresh CODEX_HOME with the same
 *   config.toml, then initialize → initialized → thread/start → turn/start → turn/completed;
 * - raw Claude Code: the Agent SDK's query() with its own spawn and the same options;
 * - both raw products get the environment the providers give (the scrubbed server
 *   environment plus the pass-through), so the comparison isolates what conch adds. (A
 *   minimal environment — PATH, HOME and the few variables the CLI needs — starts Claude
 *   Code measurably faster than the full scrubbed one; that is the environment's cost.)
 * - conch: the provider in a composition (spine, ctx.subprocess, ctx.sandboxPolicy in
 *   read-only, ctx.subagents), spawn routed through ctx.subprocess.
 *
 * Teardown is not counted (the run is answered when the result is). Variants alternate so
 * drift in the machine's load hits all alike. Target: conch's p50 ≤ raw p50 × 1.10 or
 * + 30 ms, whichever is larger. Not a test: a missed target is reported, never a failure.
 * Needs the products (./scripts/install-products.sh).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { join } from 'node:path'
import { Context } from 'cordis'
import AgentService from '../packages/core/agent/src/index.ts'
import LlmService from '../packages/core/llm/src/index.ts'
import SessionService from '../packages/core/session/src/index.ts'
import ToolsService from '../packages/core/tools/src/index.ts'
import SandboxPolicyService from '../packages/sandbox/sandbox-policy/src/index.ts'
import SubprocessService from '../packages/subprocess/subprocess/src/index.ts'
import SubagentService, { childEnv } from '../packages/subagent/subagent/src/index.ts'
import { startFakeModel } from '../packages/subagent/fake-model/src/index.ts'
import * as codex from '../packages/subagent/subagent-codex/src/index.ts'
import * as claude from '../packages/subagent/subagent-claude-code/src/index.ts'
import { median, percentile, round } from './stats.ts'

const RUNS = Number(process.env.SUBAGENT_RUNS ?? 7)
const ANSWER = 'the answer is 42'

const startedAt = performance.now()
const progress = (message: string) => process.stderr.write(`[bench ${((performance.now() - startedAt) / 1000).toFixed(1).padStart(6)} s] ${message}\n`)

const codexBinary = codex.resolveCodexExecutable(undefined)
const claudeBinary = claude.resolveClaudeExecutable(undefined)
if (!codexBinary || !claudeBinary) throw new Error(`the products are missing: ${codex.NOT_FOUND_HINT}`)

const fake = await startFakeModel({ defaultAnswer: { text: ANSWER } })
const scratch = mkdtempSync('/var/tmp/conch-bench-subagents-')
const workspace = mkdtempSync(join(scratch, 'ws-'))
const homeRoot = join(scratch, 'homes')
process.env.FAKE_API_KEY = 'dummy'
process.env.ANTHROPIC_BASE_URL = fake.url
process.env.ANTHROPIC_API_KEY = 'sk-ant-dummy'
process.env.CLAUDE_CODE_MAX_RETRIES = '0'

const codexSettings: codex.TomlTable = {
  model: 'gpt-5.5',
  model_provider: 'fake',
  model_providers: { fake: { name: 'fake', base_url: fake.openaiBaseUrl, wire_api: 'responses', env_key: 'FAKE_API_KEY', request_max_retries: 0, stream_max_retries: 0 } },
}

// ─── raw products ───────────────────────────────────────────────────────────────

/** Raw Codex: spawn → the turn's agent message. */
async function rawCodex(): Promise<number> {
  const home = codex.createCodexHome({ root: homeRoot, childTmpDir: '/tmp', config: codexSettings })
  const start = performance.now()
  const child = spawn(codexBinary!, ['app-server'], {
    cwd: workspace,
    env: childEnv(['FAKE_API_KEY'], { CODEX_HOME: home.path }),
    stdio: ['pipe', 'pipe', 'ignore'],
  })
  let id = 0
  const pending = new Map<number, (result: unknown) => void>()
  const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`)
  const request = <T>(method: string, params: unknown) =>
    new Promise<T>((resolve) => {
      pending.set(++id, resolve as (result: unknown) => void)
      send({ id, method, params })
    })
  let answered!: (ms: number) => void
  const done = new Promise<number>((resolve) => (answered = resolve))
  createInterface({ input: child.stdout }).on('line', (line) => {
    const message = JSON.parse(line) as { id?: number; method?: string; result?: unknown; params?: { turn?: { status?: string } } }
    if (message.id !== undefined && message.method === undefined) pending.get(message.id)?.(message.result)
    else if (message.method === 'turn/completed') answered(performance.now() - start)
  })
  await request('initialize', { clientInfo: { name: 'bench', title: null, version: '0' }, capabilities: null })
  send({ method: 'initialized' })
  const thread = await request<{ thread: { id: string } }>('thread/start', { cwd: workspace, ephemeral: true, approvalPolicy: 'on-request', sandbox: 'read-only' })
  await request('turn/start', { threadId: thread.thread.id, input: [{ type: 'text', text: 'answer', text_elements: [] }] })
  const ms = await done
  child.stdin.end()
  await new Promise((resolve) => child.once('exit', resolve))
  home.remove()
  return ms
}

/** Raw Claude Code: query() with the SDK's own spawn → the result message. */
async function rawClaude(): Promise<number> {
  const configDir = mkdtempSync(join(scratch, 'claude-'))
  const start = performance.now()
  let ms = Number.NaN
  for await (const message of claude.sdkQuery({
    prompt: 'answer',
    options: {
      cwd: workspace,
      pathToClaudeCodeExecutable: claudeBinary!,
      persistSession: false,
      settingSources: [],
      permissionMode: 'dontAsk',
      allowedTools: [],
      disallowedTools: ['AskUserQuestion', ...claude.WRITE_TOOLS],
      sandbox: claude.projectSandbox('read-only', workspace).sandbox!,
      includePartialMessages: true,
      strictMcpConfig: true,
      mcpServersDelivery: 'initialize',
      env: childEnv(['ANTHROPIC_API_KEY'], { CLAUDE_CONFIG_DIR: configDir, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' }),
    },
  })) {
    if (message.type === 'result') ms = performance.now() - start
  }
  rmSync(configDir, { recursive: true, force: true })
  return ms
}

// ─── through conch ──────────────────────────────────────────────────────────────

async function composition() {
  const ctx = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  fibers.push(await ctx.plugin(SessionService, {}))
  fibers.push(await ctx.plugin(ToolsService, ToolsService.Config.parse({})))
  fibers.push(await ctx.plugin(LlmService, {}))
  fibers.push(await ctx.plugin(AgentService, AgentService.Config.parse({})))
  fibers.push(await ctx.plugin(SubprocessService, SubprocessService.Config.parse({})))
  fibers.push(await ctx.plugin(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: 'read-only', workspaceRoot: workspace })))
  fibers.push(await ctx.plugin(SubagentService, SubagentService.Config.parse({})))
  fibers.push(await ctx.plugin(codex, codex.Config.parse({ executable: codexBinary, homeRoot, env: ['FAKE_API_KEY'], config: codexSettings })))
  fibers.push(await ctx.plugin(claude, claude.Config.parse({ executable: claudeBinary, stateRoot: join(scratch, 'state'), env: ['ANTHROPIC_API_KEY'] })))
  const agent = await ctx.agents.create({ workspaceRoot: workspace })
  return {
    ctx,
    agent,
    async dispose() {
      await ctx.agents.dispose(agent)
      for (const fiber of fibers.reverse()) await fiber.dispose()
    },
  }
}

async function throughConch(c: Awaited<ReturnType<typeof composition>>, provider: string): Promise<number> {
  const start = performance.now()
  const run = await c.ctx.subagents.start(provider, { prompt: [{ type: 'text', text: 'answer' }], parent: c.agent })
  const result = await run.result
  const ms = performance.now() - start
  if (result.stopReason !== 'completed' || result.output[0]?.text !== ANSWER) throw new Error(`${provider}: ${JSON.stringify(result)}`)
  await run.dispose()
  return ms
}

// ─── the run ────────────────────────────────────────────────────────────────────

const c = await composition()
const samples = { codexRaw: [] as number[], codexConch: [] as number[], claudeRaw: [] as number[], claudeConch: [] as number[] }
// One warm-up of each (page cache, first-start costs), not counted.
progress('warm-up')
await rawCodex()
await throughConch(c, 'codex')
await rawClaude()
await throughConch(c, 'claude-code')
for (let i = 0; i < RUNS; i++) {
  progress(`round ${i + 1}/${RUNS}`)
  samples.codexRaw.push(await rawCodex())
  samples.codexConch.push(await throughConch(c, 'codex'))
  samples.claudeRaw.push(await rawClaude())
  samples.claudeConch.push(await throughConch(c, 'claude-code'))
}

function verdict(raw: number[], conch: number[]) {
  const rawP50 = median(raw)
  const conchP50 = median(conch)
  const allowed = Math.max(rawP50 * 0.1, 30)
  return {
    raw_p50_ms: round(rawP50),
    conch_p50_ms: round(conchP50),
    raw_p95_ms: round(percentile(raw, 95)),
    conch_p95_ms: round(percentile(conch, 95)),
    added_ms: round(conchP50 - rawP50),
    allowed_ms: round(allowed),
    target_met: conchP50 - rawP50 <= allowed,
  }
}

const report = {
  runs: RUNS,
  load_average: (await import('node:os')).loadavg().map((value) => round(value)),
  cores: (await import('node:os')).cpus().length,
  codex: verdict(samples.codexRaw, samples.codexConch),
  claude_code: verdict(samples.claudeRaw, samples.claudeConch),
  samples_ms: Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, values.map((value) => round(value))])),
}
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
await c.dispose()
await fake.close()
rmSync(scratch, { recursive: true, force: true })
process.exit(0)
