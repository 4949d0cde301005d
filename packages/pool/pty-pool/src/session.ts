/**
 * One warm CLI session: a real terminal running an interactive agent CLI, booted once and
 * invoked turn after turn with sentinel framing. One state machine (`TRANSITIONS`, changed only
 * through `to`).
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, watch as watchPath, type FSWatcher } from 'node:fs'
import { agentHome } from '@conch/sandbox'
import { assertStateDirUnchanged } from './state-dir.ts'
import { dirname, isAbsolute, join } from 'node:path'
import { resolveExecutable, scrubbedEnv, skippedExecutables } from '@conch/subprocess'
import type { KindConfig, PoolConfig } from './config.ts'
import { InvokeFailure, PoolError } from './errors.ts'
import { collapse, echoProbe, extractAnswer, extractFromText, findEcho, newSentinel, sentinelInstruction } from './sentinel.ts'
import type { PoolTerminal, TerminalCloseReport, TerminalFactory, TerminalOwner } from './terminal.ts'
import { createHomeFile, makeHomeDir } from './home-fs.ts'
import { TranscriptReader } from './transcript.ts'

/** What a pooled session is for. Conversations never share a session. */
export interface PoolKey {
  /** The owner agent's id. */
  owner: string
  /** The caller's conversation (the ACP session, the run's session). */
  conversation: string
  kind: string
  model: string
  /** Account id; redacted in logs. */
  account: string
  bare: boolean
}

export function keyString(key: PoolKey): string {
  return JSON.stringify([key.owner, key.conversation, key.kind, key.model, key.account, key.bare])
}

/** The key as logged: the account replaced by `[redacted]` when set. */
export function redactKey(key: PoolKey): PoolKey {
  return { ...key, account: key.account ? '[redacted]' : '' }
}

export type SessionState = 'booting' | 'idle' | 'busy' | 'unhealthy' | 'closing' | 'closed'

const TRANSITIONS: Record<SessionState, readonly SessionState[]> = {
  booting: ['idle', 'unhealthy', 'closing'],
  idle: ['busy', 'unhealthy', 'closing'],
  busy: ['idle', 'unhealthy', 'closing'],
  unhealthy: ['closing'],
  closing: ['closed'],
  closed: [],
}

export interface SessionEnvironment {
  /** Parent environment the scrubbed child environment derives from. */
  parentEnv: Readonly<Record<string, string | undefined>>
  /** Account variables, already resolved to values (CLI variable → value). */
  accountEnv: Record<string, string>
  cwd: string
  /** Directory under which the private home is made. */
  stateDir: string
  /** The folder in `stateDir` of the owner agents' folders of homes (`PtyPool.agentHomes`): an owner agent's home is made in its own. */
  agentHomes?: string
  /** Variables added after scrubbing and the kind's own (a worker's ownership tag). */
  extraEnv?: Record<string, string>
  /** Whose CLI this is; passed to the terminal factory, which confines it under the owner's policy. */
  owner?: TerminalOwner
  /** Folders agents may write besides the owner's workspace root (`PoolDeps.workspaces`). */
  workspaces?: readonly string[]
  /** Told about a transcript line or folder past its bound. */
  warn?: (message: string) => void
}

export interface AnswerOfTurn {
  text: string
  /** `transcript` when the CLI's own transcript matched the screen, else `screen`. */
  source: 'screen' | 'transcript'
  /** Where the turn's time went, ms. */
  phases: TurnPhases
}

/**
 * Where one turn's time went, ms: `echo` first write → echo; `answer` Enter → a sentinel pair;
 * `settle` pair → answer taken; `transcript` its read after a settled screen answer (else 0).
 */
export interface TurnPhases {
  echo: number
  answer: number
  settle: number
  transcript: number
}

/**
 * The prompt as it may be typed: CR LF and CR become LF, every other C0 but TAB, DEL and C1
 * (ECMA-48 § 5) is removed, so a prompt can neither press a key of its own (CR, ETX) nor start a
 * control sequence — in particular not end a bracketed paste early with `ESC[201~` and type keys.
 */
