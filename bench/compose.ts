/**
 * The composition the benchmark drives: the same plugins as the root cordis.yml for terminals
 * (sessions, tools, llm, subprocess, sandbox with bubblewrap, sandbox policy, ctx.pty with the
 * node-pty backend, agents), plus a second backend type, `shell-silence`, that is the same
 * `LocalBackend` with its exact tiers disabled — what a tool that waits for quiet pays.
 *
 * Every conch figure goes through `ctx.pty` (the seam a tool calls) unless it says otherwise.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import AgentService, { type Agent } from '../packages/core/agent/src/index.ts'
import LlmService from '../packages/core/llm/src/index.ts'
import SessionService from '../packages/core/session/src/index.ts'
import ToolsService from '../packages/core/tools/src/index.ts'
import PtyService, { type BackendSession, type SendResult } from '../packages/pty/pty/src/index.ts'
import * as ptyLocal from '../packages/pty/pty-local/src/index.ts'
import { inspectorFor } from '../packages/pty/pty-local/src/plugin.ts'
import { helperTermiosReader } from '../packages/pty/pty-local/src/termios.ts'
import SandboxService from '../packages/sandbox/sandbox/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import SandboxPolicyService from '../packages/sandbox/sandbox-policy/src/index.ts'
import SubprocessService from '../packages/subprocess/subprocess/src/index.ts'

/** Backend type of the silence-only sessions. */
export const SILENCE_TYPE = 'shell-silence'

/**
 * Backend type whose shells each get a sandbox of their own, as every terminal had before the
 * agent sandbox: the same policy (mode, deny-write list, protected paths) without `agent`.
 */
export const OWN_SANDBOX_TYPE = 'shell-own-sandbox'

export type Composition = Awaited<ReturnType<typeof compose>>

/**
 * The /proc inspector with its exact tiers switched off: `exact` is false, probes say
 * `unknown` and the task counters and read states are unknown, so a send settles only on the
 * controlled prompt, silence (`idleSilenceMs`) or the timeout. The foreground group is still
 * read (signals need it).
 */
export function silenceOnly(inner: ptyLocal.TerminalInspector): ptyLocal.TerminalInspector {
  return {
    // Every other question (foreground group, names, executables) is answered as before.
    ...inner,
    exact: false,
    probe: async () => ({ verdict: 'unknown', tpgid: undefined, tasks: [], reader: undefined, detail: 'exact tiers disabled (silence-only figure)' }),
    taskSwitches: async () => undefined,
    blockedInRead: async () => undefined,
  }
}

/**
 * A context in a fresh temporary workspace (`conch-bench-<prefix>…`) with the terminal stack
 * loaded: the spine, ctx.subprocess, ctx.sandbox with bubblewrap, ctx.sandboxPolicy in `mode`,
 * ctx.pty with the node-pty backend (`pty`). Its warnings and errors go to stderr. `load` adds a
 * plugin; `dispose` disposes `agents`, then every plugin in reverse order, and removes the workspace.
 * `sandbox` is the provider row (default: bubblewrap).
 */
export async function terminalStack(
  prefix: string,
  mode: 'danger-full-access' | 'workspace-write',
  pty: ptyLocal.Config,
  sandbox: { plugin: unknown; config: unknown } = { plugin: sandboxLocal, config: sandboxLocal.Config.parse({}) },
) {
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), `conch-bench-${prefix}`)))
  const ctx = new Context()
  ctx.logger.exporter({
    export: (message) => {
      if (message.type === 'warn' || message.type === 'error') process.stderr.write(`[cordis ${message.type}] ${message.args.map(String).join(' ')}\n`)
    },
  })
  const fibers: { dispose(): Promise<void> }[] = []
  const load = async (plugin: Parameters<Context['plugin']>[0], config?: unknown) => void fibers.push(await ctx.plugin(plugin, config))
  await load(SessionService, SessionService.Config.parse({}))
  await load(ToolsService, ToolsService.Config.parse({}))
  await load(LlmService, LlmService.Config.parse({}))
  await load(SubprocessService, SubprocessService.Config.parse({}))
  await load(SandboxService, {})
  await load(sandbox.plugin as Parameters<Context['plugin']>[0], sandbox.config)
  await load(SandboxPolicyService, SandboxPolicyService.Config.parse({ mode, workspaceRoot: workspace }))
  await load(PtyService, {})
  await load(ptyLocal, pty)
  return {
    ctx,
    workspace,
    load,
    async dispose(...agents: Agent[]) {
      try {
        for (const agent of agents) await ctx.agents.dispose(agent)
      } finally {
        for (const fiber of fibers.reverse()) await fiber.dispose()
        rmSync(workspace, { recursive: true, force: true })
      }
    },
  }
}

