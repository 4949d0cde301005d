/** What every provider whose child is a separate process shares (the README's "Writing a provider"). */
import { accessSync, constants, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import type { Context } from 'cordis'
import { z } from 'zod'
import type { Agent } from '@conch/agent'
import { describeExit, messageOf } from '@conch/session'
import { isExecutableFile, scrubbedEnv, type ChildHandle, type SubprocessServiceApi, type TerminateReport } from '@conch/subprocess'
import { SubagentError } from './types.ts'

const AbsolutePath = z.string().refine((path) => isAbsolute(path), { message: 'must be an absolute path' })

/** A directory the server can enter: absolute, existing, a directory, searchable (access(2) X_OK). */
export const AbsoluteDirectory = AbsolutePath.refine(
    (path) => {
      try {
        if (!statSync(path).isDirectory()) return false
        accessSync(path, constants.X_OK)
        return true
      } catch {
        return false
      }
    },
    { message: 'must be an existing directory the server can enter' },
  )

/** What a provider may be called: lower-case letters, digits and dashes, a letter first. */
export const PROVIDER_NAME = /^[a-z][a-z0-9-]*$/

/** A provider's `name` config field: what the tool rows refer to, `fallback` when unset. */
export function providerName(fallback: string, description = 'Provider name the tool rows refer to.') {
  return z.string().regex(PROVIDER_NAME, 'must match [a-z][a-z0-9-]*').default(fallback).describe(description)
}

/** An absolute folder that defaults to `$XDG_CACHE_HOME/conch/<folder>` (`~/.cache/conch/<folder>`). */
export function cacheFolder(folder: string) {
  return AbsolutePath.default(() => join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'conch', folder))
}

/** A provider's optional `executable` field: the absolute path of an executable file, `binary` naming which. */
export function executableFile(binary: string) {
  return AbsolutePath.refine((path) => isExecutableFile(path), { message: `must be an executable file (${binary})` }).optional()
}

/** An environment variable name (POSIX: letters, digits, underscore, not starting with a digit). */
const VariableName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')

/** Config fields of every out-of-process provider, spread into its own `z.object`. */
export const outOfProcessConfig = {
  cwd: AbsoluteDirectory.optional().describe(
    "The child's working directory; unset: the parent session's workspace root. Never the server's own cwd.",
  ),
  env: z
    .array(VariableName)
    .default([])
    .describe(
      'Variables passed through to the child from the server environment, by name (for example a key the child needs). Everything else comes from the scrubbed environment.',
    ),
  startTimeoutMs: z
    .number()
    .int()
    .positive()
    .default(30_000)
    .describe('How long the child may take to start (spawn to ready), in ms; then the start fails and the child is torn down.'),
  disposeEofGraceMs: z
    .number()
    .int()
    .nonnegative()
    .default(6000)
    .describe('After the protocol shutdown and closing stdin, how long the child may take to exit by itself, in ms.'),
  disposeGraceMs: z
    .number()
    .int()
    .nonnegative()
    .default(3000)
    .describe("Between SIGTERM and SIGKILL of the child's process tree, in ms."),
}

/** Config fields of providers whose child speaks ACP (`startAcpChild`), spread beside `outOfProcessConfig`. */
export const acpChildConfig = {
  maxFrameBytes: z
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024 * 1024)
    .default(16 * 1024 * 1024)
    .describe(
      'Longest line the child may send on its protocol stream, in bytes. A longer one ends the run as `protocol`, naming its start; the parent keeps serving.',
    ),
}

export type AcpChildConfig = z.output<z.ZodObject<typeof acpChildConfig>>
export type OutOfProcessConfig = z.output<z.ZodObject<typeof outOfProcessConfig>>

/**
 * The child's working directory: the configured absolute directory, else the parent session's
 * workspace root (`session/start`'s `workspaceRoot`).
 * @throws SubagentError `START_FAILED` when neither is set — the server's own cwd is never used.
 */
export function childCwd(configured: string | undefined, parent: Agent, provider: string): string {
  if (configured !== undefined) return configured
  const root = parent.session.start.workspaceRoot
  if (root !== undefined && isAbsolute(root)) return root
  throw new SubagentError('START_FAILED', {
    reason: `cannot start a "${provider}" sub-agent for agent ${parent.id}: its session has no workspace root and the provider has no cwd configured`,
  })
}

/**
 * The host folders the parent agent may write, whatever its mode now (what it wrote under a wider
 * one stays): its workspace root as `ctx.sandboxPolicy` resolves it (else its session's), and
 * `ctx.sandbox`'s `readWritePaths`. A provider's program is never taken from a PATH folder there
 * (`SpawnOptions.agentWritable`, `ProductsEnv.writable`): the child runs outside the parent's sandbox.
 */
export function parentWritable(ctx: Context, parent: Agent): string[] {
  const policy = ctx.get('sandboxPolicy') as { resolve(options: { session: Agent['session'] }): { workspaceRoot: string } } | undefined
  const sandbox = ctx.get('sandbox') as { readWritePaths?(): string[] } | undefined
  const root = policy?.resolve({ session: parent.session }).workspaceRoot ?? parent.session.start.workspaceRoot
  return [...(root === undefined ? [] : [root]), ...(sandbox?.readWritePaths?.() ?? [])]
}

/** The child's environment: `scrubbedEnv(source)`, plus the set variables named in `passThrough`, plus `extra` (wins). */
export function childEnv(
  passThrough: readonly string[],
  extra: Readonly<Record<string, string>> = {},
  source: Readonly<Record<string, string | undefined>> = process.env,
): Record<string, string> {
  const trusted: Record<string, string> = {}
  for (const name of passThrough) {
    const value = source[name]
    if (value !== undefined) trusted[name] = value
  }
  return scrubbedEnv(source, { trusted: { ...trusted, ...extra } })
}

