/**
 * The three ways the `workflows` bench drives a workflow (conch's agent loop with a scripted
 * model, a Terminus-shaped tmux harness, a one-shot `bash -c` tool; docs/performance.md, "Tokens
 * per workflow", describes each), each returning what the model read (the text of every tool
 * result, as that tool hands it over), its tool calls and the wall time from the first call to
 * the last result.
 */
import { execFile, spawn } from 'node:child_process'
import { promisify } from 'node:util'
import type { ChatMessage, ModelAdapter, ModelChunk } from '../../packages/core/llm/src/index.ts'
import type { Composition } from '../compose.ts'
import { delay } from '../harness.ts'
import type { ConchDriver, TmuxStep, Workflow } from './definitions.ts'

export interface HarnessRun {
  /** UTF-8 bytes of every text the model read. */
  bytes: number
  /** Of those, the bytes of the harness's own lines and suffixes, not the programs' output (`OWN`). */
  harness_bytes: number
  calls: number
  wall_ms: number
  /** Those texts, joined (the outcome check reads them). */
  read: string
}

/** Terminus's pane: 160 columns, 40 rows, as conch's terminals are by default. */
const COLS = 160
const ROWS = 40
/** A pipe tool's result bound (a one-shot bash tool cuts its output at 30 000 characters). */
const PIPE_MAX_BYTES = 30_000
const PIPE_TIMEOUT_MS = 60_000
/** How long a conch run may stay open after its script ended (a hold it should not have). */
const RUN_END_MS = 15_000

/**
 * What each harness writes itself: conch's status lines (`[exit: …]`, `[wait: …]`, `[session: …]`,
 * the open, task, notification and screen headers, a screen's `[rows a-b unchanged]`); the tmux
 * harness's headers and the `; tmux wait -S` it appends to a command (echoed back); the pipe
 * tool's exit and empty notes.
 */
export const OWN: Record<'conch' | 'tmux' | 'pipe', RegExp> = {
  conch: /^\[(?:(?:wait|exit|session|opened|task|status|screen|input|note|notification): |earlier command |rows \d+-\d+ unchanged\]).*$| {2}← cursor$/gm,
  tmux: /^(?:New Terminal Output|Current Terminal Screen):$|; tmux wait -S [\w-]+/gm,
  pipe: /^Exit code \d+$|^\(no output\)$/gm,
}

function measured(harness: keyof typeof OWN, texts: readonly string[], calls: number, wallMs: number): HarnessRun {
  const bytes = (text: string) => Buffer.byteLength(text)
  const own = texts.flatMap((text) => text.match(OWN[harness]) ?? [])
  return { bytes: texts.reduce((sum, text) => sum + bytes(text), 0), harness_bytes: own.reduce((sum, text) => sum + bytes(text), 0), calls, wall_ms: wallMs, read: texts.join('\n') }
}

/** A queue whose `next()` waits for the next `push`. */
function channel<T>() {
  const items: T[] = []
  const waiting: ((item: T) => void)[] = []
  return {
    push(item: T) {
      const take = waiting.shift()
      if (take) take(item)
      else items.push(item)
    },
    next(): Promise<T> {
      return items.length > 0 ? Promise.resolve(items.shift()!) : new Promise((resolve) => waiting.push(resolve))
    },
  }
}

type Action = { type: 'call'; name: string; input: Record<string, unknown> } | { type: 'end' }

/** What the model reads from a request: the tool message of its last call, or the wake prompt. */
function lastRead(messages: readonly ChatMessage[]): string {
  const last = messages.at(-1)
  return last?.role === 'tool' || last?.role === 'user' ? last.content : ''
}

/** The workflow's conch script as a model on the real agent loop; `dir` is the agent's workspace. */
export async function runConch(c: Composition, workflow: Workflow, dir: string): Promise<HarnessRun> {
  const actions = channel<Action>()
  const reads = channel<string | undefined>()
  let requests = 0
  let finished = false
  const adapter: ModelAdapter = {
    provider: 'bench-workflows',
    stream(request) {
      return (async function* (): AsyncGenerator<ModelChunk> {
        if (requests++ > 0) reads.push(lastRead(request.messages))
        const action = finished ? ({ type: 'end' } as const) : await actions.next()
        if (action.type === 'call') {
          yield { type: 'tool-call-delta', index: 0, id: `call_${requests}`, name: action.name, argumentsDelta: JSON.stringify(action.input) }
          yield { type: 'finish', reason: 'tool_calls' }
        } else {
          yield { type: 'text-delta', text: 'done' }
          yield { type: 'finish', reason: 'stop' }
        }
      })()
    },
  }
  const texts: string[] = []
  let calls = 0
  const read = async (action: Action): Promise<string> => {
    actions.push(action)
    const text = await reads.next()
    if (text === undefined) throw new Error(`workflows: the conch run of "${workflow.name}" ended while the script waited`)
    texts.push(text)
    return text
  }
  const call = (name: string, input: Record<string, unknown>) => {
    calls++
    return read({ type: 'call', name, input })
  }
  const driver: ConchDriver = {
    send: (input) => call('terminal_send', typeof input === 'string' ? { text: input } : input),
    call,
    async waitFor(pattern) {
      while (!texts.some((text) => pattern.test(text))) await read({ type: 'end' })
    },
  }
  const unregister = c.ctx.llm.register(adapter)
  const agent = await c.ctx.agents.create({ workspaceRoot: dir })
  const abort = new AbortController()
  try {
    const start = performance.now()
    const run = c.ctx.agents.run(agent, { prompt: workflow.name, signal: abort.signal })
    // A run that ends (or fails) while the script waits for a read fails that read.
    void run.then(() => reads.push(undefined), () => reads.push(undefined))
    await workflow.conch(driver)
    const wallMs = performance.now() - start
    finished = true
    actions.push({ type: 'end' })
    const timer = setTimeout(() => abort.abort(new Error('the run stayed open after its script ended')), RUN_END_MS)
    const result = await run.finally(() => clearTimeout(timer))
    if (result.status !== 'completed') throw new Error(`workflows: the conch run of "${workflow.name}" ended ${result.status}: ${result.text}`)
    return measured('conch', texts, calls, wallMs)
  } finally {
    await c.ctx.agents.dispose(agent)
    unregister()
  }
}

