/**
 * `PtyService` (ctx.pty): the backend registry, session ids and ownership, the
 * one-send-at-a-time reservation, and the lifecycle of spawns and sessions. Backends only
 * start terminals and settle sends; every rule about who may touch what lives here, so every
 * backend gets the same rules.
 */
import { type Context, Service, type Tracker } from 'cordis'
import { z } from 'zod'
import type { SandboxPolicyServiceApi } from '@conch/sandbox-policy'
import { describeExit, messageOf, registerUnique } from '@conch/session'
import {
  type BackendSession,
  type ScreenState,
  type ScreenStateOptions,
  type CloseResult,
  type ClosedProcess,
  PTY_SIGNALS,
  type PtyBackend,
  PtyError,
  type PtyOwner,
  type PtyServiceApi,
  type PtySignal,
  type ReadOptions,
  type ReadPage,
  type SendInput,
  type SecretValue,
  type SendPayload,
  type SendOperation,
  type SessionInfo,
  type SignalResult,
  type SpawnOptions,
  type SpawnResult,
  type TerminalSize,
  MAX_SESSION_NAME_CHARS,
  MAX_TERMINAL_COLS,
  MAX_TERMINAL_ROWS,
} from './types.ts'
import { processNames } from './helpers.ts'

declare module 'cordis' {
  interface Context {
    pty: PtyService
  }
}

/** A published session: the backend's handle plus what the service tracks about it. */
interface SessionEntry {
  readonly id: string
  readonly owner: PtyOwner
  readonly type: string
  readonly name: string | undefined
  readonly backend: BackendSession
  readonly createdAt: string
  /** Where the session is in its life; the one field that says so. */
  phase: SessionPhase
}

/**
 * A published session's phase:
 * - `open`: idle, ready for a send;
 * - `busy`: a send is active (`send`: its token, so only that send's end releases it);
 * - `closing`: a close is in flight (`attempt`, shared by concurrent closes); from here on
 *   only `close`, `status` and `read` reach the backend;
 * - `close-failed`: the last close failed; the session stays listed, refuses sends and
 *   signals, and a later close retries.
 */
type SessionPhase =
  | { phase: 'open' }
  | { phase: 'busy'; send: object }
  | { phase: 'closing'; attempt: Promise<CloseResult> }
  | { phase: 'close-failed' }

/** A spawn whose backend has not settled yet (or whose rollback is still running). */
interface SpawnEntry {
  readonly id: string
  readonly owner: PtyOwner
  readonly name: string | undefined
  /** Service-owned: aborted by the caller's signal, the owner's disposal or the service's disposal. */
  readonly controller: AbortController
  /** Resolves (never rejects) when the spawn has published or finished rolling back. */
  readonly settled: Promise<void>
}

/** A rollback close that failed; kept as owner activity until a dispose reports it. */
interface CleanupFailure {
  readonly sessionId: string
  readonly owner: PtyOwner
  readonly error: Error
}

/** Unknown keys are refused so a misplaced setting fails at load. */
const Config = z
  .strictObject({
    maxSessionsPerOwner: z
      .number()
      .int()
      .positive()
      .default(32)
      .describe('Most terminals one agent may hold at once (open, opening, or closing after a failed close); one more spawn fails with TOO_MANY_SESSIONS.'),
  })
  .prefault({})

/** Read page defaults (ReadOptions). */
const DEFAULT_READ_COUNT = 500

export default class PtyService extends Service implements PtyServiceApi {
  static Config = Config

  // Mutable state lives in containers: Cordis hands methods a proxied `this`.
  private readonly backends = new Map<string, PtyBackend>()
  private readonly sessions = new Map<string, SessionEntry>()
  private readonly spawns = new Map<string, SpawnEntry>()
  private readonly failures: CleanupFailure[] = []
  /** Per owner, the sessions a close took away, with what `closeIfIdle` said: `NO_SESSION` names them. */
  private readonly closed = new WeakMap<PtyOwner, Map<string, { reason?: string }>>()
  /** Owners whose disposal hook is installed, with the hook's disposer. */
  private readonly owners = new Map<PtyOwner, () => void>()
  /** The next session number per id prefix (`PtyOwner.sessionPrefix`, default `pty`). */
  private readonly nextIds = new Map<string, number>()
  private readonly state: { disposing: Promise<void> | undefined } = { disposing: undefined }
  private readonly warn: (message: string, error: unknown) => void

