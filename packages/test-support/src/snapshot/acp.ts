/**
 * ACP scenarios: `conch acp` as a process, driven by an ACP client built on the SDK's
 * `client()` API over the child's stdio. A scenario folder holds `input.json`
 * (`{kind, config, steps}`), `script.jsonl` and `stdout.expected.jsonl`.
 *
 * Steps run one after another:
 *
 * | step | does |
 * |---|---|
 * | `{"initialize": {…params}}` | `initialize` (default params: protocol version 1) |
 * | `{"newSession": {"as", "cwd", "mcpServers"?, "additionalDirectories"?, "expectError"?}}` | `session/new`; `as` names the session for later steps; `expectError` is the JSON-RPC code it must fail with |
 * | `{"prompt": {"session", "text", "stopReason"?, "expectError"?, "wait"?, "as"?}}` | `session/prompt`; with `wait: false` it runs on while later steps go on, and `as` names it |
 * | `{"waitForOutput": {"session", "text"}}` | waits until a `tool_call_update` of that session shows `text` |
 * | `{"cancel": {"session"}}` | `session/cancel` |
 * | `{"awaitPrompt": {"as", "stopReason"}}` | waits for a prompt started with `wait: false` |
 * | `{"closeSession": {"session"}}` | `session/close` |
 *
 * `$WORKSPACE` in any string is the scenario's workspace folder, where the `folders` listed in
 * input.json are created first. After the last step the client closes conch's stdin and waits
 * for conch to exit.
 */
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  client,
  methods,
  ndJsonStream,
  type ClientContext,
  type PromptResponse,
  type SessionNotification,
} from '@agentclientprotocol/sdk'
import { readableFrom, writableTo } from '@conch/acp'
import { z } from 'zod'
import { startConch } from './process.ts'

const sessionName = z.string().min(1)

export const AcpStep = z.union([
  z.object({ initialize: z.record(z.string(), z.unknown()).default({ protocolVersion: 1 }) }).strict(),
  z
    .object({
      newSession: z
        .object({
          as: sessionName.optional(),
          cwd: z.string(),
          mcpServers: z.array(z.unknown()).default([]),
          additionalDirectories: z.array(z.string()).optional(),
          expectError: z.number().int().optional(),
        })
        .strict(),
    })
    .strict(),
  z
    .object({
      prompt: z
        .object({
          session: sessionName,
          text: z.string(),
          stopReason: z.string().optional(),
          expectError: z.number().int().optional(),
          wait: z.boolean().default(true),
          as: z.string().optional(),
        })
        .strict(),
    })
    .strict(),
  z.object({ waitForOutput: z.object({ session: sessionName, text: z.string().min(1) }).strict() }).strict(),
  z.object({ cancel: z.object({ session: sessionName }).strict() }).strict(),
  z.object({ awaitPrompt: z.object({ as: z.string(), stopReason: z.string() }).strict() }).strict(),
  z.object({ closeSession: z.object({ session: sessionName }).strict() }).strict(),
])
export type AcpStep = z.output<typeof AcpStep>

export const AcpInput = z
  .object({
    /** `pinned` (the memory backend) or `real` (node-pty: pids, times, evidence normalised). */
    kind: z.enum(['pinned', 'real']),
    /** The composition, relative to the example folder. */
    config: z.string().min(1),
    /** Folders to create inside the workspace before the run (for sessions with their own cwd). */
    folders: z.array(z.string().regex(/^[\w.-]+$/, 'a folder name, no slashes')).default([]),
    steps: z.array(AcpStep).min(1),
  })
  .strict()
export type AcpInput = z.output<typeof AcpInput>

/** Reads and checks a scenario's `input.json`, with `$WORKSPACE` replaced. */
export function readAcpInput(scenarioDir: string, workspace: string): AcpInput {
  const text = readFileSync(join(scenarioDir, 'input.json'), 'utf8')
  return AcpInput.parse(substitute(JSON.parse(text), workspace))
}

