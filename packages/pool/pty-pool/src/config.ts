/** The pool's configuration: CLI kinds, accounts, per-agent routing and limits; a mistake fails at load naming the field. */
import { basename, delimiter, isAbsolute } from 'node:path'
import { isIP } from 'node:net'
import { z } from 'zod'
import { resolveExecutable, skippedExecutables } from '@conch/subprocess'
import { PoolError } from './errors.ts'
import { findBuiltinCommand } from './kinds.ts'

/** A regular expression given as its source text; checked at load. */
const Pattern = z.string().min(1).refine((source) => {
  try {
    new RegExp(source, 'm')
    return true
  } catch {
    return false
  }
}, 'not a valid regular expression')

/** How a transcript file is read (where the kind names one). */
export const TranscriptConfig = z.strictObject({
  /**
   * `claude-jsonl`: `<dir>/**\/*.jsonl`, assistant `message.content[].text`; `claude-stop`:
   * `<dir>/**\/*.jsonl`, one Claude Code `Stop` hook input a line (`last_assistant_message`),
   * written as the turn ends, so a new line ends the turn; `codex-rollout`:
   * `<dir>/**\/rollout-*.jsonl`, `response_item` assistant `output_text`.
   */
  format: z.enum(['claude-jsonl', 'claude-stop', 'codex-rollout']),
  /** Directory template ({home}, {cwd}). */
  dir: z.string().min(1),
  /** Bytes one check reads at most from where the last one stopped (the CLI writes its transcript; it may be of any size). */
  maxReadBytes: z.number().int().positive().default(4 * 1024 * 1024),
  /** Bytes one transcript line may have; a longer line is skipped, with a warning naming the file and this bound. */
  maxLineBytes: z.number().int().positive().default(4 * 1024 * 1024),
})
export type TranscriptConfig = z.output<typeof TranscriptConfig>

/** One CLI kind. Templates may use {home} (the session's private home), {cwd}, {model}, {sentinel}, {instruction} and {instructionJson}. */
export const KindConfig = z.strictObject({
  /** Executable: an absolute path, or a name looked up on PATH at load (built-in claude and codex: in `.products/` first, as the sub-agent providers look). */
  command: z.string().min(1),
  /** Arguments of the interactive REPL. */
  args: z.array(z.string()).default([]),
  /** Flag that carries the sentinel instruction as its next argument (Claude Code: `--append-system-prompt`); absent when a seeded file carries it. */
  instructionFlag: z.string().optional(),
  /** The model when the key names none (fills {model}). */
  defaultModel: z.string().default(''),
  /** Flag that selects the model as its next argument, when the key names one. */
  modelFlag: z.string().optional(),
  /** Arguments added when the key's bare mode is on (Claude Code: `--bare`, its minimal mode). */
  bareArgs: z.array(z.string()).default([]),
  /** Files written into the private home before the CLI starts: relative path → content template. */
  files: z.record(z.string(), z.string()).default({}),
  /** Environment set for the CLI: name → template. */
  env: z.record(z.string(), z.string()).default({}),
  /** Variables copied from the server's environment when set. */
  passEnv: z.array(z.string()).default([]),
  /** A screen row matching this means the input prompt is up (boot done). */
  readyPattern: Pattern,
  /** While a row matches this, the CLI is busy (its "esc to interrupt" hint). */
  busyPattern: Pattern,
  /** Rows matching this are status lines (spinners, elapsed time) and never count as progress. */
  statusPattern: Pattern.optional(),
  /** Group 1 is a token count shown while the CLI works; a rising count is progress. */
  tokenPattern: Pattern.optional(),
  /** Decoration in front of an answer's first row (`● `, `• `), removed. */
  answerPrefix: Pattern.optional(),
  /** Screen text that marks a dialog the boot must not meet (any match fails the boot with the screen's text). */
  dialogPattern: Pattern.optional(),
  /**
   * `multi-line`: a bracketed paste (xterm DECSET 2004) only for a prompt that spans lines; `always`:
   * every prompt while the CLI has DECSET 2004 on (for a CLI that holds fast keys back as a paste).
   */
  paste: z.enum(['multi-line', 'always']).default('multi-line'),
  /** Prompts longer than this (characters) go through a file the prompt names. */
  pasteCollapseChars: z.number().int().positive().default(800),
  /** Keys that clear the input line (default Ctrl-U). */
  clearKeys: z.string().default('\u0015'),
  /** Keys that interrupt an answer (default ESC). */
  interruptKeys: z.string().default('\u001b'),
  /** Where an exact transcript can be read. */
  transcript: TranscriptConfig.optional(),
  /** Where it is read under `bareArgs`, when that differs (Claude Code's `--bare` runs no hook of `--settings`). */
  bareTranscript: TranscriptConfig.optional(),
  /** Arguments of the one-shot mode for API-key accounts; `{prompt}` is the prompt. */
  oneShotArgs: z.array(z.string()).optional(),
  /** The sub-agent provider that runs the same prompt fresh when the pool fails (`claude-code`, `codex`). */
  fallbackProvider: z.string().optional(),
  /** Whether the CLI's terminal keeps network access (it must reach its model API). */
  network: z.boolean().default(true),
  rows: z.number().int().min(10).default(40),
  cols: z.number().int().min(40).default(160),
})
export type KindConfig = z.output<typeof KindConfig>
export type KindInput = z.input<typeof KindConfig>