  constructor(ctx: Context, public config: PtyService.Config) {
    super(ctx, 'pty')
    // Every send goes through `ctx.pty`'s proxy: no shadow context per call (`this.ctx` in a method
    // stays the caller's) and no lookup of `pty.<name>` properties (conch declares none).
    const tracker = (this as unknown as Record<symbol, Tracker>)[Service.tracker]!
    tracker.noShadow = true
    delete tracker.associate
    const logger = ctx.logger
    this.warn = (message, error) => logger.warn(message, error)
    ctx.effect(() => () => this.shutdown(), 'pty.dispose')
    // A shell started under one sandbox policy keeps it for life, so a mode change is refused
    // while the session's owner has terminals (open, opening, or a failed close) — for every
    // backend, whenever a sandbox policy service is loaded.
    ctx.inject(['sandboxPolicy'], (scope) => {
      const policy = scope.get('sandboxPolicy') as SandboxPolicyServiceApi
      policy.fence({ name: 'terminals', busy: (sessionId) => this.modeChangeBlocker(sessionId) })
    })
  }

  /**
   * Why the sandbox mode of session log `sessionId` may not change now: `terminal pty-1 is open
   * or opening` (its owners' activity), or undefined when nothing holds it.
   */
  modeChangeBlocker(sessionId: string): string | undefined {
    const ids = [...this.owners.keys()].filter((owner) => owner.session?.id === sessionId).flatMap((owner) => this.activity(owner))
    if (ids.length === 0) return undefined
    return `terminal${ids.length > 1 ? 's' : ''} ${ids.join(', ')} ${ids.length > 1 ? 'are' : 'is'} open or opening`
  }

  registerBackend(backend: PtyBackend): () => void {
    this.assertOpen()
    if (typeof backend?.type !== 'string' || backend.type === '') {
      throw new PtyError('INVALID_INPUT', { reason: 'a PTY backend needs a non-empty string `type`' })
    }
    const duplicate = () => new PtyError('DUPLICATE_BACKEND', { type: backend.type })
    return registerUnique(this.ctx, this.backends, backend.type, backend, duplicate, `pty.backend(${backend.type})`)
  }

  types(): string[] {
    return [...this.backends.keys()]
  }

  async spawn(owner: PtyOwner, options: SpawnOptions, signal?: AbortSignal): Promise<SpawnResult> {
    this.assertOpen()
    assertLive(owner)
    const { type, name, cwd } = validateSpawnOptions(options)
    const size = validateSize(options, 'open', true)
    const program = validateProgram(options)
    const backend = this.backends.get(type)
    if (!backend) throw new PtyError('NO_BACKEND', { type, known: this.types() })
    if (name !== undefined) {
      const holder = this.nameHolder(owner, name)
      if (holder) throw new PtyError('DUPLICATE_NAME', { owner: owner.id, name, holder })
    }
    const held = this.activity(owner).length
    if (held >= this.config.maxSessionsPerOwner) {
      throw new PtyError('TOO_MANY_SESSIONS', { owner: owner.id, held, max: this.config.maxSessionsPerOwner })
    }
    if (signal?.aborted) throw signal.reason

    this.track(owner)
    const prefix = owner.sessionPrefix ?? 'pty'
    if (!/^[a-z][a-z0-9]*$/.test(prefix)) throw new PtyError('INVALID_INPUT', { reason: `${owner.id}: a session id prefix is lower-case letters and digits, not ${JSON.stringify(prefix)}` })
    const number = this.nextIds.get(prefix) ?? 1
    this.nextIds.set(prefix, number + 1)
    const id = `${prefix}-${number}`
    const controller = new AbortController()
    const unlink = linkAbort(controller, [
      [signal, () => signal?.reason],
      [owner.signal, () => notLive(owner)],
    ])
    let markSettled!: () => void
    const settled = new Promise<void>((resolve) => { markSettled = resolve })
    this.spawns.set(id, { id, owner, name, controller, settled })
    try {
      return await this.runSpawn({ id, owner, type, name, cwd, size, program, backend, controller, signal })
    } finally {
      this.spawns.delete(id)
      unlink()
      markSettled()
      // A spawn that failed gives its number back when no later spawn took one and nothing is
      // pending under it, so ids stay consecutive for the sessions that exist (scripts name them).
      const pending = this.failures.some((failure) => failure.sessionId === id)
      if (!this.sessions.has(id) && !pending && this.nextIds.get(prefix) === number + 1) this.nextIds.set(prefix, number)
    }
  }

