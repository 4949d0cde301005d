/**
 * The node runtime behind `ctx.ptc`: strips the program's types on the host, takes the owner's
 * spare or starts a fresh process, runs the program on it, then refills the spare.
 */
import { createRequire } from 'node:module'
import { dirname, sep } from 'node:path'
import { PtcError, type PtcBinding, type PtcResult, type PtcRuntime, type PtcSandboxReport, type PtcSpec } from '@conch/ptc'
import type { SandboxServiceApi } from '@conch/sandbox'
import { messageOf } from '@conch/errors'
import type { SubprocessServiceApi } from '@conch/subprocess'
import type { Config } from './config.ts'
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
    this.spares = new SparePool(config.spareIdleMs)
  }

  /** Spares alive now (for tests and metrics). */
  get spareCount(): number {
    return this.spares.size
  }

  async run(spec: PtcSpec, options: { bindings: readonly PtcBinding[]; signal?: AbortSignal }): Promise<PtcResult> {
    if (this.disposed) throw new PtcError('DISPOSED', { what: 'the node ptc runtime' })
    const startedAt = performance.now()
    const failed = (kind: 'exception' | 'sandbox-unavailable' | 'abort' | 'worker-exit', message: string, stack?: string): PtcResult => ({
      ok: false,
      failure: { kind, message, ...(stack !== undefined && { stack }) },
      logs: '',
      sandbox: { mode: spec.policy.mode, enforcement: 'none', denials: [] } satisfies PtcSandboxReport,
      elapsedMs: Math.round(performance.now() - startedAt),
    })

    const stripped = await strip(spec.code, this.config.maxNestingDepth)
    if (!stripped.ok) return failed('exception', stripped.message, stripped.message)
    if (options.signal?.aborted) return failed('abort', 'the run was cancelled before it started')

    // The program runs in its agent's sandbox: the loopback and /tmp of the agent's terminals.
    const launch: LaunchSpec = { policy: spec.policy, cwd: spec.cwd, agent: { key: spec.owner.session.id, owner: spec.owner, ...(spec.policy.network !== undefined && { network: spec.policy.network }) } }
    const key = [spec.policy.mode, spec.policy.workspaceRoot, spec.cwd, this.config.maxOldGenerationSizeMb].join('\0')
    let process = this.config.spare ? await this.spares.take(spec.owner, key) : undefined
    if (process === undefined) {
      try {
        process = await this.start(launch, options.signal)
      } catch (error) {
        if ((error as { code?: unknown }).code === 'SANDBOX_UNAVAILABLE') return failed('sandbox-unavailable', messageOf(error))
        if (options.signal?.aborted) return failed('abort', 'the run was cancelled before the program started')
        return failed('worker-exit', `cannot start the program's process: ${(error as Error).message}`)
      }
    }
    const input = { spec, code: stripped.code, bindings: options.bindings, startedAt, ...(options.signal && { signal: options.signal }) }
    // Hosts the agent's proxy refuses meanwhile are named in the result: the program sees only a 403.
    const refused = new Set<string>()
    const stopWatching = this.deps.sandbox()?.onRefused?.((refusal) => {
      if (refusal.agent === launch.agent?.key) refused.add(refusal.host)
    })
    const result = await runOnProcess(process, input, this.config).finally(() => stopWatching?.())
    if (refused.size > 0) result.sandbox.refused = [...refused]
    // The next spare boots after the result is delivered, not beside the run: both would share
    // the cores, and starting a process blocks (fork and exec).
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
 * amaro's module (a WebAssembly swc), required on the first program rather than at startup. A
 * failure other than a diagnostic (a wasm trap) can leave its memory corrupt: `dropStripper`
 * then clears it from the require cache, so the next program gets a fresh instance.
 */
let amaro: typeof import('amaro') | undefined
/** CommonJS loading from this file's folder (in the built bin too: the URL points at the source tree). */
const load = createRequire(new URL('./runtime.ts', import.meta.url))

function dropStripper(): void {
  amaro = undefined
  const dist = dirname(load.resolve('amaro'))
  for (const file of Object.keys(load.cache)) if (file.startsWith(dist + sep)) delete load.cache[file]
}

/**
 * Programs stripped lately, by text, most recent last (stripping is a pure function of the text):
 * at most `STRIPPED_ENTRIES` programs of at most `STRIPPED_MAX_CHARS` characters each.
 */
const stripped = new Map<string, Stripped>()
export const STRIPPED_ENTRIES = 64
export const STRIPPED_MAX_CHARS = 16_384

/**
 * Erases the program's types with amaro in strip-only mode (Node's own stripper): types become
 * whitespace, so lines and columns stay as written. Non-erasable syntax (enum, namespace,
 * parameter properties, `import =`) and syntax errors are refused with their line; so is nesting
 * deeper than `maxNestingDepth` (the parser recurses once per level).
 */
export async function strip(code: string, maxNestingDepth: number): Promise<Stripped> {
  const depth = nestingDepth(code, maxNestingDepth)
  if (depth > maxNestingDepth) {
    return {
      ok: false,
      message: `the program nests brackets more than ${maxNestingDepth} deep (ptc-node config maxNestingDepth): build deep values in a loop instead of writing them out`,
    }
  }
  const known = stripped.get(code)
  if (known !== undefined) {
    stripped.delete(code)
    stripped.set(code, known)
    return known
  }
  const result = stripNow(code)
  if (code.length <= STRIPPED_MAX_CHARS) {
    stripped.set(code, result)
    if (stripped.size > STRIPPED_ENTRIES) stripped.delete(stripped.keys().next().value!)
  }
  return result
}

function stripNow(code: string): Stripped {
  try {
    const out = (amaro ??= load('amaro') as typeof import('amaro')).transformSync(`${WRAPPER}${code}\n}`, { mode: 'strip-only' }).code
    return { ok: true, code: out.slice(WRAPPER.length, out.lastIndexOf('}')).replace(/\n$/, '') }
  } catch (error) {
    const details = error as { code?: unknown; message?: string; startLine?: number; startColumn?: number }
    if (typeof details !== 'object' || details === null || typeof details.code !== 'string') {
      dropStripper()
      return { ok: false, message: `the type stripper failed on this program (${String(error)}); simplify the deepest expression` }
    }
    const line = details.startLine ?? 1
    const column = (details.startColumn ?? 0) - (line === 1 ? WRAPPER.length : 0) + 1
    const what = details.code === 'UnsupportedSyntax' ? 'TypeScript that cannot be erased' : 'SyntaxError'
    return { ok: false, message: `${what}: ${details.message ?? String(error)} (program.ts:${line}:${Math.max(1, column)})` }
  }
}

/**
 * How deep `(`, `[` and `{` nest in `code`, outside strings, template text and comments; the
 * scan stops once it passes `limit`. Brackets in a regular expression literal count as code;
 * nesting they hide still meets the stripper's own failure, which is recovered.
 */
export function nestingDepth(code: string, limit: number): number {
  const CLOSER: Record<string, string> = { '(': ')', '[': ']', '{': '}' }
  /** Open brackets; a template literal's text is `` ` `` on the stack, its `${` a `{`. */
  const open: string[] = []
  let depth = 0
  let at = 0
  const top = (): string | undefined => open[open.length - 1]
  while (at < code.length) {
    const char = code[at]!
    if (top() === '`') {
      if (char === '\\') at += 2
      else if (char === '`') (open.pop(), at++)
      else if (char === '$' && code[at + 1] === '{') (open.push('{'), (at += 2))
      else at++
    } else if (char === '"' || char === "'") {
      at++
      while (at < code.length && code[at] !== char && code[at] !== '\n') at += code[at] === '\\' ? 2 : 1
      at++
    } else if (char === '/' && code[at + 1] === '/') {
      while (at < code.length && code[at] !== '\n') at++
    } else if (char === '/' && code[at + 1] === '*') {
      const end = code.indexOf('*/', at + 2)
      at = end < 0 ? code.length : end + 2
    } else {
      if (char === '`') open.push('`')
      else if (char in CLOSER) open.push(char)
      else if (top() !== undefined && char === CLOSER[top()!]) open.pop()
      at++
    }
    const brackets = open.length
    if (brackets > depth && (depth = brackets) > limit) return depth
  }
  return depth
}