/** The composition every terminal bench drives (see the top of this file). */
export async function compose() {
  if (process.platform !== 'linux') throw new Error(`the benchmark measures the Linux /proc tier; ${process.platform} is not supported`)
  const config = ptyLocal.Config.parse({})
  const stack = await terminalStack('', 'danger-full-access', config)
  const { ctx, workspace, load } = stack
  await load({
    name: 'bench-silence-backend',
    inject: ['pty', 'sandbox', 'sandboxPolicy'],
    apply: (inner: Context) => {
      inner.pty.registerBackend(
        new ptyLocal.LocalBackend({
          config: ptyLocal.Config.parse({ backendType: SILENCE_TYPE }),
          sandbox: inner.sandbox,
          sandboxPolicy: inner.sandboxPolicy,
          inspect: (terminal) => silenceOnly(inspectorFor(terminal)),
        }),
      )
      const sandbox = inner.sandbox
      const confineOwn: typeof sandbox.confine = (argv, { agent: _, ...policy }) => sandbox.confine(argv, policy)
      inner.pty.registerBackend(
        new ptyLocal.LocalBackend({
          config: ptyLocal.Config.parse({ backendType: OWN_SANDBOX_TYPE }),
          sandbox: new Proxy(sandbox, { get: (target, key) => (key === 'confine' ? confineOwn : Reflect.get(target, key)) }),
          sandboxPolicy: inner.sandboxPolicy,
          inspect: inspectorFor,
        }),
      )
    },
  })
  await load(AgentService, AgentService.Config.parse({}))

  // `agent` owns unconfined terminals (`danger-full-access`), `sandboxed` terminals confined by bubblewrap (`workspace-write`).
  const agent = await ctx.agents.create({ workspaceRoot: workspace })
  const sandboxed = await ctx.agents.create({ workspaceRoot: workspace })
  ctx.sandboxPolicy.setMode(sandboxed.session, 'workspace-write')

  const direct = { config, sandbox: ctx.sandbox, sandboxPolicy: ctx.sandboxPolicy, inspect: inspectorFor }
  const directBackend = new ptyLocal.LocalBackend(direct)
  // One termios helper for the direct sessions that ask for it, as the plugin keeps one per backend.
  const termios = helperTermiosReader()
  const directTermiosBackend = new ptyLocal.LocalBackend({ ...direct, termios })
  let directCount = 0
  // Held once, as a tool package holds it (tool-pty's kit reads ctx.pty when it loads): reading
  // ctx.pty goes through Cordis's context proxy, which a tool call does not pay.
  const pty = ctx.pty

  return {
    ctx,
    agent,
    sandboxed,
    /** The workspace root of both agents (a fresh temporary directory). */
    workspace,
    /** The backend's configuration as loaded (defaults). */
    config,
    /**
     * Starts a session on the backend directly (no ctx.pty in between), with the default config
     * and the exact tiers; the caller closes it. `termios`: with a termios reader, as the plugin's
     * backend has (src/plugin.ts) — the canonical line limit, hidden input and the input queue
     * before Enter; without it (the default here) none of those queries is made.
     */
    direct: (options?: { termios?: boolean }): Promise<BackendSession> => (options?.termios === true ? directTermiosBackend : directBackend).spawn({ owner: agent, sessionId: `direct-${++directCount}`, signal: new AbortController().signal }),
    /** Sends `text` (submitted) on `ctx.pty`, held as a tool holds it, and returns the result and the wall time, ms. */
    async send(owner: Agent, sessionId: string, text: string): Promise<{ ms: number; result: SendResult }> {
      const start = performance.now()
      const result = await pty.startSend(owner, sessionId, { text, submit: true }).done
      return { ms: performance.now() - start, result }
    },
    /** Disposes the agents (closing their terminals), then every plugin in reverse order. */
    async dispose() {
      try {
        await stack.dispose(agent, sandboxed)
      } finally {
        termios.close()
      }
    },
  }
}
