/**
 * One program process: a fresh `node` running the bootstrap, started through `ctx.subprocess`
 * (which owns its tree) with the control channel on fd 3. It boots, says `ready`, and waits for
 * exactly one program. Until a run attaches, everything it reports is held.
 */
import type { PtcPolicy } from '@conch/ptc'
import type { SandboxAgent, SandboxServiceApi } from '@conch/sandbox'
import { SUBPROCESS_TAG_VARIABLE, type ChildHandle, type SubprocessServiceApi, type TerminateReport } from '@conch/subprocess'
import { ChannelError, FrameDecoder, FrameWriter, parseChildMessage, violation, type ChildMessage, type HostMessage } from './channel.ts'
import type { Config } from './config.ts'
import { confine, nodeArgv, programEnv, type Confinement } from './launch.ts'

export type ProcessEvent =
  | { type: 'message'; message: ChildMessage }
  /** Bytes the process or its descendants wrote to fd 1 or fd 2 directly, decoded as UTF-8. */
  | { type: 'output'; stream: 'out' | 'err'; text: string }
  | { type: 'protocol'; message: string }
  | { type: 'exit'; exitCode: number | null; signal: NodeJS.Signals | null }

export interface LaunchSpec {
  policy: PtcPolicy
  cwd: string
  /** The agent whose sandbox the program joins (`SandboxPolicy.agent`). */
  agent?: SandboxAgent
}

export interface ProcessDependencies {
  subprocess: SubprocessServiceApi
  sandbox: SandboxServiceApi | undefined
  config: Config
}

export class ProgramProcess {
  /** Resolves when the bootstrap said `ready`; rejects when it exits or misbehaves first. */
  readonly ready: Promise<void>
  private readonly held: ProcessEvent[] = []
  private sink: ((event: ProcessEvent) => void) | undefined
  private readonly writer: FrameWriter
  private state: 'booting' | 'ready' | 'attached' | 'gone' = 'booting'
  private readySeen = false
  /** Whether a program was sent: only then does the tree get `graceMs` (see `terminate`). */
  private programSent = false
  private settleReady!: { resolve: () => void; reject: (error: Error) => void }

  private constructor(
    private readonly handle: ChildHandle,
    readonly confinement: Confinement,
    private readonly config: Config,
  ) {
    this.ready = new Promise<void>((resolve, reject) => {
      this.settleReady = { resolve, reject }
    })
    this.ready.catch(() => {})
    const control = handle.extra[0]!
    control.on('error', () => {})
    this.writer = new FrameWriter(control, config.maxMessageBytes)
    const decoder = new FrameDecoder(config.maxMessageBytes, config.maxChannelBytes)
    const onData = (chunk: Buffer): void => {
      const { frames, error: broken } = decoder.feed(chunk)
      try {
        for (const frame of frames) {
          const message = parseChildMessage(frame)
          if (!this.readySeen) {
            if (message.t !== 'ready') throw violation(`the bootstrap sent ${message.t} before ready`)
            this.readySeen = true
            if (this.state === 'booting') {
              this.state = 'ready'
              // Nobody is waiting for this process yet: a spare prepares while it waits.
              this.writer.write({ t: 'prepare' })
            }
            this.settleReady.resolve()
            continue
          }
          if (message.t === 'ready') throw violation('a second ready frame')
          this.emit({ type: 'message', message })
        }
        if (broken) throw broken
      } catch (error) {
        control.off('data', onData)
        const text = error instanceof ChannelError ? error.message : String(error)
        this.settleReady.reject(violation(text))
        this.emit({ type: 'protocol', message: text })
      }
    }
    control.on('data', onData)
    for (const [stream, name] of [
      [handle.stdout, 'out'],
      [handle.stderr, 'err'],
    ] as const) {
      stream.setEncoding('utf8')
      stream.on('data', (text: string) => this.emit({ type: 'output', stream: name, text }))
    }
    void handle.done.then(({ exitCode, signal }) => {
      // Every byte the process wrote has been read by now (`done` is its pipes' close): bytes of
      // a frame left unfinished are the program breaking its channel, not an early exit.
      const unfinished = decoder.unfinished
      if (this.readySeen && unfinished !== undefined) {
        const announced = unfinished.announced === undefined ? 'a 4-byte length prefix' : `${unfinished.announced} announced`
        this.emit({ type: 'protocol', message: `the program's process ended inside a control frame: ${unfinished.have} bytes of ${announced} arrived` })
      }
      this.state = 'gone'
      if (!this.readySeen) this.settleReady.reject(new Error(`the node process exited (${exitCode === null ? `signal ${signal}` : `code ${exitCode}`}) before it was ready`))
      this.emit({ type: 'exit', exitCode, signal })
    })
  }

