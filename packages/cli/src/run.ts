/**
 * `conch run`: boot the composition, create one agent with the workspace root, run the task
 * to completion, print the transcript, dispose the agent and shut everything down.
 */
import type { AgentServiceApi, RunResult } from '@conch/agent'
import type { LlmServiceApi } from '@conch/llm'
import { codeHeldBy, workspaceRootProblem, type SandboxServiceApi } from '@conch/sandbox'
import { messageOf, stateHome } from '@conch/session'
import type { CompositionArgs, RunArgs } from './args.ts'
import { boot, describeError, type App, type LogLevel } from './boot.ts'
import { display, readComposition, type Composition } from './compose.ts'
import { interpolateEnv } from './env.ts'
import { BootError, CliError } from './errors.ts'
import { checkApiKey, REPLAY_PACKAGE, useScript } from './model.ts'
import { realpathOf } from './protect.ts'
import { createTranscript, resultStatus, visible } from './transcript.ts'

export interface CommandIo {
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
  env: NodeJS.ProcessEnv
  /** Aborted on the first SIGINT / SIGTERM; the run ends `cancelled` and everything shuts down. */
  signal: AbortSignal
}

/**
 * Reads a composition for a command: overlays applied, `--script` patched in (or, without a
 * script, the live model's key checked), then environment variables substituted.
 * @throws CliError (`CONFIG_INVALID`, `UNKNOWN_ENTRY`, `MISSING_ENV`, `NO_API_KEY`, …).
 */
export function loadComposition(options: { config: string; script?: string; env: NodeJS.ProcessEnv }): Composition {
  const composition = readComposition(options.config)
  let entries = composition.entries
  // The script path as the user would write it, so the model's messages name it that way.
  if (options.script !== undefined) entries = useScript(entries, display(options.script), composition.file)
  else checkApiKey(entries, options.env)
  return { ...composition, entries: interpolateEnv(entries, options.env) }
}

/** Loads and boots a composition for a command (see `loadComposition` and `boot`). */
export async function bootFor(
  options: CompositionArgs & { script?: string; logLevel: LogLevel },
  io: CommandIo,
): Promise<App> {
  noteOwnComposition(options, io.stderr)
  const composition = loadComposition({ ...options, env: io.env })
  // Plugins that start another conch (`@conch/subagent-conch`) default to the same composition.
  process.env.CONCH_CONFIG = composition.file
  const app = await boot(composition, { stderr: io.stderr, logLevel: options.logLevel }).catch((error: unknown) => {
    throw options.script === undefined ? error : (scriptError(error) ?? error)
  })
  try {
    await checkSandbox(app)
  } catch (error) {
    await app.shutdown()
    throw error
  }
  return app
}

/** Says on stderr, without `--config`, that conch's own composition is booted (and which ./cordis.yml was not). */
export function noteOwnComposition(options: CompositionArgs, stderr: NodeJS.WritableStream): void {
  if (!options.ownComposition) return
  const why = options.ignored === undefined
    ? `no cordis.yml in ${process.cwd()}`
    : `not loading ${options.ignored} (a composition runs as host code; to use it on purpose: --config ./cordis.yml)`
  stderr.write(visible(`conch: ${why}; using conch's own ${options.config}\n`))
}

/**
 * A composition whose sandbox policy confines terminals (any default mode but
 * `danger-full-access`) and that loads a sandbox provider starts only where one works: the probe
 * runs now, not at the model's first terminal, which could do nothing about it.
 * @throws CliError `SANDBOX_UNAVAILABLE` (exit 2) with the sandbox's reasons and its fix.
 */
async function checkSandbox(app: App): Promise<void> {
  const mode = (app.ctx.get('sandboxPolicy') as { config?: { mode?: string } } | undefined)?.config?.mode
  const sandbox = app.ctx.get('sandbox') as SandboxServiceApi | undefined
  if (mode === undefined || mode === 'danger-full-access' || sandbox?.probe === undefined) return
  try {
    await sandbox.probe()
  } catch (error) {
    throw new CliError('SANDBOX_UNAVAILABLE', { reason: `${display(app.composition.file)} confines terminals (sandbox mode ${mode}), but ${messageOf(error)}` })
  }
}

