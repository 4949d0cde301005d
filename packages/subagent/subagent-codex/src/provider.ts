/**
 * The Codex provider: each run spawns `codex app-server` through `ctx.subprocess` with a private
 * `CODEX_HOME`, runs one turn on an ephemeral thread under the projected sandbox, and tears down
 * with the seam's ladder (`turn/interrupt` first).
 */
import { tmpdir } from 'node:os'
import {
  NO_CAPABILITIES,
  SubagentError,
  StreamTail,
  childCwd,
  childEnv,
  productsEnv,
  disposeProcess,
  raceStart,
  spawnChild,
  textOf,
  type OutOfProcessConfig,
  type ProviderRequest,
  type ProviderRun,
  type SubagentProvider,
} from '@conch/subagent'
import { skippedExecutables, type SubprocessServiceApi } from '@conch/subprocess'
import { describeExit } from '@conch/session'
import { createCodexHome, type CodexHome, type TomlTable } from './codex-home.ts'
import { JsonLinesConnection } from './connection.ts'
import type { AskForApproval, CodexSandboxMode } from './protocol.ts'
import { NOT_FOUND_HINT, resolveCodexExecutable } from './resolve.ts'
import { CodexSession } from './session.ts'

export type SandboxSetting = 'inherit' | CodexSandboxMode

export interface CodexProviderConfig extends OutOfProcessConfig {
  name: string
  executable?: string | undefined
  model?: string | undefined
  approvalPolicy: AskForApproval
  sandbox: SandboxSetting
  config: TomlTable
  homeRoot: string
}

const WIDTH: Record<CodexSandboxMode, number> = { 'read-only': 0, 'workspace-write': 1, 'danger-full-access': 2 }

/** Codex's sandbox for a run: the parent's mode (read-only without a policy), narrowed to the configured one, never widened. */
export function projectSandbox(setting: SandboxSetting, parentMode: CodexSandboxMode | undefined): CodexSandboxMode {
  const parent = parentMode ?? 'read-only'
  if (setting === 'inherit') return parent
  return WIDTH[setting] < WIDTH[parent] ? setting : parent
}

/** What the provider needs from its composition. */
export interface CodexProviderDeps {
  subprocess: SubprocessServiceApi
  /** The parent session's sandbox mode (from `ctx.sandboxPolicy`), undefined without a policy. */
  parentMode(request: ProviderRequest): CodexSandboxMode | undefined
  /** Called when a run starts and when it is gone, so mode changes can be fenced meanwhile. */
  track?(request: ProviderRequest, live: boolean): void
  /** The folders the parent may write (`parentWritable`): no binary is taken from PATH folders there. */
  parentWritable?(request: ProviderRequest): readonly string[]
}

export function codexProvider(deps: CodexProviderDeps, config: CodexProviderConfig): SubagentProvider {
  return {
    name: config.name,
    capabilities: NO_CAPABILITIES,
    start: (request) => startRun(deps, config, request),
  }
}

async function startRun(deps: CodexProviderDeps, config: CodexProviderConfig, request: ProviderRequest): Promise<ProviderRun> {
  const provider = config.name
  const cwd = childCwd(config.cwd, request.parent, provider)
  const writable = deps.parentWritable?.(request) ?? []
  const executable = resolveCodexExecutable(config.executable, productsEnv({ writable }))
  if (executable === undefined) {
    const found = skippedExecutables('codex', process.env.PATH ?? '', writable) ?? 'no codex binary found'
    throw new SubagentError('START_FAILED', { reason: `cannot start the "${provider}" sub-agent: ${found}; ${NOT_FOUND_HINT}` })
  }
  const sandbox = projectSandbox(config.sandbox, deps.parentMode(request))

  const baseEnv = childEnv(config.env)
  let home: CodexHome
  try {
    home = createCodexHome({ root: config.homeRoot, childTmpDir: baseEnv.TMPDIR ?? tmpdir(), config: config.config })
  } catch (error) {
    throw new SubagentError('START_FAILED', { reason: `cannot start the "${provider}" sub-agent: ${(error as Error).message}` }, { cause: error })
  }
  deps.track?.(request, true)
  let child
  try {
    child = spawnChild(deps.subprocess, { argv: [executable, 'app-server'], cwd, env: { ...baseEnv, CODEX_HOME: home.path }, provider, agentWritable: writable })
  } catch (error) {
    home.remove()
    deps.track?.(request, false)
    throw error
  }
  const stderr = new StreamTail(child.stderr)
  let session!: CodexSession
  const connection = new JsonLinesConnection((line) => child.write(line), {
    onNotification: (method, params) => session.onNotification(method, params),
    onRequest: (incoming) => session.onRequest(incoming),
    onViolation: (reason) => session.onViolation(reason),
  })
  session = new CodexSession({ connection, update: (update) => request.update(update), detail: () => stderr.tail() })
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk: string) => connection.feed(chunk))
  // A published run ends when the output does; pending requests fail only once the child has
  // exited and its stderr is read to the end, so diagnostics carry the whole tail.
  child.stdout.on('end', () => session.onGone('closed its output'))
  void child.done.then((exit) => {
    connection.close(`codex app-server ${describeExit(exit)}`)
    session.onGone(describeExit(exit))
  })

  let thread
  try {
    thread = await raceStart({
      handshake: session.handshake({
        cwd,
        ephemeral: true,
        approvalPolicy: config.approvalPolicy,
        sandbox,
        ...(config.model === undefined ? {} : { model: config.model }),
      }),
      child,
      signal: request.signal,
      timeoutMs: config.startTimeoutMs,
      provider,
      detail: () => stderr.tail(),
    })
  } catch (error) {
    // Nothing was published: no cooperative shutdown, just the tree.
    const report = await child.terminate({ graceMs: config.disposeGraceMs }).catch(() => undefined)
    home.remove()
    deps.track?.(request, false)
    if (report && report.survivors.length > 0) {
      throw new SubagentError('START_FAILED', { reason: `${(error as Error).message}; and its processes survived SIGKILL` }, { cause: error })
    }
    throw error
  }

  session.startTurn(textOf(request.prompt, '\n\n'))
  const onAbort = () => void session.interrupt()
  request.signal.addEventListener('abort', onAbort, { once: true })
  return {
    childId: thread.thread.id,
    outcome: session.outcome,
    async dispose() {
      request.signal.removeEventListener('abort', onAbort)
      try {
        await disposeProcess({
          child,
          shutdown: () => (session.state === 'ended' ? undefined : session.interrupt()),
          eofGraceMs: config.disposeEofGraceMs,
          graceMs: config.disposeGraceMs,
          provider,
        })
      } finally {
        home.remove()
        deps.track?.(request, false)
      }
    },
  }
}
