/**
 * Real bubblewrap runs for the attack tests: ctx.sandbox with the sandbox-local providers, and
 * confined `bash -c` scripts started through ctx.subprocess the way the terminal backend starts
 * shells.
 */
import { spawnSync } from 'node:child_process'
import { Context, type Message } from 'cordis'
import SandboxService, { type SandboxPolicy } from '@conch/sandbox'
import SubprocessService, { scrubbedEnv, type ChildHandle } from '@conch/subprocess'
import * as local from '../src/index.ts'

/** Real runs need a working bubblewrap (CI installs it with apt-get); without one they are skipped. */
export const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

export interface Harness {
  ctx: Context
  logs: Message[]
  /** Confines `bash -c script` and runs it to the end. */
  run(script: string, policy?: Partial<SandboxPolicy>, env?: Record<string, string>): Promise<RunResult>
  dispose(): Promise<void>
}

export interface RunResult {
  exitCode: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

function collect(stream: NodeJS.ReadableStream): Promise<string> {
  let text = ''
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => void (text += chunk))
  return new Promise((resolve) => stream.on('end', () => resolve(text)))
}

/** Boots ctx.subprocess, ctx.sandbox and sandbox-local with `config`; `workspace` is the default workspace root. */
export async function harness(workspace: string, config: Partial<local.Config> = {}, egress?: Parameters<typeof local.apply>[2]): Promise<Harness> {
  const ctx = new Context()
  const logs: Message[] = []
  ctx.logger.exporter({ export: (message) => void logs.push(message) })
  const fibers = [
    await ctx.plugin(SubprocessService, { graceMs: 2000, killWaitMs: 2000 }),
    await ctx.plugin(SandboxService, {}),
    await ctx.plugin(egress === undefined ? local : { name: local.name, inject: local.inject, Config: local.Config, apply: (scope: Context, given: local.Config) => local.apply(scope, given, egress) }, config as local.Config),
  ]
  return {
    ctx,
    logs,
    async run(script, policy = {}, env) {
      const confined = await ctx.sandbox.confine(['bash', '-c', script], { mode: 'workspace-write', workspaceRoot: workspace, ...policy })
      const child: ChildHandle = ctx.subprocess.spawn({ argv: confined.argv, env: env ?? scrubbedEnv(process.env) })
      const [exit, stdout, stderr] = await Promise.all([child.done, collect(child.stdout), collect(child.stderr)])
      return { exitCode: exit.exitCode, signal: exit.signal, stdout, stderr }
    },
    async dispose() {
      for (const fiber of fibers.reverse()) await fiber.dispose()
    },
  }
}

/** The message bash prints for a denied redirection (`bash: line N: <path>: Read-only file system`). */
export const readOnly = (path: string): RegExp =>
  new RegExp(`^bash: (line \\d+: )?${escape(path)}: Read-only file system$`, 'm')

export const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
export const unique = (label: string): string => `${label}-${process.pid}-${Math.random().toString(36).slice(2)}`
export const quote = (arg: string): string => `'${arg.replaceAll("'", `'\\''`)}'`