  /**
   * Confines and starts a process for `spec`.
   * @throws SandboxError `SANDBOX_UNAVAILABLE`, SubprocessError `SPAWN_FAILED`, or the signal's reason.
   */
  static async start(deps: ProcessDependencies, spec: LaunchSpec, signal?: AbortSignal): Promise<ProgramProcess> {
    const confinement = await confine(nodeArgv(deps.config), spec.policy, spec.cwd, deps.sandbox, spec.agent)
    // Confinement can take a while (the first probe); a run cancelled meanwhile starts nothing.
    signal?.throwIfAborted()
    // Confined, the sandbox's PID namespace keeps every process a descendant: the tree is walked.
    // Unconfined, one that leaves the tree stays in the program's session (unless it calls setsid),
    // and the tag, which the bootstrap keeps, lets the supervisor end it if conch is killed. Behind
    // a relay the program is no descendant on this host: its processes are found by the tag.
    const unconfined = confinement.enforcement === 'none'
    const relayed = confinement.relayed === true
    const handle = deps.subprocess.spawn({
      argv: confinement.argv as [string, ...string[]],
      cwd: spec.cwd,
      env: { ...programEnv(process.env), ...((unconfined || relayed) && { CONCH_PTC_KEEP: SUBPROCESS_TAG_VARIABLE }) },
      extraPipes: 1,
      tree: relayed ? 'tagged' : unconfined ? 'session' : 'descendants',
      supervised: unconfined,
    })
    handle.end()
    return new ProgramProcess(handle, confinement, deps.config)
  }

  /** Whether the process is still there and has not been given a program. */
  get available(): boolean {
    return this.state === 'booting' || this.state === 'ready'
  }

  /** Routes events (and those held since boot) to `sink`. A process takes one run only. */
  attach(sink: (event: ProcessEvent) => void): void {
    if (this.sink !== undefined) throw new Error('a program process runs one program only')
    if (this.state !== 'gone') this.state = 'attached'
    this.sink = sink
    for (const event of this.held.splice(0)) sink(event)
  }

  /** @throws ChannelError when the frame or the queue exceeds `maxMessageBytes`. */
  send(message: HostMessage): void {
    this.writer.write(message)
    if (message.t === 'run') this.programSent = true
  }

  /**
   * Ends the process tree, then closes the channel; waits for both. The program's descendants get
   * TERM and KILL after the config's `graceMs`; the node process itself, whose run is over,
   * SIGKILL at once. A process that was sent no program (a spare, a run that ended first) runs
   * nothing that could clean up: its tree gets no grace. Under bubblewrap its namespace's init
   * may not have started node yet, and it ignores the TERM (pid_namespaces(7)), so a grace would
   * be waited out in full.
   */
  terminate(): Promise<TerminateReport> {
    // The channel closes only after the tree was captured: the bootstrap exits when it closes,
    // and descendants of an exited process could no longer be found by walking the tree.
    const report = this.handle.terminate({ graceMs: this.programSent ? this.config.graceMs : 0, rootSignal: 'SIGKILL' })
    void report.finally(() => this.handle.extra[0]?.destroy())
    return report
  }

  private emit(event: ProcessEvent): void {
    if (this.sink) this.sink(event)
    else if (this.held.length < 1024) this.held.push(event)
  }
}
