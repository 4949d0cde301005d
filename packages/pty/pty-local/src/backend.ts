/**
 * The node-pty backend: starts a session's shell under the owner's sandbox policy and hands the
 * ready session to ctx.pty.
 */
import { randomBytes } from 'node:crypto'
import { constants, statSync } from 'node:fs'
import { open, type FileHandle } from 'node:fs/promises'
import path from 'node:path'
import { PtyError, type BackendSpawnRequest, type ExposedPort, type PtyBackend } from '@conch/pty'
import type { SandboxPolicyServiceApi } from '@conch/sandbox-policy'
import type { RelayedProcess, SandboxServiceApi } from '@conch/sandbox'
import { defaultProcessTable, isExecutableFile, resolveExecutable, signalIfSame, tagSupervisor, terminateTree, treeMembers, treeOf, type ProcessTable, type SessionTag, type TerminateTreeOptions } from '@conch/subprocess'
import type { Config } from './config.ts'
import { SESSION_TAG_VARIABLE, shellEnvironment } from './environment.ts'
import type { TerminalInspector } from './inspector.ts'
import { createControlledPrompt, type WrappedCommand } from './prompt.ts'
import { loadScreenModel } from './screen.ts'
import { LocalSession } from './session.ts'
import { loadNodePty, spawnTerminal, type TerminalProcess } from './terminal.ts'
import type { TermiosReader } from './termios.ts'

export interface LocalBackendOptions {
  config: Config
  sandbox: SandboxServiceApi
  sandboxPolicy: SandboxPolicyServiceApi
  /** Builds the platform inspector for a started terminal. */
  inspect: (terminal: TerminalView) => TerminalInspector
  /** Reads a terminal's termios flags by its slave path (termios.ts). Absent: never read — no line is refused, no input reported hidden. */
  termios?: TermiosReader
  /** The parent environment the shell's is derived from. Default `process.env`. */
  env?: NodeJS.ProcessEnv
}

export class LocalBackend implements PtyBackend {
  readonly type: string

  constructor(private readonly options: LocalBackendOptions) {
    this.type = options.config.backendType
  }

