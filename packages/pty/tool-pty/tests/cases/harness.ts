/**
 * The terminal cases C1–C9 (one file each in this folder) run against the real composition a
 * harness mounts: the spine (sessions, tools, llm, agents, tasks and the task tools), process
 * ownership, the sandbox services, `ctx.pty` with the node-pty backend, and the six terminal
 * tools — every call goes through `ctx.tools.execute` as the agent loop makes it.
 *
 * Each case runs under two sandbox modes (`ctx.sandboxPolicy`): `danger-full-access` (the shell
 * runs as it is) and `workspace-write` (the shell runs under bubblewrap, the workspace writable).
 *
 * The process helpers read /proc directly (not through @conch/subprocess), so what the cases
 * observe does not depend on the code under test.
 */
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Context } from 'cordis'
import AgentService, { type Agent } from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService from '@conch/pty'
import * as ptyLocal from '@conch/pty-local'
import SandboxService, { type SandboxMode } from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import SubprocessService from '@conch/subprocess'
import TasksService from '@conch/tasks'
import * as toolTasks from '@conch/tool-tasks'
import { until } from '@conch/test-support/wait'
import ToolsService, { type ToolResult } from '@conch/tools'
import * as toolPty from '../../src/index.ts'

/** The modes every case runs under. */
export const MODES = ['danger-full-access', 'workspace-write'] as const satisfies readonly SandboxMode[]

// ─── The composition ────────────────────────────────────────────────────────────────

export interface CaseOptions {
  mode: SandboxMode
  /** Overrides of the node-pty backend's config (e.g. a longer `idleSilenceMs`). */
  ptyLocal?: Partial<ptyLocal.Config>
  /** Overrides of the bubblewrap provider's config (e.g. a `runnerCommand` that does not exist). */
  sandboxLocal?: Partial<sandboxLocal.Config>
  toolPty?: Partial<toolPty.Config>
  /** Overrides of the PTY service's config (e.g. a small `maxSessionsPerOwner`). */
  pty?: { maxSessionsPerOwner?: number }
}

/** A result as the model sees it plus its structured meta. */
export interface Seen {
  text: string
  isError: boolean
  meta: Record<string, unknown>
}

export interface CaseHarness {
  ctx: Context
  mode: SandboxMode
  /** The agent's workspace root (canonical), the default working directory of its terminals. */
  workspace: string
  agent: Agent
  /** A second live agent, for the ownership checks. */
  other: Agent
  /** Warnings and errors the composition logged, and anything written with console.error (node-pty's write errors). */
  logged: string[]
  call(name: string, input: Record<string, unknown>, agent?: Agent): Promise<Seen>
  /** terminal_open {type: 'shell', …}; returns the session id. Fails the test when the open fails. */
  open(options?: { name?: string; cwd?: string }): Promise<string>
  /** terminal_send in the foreground (submit defaults to true). */
  send(sessionId: string, text: string, options?: { submit?: boolean; agent?: Agent }): Promise<Seen>
  /** terminal_send with run_in_background; returns the task id. */
  sendBackground(sessionId: string, text: string): Promise<string>
  read(sessionId: string, options?: { offset?: number; count?: number }): Promise<Seen>
  signal(sessionId: string, signal: string): Promise<Seen>
  close(sessionId: string): Promise<Seen>
  list(): Promise<Seen>
  /** task_output without waiting. */
  taskOutput(taskId: string): Promise<Seen>
  /** task_output {wait: true}; fails the test when the task is still running after `timeoutMs`. */
  taskDone(taskId: string, timeoutMs?: number): Promise<Seen>
  /**
   * Polls terminal_read until a scrollback line is `token` (exactly, or as `match` says — e.g. a
   * background job's line printed after the prompt); returns the page's output lines.
   */
  waitForLine(sessionId: string, token: string, options?: { match?: (line: string) => boolean; timeoutMs?: number }): Promise<string[]>
  /** The top-level process of a session (from terminal_list meta). */
  sessionPid(sessionId: string): Promise<number>
  dispose(): Promise<void>
}

