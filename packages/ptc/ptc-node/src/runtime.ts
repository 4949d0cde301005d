/**
 * The node runtime behind `ctx.ptc`: strips the program's types on the host (amaro, strip-only:
 * positions kept, non-erasable syntax refused), takes the owner's spare or starts a fresh
 * process, runs the program on it, and then refills the spare in the background.
 */
import { PtcError, type PtcBinding, type PtcResult, type PtcRuntime, type PtcSandboxReport, type PtcSpec } from '@conch/ptc'
import type { SandboxServiceApi } from '@conch/sandbox'
import type { SubprocessServiceApi } from '@conch/subprocess'
import type { Config } from './config.ts'
import { SandboxUnavailable } from './launch.ts'
import { ProgramProcess, type LaunchSpec } from './process.ts'
import { runOnProcess } from './run.ts'
import { SparePool } from './spare.ts'

/** What the program is wrapped in before stripping and evaluation: on line 1, so lines stay as written. */
const WRAPPER = 'async function __program() {'

export interface RuntimeDependencies {
  subprocess: SubprocessServiceApi
  /** Optional: without it only `danger-full-access` runs; confined modes are `sandbox-unavailable`. */
  sandbox: () => SandboxServiceApi | undefined
}

export class NodeRuntime implements PtcRuntime {
  readonly name = 'node'
  readonly timeouts: PtcRuntime['timeouts']
  private readonly spares: SparePool
  private disposed = false

  constructor(
    private readonly deps: RuntimeDependencies,
    private readonly config: Config,
  ) {
    this.timeouts = { timeoutMs: config.timeoutMs, maxTimeoutMs: config.maxTimeoutMs }
    this.spares = new SparePool(config.spareIdleMs, config.graceMs)
  }

  /** Spares alive now (for tests and metrics). */
  get spareCount(): number {
    return this.spares.size
  }

  async run(spec: PtcSpec, options: { bindings: readonly PtcBinding[]; signal?: AbortSignal }): Promise<PtcResult> {
    if (this.disposed) throw new PtcError('DISPOSED', 'the node ptc runtime is disposed')
    const startedAt = performance.now()
    const failed = (kind: 'exception' | 'sandbox-unavailable' | 'abort' | 'worker-exit', message: string, stack?: string): PtcResult => ({
      ok: false,
      failure: { kind, message, ...(stack !== undefined && { stack }) },
      logs: '',
      sandbox: { mode: spec.policy.mode, enforcement: 'none', denials: [] } satisfies PtcSandboxReport,
      elapsedMs: Math.round(performance.now() - startedAt),
    })

    const stripped = await strip(spec.code)
    if (!stripped.ok) return failed('exception', stripped.message, stripped.message)
    if (options.signal?.aborted) return failed('abort', 'the run was cancelled before it started')

    const launch: LaunchSpec = { policy: spec.policy, cwd: spec.cwd }
    const key = [spec.policy.mode, spec.policy.workspaceRoot, spec.cwd, this.config.maxOldGenerationSizeMb].join('\0')
    let process = this.config.spare ? await this.spares.take(spec.owner, key) : undefined
    if (process === undefined) {
      try {
        process = await this.start(launch, options.signal)
      } catch (error) {
        if (error instanceof SandboxUnavailable) return failed('sandbox-unavailable', error.message)
        if (options.signal?.aborted) return failed('abort', 'the run was cancelled before the program started')
        return failed('worker-exit', `cannot start the program's process: ${(error as Error).message}`)
      }
    }
    const input = { spec, code: stripped.code, bindings: options.bindings, startedAt, ...(options.signal && { signal: options.signal }) }
    const result = await runOnProcess(process, input, this.config)
    // The next spare boots after this run, not beside it: on a small machine the two would share
    // the cores, and a run that comes before the spare is ready takes it while it boots. Starting
    // a process blocks for a few ms (fork and exec), so it waits until the result is delivered.
    if (this.config.spare && !this.disposed) {
      setImmediate(() => {
        if (!this.disposed) this.spares.refill(spec.owner, key, () => this.start(launch))
      })
    }
    return result
  }

  /** Closes every spare and waits for their trees. Running programs end with the subprocess service's scope. */
  async dispose(): Promise<void> {
    this.disposed = true
    await this.spares.dispose()
  }

  private start(launch: LaunchSpec, signal?: AbortSignal): Promise<ProgramProcess> {
    return ProgramProcess.start({ subprocess: this.deps.subprocess, sandbox: this.deps.sandbox(), config: this.config }, launch, signal)
  }
}

type Stripped = { ok: true; code: string } | { ok: false; message: string }

/**
 * amaro, imported on the first program: its module instantiates a WebAssembly build of swc
 * (about 3.7 MB of JavaScript and 60 ms of CPU), which a composition that never runs a program
 * should not pay at startup.
 */
let amaro: Promise<typeof import('amaro')> | undefined

/**
 * Programs stripped lately, by text, most recent last: the stripper is a pure function of the
 * text and costs 0.2–0.4 ms of CPU per program, which a program run again (a retry, a loop of
 * the same program) need not pay twice. At most `STRIPPED_ENTRIES` programs of at most
 * `STRIPPED_MAX_CHARS` characters each are kept.
 */
const stripped = new Map<string, Stripped>()
export const STRIPPED_ENTRIES = 64
export const STRIPPED_MAX_CHARS = 16_384

/**
 * Erases the program's types with amaro in strip-only mode (Node's own stripper): types become
 * whitespace, so every line and column stays where it was written. Non-erasable syntax (enum,
 * namespace, parameter properties, `import =`) and syntax errors are refused with the construct
 * and its line. A text stripped lately is answered from `stripped`.
 */
export async function strip(code: string): Promise<Stripped> {
  const known = stripped.get(code)
  if (known !== undefined) {
    stripped.delete(code)
    stripped.set(code, known)
    return known
  }
  const result = await stripNow(code)
  if (code.length <= STRIPPED_MAX_CHARS) {
    stripped.set(code, result)
    if (stripped.size > STRIPPED_ENTRIES) stripped.delete(stripped.keys().next().value!)
  }
  return result
}

async function stripNow(code: string): Promise<Stripped> {
  const { transformSync } = await (amaro ??= import('amaro'))
  try {
    const out = transformSync(`${WRAPPER}${code}\n}`, { mode: 'strip-only' }).code
    return { ok: true, code: out.slice(WRAPPER.length, out.lastIndexOf('}')).replace(/\n$/, '') }
  } catch (error) {
    const details = error as { code?: string; message?: string; startLine?: number; startColumn?: number }
    const line = details.startLine ?? 1
    const column = (details.startColumn ?? 0) - (line === 1 ? WRAPPER.length : 0) + 1
    const what = details.code === 'UnsupportedSyntax' ? 'TypeScript that cannot be erased' : 'SyntaxError'
    return { ok: false, message: `${what}: ${details.message ?? String(error)} (program.ts:${line}:${Math.max(1, column)})` }
  }
}