/** An account: its type decides the route, its variables are read from the server's environment at spawn. */
export const AccountConfig = z.strictObject({
  /** `api-key`: the one-shot mode works, take a one-shot PTY invoke; `oauth`: the warm REPL. */
  type: z.enum(['api-key', 'oauth']),
  /** CLI variable → the server's variable holding the value (values never live in config). */
  env: z.record(z.string(), z.string()).default({}),
})
export type AccountConfig = z.output<typeof AccountConfig>

/** Per-agent routing. */
export const AgentRoute = z.strictObject({
  runtime: z.enum(['fresh-spawn', 'pty-pool']).default('fresh-spawn'),
  kind: z.string().min(1),
  model: z.string().default(''),
  account: z.string().default(''),
  bare: z.boolean().default(false),
})
export type AgentRoute = z.output<typeof AgentRoute>

const LOOPBACK_NAMES = new Set(['127.0.0.1', '::1', 'localhost'])

/** True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x (RFC 1122 §3.2.1.3, RFC 4291 §2.5.3). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false
  const bare = address.startsWith('::ffff:') ? address.slice(7) : address
  if (bare === '::1') return true
  return isIP(bare) === 4 && bare.startsWith('127.')
}

export const StatusConfig = z.strictObject({
  /** Loopback address only; anything else is refused at load. */
  host: z.string().default('127.0.0.1').refine((host) => LOOPBACK_NAMES.has(host) || isLoopbackAddress(host), 'the status endpoint binds loopback only (127.0.0.0/8 or ::1)'),
  /** 0 picks a free port. */
  port: z.number().int().min(0).max(65535).default(0),
  /** Connections open at once; more are closed as they arrive (each holds a descriptor of this process). */
  maxConnections: z.number().int().positive().default(32),
  /** A connection that has not sent its complete request headers within this is closed, ms. */
  headersTimeoutMs: z.number().int().positive().default(5_000),
  /** A connection whose request is not complete within this is closed, ms (at least `headersTimeoutMs`). */
  requestTimeoutMs: z.number().int().positive().default(10_000),
  /** An idle keep-alive connection is closed after this, ms. */
  keepAliveTimeoutMs: z.number().int().positive().default(5_000),
}).refine((status) => status.requestTimeoutMs >= status.headersTimeoutMs, { message: 'requestTimeoutMs must be at least headersTimeoutMs', path: ['requestTimeoutMs'] })
export type StatusConfig = z.output<typeof StatusConfig>

/** The supervisor of a managed worker (`worker: managed`). */
export const SupervisorConfig = z.strictObject({
  /** argv of the worker; default: the running conch bin with `pool-worker` (`[node, argv[1], 'pool-worker']`). */
  command: z.array(z.string().min(1)).min(1).optional(),
  /** Health ping period, ms. */
  pingEveryMs: z.number().int().positive().default(2_000),
  /** A ping without a pong within this is a health miss, ms. */
  pingTimeoutMs: z.number().int().positive().default(1_000),
  /** This many misses in a row: the worker is killed and restarted. */
  maxMisses: z.number().int().positive().default(3),
  /** First restart delay, doubled after each restart that did not stay up, ms. */
  backoffMs: z.number().int().positive().default(250),
  /** Largest restart delay, ms. */
  backoffMaxMs: z.number().int().positive().default(10_000),
  /** The worker is up this long: the next restart starts from `backoffMs` again, ms. */
  stableMs: z.number().int().positive().default(30_000),
  /** Spawn → the worker's `ready`, ms; an invoke waits at most this for a (re)starting worker. */
  readyTimeoutMs: z.number().int().positive().default(15_000),
  /** SIGTERM → SIGKILL at shutdown, ms. */
  termGraceMs: z.number().int().positive().default(5_000),
  /** How long a cancelled invoke waits for the worker's confirmation before the worker is killed, ms. */
  cancelGraceMs: z.number().int().positive().default(10_000),
  /** Largest line the worker may send, bytes. */
  maxMessageBytes: z.number().int().min(1024).default(4 * 1024 * 1024),
})
export type SupervisorConfig = z.output<typeof SupervisorConfig>

