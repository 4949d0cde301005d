/**
 * Sub-agents — what conch adds to a sub-agent run (`pnpm bench:subagents` runs it alone and
 * prints JSON): for Codex and Claude Code, spawn → answer through the conch provider against the
 * raw product driven directly (Codex's app-server protocol, the Agent SDK's query()) with the
 * same fake model server and the same environment, in the same run, so the comparison isolates
 * what conch adds. Teardown is not counted; variants alternate. Needs the products
 * (./scripts/install-products.sh); a missing one is reported and its row skipped.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createInterface } from 'node:readline'
import os from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { childEnv } from '../packages/subagent/subagent/src/index.ts'
import { startFakeModel } from '../packages/test-support/src/fake-model/index.ts'
import { bootProvider, type ProviderHarness } from '../packages/test-support/src/harness.ts'
import * as codex from '../packages/subagent/subagent-codex/src/index.ts'
import * as claude from '../packages/subagent/subagent-claude-code/src/index.ts'
import { median, percentile, ratio, round } from './stats.ts'
import { progress } from './harness.ts'
import type { Bench } from './registry.ts'
import { ms, x } from './table.ts'

const ANSWER = 'the answer is 42'

/** The fake model server and the scratch folders of one run (set by `benchSubagents`). */
let fake: Awaited<ReturnType<typeof startFakeModel>>
let scratch: string
let workspace: string
let homeRoot: string
let codexSettings: codex.TomlTable
let codexBinary: string | undefined
let claudeBinary: string | undefined

async function setup(): Promise<void> {
  fake = await startFakeModel({ defaultAnswer: { text: ANSWER } })
  scratch = mkdtempSync('/var/tmp/conch-bench-subagents-')
  workspace = mkdtempSync(join(scratch, 'ws-'))
  homeRoot = join(scratch, 'homes')
  process.env.FAKE_API_KEY = 'dummy'
  process.env.ANTHROPIC_BASE_URL = fake.url
  process.env.ANTHROPIC_API_KEY = 'sk-ant-dummy'
  process.env.CLAUDE_CODE_MAX_RETRIES = '0'
  codexSettings = {
    model: 'gpt-5.5',
    model_provider: 'fake',
    model_providers: { fake: { name: 'fake', base_url: fake.openaiBaseUrl, wire_api: 'responses', env_key: 'FAKE_API_KEY', request_max_retries: 0, stream_max_retries: 0 } },
  }
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

function composition() {
  return bootProvider(
    [
      ...(codexBinary ? [[codex, codex.Config.parse({ executable: codexBinary, homeRoot, env: ['FAKE_API_KEY'], config: codexSettings })] as const] : []),
      ...(claudeBinary ? [[claude, claude.Config.parse({ executable: claudeBinary, stateRoot: join(scratch, 'state'), env: ['ANTHROPIC_API_KEY'] })] as const] : []),
    ],
    { workspaceRoot: workspace, mode: 'read-only' },
  )
}

async function throughConch(c: ProviderHarness, provider: string): Promise<number> {
  const start = performance.now()
  const run = await c.ctx.subagents.start(provider, { prompt: [{ type: 'text', text: 'answer' }], parent: c.agent })
  const result = await run.result
  const ms = performance.now() - start
  if (result.stopReason !== 'completed' || result.output[0]?.text !== ANSWER) throw new Error(`${provider}: ${JSON.stringify(result)}`)
  await run.dispose()
  return ms
}

// ─── the run ────────────────────────────────────────────────────────────────────

export type SubagentFigures = Awaited<ReturnType<typeof benchSubagents>>

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

/** Spawn → answer through conch and raw, `runs` rounds after one warm-up of each, for every installed product. */
export async function benchSubagents(progress: (message: string) => void, options: { runs?: number } = {}) {
  const runs = options.runs ?? 7
  codexBinary = codex.resolveCodexExecutable(undefined)
  claudeBinary = claude.resolveClaudeExecutable(undefined)
  const skipped = [
    ...(codexBinary ? [] : [`codex: not installed (${codex.NOT_FOUND_HINT})`]),
    ...(claudeBinary ? [] : [`claude-code: not installed (${claude.NOT_FOUND_HINT})`]),
  ]
  for (const note of skipped) progress(`subagents: skipping ${note}`)
  const samples = { codexRaw: [] as number[], codexConch: [] as number[], claudeRaw: [] as number[], claudeConch: [] as number[] }
  if (codexBinary || claudeBinary) {
    await setup()
    const c = await composition()
    try {
      const products = [
        [codexBinary, 'codex', rawCodex, samples.codexRaw, samples.codexConch],
        [claudeBinary, 'claude-code', rawClaude, samples.claudeRaw, samples.claudeConch],
      ] as const
      const oneRound = async (counted: boolean) => {
        for (const [binary, provider, rawRun, rawInto, conchInto] of products) {
          if (!binary) continue
          const raw = await rawRun()
          const through = await throughConch(c, provider)
          if (counted) {
            rawInto.push(raw)
            conchInto.push(through)
          }
        }
      }
      // One warm-up of each (page cache, first-start costs), not counted.
      progress('subagents: warm-up')
      await oneRound(false)
      for (let i = 0; i < runs; i++) {
        progress(`subagents: round ${i + 1}/${runs}`)
        await oneRound(true)
      }
    } finally {
      await c.dispose()
      await fake.close()
      rmSync(scratch, { recursive: true, force: true })
    }
  }
  return {
    runs,
    ...(codexBinary && { codex: verdict(samples.codexRaw, samples.codexConch) }),
    ...(claudeBinary && { claude_code: verdict(samples.claudeRaw, samples.claudeConch) }),
    /** Products not installed, with the hint; their rows are skipped. */
    skipped,
    load_average: os.loadavg().map((value) => round(value)),
    samples_ms: Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, values.map((value) => round(value))])),
  }
}

export const subagentsBench: Bench = {
  keys: ['subagents'],
  async run() {
    progress('subagents: codex and claude-code spawn → answer through conch and raw, with the fake model server, 7 rounds')
    return { subagents: await benchSubagents(progress) }
  },
  rows(r, verdict) {
    const rows: string[][] = []
    for (const [key, label] of [['codex', 'codex'], ['claude_code', 'claude-code']] as const) {
      const v = r.subagents?.[key]
      if (v) rows.push([`sub-agent ${label} spawn→answer p50`, ms(v.conch_p50_ms), `raw ${ms(v.raw_p50_ms)}`, x(ratio(v.conch_p50_ms, v.raw_p50_ms)), verdict(`subagents.${key}.conch_p50_ms`)])
    }
    return rows
  },
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const figures = await benchSubagents(progress, { runs: Number(process.env.SUBAGENT_RUNS ?? 7) })
  process.stdout.write(`${JSON.stringify({ ...figures, cores: os.cpus().length }, null, 2)}\n`)
  process.exit(0)
}
