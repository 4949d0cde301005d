/**
 * The managed worker's side (`conch pool-worker`): hosts the warm sessions and speaks the
 * protocol of `protocol.ts` on fd 3; the main process keeps everything else. Each CLI runs under
 * the `policy` its invoke carries (an invoke without one is refused) and carries the worker's
 * `CONCH_SUBPROCESS_TAG`, so the main process stops it even after the worker died with SIGKILL.
 */
import { fstatSync } from 'node:fs'
import { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { unreachable } from '@conch/errors'
import { SUBPROCESS_TAG_VARIABLE } from '@conch/subprocess'
import { parseWorkerConfig } from './config.ts'
import { openStateDir } from './state-dir.ts'
import { InvokeFailure, PoolError } from './errors.ts'
import { encodeLine, LineDecoder, MainMessageSchema, type MainMessage, type TerminalSections, type WorkerMessage } from './protocol.ts'
import type { TerminalFactory } from './terminal.ts'
import { WarmSessions } from './warm.ts'

/** The descriptor of the protocol channel in the worker. */
export const WORKER_CHANNEL_FD = 3

export interface PoolWorkerOptions {
  /** The channel; default a socket over fd 3. */
  channel?: Duplex
  signal?: AbortSignal
  /** Diagnostics (stderr). */
  log?: (line: string) => void
  /** A fixed terminal factory (tests); otherwise `conchTerminals`. */
  terminals?: TerminalFactory
  /** Composes the worker's conch terminals from the main process's config sections; absent (and no `terminals`): init fails. */
  conchTerminals?: (sections: TerminalSections) => Promise<WorkerTerminals>
  /** Largest line the main process may send, bytes (prompts are bounded by it). */
  maxMessageBytes?: number
}

/** The worker's conch terminals: the factory, and the close of what backs it (run after every session closed). */
export interface WorkerTerminals {
  terminals: TerminalFactory
  close(): Promise<void>
}

/**
 * Runs the worker until it is told to stop.
 * @throws PoolError `CONFIG_INVALID` when there is no channel (fd 3 is not an open socket); protocol
 *   errors from the main process end the worker with a log line instead.
 */
export async function runPoolWorker(options: PoolWorkerOptions = {}): Promise<void> {
  if (!options.channel) {
    let socket = false
    try {
      socket = fstatSync(WORKER_CHANNEL_FD).isSocket()
    } catch {
      // not open
    }
    if (!socket) {
      throw new PoolError('CONFIG_INVALID', { field: 'conch pool-worker', problem: `fd ${WORKER_CHANNEL_FD} is not an open socket; the worker is started by the pool's supervisor, which speaks the protocol on it` })
    }
  }
  const channel = options.channel ?? new Socket({ fd: WORKER_CHANNEL_FD, readable: true, writable: true })
  const log = options.log ?? ((line: string) => process.stderr.write(`conch pool-worker: ${line}\n`))
  const decoder = new LineDecoder(options.maxMessageBytes ?? 64 * 1024 * 1024)
  const controllers = new Map<number, AbortController>()
  let warm: WarmSessions | undefined
  let initialised = false
  let host: WorkerTerminals | undefined
  let confined = false
  let stopping: Promise<void> | undefined
  let finish!: () => void
  const finished = new Promise<void>((resolve) => (finish = resolve))

  const send = (message: WorkerMessage) => {
    if (!channel.destroyed && channel.writable) channel.write(encodeLine(message))
  }
  const stop = (why: string) => {
    stopping ??= (async () => {
      log(`stopping: ${why}`)
      for (const controller of controllers.values()) controller.abort(new Error(why))
      await warm?.close()
      await host?.close().catch((error: unknown) => log(`closing the terminals failed: ${(error as Error).message}`))
      channel.end()
      finish()
    })()
  }

  const handle = (message: MainMessage) => {
    switch (message.type) {
      case 'init': {
        if (initialised) return stop('a second init')
        initialised = true
        const config = parseWorkerConfig(message.config)
        const tag = process.env[SUBPROCESS_TAG_VARIABLE]
        // Checked again here: the worker never makes a home where a link or another user could lead it.
        const stateDir = openStateDir(config.stateDir ?? '', { field: 'stateDir' })
        confined = options.terminals === undefined
        void (async () => {
          let terminals = options.terminals
          if (terminals === undefined) {
            if (!options.conchTerminals) throw new PoolError('CONFIG_INVALID', { field: 'worker config: terminal', problem: 'this worker cannot compose conch terminals' })
            const composed = await options.conchTerminals(message.terminal ?? { sandboxLocal: {}, ptyLocal: {} })
            if (stopping) return void (await composed.close())
            host = composed
            terminals = composed.terminals
          }
          if (stopping) return
          let sessionsQueued = false
          warm = new WarmSessions(config, {
            terminals,
            env: message.env,
            warn: log,
            stateDir,
            count: (name) => send({ type: 'count', name }),
            changed: () => {
              if (sessionsQueued) return
              sessionsQueued = true
              queueMicrotask(() => {
                sessionsQueued = false
                send({ type: 'sessions', sessions: warm!.sessionStates() })
              })
            },
            ...(tag && { extraEnv: { [SUBPROCESS_TAG_VARIABLE]: tag } }),
          })
          send({ type: 'ready', pid: process.pid })
        })().catch((error: unknown) => stop(`init failed: ${(error as Error).message}`))
        return
      }
      case 'invoke': {
        const refuse = (reason: 'unhealthy' | 'spawn', text: string) => send({ type: 'result', id: message.id, ok: false, reason, message: text, midTask: false, elapsedMs: 0 })
        if (!warm || stopping) return refuse('unhealthy', 'the pool worker is stopping')
        // A CLI runs only under the policy the main process sent, never a default one.
        if (confined && !message.policy) return refuse('spawn', `an invoke for ${message.key.owner} without its owner's sandbox policy`)
        const controller = new AbortController()
        controllers.set(message.id, controller)
        const owner = { id: message.key.owner, ...(message.policy && { policy: message.policy }) }
        const attempt = { signal: controller.signal, capMs: message.capMs, stallMs: message.stallMs, cwd: message.cwd, owner }
        const work = message.oneShot ? warm.oneShot(message.key, message.prompt, attempt) : warm.invoke(message.key, message.prompt, attempt)
        const current = warm
        const settled = (result: WorkerMessage) => {
          controllers.delete(message.id)
          send({ type: 'sessions', sessions: current.sessionStates() })
          send(result)
        }
        void work.then(
          (answer) => settled({ type: 'result', id: message.id, ok: true, ...answer }),
          (error: unknown) => {
            const failure = error instanceof InvokeFailure ? error : new InvokeFailure('unhealthy', (error as Error).message, false)
            const { reason, midTask, elapsedMs, bootMs } = failure
            settled({ type: 'result', id: message.id, ok: false, reason, message: failure.message, midTask, elapsedMs, ...(bootMs !== undefined && { bootMs }) })
          },
        )
        return
      }
      case 'cancel':
        controllers.get(message.id)?.abort(new Error('cancelled'))
        return
      case 'ping':
        send({ type: 'pong', id: message.id })
        return
      case 'evict_tick':
        void warm?.evictTick()
        return
      case 'set_evict_every':
        warm?.setEvictEvery(message.ms)
        return
      default:
        return unreachable(message, 'main message')
    }
  }

  channel.on('data', (chunk: Buffer) => {
    const { values, violation } = decoder.feed(chunk)
    for (const value of values) {
      const parsed = MainMessageSchema.safeParse(value)
      if (!parsed.success) return stop(`a message of no known shape from the main process: ${parsed.error.issues[0]?.message}`)
      try {
        handle(parsed.data)
      } catch (error) {
        return stop((error as Error).message)
      }
    }
    if (violation) stop(violation.message)
  })
  channel.on('end', () => stop('the channel closed'))
  channel.on('error', (error) => stop(`channel error: ${error.message}`))
  if (options.signal?.aborted) stop('stopped before it started')
  else options.signal?.addEventListener('abort', () => stop('stop requested (SIGTERM)'), { once: true })
  await finished
}