export const PoolConfig = z.strictObject({
  /** The kill switch: when true every invoke takes the fresh-spawn path. */
  killSwitch: z.boolean().default(false),
  /** `in-process` or `managed` (a supervised `conch pool-worker` process). */
  worker: z.enum(['in-process', 'managed']).default('in-process'),
  /** The managed worker's supervisor. */
  supervisor: SupervisorConfig.default(() => SupervisorConfig.parse({})),
  /**
   * `conch`: each CLI a terminal of its owner agent, under its sandbox policy; `unconfined`: under
   * `danger-full-access` — the CLI reads and writes whatever conch can.
   */
  terminal: z.enum(['conch', 'unconfined']).default('conch'),
  /** `worker: managed`: the `@conch/sandbox-local` and `@conch/pty-local` config the worker composes its ctx.pty from. */
  workerTerminals: z
    .strictObject({ sandboxLocal: z.record(z.string(), z.unknown()).default({}), ptyLocal: z.record(z.string(), z.unknown()).default({}) })
    .default({ sandboxLocal: {}, ptyLocal: {} }),
  /** Shutdown: how long in-flight invokes may take to finish before sessions are closed, ms. */
  drainMs: z.number().int().nonnegative().default(10_000),
  maxSessions: z.number().int().positive().default(8),
  bootTimeoutMs: z.number().int().positive().default(30_000),
  /** No substantive progress for this long fails the invoke (env CONCH_POOL_STALL_MS). */
  stallMs: z.number().int().positive().default(120_000),
  /** Absolute cap of one invoke (env CONCH_POOL_HARD_CAP_MS). */
  hardCapMs: z.number().int().positive().default(1_800_000),
  idleEvictMs: z.number().int().positive().default(600_000),
  evictEveryMs: z.number().int().positive().default(60_000),
  /** Quiet time after the closing sentinel before the answer is taken, ms. */
  settleMs: z.number().int().min(0).default(150),
  /** How long to wait for the prompt's echo, ms. */
  echoTimeoutMs: z.number().int().positive().default(5_000),
  /** Grace between TERM and KILL when the managed worker's tree is stopped, ms (a session closes with the terminal backend's grace). */
  closeGraceMs: z.number().int().positive().default(2_000),
  /** Where private homes are made (absolute); default `<state home>/conch/pool`. */
  stateDir: z.string().optional(),
  /** The session's working directory when the caller gives none. */
  cwd: z.string().optional(),
  /** Kinds by name; an entry named like a built-in kind (claude, codex, generic) overrides only the fields it sets. */
  kinds: z.record(z.string(), z.record(z.string(), z.unknown())).default({}),
  accounts: z.record(z.string(), AccountConfig).default({}),
  /** Per-agent settings; a malformed entry falls back to fresh-spawn (see `routeFor`). */
  agents: z.record(z.string(), z.unknown()).default({}),
  status: StatusConfig.optional(),
})
export type PoolConfig = Omit<z.output<typeof PoolConfig>, 'kinds'> & { kinds: Record<string, KindConfig> }


/**
 * Loads the pool's config: applies the env overrides, checks every configured kind's binary,
 * and checks that every well-formed agent route names a known kind and account. A binary named
 * without a path is never taken from a PATH folder inside `writable` (folders agents may write).
 * @throws PoolError `CONFIG_INVALID` naming the field.
 */