  startSend(owner: PtyOwner, sessionId: string, input: SendInput): SendOperation {
    const entry = this.entry(owner, sessionId)
    const payload = payloadOf(input, sessionId)
    for (const key of ['timeoutMs', 'idleMs'] as const) {
      const value = input[key]
      if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
        throw new PtyError('INVALID_INPUT', { reason: `${key} of a send to ${sessionId} must be a positive integer of milliseconds, not ${String(value)}; nothing was written` })
      }
    }
    if (entry.phase.phase === 'closing' || entry.phase.phase === 'close-failed') throw closing(entry.id)
    if (entry.phase.phase === 'busy') {
      throw new PtyError('SEND_ACTIVE', { reason: `PTY session ${entry.id} is still running a send; wait for it with task_output or interrupt it with terminal_signal SIGINT, then send again` })
    }
    assertRunning(entry, 'nothing was written. Its scrollback can still be read; open a new session to continue')

    const token = {}
    entry.phase = { phase: 'busy', send: token }
    const release = () => {
      if (entry.phase.phase === 'busy' && entry.phase.send === token) entry.phase = { phase: 'open' }
    }
    let operation: SendOperation
    try {
      operation = entry.backend.startSend({
        ...payload,
        submit: input.submit,
        ...(input.timeoutMs !== undefined && { timeoutMs: input.timeoutMs }),
        ...(input.idleMs !== undefined && { idleMs: input.idleMs }),
      })
    } catch (error) {
      release()
      throw error
    }