  /**
   * Starts a shell for `request.owner` under its sandbox policy, resolved once, confined by
   * `ctx.sandbox.confine` unless `danger-full-access` (never a silent downgrade), and waits for
   * its first ready point.
   * @throws PtyError `SPAWN_FAILED` (bad cwd, no sandbox, the shell exited or never became
   *   ready), or `request.signal.reason` when the signal aborts.
   */
  async spawn(request: BackendSpawnRequest): Promise<LocalSession> {
    const { config } = this.options
    const policy = this.options.sandboxPolicy.resolve({ session: request.owner.session })
    const cwd = resolveCwd(request.cwd, policy.workspaceRoot)
    const program = request.command !== undefined
    const prompt = createControlledPrompt()
    const tag: SessionTag = { name: SESSION_TAG_VARIABLE, value: randomBytes(16).toString('hex') }
    const env = shellEnvironment({ parent: this.options.env ?? process.env, trusted: config.trustedEnv, allow: config.allowEnv, prompt, tag })
    if (program) {
      // No controlled prompt; the caller's variables go over the scrubbed environment, not the tag.
      delete env.PS1
      delete env.PROMPT_COMMAND
      Object.assign(env, request.env ?? {})
      env[tag.name] = tag.value
    }
    let argv: [string, ...string[]] = program ? [resolveCommand(request.command!, env.PATH ?? ''), ...(request.args ?? [])] : [config.shellPath, ...config.shellArgs]
    let exposed: ExposedPort[] | undefined
    let relayed: RelayedProcess | undefined
    if (policy.mode !== 'danger-full-access') {
      try {
        const confined = await this.options.sandbox.confine(argv, {
          mode: policy.mode,
          workspaceRoot: policy.workspaceRoot,
          cwd,
          ...(request.network !== undefined && { network: request.network }),
          ...(request.writablePaths !== undefined && { writablePaths: request.writablePaths }),
          // The shell joins its agent's sandbox: the loopback and /tmp of the agent's other processes.
          agent: { key: policy.sessionId, owner: request.owner, network: policy.network, expose: [...new Set([...policy.expose, ...(request.expose ?? [])])] },
        })
        argv = confined.argv
        exposed = confined.exposed
        relayed = confined.relayed
      } catch (error) {
        throw new PtyError('SPAWN_FAILED', { reason: `cannot start a ${policy.mode} terminal: ${(error as Error).message}` }, { cause: error })
      }
    }
    if (request.signal.aborted) throw request.signal.reason
    // A container's shell gets no descriptor of this host: its marker's command comes in its
    // environment, nonce included (README, "Readiness").
    if (!program && relayed !== undefined) env.PROMPT_COMMAND = prompt.markerCommand

    // Loaded on the first spawn, not at startup.
    await Promise.all([loadNodePty(), loadScreenModel()])
    if (request.signal.aborted) throw request.signal.reason
    let wrapped: WrappedCommand
    try {
      wrapped = prompt.wrap(argv, { handOver: !program && relayed === undefined })
    } catch (error) {
      throw new PtyError('SPAWN_FAILED', { reason: `cannot write the session's key file: ${(error as Error).message}` }, { cause: error })
    }

    // Unconfined, no PID namespace ends the session's daemons if conch itself is killed: the
    // tag supervisor of @conch/subprocess sweeps the tag then.
    const unwatch = policy.mode === 'danger-full-access' ? tagSupervisor().watch(tag) : () => {}
    let terminal: TerminalProcess
    try {
      terminal = spawnTerminal({ argv: wrapped.argv, cwd, env, cols: request.cols ?? config.cols, rows: request.rows ?? config.rows })
    } catch (error) {
      unwatch()
      await wrapped.release()
      throw new PtyError('SPAWN_FAILED', { reason: `cannot start ${argv[0]}: ${(error as Error).message}` }, { cause: error })
    }
    // The wrapper reads its key file before anything in the terminal can print.
    const forget = terminal.onData(() => {
      forget()
      void wrapped.release()
    })
    void terminal.exit.then(() => wrapped.release())
    // The wrapper's start identity, read now, fences every later signal to it.
    const table = defaultProcessTable()
    const wrapper = table.get(terminal.pid)
    // Behind a relay the program leads a terminal of its own, known only once the relay started
    // it; the session listens from the start, so it is made before.
    let view: TerminalView = terminal
    let inspector = this.options.inspect(terminal)
    const tree = async (): Promise<TerminateTreeOptions> => {
      const identity = await wrapper
      return {
        rootPid: terminal.pid,
        ...(identity !== undefined && { rootStartTime: identity.startTime }),
        includeRoot: true,
        rootSignal: 'SIGHUP',
        graceMs: config.disposeGraceMs,
        tag,
        // The shell leads the terminal's session: a daemon that wiped its environment but never
        // called setsid still has that session id.
        session: true,
        discovery: policy.mode === 'danger-full-access' ? 'orphans' : 'namespace',
        // node-pty reaps the wrapper: its exit ends the wait for the root at once.
        rootExited: terminal.exit,
        signalFor: (record) => (record.pid === session.shellPgid ? 'SIGHUP' : undefined),
      }
    }
    const session: LocalSession = new LocalSession({
      config,
      cwd,
      ...(exposed !== undefined && { exposed }),
      ...(request.redact !== undefined && { redact: request.redact }),
      rows: request.rows ?? config.rows,
      cols: request.cols ?? config.cols,
      program,
      prompt,
      terminal,
      signalWrapper: async (signal) => {
        const identity = await wrapper
        if (identity !== undefined) await signalIfSame(table, identity, signal)
      },
      inspector: relayed === undefined ? inspector : lateInspector(() => inspector),
      ...(relayed !== undefined && { writeFarOutput: (bytes: string) => writeTerminal(view, bytes) }),
      ...(this.options.termios !== undefined && terminal.slavePath !== '' && { termios: () => (view.slavePath === '' ? Promise.resolve(undefined) : this.options.termios!.read(view.slavePath)) }),
      // The whole tree and the session tag go: TERM, SIGHUP for the shell (it ignores TERM and
      // passes a hangup on to its jobs), KILL after the grace. Confined, the PID namespace holds
      // the tree; unconfined, the tag sweep finds daemons that re-parented away.
      teardown: async () => {
        // Read before the tree goes: the processes conch started the shell through.
        const launchers = await launchersOf(table, terminal.pid, { relayed: relayed !== undefined, pid: session.shellPgid })
        const report = await terminateTree(await tree())
        if (report.survivors.length === 0) unwatch()
        // What the close names is the model's: its shell and what that started.
        return { ...report, stopped: report.stopped.filter((record) => !launchers.has(record.pid)) }
      },
      // What the teardown's first look finds besides the shell and its launchers. A relayed
      // shell's processes are the far side's, and not seen here.
      leftRunning: async () => {
        const shell = session.shellPgid
        if (relayed !== undefined || shell === undefined) return undefined
        const launchers = await launchersOf(table, terminal.pid, { relayed: false, pid: shell })
        return (await treeMembers(await tree())).filter((record) => record.pid !== shell && !launchers.has(record.pid))
      },
    })
    if (relayed !== undefined) {
      try {
        view = await relayedTerminal(relayed, request.signal)
        inspector = this.options.inspect(view)
      } catch (error) {
        await session.close().catch(() => {})
        if (request.signal.aborted) throw request.signal.reason
        throw new PtyError('SPAWN_FAILED', { reason: `cannot start a ${policy.mode} terminal: ${(error as Error).message}` }, { cause: error })
      }
    }
    // A program is the caller's to wait for (it prints no controlled prompt).
    if (program) return session
    try {
      await session.ready(request.signal)
    } catch (error) {
      // Nothing was published: stop what was started before reporting.
      await session.close().catch(() => {})
      throw error
    }
    return session
  }
}