export function loadPoolConfig(input: unknown, env: Readonly<Record<string, string | undefined>> = process.env, builtins: Record<string, KindInput> = {}, writable: readonly string[] = []): PoolConfig {
  const parsed = parseField(PoolConfig, input ?? {}, (path) => `pool config: ${path || '(root)'}`)
  const kinds: Record<string, KindConfig> = {}
  for (const name of new Set([...Object.keys(builtins), ...Object.keys(parsed.kinds)])) {
    const given = parsed.kinds[name]
    const found = builtins[name] !== undefined && given?.command === undefined ? findBuiltinCommand(name, env, writable) : undefined
    const kind = parseField(KindConfig, { ...builtins[name], ...(found !== undefined && { command: found }), ...given }, (path) => `pool config: kinds.${name}.${path}`)
    // A configured kind's binary must exist now; a built-in one only when an agent routes to it.
    if (given) assertExecutable(kind.command, `pool config: kinds.${name}.command`, writable)
    kinds[name] = kind
  }
  const config: PoolConfig = { ...parsed, kinds }
  if (config.worker === 'managed') {
    const command = config.supervisor.command
    if (command) assertExecutable(command[0]!, 'pool config: supervisor.command', writable)
    if (!command && !/^conch(\.m?js)?$/.test(basename(process.argv[1] ?? ''))) {
      throw new PoolError('CONFIG_INVALID', { field: 'pool config: supervisor.command', problem: `this process (${process.argv[1] ?? process.argv0}) is not the conch bin, so worker: "managed" needs the worker's argv, e.g. ["node", "/path/to/conch.js", "pool-worker"]` })
    }
  }
  for (const [name, variable] of [['stallMs', 'CONCH_POOL_STALL_MS'], ['hardCapMs', 'CONCH_POOL_HARD_CAP_MS']] as const) {
    const raw = env[variable]
    if (raw === undefined || raw === '') continue
    const value = Number(raw)
    if (!Number.isInteger(value) || value <= 0) throw new PoolError('CONFIG_INVALID', { field: variable, problem: `expected a positive integer of milliseconds, got "${raw}"` })
    config[name] = value
  }
  for (const [agent, raw] of Object.entries(config.agents)) {
    const route = AgentRoute.safeParse(raw)
    if (!route.success || route.data.runtime !== 'pty-pool') continue
    if (!(route.data.kind in config.kinds)) throw new PoolError('CONFIG_INVALID', { field: `pool config: agents.${agent}.kind`, problem: `unknown kind "${route.data.kind}"; known: ${Object.keys(config.kinds).join(', ')}` })
    assertExecutable(config.kinds[route.data.kind]!.command, `pool config: agents.${agent}.kind`, writable, `the "${route.data.kind}" binary "${config.kinds[route.data.kind]!.command}" is missing`)
    if (route.data.account && !(route.data.account in config.accounts)) throw new PoolError('CONFIG_INVALID', { field: `pool config: agents.${agent}.account`, problem: `unknown account "${route.data.account}"` })
  }
  return config
}

/** The route of one agent; a missing or malformed setting is `fresh-spawn`, so the pool is only ever opted into. */
export function routeFor(config: PoolConfig, agent: string): AgentRoute | { runtime: 'fresh-spawn' } {
  const parsed = AgentRoute.safeParse(config.agents[agent])
  if (!parsed.success) return { runtime: 'fresh-spawn' }
  return parsed.data
}

/**
 * The config as a managed worker receives it (the main process already ran `loadPoolConfig`): shapes only.
 * @throws PoolError `CONFIG_INVALID` naming the field.
 */
export function parseWorkerConfig(input: unknown): PoolConfig {
  const parsed = parseField(PoolConfig, input, (path) => `worker config: ${path || '(root)'}`)
  const kinds: Record<string, KindConfig> = {}
  for (const [name, raw] of Object.entries(parsed.kinds)) kinds[name] = parseField(KindConfig, raw, (path) => `worker config: kinds.${name}.${path}`)
  return { ...parsed, kinds }
}

/** @throws PoolError `CONFIG_INVALID` at the first issue, its path rendered as a field by `field`. */
function parseField<T extends z.ZodType>(schema: T, input: unknown, field: (path: string) => string): z.output<T> {
  const parsed = schema.safeParse(input)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]!
  throw new PoolError('CONFIG_INVALID', { field: field(issue.path.join('.')), problem: issue.message })
}

/** @throws PoolError `CONFIG_INVALID` for `field` when `command` does not resolve to an executable file outside `writable` (`resolveExecutable`). */
function assertExecutable(command: string, field: string, writable: readonly string[], missing = `"${command}" is not an executable file${isAbsolute(command) ? '' : ' on PATH'}`): void {
  const path = process.env['PATH'] ?? ''
  if (resolveExecutable(command, path, writable)) return
  throw new PoolError('CONFIG_INVALID', { field, problem: skippedExecutables(command, path, writable) ?? missing })
}