    let unlink = () => {}
    const callerSignal = input.signal
    if (callerSignal) {
      const onAbort = () => {
        operation.cancel().catch((error: unknown) => this.warn(`cancelling the send on ${entry.id} failed`, error))
      }
      if (callerSignal.aborted) onAbort()
      else {
        callerSignal.addEventListener('abort', onAbort, { once: true })
        unlink = () => callerSignal.removeEventListener('abort', onAbort)
      }
    }
    const done = operation.done.finally(() => {
      unlink()
      release()
    })
    return {
      done,
      readOutput: () => operation.readOutput(),
      onOutput: (listener) => operation.onOutput(listener),
      ...(operation.screen !== undefined && { screen: () => operation.screen?.() }),
      cancel: () => operation.cancel(),
    }
  }

  read(owner: PtyOwner, sessionId: string, options: ReadOptions = {}): ReadPage {
    const entry = this.entry(owner, sessionId)
    const offset = options.offset ?? 0
    const count = options.count ?? DEFAULT_READ_COUNT
    if (!isCount(offset) || !isCount(count)) {
      throw new PtyError('INVALID_INPUT', { reason: `read ${sessionId}: offset and count must be non-negative integers (lines), got offset=${String(offset)} count=${String(count)}` })
    }
    return entry.backend.read({ offset, count })
  }

  screen(owner: PtyOwner, sessionId: string): string {
    const entry = this.entry(owner, sessionId)
    if (entry.backend.screen === undefined) {
      throw new PtyError('INVALID_INPUT', { reason: `PTY session ${sessionId} (type ${entry.type}) keeps no screen model; read its scrollback instead` })
    }
    return entry.backend.screen()
  }

  resize(owner: PtyOwner, sessionId: string, size: TerminalSize): void {
    const entry = this.entry(owner, sessionId)
    const { rows, cols } = validateSize(size, 'resize', false) as TerminalSize
    if (entry.backend.resize === undefined) {
      throw new PtyError('INVALID_INPUT', { reason: `PTY session ${sessionId} (type ${entry.type}) cannot be resized` })
    }
    entry.backend.resize({ rows, cols })
  }

  async signal(owner: PtyOwner, sessionId: string, signal: PtySignal): Promise<SignalResult> {
    const entry = this.entry(owner, sessionId)
    if (!(PTY_SIGNALS as readonly string[]).includes(signal)) {
      throw new PtyError('INVALID_INPUT', { reason: `cannot send ${String(signal)} to ${sessionId}; allowed signals: ${PTY_SIGNALS.join(', ')}` })
    }
    if (entry.phase.phase === 'closing' || entry.phase.phase === 'close-failed') throw closing(entry.id)
    assertRunning(entry, 'no signal was sent')
    return entry.backend.signal(signal)
  }

  async write(owner: PtyOwner, sessionId: string, data: string): Promise<void> {
    const entry = this.entry(owner, sessionId)
    if (typeof data !== 'string') throw new PtyError('INVALID_INPUT', { reason: `a write to ${sessionId} takes a string, not ${typeof data}; nothing was written` })
    if (entry.backend.write === undefined) {
      throw new PtyError('INVALID_INPUT', { reason: `PTY session ${sessionId} (type ${entry.type}) takes no raw writes; use a send` })
    }
    if (entry.phase.phase === 'closing' || entry.phase.phase === 'close-failed') throw closing(entry.id)
    if (entry.phase.phase === 'busy') {
      throw new PtyError('SEND_ACTIVE', { reason: `PTY session ${entry.id} is running a send; a raw write would interleave with it, so nothing was written. Wait for the send or cancel it first` })
    }
    assertRunning(entry, 'nothing was written')
    await entry.backend.write(data)
  }

  screenState(owner: PtyOwner, sessionId: string, options: ScreenStateOptions = {}): ScreenState {
    const entry = this.entry(owner, sessionId)
    if (entry.backend.screenState === undefined) {
      throw new PtyError('INVALID_INPUT', { reason: `PTY session ${sessionId} (type ${entry.type}) keeps no full screen model; open it with a command, or read its screen or scrollback` })
    }
    return entry.backend.screenState({ scrollback: options.scrollback === true })
  }

  onChange(owner: PtyOwner, sessionId: string, listener: () => void): () => void {
    const entry = this.entry(owner, sessionId)
    if (entry.backend.onChange === undefined) {
      throw new PtyError('INVALID_INPUT', { reason: `PTY session ${sessionId} (type ${entry.type}) does not report output changes` })
    }
    return entry.backend.onChange(listener)
  }

  async close(owner: PtyOwner, sessionId: string): Promise<CloseResult> {
    return this.closeEntry(this.entry(owner, sessionId))
  }

  async closeIfIdle(owner: PtyOwner, sessionId: string, reason: string): Promise<CloseResult | undefined> {
    const entry = this.entry(owner, sessionId)
    const { phase } = entry
    if (phase.phase !== 'open' || entry.backend.leftRunning === undefined || entry.backend.status().state !== 'running') return undefined
    const left = await entry.backend.leftRunning()
    // A send that began (or ran and ended) while the backend looked replaced the phase.
    if (left === undefined || left.length > 0 || entry.phase !== phase || this.state.disposing) return undefined
    return this.closeEntry(entry, reason)
  }

  list(owner: PtyOwner): SessionInfo[] {
    return [...this.sessions.values()]
      .filter((entry) => entry.owner === owner)
      .sort(byId)
      .map((entry) => this.info(entry))
  }

  hasOwnerActivity(owner: PtyOwner): boolean {
    return this.activity(owner).length > 0
  }

  activity(owner: PtyOwner): string[] {
    const ids = new Set<string>()
    for (const entry of this.sessions.values()) if (entry.owner === owner) ids.add(entry.id)
    for (const entry of this.spawns.values()) if (entry.owner === owner) ids.add(entry.id)
    for (const failure of this.failures) if (failure.owner === owner) ids.add(failure.sessionId)
    return [...ids].sort((a, b) => idNumber(a) - idNumber(b))
  }

  // ─── lifecycle ──────────────────────────────────────────────────────────────────

  private async runSpawn(request: {
    id: string
    owner: PtyOwner
    type: string
    name: string | undefined
    cwd: string | undefined
    size: Partial<TerminalSize>
    program: ProgramOptions
    backend: PtyBackend
    controller: AbortController
    signal: AbortSignal | undefined
  }): Promise<SpawnResult> {
    const { id, owner, type, name, cwd, size, program, backend, controller, signal } = request
    let session: BackendSession
    try {
      session = await backend.spawn({
        owner,
        sessionId: id,
        ...(name !== undefined && { name }),
        ...(cwd !== undefined && { cwd }),
        ...size,
        ...program,
        signal: controller.signal,
      })
    } catch (error) {
      if (signal?.aborted) throw signal.reason
      if (controller.signal.aborted) throw controller.signal.reason
      if (error instanceof PtyError) throw error
      throw new PtyError('SPAWN_FAILED', { reason: `could not start a "${type}" PTY session: ${messageOf(error)}` }, { cause: error })
    }

    // Re-check everything that may have changed while the backend worked.
    const refusal = signal?.aborted
      ? { reason: signal.reason as unknown }
      : this.state.disposing
        ? { reason: disposingError() }
        : owner.state !== 'live'
          ? { reason: notLive(owner) }
          : controller.signal.aborted
            ? { reason: controller.signal.reason as unknown }
            : undefined
    if (refusal) {
      const failure = await this.rollback(id, owner, session)
      if (signal?.aborted) throw signal.reason
      throw failure ?? refusal.reason
    }

    const entry: SessionEntry = {
      id,
      owner,
      type,
      name,
      backend: session,
      createdAt: new Date().toISOString(),
      phase: { phase: 'open' },
    }
    this.sessions.set(id, entry)
    return { ...this.info(entry), motd: session.motd, ...(session.cwd !== undefined && { cwd: session.cwd }), ...(session.exposed !== undefined && session.exposed.length > 0 && { exposed: session.exposed }) }
  }

  /** Closes a session that was never published. A failure is kept as pending owner activity and returned. */
  private async rollback(sessionId: string, owner: PtyOwner, session: BackendSession): Promise<PtyError | undefined> {
    let failure: PtyError | undefined
    try {
      const result = await session.close()
      if (result.survivors.length > 0) failure = survivorsError(sessionId, result.survivors, 'rolling back')
    } catch (error) {
      failure = new PtyError('CLOSE_FAILED', { reason: `rolling back PTY session ${sessionId} failed: ${messageOf(error)}` }, { cause: error })
    }
    if (failure) this.failures.push({ sessionId, owner, error: failure })
    return failure
  }

  /**
   * Closes a published session; concurrent callers share one attempt, a failed attempt is not
   * cached. A session it closed is remembered for its owner, with `reason`.
   */
  private closeEntry(entry: SessionEntry, reason?: string): Promise<CloseResult> {
    if (entry.phase.phase === 'closing') return entry.phase.attempt
    const attempt = (async () => {
      let result: CloseResult
      try {
        result = await entry.backend.close()
      } catch (error) {
        throw new PtyError('CLOSE_FAILED', { reason: `closing PTY session ${entry.id} failed: ${messageOf(error)}; retry the close` }, { cause: error })
      }
      if (result.survivors.length > 0) throw survivorsError(entry.id, result.survivors, 'closing')
      if (this.sessions.get(entry.id) === entry) this.sessions.delete(entry.id)
      const closed = this.closed.get(entry.owner) ?? this.closed.set(entry.owner, new Map()).get(entry.owner)!
      closed.set(entry.id, reason === undefined ? {} : { reason })
      return result
    })()
    entry.phase = { phase: 'closing', attempt }
    attempt.catch(() => {
      if (entry.phase.phase === 'closing' && entry.phase.attempt === attempt) entry.phase = { phase: 'close-failed' }
    })
    return attempt
  }

  /** Installs the owner's disposal hook on first use. */
  private track(owner: PtyOwner): void {
    if (this.owners.has(owner)) return
    this.owners.set(owner, owner.onDispose(() => this.disposeOwner(owner)))
  }

  /**
   * Owner disposal: aborts the owner's spawns, closes its sessions, waits until all of it has
   * settled, and throws every failure together (including pending rollback failures).
   * Sessions whose close failed stay registered so the service's own disposal retries them.
   */
  private async disposeOwner(owner: PtyOwner): Promise<void> {
    this.owners.delete(owner)
    const spawns = [...this.spawns.values()].filter((spawn) => spawn.owner === owner)
    for (const spawn of spawns) spawn.controller.abort(notLive(owner))
    const closes = await Promise.allSettled(
      [...this.sessions.values()].filter((entry) => entry.owner === owner).sort(byId).map((entry) => this.closeEntry(entry)),
    )
    await Promise.all(spawns.map((spawn) => spawn.settled))
    const errors = [...rejections(closes), ...this.takeFailures((failure) => failure.owner === owner)]
    if (errors.length > 0) throw aggregate(errors, `cleaning up the PTY sessions of ${owner.id}`)
  }

  /**
   * Service disposal: aborts every spawn, closes every session, waits for all of it, then clears
   * every registry even when a close failed, and rejects with an `AggregateError` of every close
   * and pending rollback failure. From the first call on, every method refuses with
   * `SERVICE_DISPOSING`. Idempotent. Cordis only logs what a disposer throws, so a host that wants
   * the failures as a value calls it before unloading.
   */
  shutdown(): Promise<void> {
    this.state.disposing ??= (async () => {
      const reason = disposingError()
      const spawns = [...this.spawns.values()]
      for (const spawn of spawns) spawn.controller.abort(reason)
      const closes = await Promise.allSettled([...this.sessions.values()].sort(byId).map((entry) => this.closeEntry(entry)))
      await Promise.all(spawns.map((spawn) => spawn.settled))
      const errors = [...rejections(closes), ...this.takeFailures(() => true)]
      for (const detach of this.owners.values()) {
        try {
          detach()
        } catch {
          // The owner is already disposing; its hook runs against an empty registry.
        }
      }
      this.owners.clear()
      this.sessions.clear()
      this.spawns.clear()
      this.backends.clear()
      if (errors.length > 0) throw aggregate(errors, 'shutting down the PTY service')
    })()
    return this.state.disposing
  }

  // ─── checks ─────────────────────────────────────────────────────────────────────

  private assertOpen(): void {
    if (this.state.disposing) throw disposingError()
  }

  /** Every session call: service open, caller live, session known, caller is its exact owner. */
  private entry(owner: PtyOwner, sessionId: string): SessionEntry {
    this.assertOpen()
    assertLive(owner)
    const entry = typeof sessionId === 'string' ? this.sessions.get(sessionId) : undefined
    if (!entry) {
      const closed = this.closed.get(owner)?.get(sessionId)
      throw new PtyError('NO_SESSION', { sessionId: String(sessionId), ...(closed !== undefined && { closed }) })
    }
    if (entry.owner !== owner) throw new PtyError('FOREIGN_SESSION', { sessionId: entry.id })
    return entry
  }

  /** The id holding `name` for `owner` among its sessions and spawns in flight. */
  private nameHolder(owner: PtyOwner, name: string): string | undefined {
    for (const entry of this.sessions.values()) if (entry.owner === owner && entry.name === name) return entry.id
    for (const entry of this.spawns.values()) if (entry.owner === owner && entry.name === name) return entry.id
    return undefined
  }

  private takeFailures(match: (failure: CleanupFailure) => boolean): Error[] {
    const taken: Error[] = []
    for (let index = 0; index < this.failures.length; ) {
      const failure = this.failures[index]!
      if (match(failure)) {
        taken.push(failure.error)
        this.failures.splice(index, 1)
      } else index++
    }
    return taken
  }

  private info(entry: SessionEntry): SessionInfo {
    const pid = entry.backend.pid
    return {
      sessionId: entry.id,
      ...(entry.name !== undefined && { name: entry.name }),
      type: entry.type,
      ...(pid !== undefined && { pid }),
      status: entry.backend.status(),
      busy: entry.phase.phase === 'busy',
      createdAt: entry.createdAt,
    }
  }
}

