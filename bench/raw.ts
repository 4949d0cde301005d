/**
 * The raw floor: bare node-pty terminals driven the simplest way that works — write the input,
 * then wait until the output ends with the program's own prompt bytes. No sanitising, no
 * scrollback, no readiness proof, no teardown beyond a hangup. Every conch figure is compared
 * with one of these, measured in the same run.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { delay } from './harness.ts'

/** The part of node-pty's `IPty` the baselines use (node-pty 1.1.0, `encoding: null`). */
interface NodePty {
  readonly pid: number
  write(data: string): void
  kill(signal?: string): void
  onData(listener: (data: Buffer) => void): { dispose(): void }
  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): { dispose(): void }
}

interface NodePtyModule {
  spawn(file: string, args: string[], options: { name: string; cols: number; rows: number; cwd: string; env: Record<string, string>; encoding: null }): NodePty
}

// node-pty is a dependency of the backend package, not of the repository root: load the very
// copy the backend uses.
const requireFromBackend = createRequire(new URL('../packages/pty/pty-local/package.json', import.meta.url))
const nodePty = requireFromBackend('node-pty') as NodePtyModule

/** What one raw send saw. */
export interface RawSend {
  /** From the write to the prompt bytes, ms. */
  ms: number
  /** From the write to the first output, ms. */
  firstOutputMs: number
  /** Bytes read from the master during the send (the PTY turns `\n` into `\r\n`). */
  bytes: number
  /** Output of the send decoded as UTF-8 (kept only when asked for; it costs memory). */
  text?: string
}

export interface RawTerminalOptions {
  argv: readonly [string, ...string[]]
  /** The prompt the program prints when it waits for a line; a send ends when the output ends with it. */
  prompt: string
  env?: Record<string, string>
  cwd?: string
  /** Bound of one wait for the prompt, ms. Default 30000. */
  timeoutMs?: number
}

const live = new Set<RawTerminal>()

/**
 * One bare node-pty terminal. `ready` resolves at the first prompt; `send` writes a line and
 * resolves at the next prompt. A send whose prompt does not come within `timeoutMs` rejects:
 * that is a broken bench, not a slow baseline.
 */
export class RawTerminal {
  readonly pid: number
  readonly ready: Promise<number>
  readonly exited: Promise<void>
  private readonly pty: NodePty
  private readonly prompt: Buffer
  private readonly timeoutMs: number
  private tail: Buffer = Buffer.alloc(0)
  private waiter: { resolve: () => void; expect: string | undefined; text: string | undefined; bytes: number; firstAt: number } | undefined
  private isExited = false

  constructor(options: RawTerminalOptions) {
    const [file, ...args] = options.argv
    const started = performance.now()
    this.prompt = Buffer.from(options.prompt)
    this.timeoutMs = options.timeoutMs ?? 30_000
    this.pty = nodePty.spawn(file, args, {
      name: 'xterm-256color',
      cols: 160,
      rows: 40,
      cwd: options.cwd ?? process.cwd(),
      env: options.env ?? rawEnv(),
      encoding: null,
    })
    this.pid = this.pty.pid
    live.add(this)
    this.exited = new Promise((resolve) => {
      this.pty.onExit(() => {
        this.isExited = true
        live.delete(this)
        resolve()
      })
    })
    this.pty.onData((chunk) => this.onData(chunk))
    this.ready = this.wait(undefined, false, 'the first prompt').then(() => performance.now() - started)
  }

  /** Writes `line` and a carriage return, then waits for the prompt (and `expect`, when given, in the output). */
  async send(line: string, options: { expect?: string; keepText?: boolean } = {}): Promise<RawSend> {
    const start = performance.now()
    this.tail = Buffer.alloc(0)
    const waiting = this.wait(options.expect, options.keepText === true, JSON.stringify(line))
    this.pty.write(`${line}\r`)
    const { bytes, text, firstAt } = await waiting
    return { ms: performance.now() - start, firstOutputMs: firstAt - start, bytes, ...(text !== undefined ? { text } : {}) }
  }

  /**
   * Hangs up the way a closing terminal does: SIGHUP to the program (an interactive bash passes
   * it on to its jobs, bash(1) SIGNALS). Resolves when node-pty reports the exit.
   */
  async hangup(): Promise<void> {
    if (!this.isExited) this.pty.kill('SIGHUP')
    await this.exited
  }

