/**
 * The SDK's `spawnClaudeCodeProcess` hook through `ctx.subprocess`, which owns the process tree;
 * the SDK gets its `SpawnedProcess` shape. `kill()` runs the tree-scoped teardown, never a
 * signal to one pid, so nothing the CLI started outlives it.
 */
import { EventEmitter } from 'node:events'
import { Writable, type Readable } from 'node:stream'
import type { SpawnedProcess, SpawnOptions } from '@anthropic-ai/claude-agent-sdk'
import type { ChildHandle, SubprocessServiceApi } from '@conch/subprocess'

export interface SpawnedChild {
  /** The `SpawnedProcess` handed to the SDK. */
  process: SpawnedProcess
  /** The conch handle of the same child (for the teardown ladder). */
  handle: ChildHandle
}

/** `agentWritable`: the folders the parent may write, kept off the CLI's PATH (`SpawnOptions.agentWritable`, @conch/subprocess). */
export function spawnThroughSubprocess(subprocess: SubprocessServiceApi, options: SpawnOptions, graceMs: number, agentWritable: readonly string[]): SpawnedChild {
  const env = Object.fromEntries(Object.entries(options.env).filter(([, value]) => value !== undefined)) as Record<string, string>
  const handle = subprocess.spawn({
    argv: [options.command, ...options.args],
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    env,
    agentWritable,
  })
  const events = new EventEmitter()
  let killed = false
  let exitCode: number | null = null
  let signalCode: NodeJS.Signals | null = null
  const stdin = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      handle.write(chunk)
      callback()
    },
    final(callback) {
      handle.end()
      callback()
    },
  })
  void handle.done.then((exit) => {
    exitCode = exit.exitCode
    signalCode = exit.signal
    events.emit('exit', exit.exitCode, exit.signal)
  })
  const terminate = () => {
    killed = true
    handle.terminate({ graceMs }).catch((error: unknown) => events.emit('error', error instanceof Error ? error : new Error(String(error))))
  }
  if (options.signal.aborted) terminate()
  else options.signal.addEventListener('abort', terminate, { once: true })
  const spawned: SpawnedProcess = {
    stdin,
    stdout: handle.stdout as Readable,
    get killed() {
      return killed
    },
    get exitCode() {
      return exitCode
    },
    get signalCode() {
      return signalCode
    },
    kill() {
      terminate()
      return true
    },
    on: (event: 'exit' | 'error', listener: (...args: any[]) => void) => void events.on(event, listener),
    once: (event: 'exit' | 'error', listener: (...args: any[]) => void) => void events.once(event, listener),
    off: (event: 'exit' | 'error', listener: (...args: any[]) => void) => void events.off(event, listener),
  } as SpawnedProcess
  return { process: spawned, handle }
}