/**
 * A boot that failed only because the `--script` file is bad, said as that: the scripted
 * model's `SCRIPT_ERROR` names the file and the line (`s.jsonl:2: not valid JSON …`).
 */
function scriptError(error: unknown): CliError | undefined {
  if (!(error instanceof BootError) || error.failures.length !== 1) return undefined
  const [failure] = error.failures
  const [cause] = failure!.errors ?? []
  const script = cause as { code?: unknown; details?: { unreadable?: string } } | undefined
  if (failure!.name !== REPLAY_PACKAGE || !(cause instanceof Error) || script?.code !== 'SCRIPT_ERROR') return undefined
  // An unreadable file is said as `cannot read the model script FILE: …`; a bad line as `FILE:LINE: …`.
  return new CliError('SCRIPT_INVALID', { reason: script.details?.unreadable === undefined ? `the model script ${cause.message}` : cause.message })
}

/** Runs `conch run`; resolves to the exit code (0 only for a completed run). */
export async function runCommand(args: RunArgs, io: CommandIo): Promise<number> {
  const transcript = createTranscript(args.output, io.stdout, { partial: args.partial === true })
  const fail = (error: unknown): number => {
    const message = describeError(error, args.logLevel)
    // A stream-json consumer always gets its last line.
    if (args.output === 'stream-json') transcript.finish({ status: 'error', text: message, steps: 0 })
    io.stderr.write(visible(`conch: ${message}\n`))
    return error instanceof CliError ? error.exitCode : 1
  }

  let app: App
  try {
    app = await bootFor(args, io)
  } catch (error) {
    return fail(error)
  }
  try {
    if (io.signal.aborted) {
      transcript.finish({ status: 'cancelled', text: describeError(io.signal.reason, 'warn'), steps: 0 })
      return 1
    }
    const agents = app.ctx.get('agents') as AgentServiceApi | undefined
    if (!agents) {
      return fail(
        new CliError('CONFIG_INVALID', { reason: `${display(app.composition.file)} has no agent service: add an entry {id: agents, name: '@conch/agent'}` }),
      )
    }
    const refused = cwdProblem(app, args)
    if (refused !== undefined) return fail(refused)
    const agent = await agents.create({ workspaceRoot: args.cwd })
    let result: RunResult
    try {
      result = await agents.run(agent, {
        prompt: args.task,
        signal: io.signal,
        onEvent: (event) => transcript.onEvent(event),
      })
    } catch (error) {
      result = { status: 'error', text: describeError(error, 'warn'), steps: 0 }
    }
    transcript.finish(result)
    if (result.status !== 'completed') io.stderr.write(visible(`conch: ${RUN_ENDINGS[result.status]}: ${result.text}\n`))
    for (const note of unconsumedScripts(app)) io.stderr.write(visible(`conch: ${note}\n`))
    try {
      await agents.dispose(agent)
    } catch (error) {
      io.stderr.write(visible(`conch: disposing ${agent.id} failed: ${describeError(error, args.logLevel)}\n`))
    }
    return resultStatus(result) === 'completed' ? 0 : 1
  } catch (error) {
    return fail(error)
  } finally {
    await app.shutdown()
  }
}

/**
 * Why `workspaceRoot` cannot be a new agent's workspace, said before the agent starts, or
 * undefined. One rule for `conch run --cwd` and `conch acp`'s `session/new`:
 * - `CWD_REFUSED`: the sandbox's `workspaceRootProblem` (system folders, `conchFolders`, and a
 *   folder every user shares when the configured mode confines terminals);
 * - `WORKSPACE_HOLDS_CODE`: under `workspace-write`, it holds or lies inside `App.code`, which a
 *   confined process may not write (`PROTECTED_CODE_WRITABLE` at every confined spawn).
 */
