/**
 * One program run on one process, as a state machine: waiting (for ready) → running (program
 * sent) → settling (outcome chosen, tree being ended) → settled. The first outcome wins (done
 * frame, deadline, abort, protocol violation, exit, output budget); the result comes only after
 * the process tree is gone.
 */
import { isLosslessJson, type PtcBinding, type PtcFailure, type PtcFailureKind, type PtcResult, type PtcSandboxReport, type PtcSpec } from '@conch/ptc'
import { messageOf } from '@conch/errors'
import { ChannelError, type ChildMessage, violation } from './channel.ts'
import type { Config } from './config.ts'
import { OutputLedger } from './output-ledger.ts'
import type { ProcessEvent, ProgramProcess } from './process.ts'

type Outcome = { ok: true; value: unknown } | { ok: false; failure: PtcFailure }

export interface RunInput {
  spec: PtcSpec
  /** The program after type stripping (same lines and columns as written). */
  code: string
  bindings: readonly PtcBinding[]
  signal?: AbortSignal
  /** `performance.now()` when the run was asked for: the deadline counts from here. */
  startedAt: number
}

const DENIAL = /^.*\b(EROFS|EACCES|EPERM)\b.*$/gm

/** Runs `input` on `process` and resolves with the result after the tree is gone. */
export function runOnProcess(process: ProgramProcess, input: RunInput, config: Config): Promise<PtcResult> {
  return new Promise<PtcResult>((resolve) => {
    const ledger = new OutputLedger(config.maxOutputBytes)
    const functions = new Map<string, PtcBinding['functions']>(input.bindings.map((binding) => [binding.global, binding.functions]))
    const stop = new AbortController()
    const pending = new Set<number>()
    let expectedId = 1
    let phase: 'waiting' | 'running' | 'settling' = 'waiting'
    let timer: NodeJS.Timeout | undefined

    const settle = (outcome: Outcome): void => {
      if (phase === 'settling') return
      phase = 'settling'
      if (timer) clearTimeout(timer)
      input.signal?.removeEventListener('abort', onAbort)
      stop.abort()
      void process.terminate().then(
        (report) => finish(outcome, report.survivors.length === 0 ? undefined : report.survivors.map((p) => `${p.comm}[${p.pid}]`).join(', ')),
        (error: unknown) => finish(outcome, String(error)),
      )
    }
    const fail = (kind: PtcFailureKind, message: string, stack?: string): void => settle({ ok: false, failure: { kind, message, ...(stack !== undefined && { stack }) } })

    const finish = (outcome: Outcome, cleanupProblem: string | undefined): void => {
      const final: Outcome =
        cleanupProblem === undefined ? outcome : { ok: false, failure: { kind: 'worker-exit', message: `cleanup failed: processes survived the teardown: ${cleanupProblem}` } }
      const logs = ledger.logs
      const sandbox: PtcSandboxReport = {
        mode: input.spec.policy.mode,
        enforcement: process.confinement.enforcement,
        ...(process.confinement.provider !== undefined && { provider: process.confinement.provider }),
        denials: denials([logs, final.ok ? '' : `${final.failure.message}\n${final.failure.stack ?? ''}`].join('\n')),
      }
      const elapsedMs = Math.round(performance.now() - input.startedAt)
      resolve(final.ok ? { ok: true, value: final.value as never, logs, sandbox, elapsedMs } : { ok: false, failure: final.failure, logs, sandbox, elapsedMs })
    }

    const onAbort = (): void => {
      const reason: unknown = input.signal?.reason
      fail('abort', `the run was cancelled${reason instanceof Error ? `: ${reason.message}` : ''}`)
    }

    const log = (text: string): void => {
      if (!ledger.append(text)) fail('output-limit', `the program's output exceeds maxOutputBytes ${config.maxOutputBytes}; the logs keep the first bytes`)
    }

    const call = (message: Extract<ChildMessage, { t: 'call' }>): void => {
      if (message.id !== expectedId) throw violation(`call id ${message.id} is out of sequence (expected ${expectedId})`)
      expectedId++
      const namespace = functions.get(message.ns)
      const fn = namespace !== undefined && Object.hasOwn(namespace, message.fn) ? namespace[message.fn] : undefined
      if (fn === undefined) throw violation(`call ${message.id} names an undeclared binding ${message.ns}.${message.fn}`)
      if (pending.size >= config.maxPendingCalls) throw violation(`more than maxPendingCalls ${config.maxPendingCalls} binding calls are in flight`)
      pending.add(message.id)
      const reply = (value: { ok: true; value: unknown } | { ok: false; message: string }): void => {
        pending.delete(message.id)
        if (phase !== 'running') return
        try {
          process.send({ t: 'reply', id: message.id, ...value } as never)
        } catch (error) {
          if (error instanceof ChannelError && error.code === 'FRAME_TOO_LARGE' && value.ok) {
            // A result too large for one frame is the binding's problem, not the program's: say so.
            try {
              process.send({ t: 'reply', id: message.id, ok: false, message: `${message.ns}.${message.fn} returned more than maxMessageBytes ${config.maxMessageBytes}` })
              return
            } catch {} // the queue itself is full: the program is not reading
          }
          fail('protocol', messageOf(error))
        }
      }
      // Called in the turn the frame arrived, not a microtask later; a synchronous throw is the
      // binding's error like a rejection.
      let returned: Promise<unknown>
      try {
        returned = Promise.resolve(fn(message.args as never, { signal: stop.signal }))
      } catch (error) {
        returned = Promise.reject(error)
      }
      returned.then(
        (value) => {
          const problem = isLosslessJson(value)
          reply(problem === undefined ? { ok: true, value } : { ok: false, message: `${message.ns}.${message.fn} returned a value that is not JSON: ${problem}` })
        },
        (error: unknown) => reply({ ok: false, message: messageOf(error) }),
      )
    }

    const onEvent = (event: ProcessEvent): void => {
      if (phase === 'settling') return
      switch (event.type) {
        case 'output':
          log(event.text)
          return
        case 'protocol':
          fail('protocol', event.message)
          return
        case 'exit':
          fail(
            'worker-exit',
            `the program's process exited (${event.exitCode === null ? `signal ${event.signal}` : `code ${event.exitCode}`}) before it reported a result`,
          )
          return
        case 'message': {
          const message = event.message
          try {
            switch (message.t) {
              case 'ready':
                throw violation('a ready frame during the run')
              case 'log':
                log(message.text)
                return
              case 'call':
                call(message)
                return
              case 'done':
                if (!message.ok) {
                  fail(message.kind, message.message, message.stack)
                  return
                }
                if (!ledger.fits(Buffer.byteLength(JSON.stringify(message.value), 'utf8'))) {
                  fail('output-limit', `the logs plus the completion value exceed maxOutputBytes ${config.maxOutputBytes}`)
                  return
                }
                settle({ ok: true, value: message.value })
                return
              default: {
                const never: never = message
                throw violation(`unexpected frame ${JSON.stringify(never)}`)
              }
            }
          } catch (error) {
            fail('protocol', messageOf(error))
          }
        }
      }
    }

    if (input.signal?.aborted) {
      onAbort()
      return
    }
    input.signal?.addEventListener('abort', onAbort, { once: true })
    if (input.spec.timeoutMs !== null) {
      const remaining = Math.max(0, input.spec.timeoutMs - (performance.now() - input.startedAt))
      timer = setTimeout(() => fail('timeout', `the program did not finish within ${input.spec.timeoutMs} ms`), remaining)
    }
    process.attach(onEvent)
    process.ready.then(
      () => {
        if (phase !== 'waiting') return
        phase = 'running'
        const bindings = Object.fromEntries(input.bindings.map((binding) => [binding.global, Object.keys(binding.functions)]))
        try {
          process.send({ t: 'run', code: input.code, bindings, maxOutputBytes: config.maxOutputBytes })
        } catch (error) {
          fail('protocol', (error as Error).message)
        }
      },
      () => {}, // the exit or protocol event that rejected `ready` settles the run
    )
  })
}

/** Denials seen in the program's output and errors: each distinct line naming EROFS, EACCES or EPERM (at most 20). */
function denials(text: string): PtcSandboxReport['denials'] {
  const seen = new Map<string, { code: string; text: string }>()
  for (const match of text.matchAll(DENIAL)) {
    const line = match[0].trim().slice(0, 300)
    if (!seen.has(line) && seen.size < 20) seen.set(line, { code: match[1]!, text: line })
  }
  return [...seen.values()]
}