function substitute(value: unknown, workspace: string): unknown {
  if (typeof value === 'string') return value.split('$WORKSPACE').join(workspace)
  if (Array.isArray(value)) return value.map((item) => substitute(item, workspace))
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, workspace)]))
  }
  return value
}

export interface AcpRun {
  /** Every line conch wrote to stdout, parsed, in order. */
  frames: Record<string, unknown>[]
  /** Every `session/update` the client received, in order. */
  notifications: SessionNotification[]
  /** Session names (`as`) → ACP session ids. */
  sessions: Map<string, string>
  code: number
  stderr: string
}

/** How long one step may wait for conch (ms); a generous bound for a loaded machine, not a timing assertion. */
const STEP_BUDGET_MS = 90_000

/**
 * Runs the scenario; its `folders` are created in `workspace` first. After the last step the
 * client closes conch's stdin, or with `end` sends conch that signal instead.
 */
export async function runAcpScenario(options: {
  exampleDir: string
  scenarioDir: string
  input: AcpInput
  workspace: string
  end?: 'close-stdin' | NodeJS.Signals
}): Promise<AcpRun> {
  for (const folder of options.input.folders) mkdirSync(join(options.workspace, folder))
  const conch = startConch(['acp', '--config', join(options.exampleDir, options.input.config), '--script', join(options.scenarioDir, 'script.jsonl')])
  const [forClient, forRecord] = readableFrom(conch.child.stdout).tee()
  const frames: Record<string, unknown>[] = []
  const recorded = record(forRecord, frames)

  const notifications: SessionNotification[] = []
  const waiters: { match: (n: SessionNotification) => boolean; resolve: () => void }[] = []
  const app = client({ name: 'conch-snapshot' }).onNotification(methods.client.session.update, ({ params }) => {
    notifications.push(params)
    for (const waiter of [...waiters]) {
      if (!waiter.match(params)) continue
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
  })
  const connection = app.connect(ndJsonStream(writableTo(conch.child.stdin), forClient))
  const agent = connection.agent
  const sessions = new Map<string, string>()
  const prompts = new Map<string, Promise<PromptResponse>>()
  const describe = () => `\nconch stderr:\n${conch.stderr()}`

  const within = <T>(what: string, promise: Promise<T>): Promise<T> =>
    new Promise<T>((resolvePromise, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what}: no answer within ${STEP_BUDGET_MS} ms${describe()}`)), STEP_BUDGET_MS)
      void conch.exit.then((code) => reject(new Error(`${what}: conch exited (${code})${describe()}`)))
      promise.then(resolvePromise, reject).finally(() => clearTimeout(timer))
    })
  const sessionId = (name: string): string => {
    const id = sessions.get(name)
    if (id === undefined) throw new Error(`input.json names session ${JSON.stringify(name)} before a newSession step created it`)
    return id
  }

  for (const [index, step] of options.input.steps.entries()) {
    const where = `step ${index + 1} (${Object.keys(step)[0]})`
    if ('initialize' in step) {
      await within(where, agent.request(methods.agent.initialize, step.initialize as { protocolVersion: number }))
    } else if ('newSession' in step) {
      const { as, expectError, ...params } = step.newSession
      const outcome = await settle(within(where, agent.request(methods.agent.session.new, params as Parameters<ClientContext['request']>[1] & { cwd: string; mcpServers: [] })))
      checkOutcome(where, outcome, expectError, describe)
      if ('value' in outcome && as !== undefined) sessions.set(as, (outcome.value as { sessionId: string }).sessionId)
    } else if ('prompt' in step) {
      const { session, text, stopReason, expectError, wait, as } = step.prompt
      const request = agent.request(methods.agent.session.prompt, { sessionId: sessionId(session), prompt: [{ type: 'text', text }] })
      if (!wait) {
        if (as === undefined) throw new Error(`${where}: a prompt with wait: false needs "as" to await it later`)
        prompts.set(as, request)
        request.catch(() => undefined)
        continue
      }
      const outcome = await settle(within(where, request))
      checkOutcome(where, outcome, expectError, describe)
      if ('value' in outcome && stopReason !== undefined && outcome.value.stopReason !== stopReason) {
        throw new Error(`${where}: expected stopReason ${stopReason}, got ${outcome.value.stopReason}${describe()}`)
      }
    } else if ('waitForOutput' in step) {
      const id = sessionId(step.waitForOutput.session)
      const match = (n: SessionNotification) => n.sessionId === id && updateText(n).includes(step.waitForOutput.text)
      if (!notifications.some(match)) await within(where, new Promise<void>((resolvePromise) => waiters.push({ match, resolve: resolvePromise })))
    } else if ('cancel' in step) {
      await agent.notify(methods.agent.session.cancel, { sessionId: sessionId(step.cancel.session) })
    } else if ('awaitPrompt' in step) {
      const request = prompts.get(step.awaitPrompt.as)
      if (request === undefined) throw new Error(`${where}: no prompt was started as ${JSON.stringify(step.awaitPrompt.as)}`)
      const response = await within(where, request)
      if (response.stopReason !== step.awaitPrompt.stopReason) {
        throw new Error(`${where}: expected stopReason ${step.awaitPrompt.stopReason}, got ${response.stopReason}${describe()}`)
      }
    } else if ('closeSession' in step) {
      await within(where, agent.request(methods.agent.session.close, { sessionId: sessionId(step.closeSession.session) }))
    } else {
      const never: never = step
      throw new Error(`unknown step ${JSON.stringify(never)}`)
    }
  }

  const end = options.end ?? 'close-stdin'
  if (end === 'close-stdin') conch.child.stdin.end()
  else conch.child.kill(end)
  const code = await conch.exit
  await recorded
  connection.close()
  return { frames, notifications, sessions, code, stderr: conch.stderr() }
}

/** The text of a tool call update's content blocks ('' for other updates). */
export function updateText(notification: SessionNotification): string {
  const { update } = notification
  if (update.sessionUpdate !== 'tool_call_update' || !update.content) return ''
  return update.content.map((item) => (item.type === 'content' && item.content.type === 'text' ? item.content.text : '')).join('\n')
}

type Outcome<T> = { value: T } | { error: unknown }

function settle<T>(promise: Promise<T>): Promise<Outcome<T>> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  )
}

function checkOutcome(where: string, outcome: Outcome<unknown>, expectError: number | undefined, describe: () => string): void {
  if (expectError === undefined) {
    if ('error' in outcome) throw new Error(`${where} failed: ${JSON.stringify(outcome.error)}${describe()}`)
    return
  }
  if (!('error' in outcome)) throw new Error(`${where}: expected JSON-RPC error ${expectError}, got ${JSON.stringify(outcome.value)}`)
  const code = (outcome.error as { code?: unknown }).code
  if (code !== expectError) throw new Error(`${where}: expected JSON-RPC error ${expectError}, got ${JSON.stringify(outcome.error)}`)
}

/** Parses each stdout line into `frames`; a line that is not JSON is kept as `{notJson: line}`. */
async function record(stream: ReadableStream<Uint8Array>, frames: Record<string, unknown>[]): Promise<void> {
  const decoder = new TextDecoder()
  let buffered = ''
  const flush = (final: boolean) => {
    const lines = buffered.split('\n')
    buffered = final ? '' : (lines.pop() ?? '')
    for (const line of lines) {
      if (line === '') continue
      try {
        frames.push(JSON.parse(line) as Record<string, unknown>)
      } catch {
        frames.push({ notJson: line })
      }
    }
  }
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true })
    flush(false)
  }
  buffered += decoder.decode()
  flush(true)
}