export async function bootCase(options: CaseOptions): Promise<CaseHarness> {
  const workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-case-')))
  const ctx = new Context()
  const logged: string[] = []
  ctx.logger.exporter({
    export: (message) => {
      if (message.type === 'warn' || message.type === 'error') logged.push(message.args.map(String).join(' '))
    },
  })
  // node-pty reports a failed write (e.g. EBADF on a closed terminal) on console.error only.
  const consoleError = console.error
  console.error = (...args: unknown[]) => {
    logged.push(`console.error: ${args.map(String).join(' ')}`)
    consoleError(...args)
  }
  // Loaded in the order of the root cordis.yml; disposed in reverse (terminals before ctx.pty).
  const fibers: { dispose(): unknown }[] = []
  const load = async (plugin: unknown, config: unknown) => {
    fibers.push(await ctx.plugin(plugin as Parameters<Context['plugin']>[0], config as never))
  }
  await load(SessionService, SessionService.Config.parse({}))
  await load(ToolsService, ToolsService.Config.parse({}))
  await load(LlmService, LlmService.Config.parse({}))
  await load(TasksService, TasksService.Config.parse({}))
  await load(toolTasks, toolTasks.Config.parse({}))
  await load(SubprocessService, SubprocessService.Config.parse({}))
  await load(SandboxService, SandboxService.Config.parse({}))
  await load(sandboxLocal, sandboxLocal.Config.parse(options.sandboxLocal ?? {}))
  await load(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode: options.mode, workspaceRoot: workspace }))
  await load(PtyService, PtyService.Config.parse(options.pty ?? {}))
  await load(ptyLocal, ptyLocal.Config.parse(options.ptyLocal ?? {}))
  await load(toolPty, toolPty.Config.parse(options.toolPty ?? {}))
  await load(AgentService, AgentService.Config.parse({}))
  for (const name of ['sessions', 'tools', 'llm', 'tasks', 'subprocess', 'sandbox', 'sandboxPolicy', 'pty', 'agents'] as const) {
    if (ctx.get(name) === undefined) throw new Error(`the case composition did not start ctx.${name}; logged: ${logged.join('\n')}`)
  }
  if (ctx.tools.get('terminal_open') === undefined) throw new Error(`tool-pty did not register its tools; logged: ${logged.join('\n')}`)

  const agent = await ctx.agents.create({ workspaceRoot: workspace })
  const other = await ctx.agents.create({ workspaceRoot: workspace })
  let calls = 0
  const call: CaseHarness['call'] = async (name, input, caller = agent) => {
    const result: ToolResult = await ctx.tools.execute(name, input, { agent: caller, signal: new AbortController().signal, callId: `call-${++calls}` })
    return { text: result.content.map((item) => item.text).join('\n'), isError: result.isError === true, meta: result.meta ?? {} }
  }
  const succeed = (name: string, seen: Seen): Seen => {
    if (seen.isError) throw new Error(`${name} failed:\n${seen.text}`)
    return seen
  }

  const harness: CaseHarness = {
    ctx,
    mode: options.mode,
    workspace,
    agent,
    other,
    logged,
    call,
    async open(openOptions = {}) {
      const seen = succeed('terminal_open', await call('terminal_open', { type: 'shell', ...openOptions }))
      return String(seen.meta.sessionId)
    },
    send: (sessionId, text, sendOptions = {}) =>
      call('terminal_send', { sessionId, text, ...(sendOptions.submit !== undefined && { submit: sendOptions.submit }) }, sendOptions.agent),
    async sendBackground(sessionId, text) {
      const seen = succeed('terminal_send (background)', await call('terminal_send', { sessionId, text, run_in_background: true }))
      return String(seen.meta.taskId)
    },
    read: (sessionId, readOptions = {}) => call('terminal_read', { sessionId, ...readOptions }),
    signal: (sessionId, signal) => call('terminal_signal', { sessionId, signal }),
    close: (sessionId) => call('terminal_close', { sessionId }),
    list: () => call('terminal_list', {}),
    taskOutput: (taskId) => call('task_output', { taskId }),
    async taskDone(taskId, timeoutMs = 30_000) {
      const seen = succeed('task_output', await call('task_output', { taskId, wait: true, timeoutMs }))
      if (seen.meta.timedOut === true) throw new Error(`task ${taskId} still running after ${timeoutMs} ms:\n${seen.text}`)
      return seen
    },
    async waitForLine(sessionId, token, waitOptions = {}) {
      const match = waitOptions.match ?? ((line: string) => line === token)
      let lines: string[] = []
      await until(async () => {
        lines = outputLines(succeed('terminal_read', await call('terminal_read', { sessionId, count: 5000 })).text)
        return lines.some(match)
      }, waitOptions.timeoutMs ?? 15_000, `a line ${JSON.stringify(token)} in the scrollback of ${sessionId}`, () => lines.slice(-20).join('\n'))
      return lines
    },
    async sessionPid(sessionId) {
      const sessions = (await call('terminal_list', {})).meta.sessions as { sessionId: string; pid?: number }[]
      const pid = sessions.find((session) => session.sessionId === sessionId)?.pid
      if (pid === undefined) throw new Error(`terminal_list has no pid for ${sessionId}`)
      return pid
    },
    async dispose() {
      try {
        await ctx.agents.dispose(agent)
        await ctx.agents.dispose(other)
        for (const fiber of fibers.reverse()) await fiber.dispose()
      } finally {
        console.error = consoleError
        rmSync(workspace, { recursive: true, force: true })
      }
    },
  }
  return harness
}