  /** SIGHUP, then SIGKILL after `graceMs`; for cleanup after a failure. */
  async destroy(graceMs = 2000): Promise<void> {
    if (this.isExited) return
    this.pty.kill('SIGHUP')
    const timer = setTimeout(() => {
      if (!this.isExited) this.pty.kill('SIGKILL')
    }, graceMs)
    await this.exited
    clearTimeout(timer)
  }

  private wait(expect: string | undefined, keepText: boolean, what: string): Promise<{ bytes: number; text: string | undefined; firstAt: number }> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined
        reject(new Error(`raw terminal ${this.pid}: no prompt ${JSON.stringify(this.prompt.toString())} within ${this.timeoutMs} ms after ${what}`))
      }, this.timeoutMs)
      const waiter = {
        expect,
        text: keepText || expect !== undefined ? '' : undefined,
        bytes: 0,
        firstAt: 0,
        resolve: () => {
          clearTimeout(timer)
          this.waiter = undefined
          resolve({ bytes: waiter.bytes, text: waiter.text, firstAt: waiter.firstAt })
        },
      }
      this.waiter = waiter
    })
  }

  private onData(chunk: Buffer): void {
    const waiter = this.waiter
    if (waiter === undefined) return
    if (waiter.bytes === 0) waiter.firstAt = performance.now()
    waiter.bytes += chunk.length
    if (waiter.text !== undefined) waiter.text += chunk.toString('latin1')
    const keep = this.prompt.length
    this.tail = chunk.length >= keep ? chunk.subarray(chunk.length - keep) : Buffer.concat([this.tail, chunk]).subarray(-keep)
    if (!this.tail.equals(this.prompt)) return
    if (waiter.expect !== undefined && !waiter.text!.includes(waiter.expect)) return
    if (waiter.text !== undefined) waiter.text = Buffer.from(waiter.text, 'latin1').toString('utf8')
    waiter.resolve()
  }
}

/** The environment of raw terminals: this process's, a fixed TERM, no history file, no PROMPT_COMMAND. */
export function rawEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
  delete env.PROMPT_COMMAND
  return { ...env, TERM: 'xterm-256color', HISTFILE: '', ...extra }
}

/**
 * A bare interactive bash (`--noprofile --norc -i`, like a conch session) whose PS1 is a random
 * token that no command output contains. `wrap` puts a runner (e.g. bwrap) in front of it.
 */
export function rawBash(options: { wrap?: (argv: [string, ...string[]]) => [string, ...string[]]; cwd?: string } = {}): RawTerminal {
  const prompt = `raw-${randomBytes(6).toString('hex')}$ `
  const argv: [string, ...string[]] = ['/bin/bash', '--noprofile', '--norc', '-i']
  return new RawTerminal({
    argv: options.wrap ? options.wrap(argv) : argv,
    prompt,
    env: rawEnv({ PS1: prompt }),
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
  })
}

/** Every raw terminal still running, destroyed (cleanup after a failure). */
export async function destroyAllRaw(): Promise<void> {
  await Promise.all([...live].map((terminal) => terminal.destroy()))
}

/** Child pids of `pid` (proc(5) `/proc/<pid>/task/<pid>/children`). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** `pid`'s stat fields from field 3 (the state) on (proc(5)), or undefined when it is gone. */
export function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}

/** Every descendant of `pid` (proc(5) children lists, walked). */
export function descendantsOf(pid: number): number[] {
  const out: number[] = []
  const queue = [pid]
  while (queue.length) {
    for (const child of childPids(queue.shift()!)) {
      out.push(child)
      queue.push(child)
    }
  }
  return out
}

/** Whether `pid` is gone or a zombie (state `Z`/`X`: it no longer runs). */
export function isGone(pid: number): boolean {
  const state = statFields(pid)?.[0]
  return state === undefined || state === 'Z' || state === 'X'
}

/** Resolves when every pid of `pids` is gone, checking every ms; rejects after `timeoutMs`. */
export async function waitGone(pids: readonly number[], timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!pids.every(isGone)) {
    if (performance.now() > deadline) {
      const left = pids.filter((pid) => !isGone(pid)).map((pid) => `${pid} (state ${statFields(pid)?.[0]})`)
      throw new Error(`processes ${left.join(', ')} still run after ${timeoutMs} ms`)
    }
    await delay(1)
  }
}