export namespace PtyService {
  export type Config = z.output<typeof Config>
}

// ─── helpers ──────────────────────────────────────────────────────────────────────

function validateSpawnOptions(options: SpawnOptions): { type: string; name: string | undefined; cwd: string | undefined } {
  const { type, name, cwd } = options ?? ({} as SpawnOptions)
  if (typeof type !== 'string' || type === '') {
    throw new PtyError('INVALID_INPUT', { reason: 'a PTY session needs a non-empty string `type`, e.g. "shell"' })
  }
  if (name !== undefined && (typeof name !== 'string' || name === '')) {
    throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `name` must be a non-empty string when given' })
  }
  if (name !== undefined && name.length > MAX_SESSION_NAME_CHARS) {
    throw new PtyError('INVALID_INPUT', { reason: `a PTY session \`name\` must be at most ${MAX_SESSION_NAME_CHARS} characters (this one has ${name.length})` })
  }
  if (cwd !== undefined && (typeof cwd !== 'string' || cwd === '')) {
    throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `cwd` must be a non-empty path when given' })
  }
  return { type, name, cwd }
}

/** The program fields of an open, checked: what the backend receives. */
type ProgramOptions = Pick<SpawnOptions, 'command' | 'args' | 'env' | 'network' | 'writablePaths' | 'expose' | 'redact'>

