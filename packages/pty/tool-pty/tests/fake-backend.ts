/**
 * A backend whose sends settle only when the test says so, for checking the order in which
 * tools read, stream and cancel. Sessions start at once and close cleanly.
 */
import { PtyError, type BackendSendInput, type BackendSession, type BackendSpawnRequest, type PtyBackend, type SendOperation, type SendResult } from '@conch/pty'

export class ScriptedSend {
  written = false
  cancelCalls = 0
  private unread = ''
  private readonly listeners = new Set<() => void>()
  private settle!: { resolve(result: SendResult): void; reject(error: unknown): void }
  readonly operation: SendOperation

  constructor(readonly input: BackendSendInput) {
    const done = new Promise<SendResult>((resolve, reject) => (this.settle = { resolve, reject }))
    this.operation = {
      done,
      readOutput: () => {
        const text = this.unread
        this.unread = ''
        return text
      },
      onOutput: (listener) => {
        this.listeners.add(listener)
        return () => this.listeners.delete(listener)
      },
      cancel: async () => {
        this.cancelCalls++
        if (!this.written) this.settle.reject(new PtyError('SEND_CANCELLED', { reason: 'cancelled before its input was written; nothing was written' }))
        else this.finish({ viewport: '^C', evidence: { tier: 'cancel', detail: 'SIGINT delivered' } })
      },
    }
  }

  write(): void {
    this.written = true
  }

  emit(text: string): void {
    this.unread += text
    for (const listener of [...this.listeners]) listener()
  }

  finish(overrides: Partial<SendResult> = {}): void {
    this.settle.resolve({
      viewport: '',
      waitReason: 'stdin_read',
      sessionStatus: { state: 'running' },
      truncated: false,
      inputState: 'prompt',
      evidence: { tier: 'prompt', detail: 'controlled prompt' },
      elapsedMs: 12,
      ...overrides,
    })
  }
}

export class ScriptedBackend implements PtyBackend {
  readonly type = 'shell'
  readonly sends: ScriptedSend[] = []
  /** Write each send in a microtask (like a real backend) unless false. */
  autoWrite = true

  async spawn(_request: BackendSpawnRequest): Promise<BackendSession> {
    const sends = this.sends
    const backend = this
    return {
      pid: 4120,
      motd: '',
      status: () => ({ state: 'running' }),
      onExit: () => () => {},
      startSend(input) {
        const send = new ScriptedSend(input)
        sends.push(send)
        if (backend.autoWrite) queueMicrotask(() => send.write())
        return send.operation
      },
      read: () => ({ text: '', totalLines: 0, firstRetainedLine: 1, lineBegin: 1, lineEnd: 0, truncated: false }),
      signal: async (signal) => ({ signal, delivered: true, targetPgid: 4121, target: 'sleep' }),
      close: async () => ({ status: { state: 'exited', exitCode: null, signal: 'SIGHUP' }, stopped: [{ pid: 4120, name: 'bash' }], survivors: [] }),
    }
  }

  get last(): ScriptedSend {
    const send = this.sends.at(-1)
    if (!send) throw new Error('no send was started')
    return send
  }
}