/** What the inspector and the termios reader need of a terminal; `relayed`: its input comes through a relay (`TerminalInspector.relayed`). */
export type TerminalView = Pick<TerminalProcess, 'pid' | 'slave' | 'slavePath'> & { relayed?: boolean }

/**
 * The terminal a relayed process leads, by stat(2) of /proc/<pid>/fd/0 (the container's
 * devpts); without a visible process (a remote daemon) no slave, so no exact tier.
 */
async function relayedTerminal(relayed: RelayedProcess, signal: AbortSignal): Promise<TerminalView> {
  const pid = await relayed.pid(signal)
  if (pid === undefined) return { pid: -1, slave: { dev: -1, rdev: -1 }, slavePath: '', relayed: true }
  const fd = `/proc/${pid}/fd/0`
  const { dev, rdev } = statSync(fd)
  return { pid, slave: { dev, rdev }, slavePath: fd, relayed: true }
}

/**
 * Writes `bytes` to `view`'s slave as output (O_NOCTTY, O_NONBLOCK), only while the path still
 * is that terminal (a relayed shell may point fd 0 elsewhere). Whether all of `bytes` went in.
 */
export async function writeTerminal(view: TerminalView, bytes: string): Promise<boolean> {
  if (view.slavePath === '') return false
  let handle: FileHandle | undefined
  try {
    handle = await open(view.slavePath, constants.O_WRONLY | constants.O_NOCTTY | constants.O_NONBLOCK)
    const stat = await handle.stat()
    if (!stat.isCharacterDevice() || stat.dev !== view.slave.dev || stat.rdev !== view.slave.rdev) return false
    const data = Buffer.from(bytes)
    return (await handle.write(data)).bytesWritten === data.length
  } catch {
    return false
  } finally {
    await handle?.close().catch(() => {})
  }
}

/** An inspector that asks whichever `current()` gives at each call (a relayed terminal's, once known). */
function lateInspector(current: () => TerminalInspector): TerminalInspector {
  return new Proxy({} as TerminalInspector, {
    get(_target, key: keyof TerminalInspector) {
      const inspector = current()
      const value = inspector[key]
      return typeof value === 'function' ? value.bind(inspector) : value
    },
  })
}

/**
 * `command` as an executable path, by execvp(3)'s search, so a missing program fails by name
 * before any sandbox starts.
 * @throws PtyError `SPAWN_FAILED` naming the command.
 */
function resolveCommand(command: string, searchPath: string): string {
  if (command.includes('/')) {
    const resolved = path.resolve(command)
    if (isExecutableFile(resolved)) return resolved
    throw new PtyError('SPAWN_FAILED', { reason: `command ${resolved} is not an executable file` })
  }
  const found = resolveExecutable(command, searchPath)
  if (found !== undefined) return found
  throw new PtyError('SPAWN_FAILED', { reason: `command ${command} was not found on the session's PATH (${searchPath || 'empty'})` })
}

/**
 * The session's working directory: `cwd` resolved against the workspace root, which must name
 * an existing directory.
 * @throws PtyError `SPAWN_FAILED` naming the path.
 */
function resolveCwd(cwd: string | undefined, workspaceRoot: string): string {
  const resolved = cwd === undefined ? workspaceRoot : path.resolve(workspaceRoot, cwd)
  let isDirectory = false
  try {
    isDirectory = statSync(resolved).isDirectory()
  } catch {
    // reported below
  }
  if (!isDirectory) throw new PtyError('SPAWN_FAILED', { reason: `cwd ${resolved} is not an existing directory` })
  return resolved
}

/**
 * The host pids conch starts a shell through, which a close does not name: the wrapper at
 * `rootPid` and the shell's ancestors below it (bubblewrap), or for a relayed shell all below it.
 */
async function launchersOf(table: ProcessTable, rootPid: number, shell: { relayed: boolean; pid: number | undefined }): Promise<Set<number>> {
  if (shell.relayed) return new Set([rootPid, ...treeOf(await table.snapshot(), rootPid, { includeRoot: false }).map((entry) => entry.pid)])
  const chain: number[] = []
  for (let pid = shell.pid === undefined ? undefined : (await table.get(shell.pid))?.ppid; pid !== undefined && pid > 1 && chain.length < 64; ) {
    if (pid === rootPid) return new Set([rootPid, ...chain])
    chain.push(pid)
    pid = (await table.get(pid))?.ppid
  }
  // The shell is not seen below the root: only the root is known to be conch's.
  return new Set([rootPid])
}