/**
 * `command`, `args`, `env`, `network` and `writablePaths` of an open: a non-empty command
 * without NUL (execve(2) takes NUL-terminated strings), string arguments and values, names
 * without `=` or NUL, a boolean network, absolute folders.
 * @throws PtyError `INVALID_INPUT` naming the field.
 */
function validateProgram(options: SpawnOptions): ProgramOptions {
  const { command, args, env, network, writablePaths, expose, redact } = options
  const out: ProgramOptions = {}
  const clean = (value: unknown) => typeof value === 'string' && !value.includes('\0')
  if (command !== undefined) {
    if (!clean(command) || command === '') throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `command` must be a non-empty string without NUL' })
    out.command = command
  }
  if (args !== undefined) {
    if (command === undefined) throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `args` needs a `command`' })
    if (!Array.isArray(args) || !args.every(clean)) throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `args` must be a list of strings without NUL' })
    out.args = [...args]
  }
  if (env !== undefined) {
    if (env === null || typeof env !== 'object' || Array.isArray(env)) throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `env` must be an object of strings' })
    for (const [key, value] of Object.entries(env)) {
      if (key === '' || key.includes('=') || key.includes('\0') || !clean(value)) {
        throw new PtyError('INVALID_INPUT', { reason: `a PTY session \`env\` entry ${JSON.stringify(key)} must be a name without = or NUL with a string value` })
      }
    }
    out.env = { ...env }
  }
  if (network !== undefined) {
    if (typeof network !== 'boolean') throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `network` must be true or false' })
    out.network = network
  }
  if (writablePaths !== undefined) {
    if (!Array.isArray(writablePaths) || !writablePaths.every((path) => clean(path) && path.startsWith('/') && path !== '/')) {
      throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `writablePaths` must be a list of absolute folders other than /' })
    }
    out.writablePaths = [...writablePaths]
  }
  if (expose !== undefined) {
    if (!Array.isArray(expose) || !expose.every((port) => Number.isInteger(port) && port >= 1 && port <= 65535)) {
      throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `expose` must be a list of ports from 1 to 65535' })
    }
    out.expose = [...expose]
  }
  if (redact !== undefined) {
    const valid = (entry: unknown) =>
      entry !== null && typeof entry === 'object' && typeof (entry as SecretValue).name === 'string' && (entry as SecretValue).name !== '' && typeof (entry as SecretValue).value === 'string'
    if (!Array.isArray(redact) || !redact.every(valid)) throw new PtyError('INVALID_INPUT', { reason: 'a PTY session `redact` must be a list of {name, value} strings' })
    out.redact = redact.map(({ name, value }) => ({ name, value }))
  }
  return out
}