export function typeableText(prompt: string): string {
  return prompt.replace(/\r\n?/g, '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '')
}

/** Renders `{name}` placeholders; unknown names are left as they are. */
export function render(template: string, vars: Record<string, string>): string {
  return template.replace(/\{([A-Za-z]+)\}/g, (whole, name: string) => (name in vars ? vars[name]! : whole))
}

/**
 * Builds a kind's private home (mkdtemp(3), its files made through `home-fs.ts`), argv and environment.
 * @throws PoolError `HOME_PATH_UNSAFE` when a seeded path is not a plain path inside the home or
 *   something already stands in its place.
 * The binary is the kind's `command` when it is a path, else found on PATH outside the folders the
 * owner may write (its workspace root, `workspaces`): the argv names it by its path.
 * @throws InvokeFailure `spawn` when the kind's binary is not there (no home is made).
 */
export function prepareLaunch(kind: KindConfig, key: Pick<PoolKey, 'model' | 'bare'>, environment: SessionEnvironment, extra: { sentinel?: string; prompt?: string; args?: readonly string[] }) {
  const owner = environment.owner
  const root = owner?.policy?.workspaceRoot ?? owner?.agent?.session.start.workspaceRoot
  const writable = [...(environment.workspaces ?? []), ...(root === undefined ? [] : [root])]
  const path = environment.parentEnv.PATH ?? ''
  const command = resolveExecutable(kind.command, path, writable)
  if (command === undefined) throw new InvokeFailure('spawn', skippedExecutables(kind.command, path, writable) ?? `${kind.command} was not found on PATH or in .products/`, false)
  assertStateDirUnchanged(environment.stateDir)
  mkdirSync(environment.stateDir, { recursive: true, mode: 0o700 })
  // An owner agent's homes lie in its own folder where a sandbox with fixed mounts (a container) binds it.
  const agent = environment.owner?.agent
  const folder = agent === undefined || environment.agentHomes === undefined ? environment.stateDir : agentHome(environment.agentHomes, agent.session.id)
  if (folder !== environment.stateDir) makeHomeDir(environment.stateDir, folder)
  const home = mkdtempSync(join(folder, 'home-'))
  const env: Record<string, string> = scrubbedEnv(environment.parentEnv as Record<string, string | undefined>)
  for (const name of kind.passEnv) {
    const value = environment.parentEnv[name]
    if (value !== undefined) env[name] = value
  }
  Object.assign(env, environment.accountEnv)
  const apiKey = Object.entries(env).find(([name]) => /API_KEY$/.test(name))?.[1] ?? ''
  const model = key.model || kind.defaultModel
  const instruction = extra.sentinel ? sentinelInstruction(extra.sentinel) : ''
  const vars: Record<string, string> = {
    home,
    cwd: environment.cwd,
    cwdJson: JSON.stringify(environment.cwd),
    model,
    modelJson: JSON.stringify(model),
    sentinel: extra.sentinel ?? '',
    instruction,
    instructionJson: JSON.stringify(instruction),
    apiKeyTail: apiKey.slice(-20),
    prompt: extra.prompt ?? '',
  }
  for (const [name, template] of Object.entries(kind.env)) env[name] = render(template, vars)
  env.TMPDIR = join(home, 'tmp')
  Object.assign(env, environment.extraEnv)
  makeHomeDir(environment.stateDir, join(home, 'tmp'))
  for (const [path, template] of Object.entries(kind.files)) {
    const target = join(home, path)
    if (path.startsWith('/') || !target.startsWith(home + '/')) throw new PoolError('HOME_PATH_UNSAFE', { seed: path })
    createHomeFile(environment.stateDir, target, render(template, vars), 0o600)
  }
  const args = (extra.args ?? kind.args).map((arg) => render(arg, vars))
  if (extra.sentinel && kind.instructionFlag) args.push(kind.instructionFlag, instruction)
  if (key.model && kind.modelFlag) args.push(kind.modelFlag, key.model)
  if (key.bare) args.push(...kind.bareArgs.map((arg) => render(arg, vars)))
  return { home, env, argv: [command, ...args] as [string, ...string[]] }
}

/** Waits for `probe` to return a value, re-checking on every screen change, every `tickMs` and each `check()`. */
function watch<T>(terminal: PoolTerminal, probe: () => T | undefined, tickMs = 50): { result: Promise<T>; stop: () => void; check: () => void } {
  let stop = () => {}
  let check = () => {}
  const result = new Promise<T>((resolve, reject) => {
    check = () => {
      try {
        const value = probe()
        if (value !== undefined) {
          stop()
          resolve(value)
        }
      } catch (error) {
        stop()
        reject(error)
      }
    }
    const offChange = terminal.onChange(check)
    const timer = setInterval(check, tickMs)
    stop = () => {
      offChange()
      clearInterval(timer)
    }
    check()
  })
  return { result, stop, check: () => check() }
}

export class PoolSession {
  state: SessionState = 'booting'
  readonly sentinel = newSentinel()
  readonly createdAt = Date.now()
  lastUsedAt = Date.now()
  bootMs = 0
  turns = 0
  /** Why the session became unhealthy. */
  unhealthyReason: string | undefined
  private terminal: PoolTerminal | undefined
  private home = ''
  private transcript: TranscriptReader | undefined
  /** The transcript gains a record as each turn ends (`claude-stop`): that record is the answer. */
  private turnEnds = false
  private closing: Promise<TerminalCloseReport> | undefined
  private readonly patterns: {
    ready: RegExp
    busy: RegExp
    status?: RegExp
    tokens?: RegExp
    prefix?: RegExp
    dialog?: RegExp
  }

  constructor(
    readonly key: PoolKey,
    readonly kind: KindConfig,
    private readonly config: PoolConfig,
    private readonly environment: SessionEnvironment,
    private readonly terminals: TerminalFactory,
  ) {
    this.patterns = {
      ready: new RegExp(kind.readyPattern),
      busy: new RegExp(kind.busyPattern),
      ...(kind.statusPattern && { status: new RegExp(kind.statusPattern) }),
      ...(kind.tokenPattern && { tokens: new RegExp(kind.tokenPattern, 'g') }),
      ...(kind.answerPrefix && { prefix: new RegExp(kind.answerPrefix) }),
      ...(kind.dialogPattern && { dialog: new RegExp(kind.dialogPattern) }),
    }
  }

  get pid(): number | undefined {
    return this.terminal?.pid
  }

  /** The owner the session's CLI runs for (see `TerminalOwner`). */
  get owner(): TerminalOwner | undefined {
    return this.environment.owner
  }

  private to(next: SessionState): void {
    if (this.state === next) return
    if (!TRANSITIONS[this.state].includes(next)) throw new Error(`pool session: no transition ${this.state} → ${next}`)
    this.state = next
  }

  markUnhealthy(reason: string): void {
    if (this.state === 'booting' || this.state === 'idle' || this.state === 'busy') {
      this.unhealthyReason = reason
      this.to('unhealthy')
    }
  }

  /**
   * Spawns the CLI and waits for its input prompt.
   * @throws InvokeFailure `spawn` (the program could not start) or `boot` (a dialog, an exit or
   *   `bootTimeoutMs` without a prompt; the message carries the screen's text).
   */
  async boot(signal?: AbortSignal): Promise<void> {
    const started = Date.now()
    const launch = prepareLaunch(this.kind, this.key, this.environment, { sentinel: this.sentinel })
    this.home = launch.home
    const spec = (this.key.bare && this.kind.bareTranscript) || this.kind.transcript
    if (spec) {
      this.turnEnds = spec.format === 'claude-stop'
      this.transcript = new TranscriptReader({
        base: this.environment.stateDir,
        dir: render(spec.dir, { home: this.home, cwd: this.environment.cwd }),
        format: spec.format,
        maxReadBytes: spec.maxReadBytes,
        maxLineBytes: spec.maxLineBytes,
        warn: this.environment.warn ?? ((message) => process.emitWarning(message)),
      })
    }
    try {
      this.terminal = await this.terminals({ argv: launch.argv, cwd: this.environment.cwd, env: launch.env, rows: this.kind.rows, cols: this.kind.cols, network: this.kind.network, home: launch.home, ...(this.environment.owner && { owner: this.environment.owner }) })
    } catch (error) {
      this.markUnhealthy('spawn failed')
      throw new InvokeFailure('spawn', `could not start ${this.kind.command}: ${(error as Error).message}`, false)
    }
    const terminal = this.terminal
    const screenText = () => terminal.screen().filter((row) => row.trim() !== '').join('\n')
    const watcher = watch(terminal, () => {
      const rows = terminal.screen()
      const exit = terminal.exitStatus()
      if (exit) throw new InvokeFailure('boot', `${this.kind.command} exited during boot (code ${exit.exitCode}, signal ${exit.signal}); screen:\n${screenText()}`, false)
      if (this.patterns.dialog && rows.some((row) => this.patterns.dialog!.test(row))) {
        throw new InvokeFailure('boot', `${this.kind.command} showed a dialog during boot; screen:\n${screenText()}`, false)
      }
      if (Date.now() - started > this.config.bootTimeoutMs) {
        throw new InvokeFailure('boot', `${this.kind.command} showed no input prompt within ${this.config.bootTimeoutMs} ms; screen:\n${screenText()}`, false)
      }
      if (signal?.aborted) throw new InvokeFailure('cancelled', 'boot cancelled', false)
      return rows.some((row) => this.patterns.ready.test(row)) && !rows.some((row) => this.patterns.busy.test(row)) ? true : undefined
    })
    try {
      await watcher.result
    } catch (error) {
      this.markUnhealthy('boot failed')
      throw error
    }
    this.bootMs = Date.now() - started
    this.to('idle')
    // A CLI gone between turns (a crash, its owner disposed) leaves an unhealthy session for the tick.
    void terminal.exited.then(() => {
      if (this.state === 'idle') this.markUnhealthy('the CLI exited between turns')
    })
  }

  /**
   * One turn: clear the input line, type the prompt (see the README's "The sentinel protocol"),
   * wait for its echo, press Enter as its own write, then wait for the last complete sentinel
   * pair after the echo while the CLI is idle and the screen quiet.
   * @throws InvokeFailure — the session is then unhealthy.
   */
  async invoke(prompt: string, options: { signal?: AbortSignal; capMs: number; stallMs: number }): Promise<AnswerOfTurn> {
    const terminal = this.terminal
    if (!terminal || this.state !== 'idle') throw new InvokeFailure('unhealthy', `session is ${this.state}`, false)
    this.to('busy')
    this.lastUsedAt = Date.now()
    const started = Date.now()
    let submitted = false
    try {
      const text = this.promptText(prompt)
      const probe = echoProbe(text)
      const countEcho = () => terminal.screen({ scrollback: true }).filter((row) => collapse(row).includes(probe)).length
      const before = countEcho()
      terminal.write(this.kind.clearKeys)
      const multiLine = text.includes('\n')
      if ((multiLine || this.kind.paste === 'always') && terminal.bracketedPaste()) terminal.write(`\u001b[200~${text}\u001b[201~`)
      else terminal.write(multiLine ? text.replace(/\s*\n\s*/g, ' ') : text)
      const echo = watch(terminal, () => {
        this.checkAlive(terminal, false, options.signal)
        if (Date.now() - started > this.config.echoTimeoutMs) throw new InvokeFailure('stall', `the prompt was not echoed on an idle screen within ${this.config.echoTimeoutMs} ms`, false, Date.now() - started)
        // The last answer can precede the CLI's idle screen (a turn-end record): Enter while it is busy would queue the prompt.
        return countEcho() > before && !terminal.screen().some((row) => this.patterns.busy.test(row)) ? true : undefined
      })
      await echo.result
      // Records read up to here belong to earlier turns (an idle CLI has run its hooks).
      this.transcript?.read()
      const stopsBefore = this.transcript?.stops ?? 0
      const echoMs = Date.now() - started
      terminal.write('\r')
      submitted = true
      const answer = await this.awaitAnswer(terminal, text, started, stopsBefore, options)
      answer.phases.echo = echoMs
      this.turns++
      this.lastUsedAt = Date.now()
      this.to('idle')
      return answer
    } catch (error) {
      const failure = error instanceof InvokeFailure ? error : new InvokeFailure('unhealthy', (error as Error).message, submitted)
      this.markUnhealthy(failure.reason)
      if (!terminal.exitStatus()) terminal.write(this.kind.interruptKeys)
      throw new InvokeFailure(failure.reason, failure.message, submitted || failure.midTask, failure.elapsedMs || Date.now() - started)
    }
  }

  private promptText(prompt: string): string {
    if (prompt.length <= this.kind.pasteCollapseChars) return typeableText(prompt)
    // The CLI writes its home: a fresh name, created through home-fs.ts, so no planted link is followed.
    assertStateDirUnchanged(this.environment.stateDir)
    const file = join(this.home, 'prompts', `prompt-${this.turns + 1}-${randomBytes(6).toString('hex')}.md`)
    createHomeFile(this.environment.stateDir, file, prompt, 0o600)
    return `Read the file ${file} in full and treat its content as this turn's request.`
  }

  private checkAlive(terminal: PoolTerminal, midTask: boolean, signal?: AbortSignal): void {
    const exit = terminal.exitStatus()
    if (exit) throw new InvokeFailure('unhealthy', `${this.kind.command} exited mid-invoke (code ${exit.exitCode}, signal ${exit.signal})`, midTask)
    if (signal?.aborted) throw new InvokeFailure('cancelled', 'the invoke was cancelled', midTask)
  }

  private async awaitAnswer(terminal: PoolTerminal, text: string, started: number, stopsBefore: number, options: { signal?: AbortSignal; capMs: number; stallMs: number }): Promise<AnswerOfTurn> {
    let lastChange = Date.now()
    let lastProgress = Date.now()
    let fingerprint = ''
    let tokens = -1
    let sawBusy = false
    const offChange = terminal.onChange(() => {
      lastChange = Date.now()
    })
    const entered = Date.now()
    let pairAt = 0
    let transcriptCheckedAt = 0
    // The transcript folder changed (inotify) since the last check: read it at once.
    let transcriptWritten = false
    let transcriptWatch: FSWatcher | undefined
    /** `answer()` when the transcript was written or 15 ms passed since the last check; else, or when none, undefined. */
    const fromTranscript = (now: number, answer: () => string | undefined): string | undefined => {
      if (!transcriptWritten && now - transcriptCheckedAt < 15) return undefined
      transcriptCheckedAt = now
      transcriptWritten = false
      const found = answer()
      if (found === undefined) {
        transcriptWatch ??= this.watchTranscript(() => {
          transcriptWritten = true
          watcher.check()
        })
      }
      return found
    }
    const watcher = watch(terminal, (): { extraction?: { text: string }; transcript?: string } | undefined => {
      this.checkAlive(terminal, true, options.signal)
      const now = Date.now()
      // A turn-end record after the prompt holding a complete pair is the answer, before the screen shows it.
      const ended = this.turnEnds ? fromTranscript(now, () => {
        const text = this.transcript!.read()
        return text !== undefined && this.transcript!.stops > stopsBefore ? extractFromText(text, this.sentinel) : undefined
      }) : undefined
      if (ended !== undefined) return { transcript: ended }
      const rows = terminal.screen({ scrollback: true })
      const echoRow = findEcho(rows, text, (row) => this.patterns.ready.test(row))
      const busy = rows.some((row) => this.patterns.busy.test(row))
      if (busy) sawBusy = true
      // Progress: new answer text (status rows excluded) or a rising token count.
      const after = echoRow >= 0 ? rows.slice(echoRow + 1) : []
      const substance = after.filter((row) => !(this.patterns.status?.test(row) || this.patterns.busy.test(row))).join('\n')
      if (substance !== fingerprint) {
        fingerprint = substance
        lastProgress = now
      }
      if (this.patterns.tokens) {
        for (const match of after.join('\n').matchAll(this.patterns.tokens)) {
          const count = parseCount(match[1] ?? '')
          if (count > tokens) {
            tokens = count
            lastProgress = now
          }
        }
      }
      if (now - started > options.capMs) throw new InvokeFailure('hard_cap', `no answer within the hard cap of ${Math.round(options.capMs / 1000)} s`, true, now - started)
      if (now - lastProgress > options.stallMs) throw new InvokeFailure('stall', `no progress for ${Math.round(options.stallMs / 1000)} s`, true, options.stallMs)
      if (echoRow < 0 || busy) return undefined
      const extraction = extractAnswer(rows, this.sentinel, echoRow + 1, this.patterns.prefix)
      if (extraction && pairAt === 0) pairAt = now
      // The CLI's transcript holding the same pair proves the turn is over without the quiet time.
      const transcript = extraction && this.transcript && !this.turnEnds ? fromTranscript(now, () => this.transcriptAnswer(extraction.text)) : undefined
      if (transcript !== undefined) return { transcript }
      if (now - lastChange < this.config.settleMs) return undefined
      if (extraction) return { extraction }
      if (sawBusy && now - lastChange >= Math.max(1000, this.config.settleMs)) throw new InvokeFailure('no_sentinel', `${this.kind.command} went idle without a complete sentinel pair`, true, now - started)
      return undefined
    }, 20)
    try {
      const found = await watcher.result
      const settled = Date.now()
      const phases: TurnPhases = { echo: 0, answer: (pairAt || settled) - entered, settle: settled - (pairAt || settled), transcript: 0 }
      if (found.transcript !== undefined) return { text: found.transcript, source: 'transcript', phases }
      const transcript = await this.readTranscript(found.extraction!.text)
      phases.transcript = Date.now() - settled
      return transcript !== undefined ? { text: transcript, source: 'transcript', phases } : { text: found.extraction!.text, source: 'screen', phases }
    } finally {
      offChange()
      transcriptWatch?.close()
    }
  }

  /**
   * Calls `written` when the last transcript's folder changes (inotify); undefined when it cannot
   * be watched (the ticks then find the answer). It only wakes a check: reading still follows no link.
   */
  private watchTranscript(written: () => void): FSWatcher | undefined {
    const path = this.transcript?.path
    if (path === undefined || !isAbsolute(path)) return undefined
    try {
      return watchPath(dirname(path), { persistent: false }, written).on('error', () => undefined)
    } catch {
      return undefined
    }
  }

  /** The transcript's last answer when its last sentinel pair matches the screen's answer. */
  private transcriptAnswer(screenAnswer: string): string | undefined {
    const text = this.transcript?.read()
    const answer = text === undefined ? undefined : extractFromText(text, this.sentinel)
    return answer !== undefined && looseText(answer) === looseText(screenAnswer) ? answer : undefined
  }

  /** The exact answer from the CLI's transcript when it matches the screen's (polled briefly: it lands after the screen). */
  private async readTranscript(screenAnswer: string): Promise<string | undefined> {
    if (!this.transcript) return undefined
    const deadline = Date.now() + 400
    for (;;) {
      const answer = this.transcriptAnswer(screenAnswer)
      if (answer !== undefined) return answer
      if (Date.now() > deadline) return undefined
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  /** Closes the terminal and its whole tree; idempotent. */
  close(): Promise<TerminalCloseReport> {
    if (this.state !== 'closing' && this.state !== 'closed') this.to('closing')
    this.closing ??= (async () => {
      const report = this.terminal ? await this.terminal.close() : { stopped: [], survivors: [] }
      this.to('closed')
      return report
    })()
    return this.closing
  }
}

function parseCount(raw: string): number {
  const value = Number.parseFloat(raw.replace(/,/g, ''))
  return raw.endsWith('k') ? value * 1000 : value
}

/** Whitespace and markdown markers ignored: how a transcript answer is matched against the screen's. */
function looseText(text: string): string {
  return collapse(text.replace(/[*_`#>|]/g, ''))
}