export interface SpawnChildOptions {
  argv: [string, ...string[]]
  cwd: string
  env: Record<string, string>
  provider: string
  /** `parentWritable`: a bare `argv[0]` found only in a PATH folder there is refused. */
  agentWritable?: readonly string[]
}

/**
 * Spawns the child through `ctx.subprocess` (own session and process group, tagged, owned).
 * @throws SubagentError `START_FAILED` naming the program, with the `SubprocessError` as cause.
 */
export function spawnChild(subprocess: SubprocessServiceApi, options: SpawnChildOptions): ChildHandle {
  try {
    return subprocess.spawn({ argv: options.argv, cwd: options.cwd, env: options.env, ...(options.agentWritable && { agentWritable: options.agentWritable }) })
  } catch (error) {
    throw new SubagentError('START_FAILED', { reason: `cannot start the "${options.provider}" sub-agent: ${(error as Error).message}` }, {
      cause: error,
    })
  }
}

/** The tail of a stream (the child's stderr, for diagnostics), at most `maxBytes` UTF-8 bytes. */
export class StreamTail {
  private text = ''

  constructor(stream: NodeJS.ReadableStream, private readonly maxChars = 4096) {
    stream.setEncoding?.('utf8')
    stream.on('data', (chunk: string | Buffer) => {
      this.text = (this.text + chunk.toString()).slice(-this.maxChars)
    })
  }

  /** The last line(s) of what was written, trimmed; empty when nothing was. */
  tail(lines = 5): string {
    return this.text.trim().split('\n').slice(-lines).join('\n')
  }
}

/** After a pipe to the child broke, how long to wait for its exit so a diagnostic can name it, in ms. */
export const EXIT_WINDOW_MS = 250

export interface RaceStartOptions<T> {
  /** The protocol handshake (for example ACP initialize + session/new). */
  handshake: Promise<T>
  child: ChildHandle
  signal: AbortSignal
  timeoutMs: number
  provider: string
  /** Text appended to diagnostics, e.g. the child's stderr tail. */
  detail?: () => string
}

/**
 * Races a child's handshake against its exit (even with code 0), the caller's signal and a
 * timeout; only the handshake can win.
 * @throws SubagentError `START_FAILED` naming what happened.
 */
export async function raceStart<T>(options: RaceStartOptions<T>): Promise<T> {
  const { provider } = options
  const detail = (): string => {
    const text = options.detail?.() ?? ''
    return text === '' ? '' : `; its stderr ends with: ${text}`
  }
  let timer: ReturnType<typeof setTimeout> | undefined
  let onAbort: (() => void) | undefined
  const failures = new Promise<never>((_, reject) => {
    void options.child.done.then((exit) =>
      reject(new SubagentError('START_FAILED', { reason: `the "${provider}" sub-agent ${describeExit(exit)} before it was ready${detail()}` })),
    )
    timer = setTimeout(
      () => reject(new SubagentError('START_FAILED', { reason: `the "${provider}" sub-agent was not ready within ${options.timeoutMs} ms${detail()}` })),
      options.timeoutMs,
    )
    onAbort = () =>
      reject(new SubagentError('START_FAILED', { reason: `the "${provider}" sub-agent was cancelled while it started` }, { cause: options.signal.reason }))
    if (options.signal.aborted) onAbort()
    else options.signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([
      options.handshake.catch(async (error: unknown) => {
        if (error instanceof SubagentError) throw error
        // A handshake broken by the child's exit (closed pipe) reads better as that exit.
        const exit = await Promise.race([options.child.done, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), EXIT_WINDOW_MS))])
        if (exit !== undefined) {
          throw new SubagentError('START_FAILED', { reason: `the "${provider}" sub-agent ${describeExit(exit)} before it was ready${detail()}` })
        }
        throw new SubagentError('START_FAILED', { reason: `the "${provider}" sub-agent failed its handshake: ${messageOf(error)}${detail()}` }, {
          cause: error,
        })
      }),
      failures,
    ])
  } finally {
    clearTimeout(timer)
    if (onAbort) options.signal.removeEventListener('abort', onAbort)
    failures.catch(() => {})
  }
}

export interface DisposeProcessOptions {
  child: ChildHandle
  /** Step 1: the protocol's own cancel or shutdown; best-effort, errors are ignored. */
  shutdown?: () => void | Promise<void>
  eofGraceMs: number
  graceMs: number
  provider: string
}

/**
 * The teardown ladder: `shutdown` (bounded by the EOF grace) → close stdin → wait `eofGraceMs`
 * → terminate the tree (SIGTERM, `graceMs`, SIGKILL; also after a clean exit, which sweeps tagged
 * descendants) → no survivors.
 * @throws SubagentError `TEARDOWN_FAILED` listing the survivors (call again to retry).
 */
export async function disposeProcess(options: DisposeProcessOptions): Promise<TerminateReport> {
  const { child } = options
  let exited = false
  void child.done.then(() => (exited = true))
  const deadline = Date.now() + options.eofGraceMs
  if (options.shutdown) {
    await withinMs(Promise.resolve().then(options.shutdown).catch(() => {}), options.eofGraceMs)
  }
  child.end()
  if (!exited) await withinMs(child.done, Math.max(0, deadline - Date.now()))
  const report = await child.terminate({ graceMs: options.graceMs })
  if (report.survivors.length > 0) {
    throw new SubagentError('TEARDOWN_FAILED', { provider: options.provider, survivors: report.survivors.map((record) => `${record.comm} (pid ${record.pid})`) })
  }
  return report
}

async function withinMs(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))])
  clearTimeout(timer)
}