/**
 * `rows` and `cols` of an open (each optional) or a resize (both required): integers within
 * 1–MAX_TERMINAL_ROWS and 1–MAX_TERMINAL_COLS.
 */
function validateSize(options: Partial<TerminalSize>, doing: string, optional: boolean): Partial<TerminalSize> {
  const out: Partial<TerminalSize> = {}
  for (const [key, max] of [['rows', MAX_TERMINAL_ROWS], ['cols', MAX_TERMINAL_COLS]] as const) {
    const value = options?.[key]
    if (value === undefined && optional) continue
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw new PtyError('INVALID_INPUT', { reason: `${doing}: \`${key}\` must be an integer from 1 to ${max}, got ${String(value)}` })
    }
    out[key] = value
  }
  return out
}

function assertLive(owner: PtyOwner): void {
  if (owner.state !== 'live') throw notLive(owner)
}

function notLive(owner: PtyOwner): PtyError {
  return new PtyError('OWNER_NOT_LIVE', { owner: owner.id, state: owner.state })
}

function disposingError(): PtyError {
  return new PtyError('SERVICE_DISPOSING', {})
}

function assertRunning(entry: SessionEntry, outcome: string): void {
  const status = entry.backend.status()
  if (status.state === 'exited') throw new PtyError('SESSION_EXITED', { reason: `PTY session ${entry.id} ${describeExit(status)}; ${outcome}` })
}

