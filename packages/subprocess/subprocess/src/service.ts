/**
 * `ctx.subprocess`: one-shot children with process-tree ownership, each in its own session
 * (setsid(2)) with a tag in its environment; disposing the service or the calling plugin
 * terminates its tree and awaits it.
 */
import { spawn as spawnChild, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Duplex } from 'node:stream'
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import { messageOf } from '@conch/errors'
import { withDescriptorsClosed } from './descriptors.ts'
import { isExecutableFile, pathOutside, resolveExecutable, skippedExecutables } from './executable.ts'
import { createSessionTag, scrubbedEnv } from './env.ts'
import { tagSupervisor } from './supervisor.ts'
import { defaultProcessTable } from './table.ts'
import { terminateTree } from './terminate.ts'
import {
  SubprocessError,
  type ChildHandle,
  type SessionTag,
  type SpawnOptions,
  type SubprocessServiceApi,
  type TerminateReport,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    subprocess: SubprocessService
  }
}

/** Environment variable carrying each child's tag (see `SessionTag`). */
export const SUBPROCESS_TAG_VARIABLE = 'CONCH_SUBPROCESS_TAG'

const Argv = z.tuple([z.string().min(1, 'the program (argv[0]) is empty')], z.string()).refine(
  (argv) => argv.every((arg) => !arg.includes('\0')),
  'an argument contains a NUL byte',
)

type Exit = { exitCode: number | null; signal: NodeJS.Signals | null }

/** The service's record of one child: its handle, tag, and how to let go of it. */
interface Owned {
  readonly handle: ChildHandle
  readonly tag: SessionTag
  /** Unregisters the caller-scope effect without running it. */
  release(): void
  /** `SpawnOptions.tree`. */
  readonly tree: 'tagged' | 'descendants' | 'session'
}

class SubprocessService extends Service implements SubprocessServiceApi {
  static Config = z
    .strictObject({
      graceMs: z
        .number()
        .int()
        .nonnegative()
        .default(3000)
        .describe('How long a terminated child tree gets between SIGTERM and SIGKILL, in ms.'),
      killWaitMs: z
        .number()
        .int()
        .nonnegative()
        .default(2000)
        .describe('How long to wait for KILLed processes to disappear before reporting them as survivors, in ms.'),
      allowEnv: z
        .array(z.string().min(1))
        .optional()
        .describe('Parent variables (names, or `*` patterns) a child spawned without `env` keeps although the scrubbing policy drops them.'),
    })
    .prefault({})

  private readonly owned = new Set<Owned>()
  private readonly state = { disposing: false }

  constructor(ctx: Context, public config: SubprocessService.Config) {
    super(ctx, 'subprocess')
    ctx.effect(() => () => this.terminateAll(), 'subprocess.terminateAll')
  }