export function workspaceRefusal(app: App, workspaceRoot: string): { code: 'CWD_REFUSED' | 'WORKSPACE_HOLDS_CODE'; reason: string } | undefined {
  const mode = (app.ctx.get('sandboxPolicy') as { config?: { mode?: string } } | undefined)?.config?.mode
  const confined = mode !== undefined && mode !== 'danger-full-access'
  const problem = workspaceRootProblem(workspaceRoot, { ...conchFolders(app), shared: confined })
  if (problem !== undefined) return { code: 'CWD_REFUSED', reason: `cannot be the workspace${confined ? ` under the sandbox mode ${mode}` : ''}: ${problem}` }
  if (mode !== 'workspace-write' || app.code.length === 0) return undefined
  const root = realpathOf(workspaceRoot)
  if (root === undefined) return undefined
  const named = codeHeldBy(app.code, root)
  if (named === undefined) return undefined
  return {
    code: 'WORKSPACE_HOLDS_CODE',
    reason: `cannot be the workspace under the sandbox mode workspace-write: it holds code this composition runs outside conch's installation (${named}), which a terminal confined there could rewrite or shadow for the next boot`,
  }
}

/**
 * conch's own folders for `workspaceRootProblem`: `own` (a workspace may neither hold nor lie in
 * them) is the state home and the sessions' `dir`; `inside` (it may hold but not lie in them) is
 * the sandbox's `ownFolders`, and the `dir` when `allowInsideWorkspace` is set.
 */
function conchFolders(app: App): { own: string[]; inside: string[] } {
  const sessions = app.ctx.get('sessions') as { dir?: string; config?: { allowInsideWorkspace?: boolean } } | undefined
  const sandbox = app.ctx.get('sandbox') as SandboxServiceApi | undefined
  const logs = sessions?.dir === undefined ? [] : [sessions.dir]
  const holdable = sessions?.config?.allowInsideWorkspace === true
  return {
    own: [stateHome(process.env), ...(holdable ? [] : logs)],
    inside: [...(sandbox?.ownFolders?.() ?? []), ...(holdable ? logs : [])],
  }
}

/** `conch run`'s refusal of its `--cwd` (`workspaceRefusal`; exit 2), before any model call. */
function cwdProblem(app: App, args: RunArgs): CliError | undefined {
  const refusal = workspaceRefusal(app, args.cwd)
  if (refusal === undefined) return undefined
  const given = args.cwdGiven === true ? `--cwd ${args.cwd}` : `the working directory ${args.cwd} (the default --cwd)`
  const fix =
    refusal.code === 'CWD_REFUSED'
      ? 'Pass --cwd a folder of your own.'
      : 'Keep the harness (the composition and its plugins) in a folder of its own and pass --cwd the project the agent works on.'
  return new CliError(refusal.code, { reason: `${given} ${refusal.reason}. ${fix}` })
}

/** How the stderr note says a run that did not complete ended. */
const RUN_ENDINGS: Record<Exclude<RunResult['status'], 'completed'>, string> = {
  error: 'the run ended with an error',
  cancelled: 'the run was cancelled',
  max_steps: 'the run stopped at its step limit (max_steps)',
}

/** A scripted model (an adapter with `remaining()`, as `@conch/llm-replay`'s) with lines left over. */
interface ScriptedAdapter {
  file?: string
  remaining(): number
  consumed?(): number
}

function unconsumedScripts(app: App): string[] {
  const llm = app.ctx.get('llm') as LlmServiceApi | undefined
  if (!llm) return []
  const notes: string[] = []
  for (const provider of llm.providers()) {
    const adapter = llm.get(provider) as Partial<ScriptedAdapter> | undefined
    if (typeof adapter?.remaining !== 'function') continue
    const left = adapter.remaining()
    if (left <= 0) continue
    const used = typeof adapter.consumed === 'function' ? `; the run used ${adapter.consumed()}` : ''
    const name = adapter.file ?? provider
    notes.push(`the model script ${name} has ${left} unconsumed ${left === 1 ? 'line' : 'lines'}${used}`)
  }
  return notes
}