function closing(sessionId: string): PtyError {
  return new PtyError('SESSION_EXITED', { reason: `PTY session ${sessionId} is being closed; nothing was written. Retry the close if it failed, or open a new session` })
}

function survivorsError(sessionId: string, survivors: ClosedProcess[], doing: string): PtyError {
  return new PtyError('CLOSE_FAILED', { reason: `${doing} PTY session ${sessionId} left processes running (${processNames(survivors)}); retry the close` })
}

function aggregate(errors: Error[], doing: string): AggregateError {
  return new AggregateError(errors, `${doing} failed: ${errors.map((error) => error.message).join('; ')}`)
}

function rejections(results: PromiseSettledResult<unknown>[]): Error[] {
  return results.flatMap((result) => {
    if (result.status === 'fulfilled') return []
    return [result.reason instanceof Error ? result.reason : new Error(String(result.reason))]
  })
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

function idNumber(id: string): number {
  return Number(id.slice(id.lastIndexOf('-') + 1))
}

function byId(a: { id: string }, b: { id: string }): number {
  return idNumber(a.id) - idNumber(b.id)
}

/** Aborts `controller` when any source aborts, with that source's reason. Returns the unlinker. */
function linkAbort(controller: AbortController, sources: [AbortSignal | undefined, () => unknown][]): () => void {
  const unlinks: (() => void)[] = []
  for (const [source, reason] of sources) {
    if (!source) continue
    if (source.aborted) {
      controller.abort(reason())
      continue
    }
    const onAbort = () => controller.abort(reason())
    source.addEventListener('abort', onAbort, { once: true })
    unlinks.push(() => source.removeEventListener('abort', onAbort))
  }
  return () => unlinks.forEach((unlink) => unlink())
}

/**
 * The one payload of a send — `text`, `keys` or `secret`, exactly one — checked before anything
 * is reserved or written.
 * @throws PtyError `INVALID_INPUT` naming what is wrong.
 */
function payloadOf(input: SendInput, sessionId: string): SendPayload {
  if (typeof input !== 'object' || input === null || typeof input.submit !== 'boolean') {
    throw new PtyError('INVALID_INPUT', { reason: `a send to ${sessionId} needs a boolean \`submit\` and one of \`text\`, \`keys\` or \`secret\`; nothing was written` })
  }
  const given = (['text', 'keys', 'secret'] as const).filter((key) => input[key] !== undefined)
  if (given.length !== 1) {
    throw new PtyError('INVALID_INPUT', {
      reason: `a send to ${sessionId} takes exactly one of \`text\`, \`keys\` or \`secret\`${given.length ? `, not ${given.map((key) => `\`${key}\``).join(' and ')}` : ''}; nothing was written`,
    })
  }
  if (input.text !== undefined) {
    if (typeof input.text !== 'string') throw new PtyError('INVALID_INPUT', { reason: `\`text\` of a send to ${sessionId} must be a string; nothing was written` })
    return { text: input.text }
  }
  if (input.keys !== undefined) {
    const keys = input.keys
    if (!Array.isArray(keys) || keys.length === 0 || !keys.every((key) => typeof key === 'string' || (typeof key === 'object' && key !== null && typeof key.text === 'string'))) {
      throw new PtyError('INVALID_INPUT', { reason: `\`keys\` of a send to ${sessionId} must be a non-empty list of key names or {text} entries; nothing was written` })
    }
    return { keys: [...keys] }
  }
  const secret = input.secret
  if (typeof secret !== 'object' || secret === null || typeof secret.name !== 'string' || typeof secret.value !== 'string' || secret.value === '') {
    throw new PtyError('INVALID_INPUT', { reason: `\`secret\` of a send to ${sessionId} needs a name and a non-empty value; nothing was written` })
  }
  return { secret: { name: secret.name, value: secret.value } }
}