// ─── Reading results ────────────────────────────────────────────────────────────────

const METADATA_LINE = /^\[(wait|exit|session|input|note|interrupted|lines|older|dropped|opened|closed|signal|task|status|error|still running)\b.*\]$|^\[… .* omitted\b.*\]$/
const EMPTY_MARKERS = new Set(['(no new output)', '(no lines)'])

/**
 * The output lines of a rendered result (terminal_send, terminal_read, task_output): the text
 * without the bracketed metadata lines at its end and without the "nothing new" placeholders.
 */
export function outputLines(text: string): string[] {
  const lines = text.split('\n')
  while (lines.length && (METADATA_LINE.test(lines.at(-1)!) || lines.at(-1) === '')) lines.pop()
  return lines.filter((line) => !EMPTY_MARKERS.has(line))
}

/** How many lines are exactly `token`. */
export function count(lines: readonly string[], token: string): number {
  return lines.filter((line) => line === token).length
}


/** Whether `text` survives a UTF-8 round trip unchanged (no lone surrogate). */
export function roundTripsUtf8(text: string): boolean {
  return Buffer.from(text, 'utf8').toString('utf8') === text
}

/** Whether `text` holds a lone UTF-16 surrogate. */
export function hasLoneSurrogate(text: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)
}

// ─── /proc ──────────────────────────────────────────────────────────────────────────

/** One process as /proc shows it (proc(5)); fields of stat parsed after the last `)`. */
export interface ProcEntry {
  pid: number
  /** stat field 3. */
  state: string
  ppid: number
  pgrp: number
  /** Foreground process group of its controlling terminal (stat field 8). */
  tpgid: number
  /** Start time in clock ticks since boot (stat field 22): with the pid, the process identity. */
  starttime: number
  /** argv joined by spaces. */
  cmdline: string
}

/** Every process readable in /proc right now. */
export function processes(): ProcEntry[] {
  const entries: ProcEntry[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ')
      entries.push({
        pid: Number(name),
        state: fields[0] ?? '?',
        ppid: Number(fields[1]),
        pgrp: Number(fields[2]),
        tpgid: Number(fields[5]),
        starttime: Number(fields[19]),
        cmdline,
      })
    } catch {
      // gone between readdir and read
    }
  }
  return entries
}

/** Processes whose ancestry reaches `rootPid` (not including it). */
export function descendants(rootPid: number, all: ProcEntry[] = processes()): ProcEntry[] {
  const byPid = new Map(all.map((entry) => [entry.pid, entry]))
  return all.filter((entry) => {
    for (let parent = entry.ppid, hops = 0; parent > 1 && hops < 64; hops++) {
      if (parent === rootPid) return true
      parent = byPid.get(parent)?.ppid ?? 0
    }
    return false
  })
}

/** Whether the process with this identity still exists (a zombie counts as gone). */
export function alive(identity: { pid: number; starttime: number }): boolean {
  return processes().some((entry) => entry.pid === identity.pid && entry.starttime === identity.starttime && entry.state !== 'Z')
}

/**
 * Waits for a descendant of `rootPid` whose command line is `cmdline` (exactly, or matching a
 * pattern) and that is the foreground of its terminal.
 */
export async function waitForForeground(rootPid: number, cmdline: string | RegExp, timeoutMs = 10_000): Promise<ProcEntry> {
  const matches = (entry: ProcEntry) => (typeof cmdline === 'string' ? entry.cmdline === cmdline : cmdline.test(entry.cmdline))
  let found: ProcEntry | undefined
  await until(() => {
    found = descendants(rootPid).find((entry) => matches(entry) && entry.pgrp === entry.tpgid && entry.state !== 'Z')
    return found !== undefined
  }, timeoutMs, `${String(cmdline)} in the foreground under pid ${rootPid}`, () => descendants(rootPid).map((entry) => `${entry.pid} ${entry.state} pgrp=${entry.pgrp} tpgid=${entry.tpgid} ${entry.cmdline}`).join('\n'))
  return found!
}

/** Zombie children of this (the test) process. */
export function zombieChildren(): ProcEntry[] {
  return processes().filter((entry) => entry.ppid === process.pid && entry.state === 'Z')
}