  spawn(options: SpawnOptions): ChildHandle {
    const argv = Argv.safeParse(options.argv)
    if (!argv.success) {
      const reason = argv.error.issues[0]?.message ?? 'invalid argv'
      throw new SubprocessError('INVALID_ARGV', { program: JSON.stringify(options.argv), problem: reason })
    }
    if (this.state.disposing) {
      throw new SubprocessError('SERVICE_DISPOSING', { program: argv.data[0] })
    }
    options.signal?.throwIfAborted()

    const extraPipes = options.extraPipes ?? 0
    if (!Number.isInteger(extraPipes) || extraPipes < 0 || extraPipes > 4) {
      throw new SubprocessError('INVALID_ARGV', { program: argv.data[0], problem: `extraPipes must be an integer from 0 to 4, got ${extraPipes}` })
    }
    if (options.tree !== undefined && options.tree !== 'tagged' && options.tree !== 'descendants' && options.tree !== 'session') {
      throw new SubprocessError('INVALID_ARGV', { program: argv.data[0], problem: `tree must be 'tagged', 'descendants' or 'session', got ${JSON.stringify(options.tree)}` })
    }
    const [program, ...args] = argv.data
    const tag = createSessionTag(SUBPROCESS_TAG_VARIABLE)
    const env = { ...(options.env ?? scrubbedEnv(process.env, { allow: this.config.allowEnv ?? [] })), [tag.name]: tag.value }

    // Registered before anything starts, so an inactive caller scope throws before a process exists.
    let owned: Owned | undefined
    let released = false
    const disposeEffect = this.ctx.effect(() => () => {
      if (released || owned === undefined) return
      return owned.handle.terminate().then(() => undefined)
    }, 'subprocess.child')

    const refuse = (problem: string, cause?: { cause: unknown }): SubprocessError => {
      released = true
      void disposeEffect()
      return new SubprocessError('SPAWN_FAILED', { program, problem }, cause)
    }
    // The program is looked up here, because the shell below always starts: a missing program must
    // still fail at once, not as the shell's exit 127; and env(1) gets the file, not a name to search.
    const located = locate(options.cwd, env.PATH, program, options.agentWritable ?? [])
    if (typeof located !== 'string') throw refuse(located.problem)
    if (options.agentWritable !== undefined && env.PATH !== undefined) env.PATH = pathOutside(env.PATH, options.agentWritable)
    let child: ChildProcess
    try {
      // Only stdio and the extra pipes reach the program (descriptors.ts).
      const [shell, ...wrapped] = withDescriptorsClosed([located, ...args], 3 + extraPipes, env)
      child = spawnChild(shell, wrapped, {
        cwd: options.cwd,
        env,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe', ...Array.from({ length: extraPipes }, () => 'pipe' as const)],
        windowsHide: true,
      })
    } catch (error) {
      throw refuse(messageOf(error), { cause: error })
    }
    // Node reports ENOENT/EACCES asynchronously, but leaves `pid` unset at once.
    child.on('error', () => {})
    if (child.pid === undefined) throw refuse('it did not start')
    const pid = child.pid
    child.stdin?.on('error', () => {})
    const unwatch = options.supervised === true ? tagSupervisor().watch(tag) : () => {}

    const done = new Promise<Exit>((resolve) => {
      child.once('close', (exitCode: number | null, signal: NodeJS.Signals | null) => resolve({ exitCode, signal }))
    })
    // `exit` comes when the child is reaped, before its pipes close: a waiting teardown looks at once.
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    const tree = options.tree ?? 'tagged'
    // Its start identity, read while surely unreaped: it bounds the teardown's sweep after pid reuse.
    const rootStartTime = tree !== 'descendants' ? defaultProcessTable().get(pid).then((entry) => entry?.startTime, () => undefined) : undefined

    let terminating: Promise<TerminateReport> | undefined
    const handle: ChildHandle = {
      pid,
      stdout: child.stdout!,
      stderr: child.stderr!,
      extra: child.stdio.slice(3).map((stream) => stream as Duplex),
      write: (data) => {
        if (child.stdin && !child.stdin.writableEnded) child.stdin.write(data)
      },
      end: () => {
        child.stdin?.end()
      },
      done,
      terminate: (terminateOptions = {}) => {
        terminating ??= (rootStartTime ?? Promise.resolve(undefined)).then((startTime) => terminateTree({
          rootPid: pid,
          ...(startTime !== undefined && { rootStartTime: startTime }),
          includeRoot: true,
          graceMs: terminateOptions.graceMs ?? this.config.graceMs,
          ...(terminateOptions.rootSignal !== undefined && { rootSignal: terminateOptions.rootSignal }),
          killWaitMs: this.config.killWaitMs,
          rootExited: exited,
          ...(tree === 'tagged'
            ? { tag, session: true }
            : tree === 'session'
              ? { discovery: 'orphans' as const, session: true }
              : { discovery: 'children' as const }),
        })).finally(() => {
          terminating = undefined
        })
        return terminating
      },
    }

    const onAbort = (): void => void handle.terminate()
    options.signal?.addEventListener('abort', onAbort, { once: true })

    owned = {
      handle,
      tag,
      tree,
      release: () => {
        released = true
        unwatch()
        options.signal?.removeEventListener('abort', onAbort)
        this.owned.delete(owned!)
        void disposeEffect()
      },
    }
    this.owned.add(owned)
    const record = owned
    void done.then(() => this.releaseWhenClean(record))
    return handle
  }

  /** After the child exits, keeps owning it only while processes carrying its tag remain (`tagged` trees). */
  private async releaseWhenClean(owned: Owned): Promise<void> {
    if (!this.owned.has(owned)) return
    // A `descendants` or `session` tree cannot be found by a tag once its root is gone: nothing to wait for.
    if (owned.tree !== 'tagged') {
      owned.release()
      return
    }
    try {
      const table = defaultProcessTable()
      const entries = await table.snapshot()
      const values = await Promise.all(entries.map((entry) => table.environ(entry.pid, owned.tag.name)))
      if (values.some((value) => value === owned.tag.value)) return
    } catch {
      return
    }
    owned.release()
  }

  private async terminateAll(): Promise<void> {
    this.state.disposing = true
    const all = [...this.owned]
    await Promise.all(
      all.map(async (owned) => {
        await owned.handle.terminate()
        owned.release()
      }),
    )
  }
}

/**
 * The file `program` names from `cwd` with `path` as PATH, or why it cannot be executed: a missing
 * working directory; a name with a `/` (relative to `cwd`) that is not an executable file; a bare
 * name in no absolute folder of PATH outside `agentWritable` (`resolveExecutable`: relative entries
 * name the working directory, and a folder an agent may write may hold a program it put there).
 */
function locate(cwd: string | undefined, path: string | undefined, program: string, agentWritable: readonly string[]): string | { problem: string } {
  if (cwd !== undefined && !existsSync(cwd)) return { problem: `the working directory ${cwd} does not exist` }
  if (program.includes('/')) {
    const file = resolve(cwd ?? '.', program)
    if (!existsSync(file)) return { problem: 'no such file' }
    return isExecutableFile(file) ? program : { problem: 'it is not executable' }
  }
  // Without PATH, execvp(3) searches the system default (confstr _CS_PATH).
  const folders = path ?? '/bin:/usr/bin'
  const found = resolveExecutable(program, folders, agentWritable)
  if (found !== undefined) return found
  return { problem: skippedExecutables(program, folders, agentWritable) ?? `not found (or not executable) in the absolute folders of PATH=${path ?? ''}` }
}

namespace SubprocessService {
  export type Config = z.output<typeof SubprocessService.Config>
}

export default SubprocessService