/**
 * What a Terminus-shaped harness hands the model after a step: the part of the whole pane
 * (history and screen) after the previous capture, or the visible screen when the previous
 * capture is no longer a part of it (a full-screen program, a cleared screen) or nothing new came.
 * Captures have their trailing blank rows dropped.
 */
export function incremental(previous: string | undefined, current: string, visible: string): string {
  if (previous !== undefined) {
    const before = previous.trimEnd()
    const at = current.indexOf(before)
    if (at >= 0) {
      const fresh = current.slice(at + before.length)
      if (fresh.trim() !== '') return `New Terminal Output:\n${fresh.replace(/^\n/, '')}`
    }
  }
  return `Current Terminal Screen:\n${visible}`
}

const execTmux = promisify(execFile)
/** The private tmux server of this bench process. */
const SOCKET = `conch-bench-${process.pid}`

/** The workflow's tmux steps through a private tmux server whose shell starts in `dir`. */
export async function runTmux(workflow: Workflow, dir: string): Promise<HarnessRun> {
  // A server of its own even when the bench runs inside tmux.
  const env: NodeJS.ProcessEnv = { ...process.env, HISTFILE: '/dev/null' }
  delete env['TMUX']
  const tmux = async (...args: string[]) => (await execTmux('tmux', ['-L', SOCKET, ...args], { env })).stdout
  const capture = async (entire: boolean) => (await tmux('capture-pane', '-p', ...(entire ? ['-S', '-'] : []), '-t', 'w')).replace(/\s+$/, '')
  await tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'w', '-x', String(COLS), '-y', String(ROWS), '-c', dir, 'bash --noprofile --norc')
  try {
    // The harness starts the session before the model's first step; its first screen is not a call.
    const ready = performance.now()
    while (!/[#$]$/.test(await capture(false))) {
      if (performance.now() - ready > 10_000) throw new Error('workflows: the tmux shell showed no prompt within 10 s')
      await delay(10)
    }
    let previous = await capture(true)
    const texts: string[] = []
    const start = performance.now()
    const read = async () => {
      const current = await capture(true)
      const text = incremental(previous, current, await capture(false))
      previous = current
      return text
    }
    for (const [index, step] of workflow.tmux.entries()) texts.push(await tmuxStep(tmux, step, `wf-${process.pid}-${index}`, read))
    return measured('tmux', texts, workflow.tmux.length, performance.now() - start)
  } finally {
    await tmux('kill-server').catch(() => {})
  }
}

async function tmuxStep(tmux: (...args: string[]) => Promise<string>, step: TmuxStep, channelName: string, read: () => Promise<string>): Promise<string> {
  const keys = step.block ? `${step.keys}; tmux wait -S ${channelName}` : step.keys
  const enter = step.enter ?? !step.key
  if (!step.block) {
    await tmux('send-keys', '-t', 'w', ...(step.key ? [keys] : ['-l', '--', keys]))
    if (enter) await tmux('send-keys', '-t', 'w', 'Enter')
    await delay(step.waitMs)
    return read()
  }
  const waiter = spawn('tmux', ['-L', SOCKET, 'wait-for', channelName], { stdio: 'ignore' })
  const signalled = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      waiter.kill()
      resolve(false)
    }, step.waitMs)
    waiter.once('exit', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
  await tmux('send-keys', '-t', 'w', '-l', '--', keys)
  await tmux('send-keys', '-t', 'w', 'Enter')
  if (!(await signalled)) throw new Error(`workflows: tmux step ${JSON.stringify(step.keys)} did not signal ${channelName} within ${step.waitMs} ms`)
  return read()
}

/** The workflow's pipe calls, each a `bash -c` in `dir`. */
export async function runPipe(workflow: Workflow, dir: string): Promise<HarnessRun> {
  const texts: string[] = []
  const start = performance.now()
  for (const command of workflow.pipe) texts.push(await pipeCall(command, dir))
  return measured('pipe', texts, workflow.pipe.length, performance.now() - start)
}

function pipeCall(command: string, dir: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    const chunks: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk))
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
      reject(new Error(`workflows: pipe call ${JSON.stringify(command)} ran past ${PIPE_TIMEOUT_MS} ms`))
    }, PIPE_TIMEOUT_MS)
    child.once('error', reject)
    child.once('close', (code) => {
      clearTimeout(timer)
      const all = Buffer.concat(chunks)
      const output = all.length > PIPE_MAX_BYTES ? `${all.subarray(0, PIPE_MAX_BYTES).toString('utf8')}\n[output truncated]` : all.toString('utf8')
      resolve(`${output === '' ? '(no output)' : output.replace(/\n$/, '')}${code === 0 ? '' : `\nExit code ${code}`}`)
    })
  })
}
